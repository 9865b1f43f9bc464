"""The transport Protocol: what the engine needs from a broker.

Two implementations: :mod:`aiostreams.transport.memory` (an in-process broker with Kafka's
semantics, the embedded default and the unit-test transport) and
:mod:`aiostreams.transport.kafka` (aiokafka against a real Apache Kafka broker).

Semantics every implementation keeps:

* offsets are per partition and increase with every appended record; they are *not* dense
  on Kafka (transaction markers take offsets), so never treat a difference of offsets as
  a count of records;
* a consumer's committed offset is the offset of the *next* record to read;
* ``getmany`` returns records of assigned, non-paused partitions only, in offset order
  per partition, and never returns a record twice unless the consumer seeks back;
* rebalance callbacks run inside ``getmany`` (as in Kafka, inside ``poll``): revoked
  partitions are reported before the new ones are assigned, and a partition is handed to a
  new owner only after its old owner's ``on_revoked`` has returned. Callbacks may report the
  whole old/new assignment (Kafka's eager protocol) or only the change (memory): listeners
  must handle both;
* a producer's ``send_batch`` appends in list order; ``flush`` returns once everything sent
  before it is durable (acknowledged with ``acks=all`` on Kafka).
"""

from __future__ import annotations

import base64
import enum
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Protocol, TypedDict, Unpack, runtime_checkable

from aiostreams.errors import ConfigError
from aiostreams.transport.offset_reset import OffsetResets, check_policy
from aiostreams.types import OutgoingRecord, RawRecord, TopicPartition


class IsolationLevel(enum.Enum):
    READ_UNCOMMITTED = "read_uncommitted"
    READ_COMMITTED = "read_committed"

    @classmethod
    def of(cls, read_committed: bool) -> IsolationLevel:
        """``READ_COMMITTED`` when ``read_committed`` (an exactly-once app), else
        ``READ_UNCOMMITTED``."""
        return cls.READ_COMMITTED if read_committed else cls.READ_UNCOMMITTED


OFFSET_RESETS = ("earliest", "latest")


@dataclass(frozen=True, slots=True)
class ConsumerOptions:
    """How a consumer is configured, one object for every transport and every caller.

    Invariants (checked at construction, raising :class:`ConfigError` naming the field):
    ``max_poll_records >= 1``; ``auto_offset_reset`` is ``"earliest"`` or ``"latest"``;
    ``group_id`` is None (no group: ``assign`` only) or non-empty; ``group_instance_id``
    (static membership) only with a ``group_id``; ``offset_out_of_range`` is None or one of
    ``"earliest"``, ``"latest"``, ``"fail"``.

    ``auto_offset_reset`` is where a partition without a committed offset starts;
    ``offset_out_of_range`` what happens when a position is outside the partition's log
    (see :mod:`~aiostreams.transport.offset_reset`; None: as ``auto_offset_reset`` says,
    with a WARNING and a count).
    """

    group_id: str | None = None
    client_id: str = "aiostreams"
    isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED
    group_instance_id: str | None = None
    max_poll_records: int = 2000
    auto_offset_reset: str = "earliest"
    offset_out_of_range: str | None = None
    state_aware_assignment: bool = False
    """This member keeps standbys: it reports its state to the group's placement
    (:mod:`~aiostreams.transport.group_placement`), and is given standbys and warm-ups; the
    subscribing listener must be a
    :class:`~aiostreams.transport.group_placement.PlacementListener`. (Members with and
    without it share one group, on Kafka as in memory: see
    :mod:`~aiostreams.transport.kafka_assignor`.)"""

    def __post_init__(self) -> None:
        if self.max_poll_records < 1:
            raise ConfigError(
                f"max_poll_records must be at least 1, got {self.max_poll_records}")
        if self.auto_offset_reset not in OFFSET_RESETS:
            raise ConfigError(f"auto_offset_reset must be one of {OFFSET_RESETS}, "
                              f"got {self.auto_offset_reset!r}")
        if self.offset_out_of_range is not None:
            check_policy(self.offset_out_of_range)
        if self.group_id == "":
            raise ConfigError("group_id must be a non-empty string, or None for no group")
        if self.group_instance_id is not None and self.group_id is None:
            raise ConfigError("group_instance_id (static membership) needs a group_id")

    @classmethod
    def of(cls, group_id: str | None, options: ConsumerOptions | None,
           settings: ConsumerSettings) -> ConsumerOptions:
        """The options ``Transport.consumer(group_id, options=..., **settings)`` asks for:
        either a whole ``options`` object, or a ``group_id`` and keyword settings."""
        if options is None:
            return cls(group_id, **settings)
        if group_id is not None or settings:
            raise ConfigError(
                "give a consumer either options=ConsumerOptions(...) or a group_id and "
                f"keyword settings, not both (got group_id={group_id!r}, "
                f"settings {sorted(settings)})")
        return options

    @property
    def out_of_range_policy(self) -> str:
        """What a position outside the log does: ``offset_out_of_range``, else
        ``auto_offset_reset``."""
        return self.offset_out_of_range or self.auto_offset_reset

    @property
    def read_committed(self) -> bool:
        return self.isolation_level is IsolationLevel.READ_COMMITTED

    def require_group(self, action: str) -> str:
        """The group id, or a :class:`ConfigError` saying ``action`` needs one."""
        if self.group_id is None:
            raise ConfigError(
                f"cannot {action} without a group: create the consumer with a group_id, "
                "e.g. transport.consumer('my-group')"
            )
        return self.group_id


class ConsumerSettings(TypedDict, total=False):
    """:class:`ConsumerOptions`' fields but the group, as keyword arguments."""

    client_id: str
    isolation_level: IsolationLevel
    group_instance_id: str | None
    max_poll_records: int
    auto_offset_reset: str
    offset_out_of_range: str | None
    state_aware_assignment: bool


assert {f.name for f in fields(ConsumerOptions)} == {
    "group_id", *ConsumerSettings.__annotations__
}, "ConsumerSettings must list ConsumerOptions' fields but group_id"


class RebalanceListener(Protocol):
    """Called by a consumer from inside ``getmany`` when its assignment changes."""

    async def on_partitions_revoked(self, revoked: Collection[TopicPartition]) -> None: ...

    async def on_partitions_assigned(self, assigned: Collection[TopicPartition]) -> None: ...


@dataclass(frozen=True, slots=True)
class TopicSpec:
    """A topic to create: name, partition count and topic configs (e.g. cleanup.policy)."""

    name: str
    partitions: int
    replication_factor: int = 1
    config: Mapping[str, str] = field(default_factory=dict)


def format_topic_id(raw: bytes) -> str:
    """Kafka's text form of a 16-byte topic id (as ``kafka-topics.sh --describe`` prints
    it): URL-safe base64 without padding."""
    assert len(raw) == 16, f"a topic id is 16 bytes, got {len(raw)}"
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


@runtime_checkable
class Consumer(Protocol):
    """A group member reading assigned partitions; commits are manual only."""

    async def start(self) -> None: ...

    async def stop(self) -> None:
        """Leave the group (running ``on_partitions_revoked`` for what it owns) and close."""
        ...

    def subscribe(self, topics: Collection[str], listener: RebalanceListener) -> None: ...

    def assign(self, partitions: Collection[TopicPartition]) -> None:
        """Manual assignment, no group membership (tools, tests, restore readers)."""
        ...

    def assignment(self) -> frozenset[TopicPartition]: ...

    def owns_assignment(self) -> bool:
        """Whether this member may still act as the owner of ``assignment()``: false once
        the group may have given its partitions to others without this member having run
        ``on_partitions_revoked`` for them (its session may have expired, the coordinator
        no longer knows its generation). It then rejoins at its next poll, which revokes
        everything it held. Always true without a group. No I/O."""
        ...

    @property
    def generation(self) -> int:
        """The group generation of this member's assignment (-1: none yet, or no
        group). A partition's later owner always holds it in a later generation."""
        ...

    async def getmany(
        self, timeout: float, max_records: int | None = None
    ) -> dict[TopicPartition, list[RawRecord]]:
        """Wait up to ``timeout`` seconds for records; return at once when some are ready."""
        ...

    def pause(self, partitions: Collection[TopicPartition]) -> None: ...

    def resume(self, partitions: Collection[TopicPartition]) -> None: ...

    def seek(self, tp: TopicPartition, offset: int) -> None: ...

    async def position(self, tp: TopicPartition) -> int: ...

    def highwater(self, tp: TopicPartition) -> int | None:
        """The partition's end offset as last seen while fetching (no I/O), or None when
        unknown. Tells a task whether an empty partition has records not fetched yet."""
        ...

    async def commit(self, offsets: Mapping[TopicPartition, int]) -> None: ...

    async def committed(self, tp: TopicPartition) -> int | None: ...

    async def end_offsets(
        self, partitions: Collection[TopicPartition]
    ) -> dict[TopicPartition, int]: ...

    async def beginning_offsets(
        self, partitions: Collection[TopicPartition]
    ) -> dict[TopicPartition, int]: ...

    @property
    def offset_resets(self) -> OffsetResets:
        """The resets of out-of-range positions this consumer made (counted per topic,
        partition and reason; see :mod:`~aiostreams.transport.offset_reset`)."""
        ...


@runtime_checkable
class Producer(Protocol):
    """Appends records; optionally transactional (exactly-once)."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def send_batch(self, records: Sequence[OutgoingRecord]) -> None:
        """Hand records to the producer in order. Delivery is proven by ``flush``."""
        ...

    async def flush(self) -> None:
        """Return once every record sent before the call is durable; raise if one failed."""
        ...

    def partition_for(self, topic: str, key: bytes | None, partitions: int) -> int: ...

    @property
    def transactional(self) -> bool: ...

    async def begin_transaction(self) -> None: ...

    async def send_offsets_to_transaction(
        self, offsets: Mapping[TopicPartition, int], group_id: str
    ) -> None: ...

    async def commit_transaction(self) -> None: ...

    async def abort_transaction(self) -> None: ...


@runtime_checkable
class Admin(Protocol):
    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def create_topics(self, specs: Sequence[TopicSpec]) -> None:
        """Create the topics that do not exist yet; existing ones are left as they are."""
        ...

    async def partitions_for(self, topic: str) -> int | None:
        """The topic's partition count, or None when it does not exist."""
        ...

    async def list_topics(self) -> list[str]: ...

    async def topic_ids(self, topics: Collection[str]) -> dict[str, str | None]:
        """Each topic's incarnation id: Kafka's topic id (KIP-516), new each time a topic of
        that name is created, so a topic deleted and created again (its offsets restarting
        at 0) is told from the one before. None for a topic that does not exist, and for
        every topic of a broker without topic ids (Kafka before 2.8)."""
        ...

    async def delete_topics(self, topics: Sequence[str]) -> None: ...

    async def delete_records(self, before: Mapping[TopicPartition, int]) -> None:
        """Delete every record below ``before[tp]`` of each partition (Kafka's
        delete-records): the partition's beginning offset moves up to it, never down."""
        ...


@runtime_checkable
class Transport(Protocol):
    """A factory for clients of one broker (one cluster)."""

    @property
    def url(self) -> str: ...

    def consumer(
        self,
        group_id: str | None = None,
        *,
        options: ConsumerOptions | None = None,
        **settings: Unpack[ConsumerSettings],
    ) -> Consumer:
        """A consumer configured by ``options``, or by ``group_id`` and ``settings`` (the
        other fields of :class:`ConsumerOptions`); see :meth:`ConsumerOptions.of`."""
        ...

    def producer(
        self, *, client_id: str = "aiostreams", transactional_id: str | None = None
    ) -> Producer: ...

    def admin(self) -> Admin: ...


async def read_topic_ids(transport: Transport, topics: Collection[str]) -> dict[str, str | None]:
    """:meth:`Admin.topic_ids` of ``topics`` through a short-lived admin client of
    ``transport``. Cancellation: the admin client is stopped."""
    if not topics:
        return {}
    admin = transport.admin()
    await admin.start()
    try:
        return await admin.topic_ids(topics)
    finally:
        await admin.stop()
