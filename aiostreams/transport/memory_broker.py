"""The in-process broker behind ``memory://``: topics, partition logs, groups, transactional ids.

The clients (:mod:`~aiostreams.transport.memory_consumer`,
:mod:`~aiostreams.transport.memory_producer`) keep their own state and reach in here, under
the broker's lock, for everything shared.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import re
import secrets
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import fields
from typing import ClassVar

from aiostreams.errors import ConfigError, UnknownTopicError
from aiostreams.transport.base import format_topic_id
from aiostreams.transport.memory_group import GroupCoordinator
from aiostreams.types import OutgoingRecord, RawRecord, TopicPartition

__all__ = ["MemoryBroker"]

_LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")
"""Kafka's rule for topic names, applied to broker names too (they appear in URLs)."""


PartitionChooser = Callable[[str, bytes | None, int], int]
"""``(topic, key, partition_count) -> partition``, e.g. a producer's ``partition_for``: a
partition in ``0..partition_count-1``; for a non-null key, a function of the key and the
count alone (no state it changes), as Kafka's default partitioner is."""

_new = object.__new__
# append builds a RawRecord per record by storing its fields on a bare instance (a class
# call to the dataclass __init__ costs about as much again), so these must be every field.
_RAW_FIELDS = ("topic", "partition", "offset", "timestamp", "key", "value", "headers")
assert tuple(f.name for f in fields(RawRecord)) == _RAW_FIELDS \
    and not hasattr(RawRecord, "__post_init__"), "RawRecord changed: update MemoryBroker.append"


def check_name(kind: str, name: str) -> None:
    if not _LEGAL_NAME.fullmatch(name) or name in (".", ".."):
        raise ValueError(
            f"illegal {kind} name {name!r}: Kafka allows 1 to 249 ASCII letters, digits, "
            "'.', '_' and '-' (and not '.' or '..' alone)"
        )


class Waiter:
    """One pending ``getmany``: a future on the consumer's loop that any thread may wake.

    Producers (and group changes) call :meth:`wake` under the broker lock, possibly from
    another thread or event loop; the future is then resolved on its own loop. Waking a
    waiter whose loop is closed does nothing.
    """

    __slots__ = ("_future", "_loop", "topics")

    def __init__(self, topics: frozenset[str]) -> None:
        self._loop = asyncio.get_running_loop()
        self._future: asyncio.Future[None] = self._loop.create_future()
        self.topics = topics

    def wake(self) -> None:
        loop = self._loop
        if loop.is_closed():
            return
        try:
            same_loop = asyncio.get_running_loop() is loop
        except RuntimeError:
            same_loop = False
        if same_loop:
            self._resolve()
            return
        # RuntimeError: the loop closed after the check above, so nobody is waiting any more.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self._resolve)

    def _resolve(self) -> None:
        if not self._future.done():
            self._future.set_result(None)

    async def wait(self, timeout: float) -> None:
        """Return when woken or after ``timeout`` seconds; cancelling it just stops waiting."""
        try:
            await asyncio.wait({self._future}, timeout=timeout)
        finally:
            self._future.cancel()


class MemoryBroker:
    """An in-process Kafka broker with the semantics of :mod:`aiostreams.transport.base`.

    Each topic has N partitions; each partition is an append-only log of
    :class:`RawRecord`. Invariants: the record at index ``i`` of a log has offset ``i``
    (asserted on append) and logs never shrink (no retention, no compaction); the
    beginning offset is 0 until ``delete_records`` moves it up (it never moves down), and
    records below it are no longer served (a consumer positioned below it starts at it).
    Each created topic gets a new random id (Kafka's topic id): a topic deleted and created
    again under its name has another id, and its offsets start again at 0.
    Consumer groups (:class:`GroupCoordinator`) hold committed
    offsets; transactional ids hold the epoch of their newest producer, for fencing.

    ``MemoryBroker()`` is private to its creator; ``MemoryBroker.named("x")`` returns the
    one broker of that name in the process, which is what ``memory://x`` URLs resolve to.
    With ``auto_create_partitions=N`` an unknown topic is created with N partitions on
    first produce, subscribe or assign instead of raising :class:`UnknownTopicError`.

    Thread safety: all shared state is changed under one lock and blocking waits are
    asyncio futures woken on their own loop, so clients on different event loops (or
    threads) may share a broker.
    """

    _registry: ClassVar[dict[str, MemoryBroker]] = {}
    _registry_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, *, auto_create_partitions: int | None = None) -> None:
        if auto_create_partitions is not None and auto_create_partitions < 1:
            raise ConfigError(
                f"auto_create_partitions must be None (never) or at least 1, "
                f"got {auto_create_partitions}"
            )
        self.auto_create_partitions = auto_create_partitions
        self._name: str | None = None
        self._lock = threading.RLock()
        self._logs: dict[str, list[list[RawRecord]]] = {}
        self._configs: dict[str, dict[str, str]] = {}
        self._topic_ids: dict[str, str] = {}
        self._log_start: dict[TopicPartition, int] = {}
        self._groups: dict[str, GroupCoordinator] = {}
        self._waiters: set[Waiter] = set()
        self._txn_epochs: dict[str, int] = {}
        self._member_ids = itertools.count(1)

    @classmethod
    def named(cls, name: str) -> MemoryBroker:
        """The process-wide broker called ``name``, created on first use."""
        check_name("memory broker", name)
        with cls._registry_lock:
            broker = cls._registry.get(name)
            if broker is None:
                broker = cls._registry[name] = cls()
                broker._name = name
            return broker

    @property
    def name(self) -> str | None:
        """The registry name, or None for a private broker."""
        return self._name

    def __repr__(self) -> str:
        if self._name is None:
            return f"<private MemoryBroker {id(self):#x}>"
        return f"MemoryBroker({self._name!r})"

    # -- topics -------------------------------------------------------------------------

    def create_topic(
        self, name: str, partitions: int = 1, config: Mapping[str, str] | None = None
    ) -> bool:
        """Create ``name`` with ``partitions`` partitions; False if it already existed.

        An existing topic is left exactly as it is, whatever ``partitions`` says.
        """
        check_name("topic", name)
        if partitions < 1:
            raise ValueError(f"topic {name!r} needs at least 1 partition, got {partitions}")
        with self._lock:
            if name in self._logs:
                return False
            self._logs[name] = [[] for _ in range(partitions)]
            self._configs[name] = dict(config or {})
            self._topic_ids[name] = format_topic_id(secrets.token_bytes(16))
            for group in self._groups.values():
                group.topics_changed([name])
            return True

    def delete_topics(self, names: Collection[str]) -> None:
        """Delete topics with their records and committed offsets; all must exist."""
        with self._lock:
            missing = sorted(set(names) - self._logs.keys())
            if missing:
                raise UnknownTopicError(
                    f"cannot delete topics {missing} of {self!r}: they do not exist"
                )
            for name in names:
                del self._logs[name]
                del self._configs[name]
                del self._topic_ids[name]
            self._log_start = {tp: o for tp, o in self._log_start.items()
                               if tp.topic not in names}
            for group in self._groups.values():
                for name in names:
                    group.forget_topic(name)
                group.topics_changed(names)

    def topic_names(self) -> list[str]:
        with self._lock:
            return sorted(self._logs)

    def partition_count(self, topic: str) -> int | None:
        with self._lock:
            log = self._logs.get(topic)
            return None if log is None else len(log)

    def topic_id(self, topic: str) -> str | None:
        """The id of this incarnation of ``topic`` (as Kafka writes one), or None when the
        topic does not exist."""
        with self._lock:
            return self._topic_ids.get(topic)

    def topic_config(self, topic: str) -> dict[str, str]:
        with self._lock:
            self.require_topic(topic, create=False)
            return dict(self._configs[topic])

    # -- inspection helpers for tests and debugging --------------------------------------

    def records(self, topic: str, partition: int | None = None) -> list[RawRecord]:
        """The records of one partition, or of all partitions in partition order."""
        with self._lock:
            logs = self.require_topic(topic, create=False)
            if partition is None:
                return [record for log in logs for record in log]
            return list(logs[self.check_partition(topic, partition)])

    def end_offset(self, tp: TopicPartition) -> int:
        """The offset the next record appended to ``tp`` will get."""
        with self._lock:
            logs = self.require_topic(tp.topic, create=False)
            return len(logs[self.check_partition(tp.topic, tp.partition)])

    def beginning_offset(self, tp: TopicPartition) -> int:
        """The first offset of ``tp`` still served (0 unless records were deleted)."""
        with self._lock:
            self.require_topic(tp.topic, create=False)
            self.check_partition(tp.topic, tp.partition)
            return self._log_start.get(tp, 0)

    def delete_records(self, before: Mapping[TopicPartition, int]) -> None:
        """Kafka's delete-records: the beginning offset of each partition moves up to
        ``before[tp]`` (past the end is an error, as in Kafka; lower than now is a no-op)."""
        with self._lock:
            for tp, offset in before.items():
                end = self.end_offset(tp)
                if not 0 <= offset <= end:
                    raise ValueError(f"cannot delete records of {tp} below {offset}: its "
                                     f"offsets run from 0 to {end}")
                self._log_start[tp] = max(self._log_start.get(tp, 0), offset)

    def committed(self, group_id: str, tp: TopicPartition) -> int | None:
        with self._lock:
            group = self._groups.get(group_id)
            return None if group is None else group.committed(tp)

    # -- used by the clients, under the lock ---------------------------------------------

    def require_topic(self, topic: str, *, create: bool = True) -> list[list[RawRecord]]:
        """The partition logs of ``topic``, auto-creating it if allowed, else raise."""
        logs = self._logs.get(topic)
        if logs is None and create and self.auto_create_partitions is not None:
            self.create_topic(topic, self.auto_create_partitions)
            logs = self._logs[topic]
        if logs is None:
            raise UnknownTopicError(
                f"topic {topic!r} does not exist on {self!r}. Create it first: "
                f"`await admin.create_topics([TopicSpec({topic!r}, partitions=N)])`, or "
                f"`broker.create_topic({topic!r}, N)` in tests, or make the broker with "
                "MemoryBroker(auto_create_partitions=N) to create topics on first use"
            )
        return logs

    def check_partition(self, topic: str, partition: int) -> int:
        count = len(self._logs[topic])
        if not 0 <= partition < count:
            raise ValueError(
                f"partition {partition} of topic {topic!r} does not exist: "
                f"the topic has partitions 0..{count - 1}"
            )
        return partition

    def append(self, records: Iterable[tuple[OutgoingRecord, int]]) -> None:
        """Append (record, partition) pairs in order and wake consumers of their topics.

        Every topic must exist: callers resolve partitions (and so check topics) first.
        A record's offset is its log's length: this is the only writer of the logs, so each
        log stays dense from offset 0 (asserted per log touched, after the batch).
        """
        now = time.time()
        logs = self._logs
        touched: set[str] = set()
        topic = ""
        partitions: list[list[RawRecord]] = []
        for record, partition in records:
            if record.topic != topic:
                topic = record.topic
                partitions = logs[topic]
                touched.add(topic)
            log = partitions[partition]
            timestamp = record.timestamp
            # RawRecord(topic, partition, ...) without the class call (see _RAW_FIELDS)
            raw: RawRecord = _new(RawRecord)
            raw.topic = topic
            raw.partition = partition
            raw.offset = len(log)
            raw.timestamp = now if timestamp is None else timestamp
            raw.key = record.key
            raw.value = record.value
            raw.headers = record.headers
            log.append(raw)
        assert all(not log or log[-1].offset + 1 == len(log)
                   for name in touched for log in logs[name]), "offsets must be dense"
        for waiter in list(self._waiters):
            if waiter.topics & touched:
                waiter.wake()

    def group(self, group_id: str) -> GroupCoordinator:
        group = self._groups.get(group_id)
        if group is None:
            group = self._groups[group_id] = GroupCoordinator(group_id, self.partition_count)
        return group

    def member_count(self, group_id: str) -> int:
        """How many members group ``group_id`` has now (0 for a group never joined)."""
        with self._lock:
            group = self._groups.get(group_id)
            return 0 if group is None else group.member_count

    def new_member_id(self, client_id: str) -> str:
        # Zero-padded so that sorting member ids (the assignment order) is joining order.
        return f"{client_id}-{next(self._member_ids):08d}"

    def add_waiter(self, waiter: Waiter) -> None:
        self._waiters.add(waiter)

    def remove_waiter(self, waiter: Waiter) -> None:
        self._waiters.discard(waiter)

    def init_transactions(self, transactional_id: str) -> int:
        """Register a producer for ``transactional_id``; returns its epoch (fences older)."""
        epoch = self._txn_epochs.get(transactional_id, -1) + 1
        self._txn_epochs[transactional_id] = epoch
        return epoch

    def transactional_epoch(self, transactional_id: str) -> int:
        return self._txn_epochs[transactional_id]

    def commit_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        self.group(group_id).commit(offsets)

    def resolve_partitions(
        self, records: Sequence[OutgoingRecord], choose: PartitionChooser
    ) -> list[tuple[OutgoingRecord, int]]:
        """Each record with its partition (see :meth:`choose_partitions`)."""
        return list(zip(records, self.choose_partitions(records, choose), strict=True))

    def choose_partitions(
        self, records: Sequence[OutgoingRecord], choose: PartitionChooser
    ) -> list[int]:
        """Each record's partition (its own, else ``choose``'s), checking every topic and
        explicit partition first: raises before anything could be appended.

        A keyed record of a one-partition topic goes to partition 0 without asking
        ``choose``: a chooser's answer lies in ``0..count-1`` and, for a key, depends on
        nothing else (see :data:`PartitionChooser`).
        """
        chosen: list[int] = []
        add = chosen.append
        counts: dict[str, int] = {}  # partition counts of the topics met so far
        for record in records:
            topic = record.topic
            count = counts.get(topic)
            if count is None:
                count = counts[topic] = len(self.require_topic(topic))
            partition = record.partition
            if partition is None:
                key = record.key
                partition = 0 if count == 1 and key is not None else choose(topic, key, count)
            elif not 0 <= partition < count:
                self.check_partition(topic, partition)
            add(partition)
        return chosen
