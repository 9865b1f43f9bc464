"""The memory broker's producer: immediate appends, or buffered all-or-nothing transactions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aiostreams.errors import ProducerFencedError, TransportError
from aiostreams.transport.lifecycle import PRODUCER_TRANSITIONS as _TRANSITIONS
from aiostreams.transport.lifecycle import ProducerState, producer_state_error
from aiostreams.transport.memory_broker import MemoryBroker
from aiostreams.transport.partitioner import KeyPartitioner
from aiostreams.types import OutgoingRecord, TopicPartition

__all__ = ["MemoryProducer"]


class MemoryProducer:
    """A producer for a :class:`MemoryBroker`.

    Without a ``transactional_id``, ``send_batch`` appends at once, in list order, and all
    or nothing (every record's topic and partition are checked before the first append);
    ``flush`` has nothing left to wait for.

    With one, ``start()`` registers the id and fences any older producer holding it.
    Records and offsets of a transaction are buffered in the producer and
    ``commit_transaction`` appends every record and commits every offset in one step under
    the broker lock; ``abort_transaction`` drops them. Uncommitted records are therefore
    never in a log, which is why consumers honour ``read_committed`` with no extra work.
    Unlike Kafka, a commit writes no control record, so offsets stay dense.

    Lifecycle: ``CREATED → READY ⇄ IN_TRANSACTION``, then ``FENCED`` (a newer producer
    took the id; every later call raises :class:`ProducerFencedError`) and ``STOPPED``.
    """

    def __init__(
        self,
        broker: MemoryBroker,
        *,
        client_id: str = "aiostreams",
        transactional_id: str | None = None,
    ) -> None:
        if transactional_id == "":
            raise ValueError("transactional_id must be a non-empty string, or None")
        self._broker = broker
        self._client_id = client_id
        self._transactional_id = transactional_id
        self._epoch = -1
        self._state = ProducerState.CREATED
        self._partitioner = KeyPartitioner()
        self._pending_records: list[tuple[OutgoingRecord, int]] = []
        self._pending_offsets: dict[str, dict[TopicPartition, int]] = {}

    @property
    def transactional(self) -> bool:
        return self._transactional_id is not None

    async def start(self) -> None:
        """Start; with a transactional_id, fence every older producer holding that id."""
        if self._state is not ProducerState.CREATED:
            raise TransportError(f"cannot start: the producer is {self._state.value} already")
        self._transition(ProducerState.READY)
        if self._transactional_id is not None:
            with self._broker._lock:
                self._epoch = self._broker.init_transactions(self._transactional_id)

    async def stop(self) -> None:
        """Close; an open transaction is aborted. Idempotent."""
        if self._state is not ProducerState.STOPPED:
            self._drop_transaction()
            self._transition(ProducerState.STOPPED)

    def partition_for(self, topic: str, key: bytes | None, partitions: int) -> int:
        """Kafka's default partitioner (memoised); null keys go round-robin per producer."""
        return self._partitioner.partition_for(topic, key, partitions)

    async def send_batch(self, records: Sequence[OutgoingRecord]) -> None:
        """Append ``records`` in order, or add them to the open transaction.

        Raises before appending anything if a topic or an explicit partition does not
        exist. Not interrupted by cancellation (there is no await inside).
        """
        choose = self._partitioner.partition_for
        if self._transactional_id is None:
            self._require(ProducerState.READY, "send records")
            with self._broker._lock:
                # zip's pairs, unpacked at once by append, are not allocated per record
                self._broker.append(
                    zip(records, self._broker.choose_partitions(records, choose), strict=True))
            return
        self._require(ProducerState.IN_TRANSACTION, "send records")
        with self._broker._lock:
            self._pending_records.extend(
                self._broker.resolve_partitions(records, choose)
            )

    async def flush(self) -> None:
        """Return at once: every appended record is already durable in memory."""
        self._check_fenced("flush")
        if self._state not in (ProducerState.READY, ProducerState.IN_TRANSACTION):
            raise TransportError(f"cannot flush: the producer is {self._state.value}")

    # -- transactions -------------------------------------------------------------------

    async def begin_transaction(self) -> None:
        if self._transactional_id is None:
            raise TransportError(
                "cannot begin a transaction: create the producer with a transactional_id "
                "to use transactions"
            )
        self._require(ProducerState.READY, "begin a transaction")
        self._transition(ProducerState.IN_TRANSACTION)

    async def send_offsets_to_transaction(
        self, offsets: Mapping[TopicPartition, int], group_id: str
    ) -> None:
        """Commit ``offsets`` for ``group_id`` when (and only if) the transaction commits.

        No group-generation check is made (the Protocol passes only the group id).
        """
        self._require(ProducerState.IN_TRANSACTION, "send offsets to a transaction")
        for tp, offset in offsets.items():
            if offset < 0:
                raise ValueError(f"cannot commit offset {offset} for {tp}: offsets start at 0")
        self._pending_offsets.setdefault(group_id, {}).update(offsets)

    async def commit_transaction(self) -> None:
        """Append the transaction's records and commit its offsets, atomically.

        If a topic was deleted since its records were sent, the whole transaction is
        aborted and :class:`UnknownTopicError` raised.
        """
        with self._broker._lock:  # the fencing check and the appends are one atomic step
            self._require(ProducerState.IN_TRANSACTION, "commit a transaction")
            try:
                for record, partition in self._pending_records:
                    self._broker.require_topic(record.topic, create=False)
                    self._broker.check_partition(record.topic, partition)
                self._broker.append(self._pending_records)
                for group_id, offsets in self._pending_offsets.items():
                    self._broker.commit_offsets(group_id, offsets)
            finally:
                self._drop_transaction()
                self._transition(ProducerState.READY)

    async def abort_transaction(self) -> None:
        self._require(ProducerState.IN_TRANSACTION, "abort a transaction")
        self._drop_transaction()
        self._transition(ProducerState.READY)

    # -- internals ----------------------------------------------------------------------

    def _require(self, state: ProducerState, action: str) -> None:
        self._check_fenced(action)
        if self._state is state:
            return
        if self._transactional_id is None and state is ProducerState.IN_TRANSACTION:
            raise TransportError(f"cannot {action}: the producer is {self._state.value}; "
                                 "create the producer with a transactional_id to use "
                                 "transactions")
        raise producer_state_error(self._state, state, action)

    def _check_fenced(self, action: str) -> None:
        """Raise if a newer producer took our transactional_id (checked before anything)."""
        if self._transactional_id is not None and self._state in (
            ProducerState.READY, ProducerState.IN_TRANSACTION,
        ):
            with self._broker._lock:
                newest = self._broker.transactional_epoch(self._transactional_id)
            assert newest >= self._epoch, "transactional epochs only grow"
            if newest != self._epoch:
                self._drop_transaction()
                self._transition(ProducerState.FENCED)
        if self._state is ProducerState.FENCED:
            raise ProducerFencedError(
                f"cannot {action}: producer {self._client_id!r} was fenced by a newer "
                f"producer with transactional_id {self._transactional_id!r}. Its open "
                "transaction was aborted; stop this producer, the newer one owns the id"
            )

    def _drop_transaction(self) -> None:
        self._pending_records.clear()
        self._pending_offsets.clear()

    def _transition(self, new: ProducerState) -> None:
        assert new in _TRANSITIONS[self._state], f"{self._state} -> {new}"
        self._state = new
