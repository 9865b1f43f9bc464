"""Which broker trouble a worker rides out, and for how long.

* a failed **send or flush** is answered by starting its tasks again from their last
  commit (a rewind), for as long as the trouble has lasted at most ``broker_timeout``
  since the last successful commit - except fencing (the task is lost instead) and a
  missing topic (it would fail again);
* a failed **transactional commit** (exactly-once) is answered the same way: its
  channel is marked failed - with :class:`InDoubtCommitError` when ``commit_transaction``
  itself failed, whose outcome is unknown - and its tasks rewound. Before they start
  again, :func:`settle_in_doubt` makes the transaction coordinator finish an in-doubt
  transaction (a new producer with the same transactional id is let in only once it
  has committed or aborted it) and reads the group's committed offsets: the tasks resume
  past the transaction if it committed, before it if not - nothing lost, nothing
  duplicated for read_committed readers;
* any other failure that passes with time (a timeout, a dropped connection, a coordinator
  moving) is retried with backoff (:class:`Outage`) for up to ``broker_timeout`` seconds of
  continuous trouble, under both guarantees (under exactly-once every failure of the
  transactional calls is a channel's, above, so what is retried here committed nothing);
* anything else stops the worker.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol

from aiostreams.errors import (
    BrokerUnavailableError,
    CommitFailedError,
    ProducerFencedError,
    TransportError,
    UnknownTopicError,
)
from aiostreams.runtime.clock import Clock
from aiostreams.types import TopicPartition

log = logging.getLogger("aiostreams.worker")

_CONNECTION_ERRORS = frozenset({"KafkaConnectionError", "NodeNotReadyError",
                                "KafkaTimeoutError", "RequestTimedOutError"})


class InDoubtCommitError(TransportError):
    """A transactional commit failed after it was asked for: the transaction may have
    committed or not. Its tasks are rewound, and :func:`settle_in_doubt` learns which
    before they start again."""


class Fences(Protocol):
    async def fence(self, task_id: str) -> None: ...


class ReadsCommitted(Protocol):
    async def committed(self, tp: TopicPartition) -> int | None: ...


async def settle_in_doubt(in_doubt: dict[TopicPartition, str],
                          resume_at: dict[TopicPartition, int | None], fences: Fences,
                          consumer: ReadsCommitted) -> None:
    """Before tasks whose transactional commit is in doubt start again (``in_doubt``: their
    partitions, each with its task id): fence each task's transactional id - the
    coordinator lets a new producer in only once it has committed or aborted the
    transaction in doubt - then read the group's committed offset of each partition into
    ``resume_at`` (left as it is where the group has none). Each partition settled leaves
    ``in_doubt``.

    Cancellation, or a broker that does not answer: what is not settled stays in
    ``in_doubt``, to be settled at the next attempt."""
    for task_id in sorted(set(in_doubt.values())):
        await fences.fence(task_id)
    for tp in sorted(in_doubt):
        committed = await consumer.committed(tp)
        if committed is not None:
            resume_at[tp] = committed
        del in_doubt[tp]


def show_offsets(offsets: Mapping[TopicPartition, int]) -> str:
    """``t[0]@5, t[1]@7`` (``nothing`` when empty)."""
    return ", ".join(f"{tp}@{o}" for tp, o in sorted(offsets.items())) or "nothing"


class Outage:
    """A stretch of continuous broker trouble, with exponential backoff (0.1 s → 5 s)."""

    def __init__(self, since: float) -> None:
        self.since = since
        self._backoff = 0.1

    def next_backoff(self) -> float:
        delay = self._backoff
        self._backoff = min(5.0, self._backoff * 2)
        return delay


def rewindable(error: BaseException, rewinding_since: float | None, now: float,
               broker_timeout: float) -> bool:
    """Whether a failed send or flush is answered by a rewind: any failure of the
    producer - including the odd ``RuntimeError`` aiokafka raises on a connection reset
    mid-request - but fencing or a missing topic, while the trouble since the last
    successful commit (``rewinding_since``: the first rewind since then) is young."""
    if isinstance(error, ProducerFencedError | UnknownTopicError):
        return False
    return rewinding_since is None or now - rewinding_since <= broker_timeout


def retriable(error: BaseException) -> bool:
    """A failure that passes with time (a timeout, a dropped connection), whatever the
    processing guarantee: fencing, missing topics and refused commits do not."""
    if isinstance(error, ProducerFencedError | UnknownTopicError | CommitFailedError):
        return False
    cause = error.__cause__ or error.__context__
    if type(cause).__name__ == "IllegalOperation":
        # "not in transaction": the coordinator aborted the open transaction under the
        # producer (a timeout, or a fence it has not reported yet): start again from the
        # last committed one
        return True
    flag = getattr(cause, "retriable", None)
    if isinstance(flag, bool):
        return flag or type(cause).__name__ in _CONNECTION_ERRORS
    return isinstance(error, BrokerUnavailableError) or isinstance(
        cause, ConnectionError | TimeoutError)


async def ride_out(step: Callable[[], Awaitable[None]], *, stopping: asyncio.Event,
                   transient: Callable[[TransportError], bool], clock: Clock,
                   broker_timeout: float, on_retry: Callable[[], None]) -> Exception | None:
    """Run ``step`` again and again until ``stopping`` is set, riding out transient broker
    trouble: a :class:`TransportError` that ``transient`` accepts is retried with backoff
    (``on_retry`` first: e.g. ask for the interrupted commit again) for up to
    ``broker_timeout`` seconds of continuous trouble. Returns the error that ends the run
    (anything else, or an outage longer than that), or None once ``stopping`` is set.

    Cancellation: propagates at once (``step`` is cancelled where it is)."""
    outage: Outage | None = None
    while not stopping.is_set():
        try:
            await step()
            if outage is not None:
                log.warning("worker: the broker is back after %.1fs",
                            clock.monotonic() - outage.since)
                outage = None
        except asyncio.CancelledError:
            raise
        except TransportError as e:
            if not transient(e):
                log.error("worker: stopping: %s", e)
                return e
            now = clock.monotonic()
            if outage is None:
                outage = Outage(now)
                log.warning("worker: broker trouble, retrying for up to %.0fs: %s",
                            broker_timeout, e)
            if now - outage.since > broker_timeout:
                log.error("worker: the broker has been unreachable for %.0fs; stopping: %s",
                          now - outage.since, e)
                return e
            on_retry()
            await asyncio.sleep(outage.next_backoff())
        except Exception as e:  # a bug, or a failure we cannot ride out: stop cleanly
            log.exception("worker: fetch loop failed")
            return e
    return None
