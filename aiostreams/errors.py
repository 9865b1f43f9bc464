"""The errors aiostreams raises. Each message says what happened, where, and what to do."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aiostreams.types import TopicPartition


class AiostreamsError(Exception):
    """Base class of every error aiostreams raises on purpose."""


class ConfigError(AiostreamsError, ValueError):
    """A setting or argument is wrong; the message names it and the accepted values."""


class TopologyError(AiostreamsError, ValueError):
    """The topology is malformed; the message names the node at fault."""


class TransportError(AiostreamsError):
    """The broker could not be reached or refused a request."""


class BrokerUnavailableError(TransportError):
    """No broker answered at the configured address within the allowed time."""


class UnknownTopicError(TransportError):
    """A topic the app reads or writes does not exist and may not be created."""


class ProducerFencedError(TransportError):
    """A newer producer with the same ``transactional_id`` started; this one may not write.

    Its open transaction was aborted. Stop this producer: the newer instance owns the id.
    """


class CommitFailedError(TransportError):
    """An offset commit was refused because this consumer does not own the partition now.

    A rebalance gave the partition to another member; its records will be reprocessed
    from the last committed offset there. Commit only what ``assignment()`` holds.
    """


class OwnershipLostError(CommitFailedError):
    """This worker may no longer own its tasks: its group session may have expired (the
    process was frozen or cut off for longer than ``session_timeout``) or the coordinator
    no longer knows its generation. Nothing more of those tasks is sent, committed or
    checkpointed; they are closed and the worker rejoins the group, whose new owners
    reprocess their records since the last commit.
    """


class CoPartitioningError(TopologyError):
    """Topics read together by one task do not have the same number of partitions."""


class SerializationError(AiostreamsError):
    """A value could not be turned into bytes for ``topic``."""

    def __init__(self, message: str, *, topic: str) -> None:
        super().__init__(message)
        self.topic = topic


class DeserializationError(AiostreamsError):
    """A record's key or value could not be decoded or failed validation.

    Carries the record's origin so the failure path (skip, dead-letter, fail) can name it.
    """

    def __init__(
        self,
        message: str,
        *,
        topic: str,
        partition: int = -1,
        offset: int = -1,
        field: str = "value",
    ) -> None:
        self.reason = message
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.field = field
        super().__init__(
            f"cannot deserialize the {field} of {topic}[{partition}]@{offset}: {message}"
        )

    def at(self, partition: int, offset: int, field: str | None = None) -> DeserializationError:
        """This error with the record's origin filled in.

        A serde sees only bytes, so it raises without a partition or offset (and cannot tell a
        key from a value); the caller that holds the record re-raises with them::

            except DeserializationError as exc:
                raise exc.at(record.partition, record.offset, "key")

        ``field`` keeps this error's field when ``None``. The cause (the decoder's own error)
        and the traceback are carried over; the origin-less original is not shown again.
        """
        located = DeserializationError(
            self.reason,
            topic=self.topic,
            partition=partition,
            offset=offset,
            field=self.field if field is None else field,
        )
        located.__cause__ = self.__cause__
        located.__suppress_context__ = True
        return located.with_traceback(self.__traceback__)


class ProcessingError(AiostreamsError):
    """A record failed for good (retries exhausted) and the error handler said ``fail``."""

    def __init__(
        self, message: str, *, topic: str, partition: int, offset: int, processor: str
    ) -> None:
        super().__init__(message)
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.processor = processor


class TaskFailedError(AiostreamsError):
    """A stream task stopped because a record failed with the ``fail`` handler.

    Nothing past the failed record was committed; fix the cause and restart.
    """


class StoreFormatError(TaskFailedError):
    """A store's changelog or file holds bytes of another format than the store's (see
    :mod:`aiostreams.state.store_format`): the task cannot start, and nothing of those
    bytes was decoded. Fatal for the worker, never a per-record error: the message names
    the store, where the bytes are, both formats and the command that converts them."""

    def __init__(self, message: str, *, store: str, found: str | None, expected: str,
                 where: str) -> None:
        super().__init__(message)
        self.store = store
        self.found = found
        self.expected = expected
        self.where = where


class UncommittedStopError(AiostreamsError):
    """The app stopped, but its last commit did not land (the broker did not answer within
    the stop's budget, or refused it): the message names each partition and the offsets
    processed but not committed. Nothing is lost - those records are processed again at
    the next start (at-least-once: their outputs may repeat; exactly-once: their
    transaction was aborted). ``aiostreams run`` exits with code 4.
    """

    def __init__(self, message: str, uncommitted: dict[tuple[str, int], tuple[int, int]]
                 ) -> None:
        super().__init__(message)
        self.uncommitted = uncommitted
        """``(topic, partition) -> (committed offset, processed up to)``: the records from
        the first to just before the second are processed again at the next start."""


class OffsetOutOfRangeError(TransportError):
    """A consumer's position on a partition is outside the partition's log (its records
    were deleted, or the log is shorter than the position) and the ``offset_out_of_range``
    policy is ``"fail"``. The message gives the partition, the position, the log's start
    and end, how many records are lost, and how to go on; nothing past the position was
    read or committed."""

    def __init__(self, message: str, *, topic: str, partition: int, offset: int,
                 log_start: int, log_end: int) -> None:
        super().__init__(message)
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.log_start = log_start
        self.log_end = log_end


def short_repr(value: object, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters, for an error message that names it."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


class ClientFailedError(TransportError):
    """The Kafka client under a worker died or stopped making progress, and rebuilding it
    did not help (or could not be done); the message says what died and why."""


class CorruptFetchError(TransportError):
    """A fetch response could not be parsed (a CRC mismatch, a malformed field): nothing
    of it was accepted. ``partitions`` are those it concerned, as well as can be told."""

    def __init__(self, message: str, *, partitions: tuple[TopicPartition, ...] = ()) -> None:
        super().__init__(message)
        self.partitions = partitions


class InstanceIdConflictError(ConfigError, TransportError):
    """Another process joined the consumer group with this worker's ``group_instance_id``
    (static membership) and took its place. A configuration error - two processes claim
    one identity - so the worker stops (exit code 2: the supervisor does not restart it)
    instead of rejoining, which would fence the other process in turn."""


class GroupProtocolError(ConfigError, TransportError):
    """The consumer group's members assign partitions with a protocol this worker does not
    offer - members of an older aiostreams version (``range``, ``aiostreams-state-aware``,
    round-robin before them) or another kind of client - so the broker refused its join.
    A configuration error: stop the other members (a one-time upgrade), then start this
    worker."""

