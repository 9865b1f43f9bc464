"""The memory broker's consumer: group membership, positions and fair, event-driven fetches."""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping

from aiostreams.errors import CommitFailedError, TransportError
from aiostreams.transport import lifecycle
from aiostreams.transport.base import ConsumerOptions, RebalanceListener
from aiostreams.transport.group_placement import PlacementListener
from aiostreams.transport.lifecycle import ConsumerState
from aiostreams.transport.memory_broker import MemoryBroker, Waiter
from aiostreams.transport.memory_fetch import FairFetch
from aiostreams.transport.memory_group import GroupCoordinator
from aiostreams.transport.offset_reset import OffsetResets, plan_reset
from aiostreams.types import RawRecord, TopicPartition

__all__ = ["MemoryConsumer"]


class MemoryConsumer:
    """A consumer of a :class:`MemoryBroker`, either a group member or manually assigned.

    ``_positions`` holds exactly the current assignment, mapped to the offset of the next
    record to return; ``getmany`` returns each partition's records from its position with
    no gap and no repeat (asserted), then advances it.

    As a group member it follows the two-phase handoff of
    :class:`~aiostreams.transport.memory_group.GroupCoordinator`: inside ``getmany`` it
    first revokes (``on_partitions_revoked`` for what it must give up, then release), then
    acquires the target partitions already released and runs ``on_partitions_assigned``
    for them. The callbacks receive only the *change* (like Kafka's cooperative protocol),
    are called with non-empty sets only, and a newly assigned partition starts at the
    group's committed offset, else per ``auto_offset_reset`` (a ``seek`` inside
    ``on_partitions_assigned`` wins). A position outside the partition's log (below its
    beginning after ``delete_records``, or past its end) is reset per
    ``offset_out_of_range`` at the next fetch, as Kafka's consumer does: logged, counted in
    ``offset_resets``, or raised under ``"fail"`` (see
    :mod:`~aiostreams.transport.offset_reset`). A member that stops polling keeps its partitions:
    there is no session timeout here, so always ``stop()`` a consumer.

    ``isolation_level`` is accepted and needs no work: transactional records are appended
    only when their transaction commits, so every reader already sees committed data only.
    """

    def __init__(
        self,
        broker: MemoryBroker,
        options: ConsumerOptions,
    ) -> None:
        self._broker = broker
        self.options = options
        self._state = ConsumerState.CREATED
        self._subscription: frozenset[str] | None = None
        self._listener: RebalanceListener | None = None
        self._member_id: str | None = None
        self._generation = -1
        self._manual = False
        self._positions: dict[TopicPartition, int] = {}
        self._fetch = FairFetch()
        self._waiter: Waiter | None = None
        self._polling = False
        self._sync_lock = asyncio.Lock()
        self._probe: asyncio.TimerHandle | None = None
        self.offset_resets = OffsetResets()

    # -- lifecycle ----------------------------------------------------------------------

    async def start(self) -> None:
        """Start, joining the group at once if ``subscribe`` was called before."""
        lifecycle.check_consumer_transition(self._state, ConsumerState.STARTED)
        if self._subscription is not None:
            with self._broker._lock:
                self._join(self._subscription)
        self._transition(ConsumerState.STARTED)

    async def stop(self) -> None:
        """Revoke everything owned (``on_partitions_revoked``), leave the group and close.

        A ``getmany`` waiting meanwhile returns ``{}``; one running a rebalance callback
        finishes it first. If cancelled (while waiting for that, or inside the revoke
        callback) the consumer still leaves the group and ends up stopped.
        """
        if self._state in (ConsumerState.STOPPING, ConsumerState.STOPPED):
            return
        self._transition(ConsumerState.STOPPING)
        self._wake()
        if self._probe is not None:
            self._probe.cancel()
        try:
            async with self._sync_lock:
                owned = frozenset(self._positions)
                if self._member_id is not None and owned and self._listener is not None:
                    await self._listener.on_partitions_revoked(owned)
        finally:
            with self._broker._lock:
                if self._member_id is not None:
                    self._group().leave(self._member_id)
                    self._member_id = None
                self._set_positions({})
            self._transition(ConsumerState.STOPPED)

    # -- assignment ---------------------------------------------------------------------

    def subscribe(self, topics: Collection[str], listener: RebalanceListener) -> None:
        """Join (or change the subscription in) the group; assignment happens in getmany."""
        group_id = lifecycle.check_subscribe(self._state, self.options, topics,
                                             assigned=self._manual)
        with self._broker._lock:
            for topic in topics:
                self._broker.require_topic(topic)
            subscription = frozenset(topics)
            self._listener = listener  # before joining: the join reads its placement report
            if self._member_id is not None:
                self._broker.group(group_id).subscribe(self._member_id, subscription)
            elif self._state is ConsumerState.STARTED:
                self._join(subscription)
            self._subscription = subscription
            self._listener = listener

    def assign(self, partitions: Collection[TopicPartition]) -> None:
        """Read exactly ``partitions``, with no group membership and no rebalances.

        Partitions kept from the previous assignment keep their positions; new ones start
        at the group's committed offset (when there is a group_id), else per
        ``auto_offset_reset``.
        """
        lifecycle.require_consumer_open(self._state, "assign")
        if self._subscription is not None:
            raise TransportError(
                "this consumer subscribed to topics; subscribe and assign are exclusive, "
                "use a separate consumer for manual assignment"
            )
        with self._broker._lock:
            for tp in partitions:
                self._broker.require_topic(tp.topic)
                self._broker.check_partition(tp.topic, tp.partition)
            self._manual = True
            self._set_positions(
                {tp: self._positions.get(tp, self._initial_position(tp)) for tp in partitions}
            )
            self._wake()

    def assignment(self) -> frozenset[TopicPartition]:
        return frozenset(self._positions)

    # -- reading ------------------------------------------------------------------------

    async def getmany(
        self, timeout: float, max_records: int | None = None
    ) -> dict[TopicPartition, list[RawRecord]]:
        """Return records ready now, else wait up to ``timeout`` seconds for an append.

        Runs pending rebalance callbacks first. At most ``max_records`` (default
        ``max_poll_records``) records in total, spread round-robin over the partitions that
        have some, starting from a different partition on each call. Waiting is woken by
        appends to an assigned topic and by group changes, never by polling.

        Raises :class:`~aiostreams.errors.OffsetOutOfRangeError` for a position outside
        its partition's log under ``offset_out_of_range="fail"`` (the position stays).

        Cancellation: positions only advance when records are returned, so a cancelled
        call loses nothing. If cancelled inside ``on_partitions_revoked`` the partitions
        are released all the same (as Kafka completes a rebalance whatever the callback
        does); if cancelled inside ``on_partitions_assigned`` they stay assigned.
        """
        lifecycle.require_consumer_started(self._state, "getmany")
        lifecycle.check_getmany(timeout, max_records, self._polling)
        limit = self.options.max_poll_records if max_records is None else max_records
        self._polling = True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            while True:
                if self._member_id is not None:
                    async with self._sync_lock:
                        if self._state is ConsumerState.STARTED:
                            await self._rejoin_if_expelled()
                            await self._sync_group()
                if self._state is not ConsumerState.STARTED:
                    return {}
                with self._broker._lock:
                    batch = self._fetch.take(self._broker, self._positions, limit,
                                             self._reset_out_of_range)
                    if batch:
                        return batch
                    if self._member_id is not None and self._group().needs_sync(self._member_id):
                        continue
                    remaining = deadline - loop.time()
                    if remaining <= 0:
                        return {}
                    waiter = self._waiter = Waiter(frozenset(tp.topic for tp in self._positions))
                    self._broker.add_waiter(waiter)
                try:
                    await waiter.wait(remaining)
                finally:
                    with self._broker._lock:
                        self._broker.remove_waiter(waiter)
                        self._waiter = None
        finally:
            self._polling = False

    def pause(self, partitions: Collection[TopicPartition]) -> None:
        for tp in partitions:
            self._require_assigned(tp, "pause")
        self._fetch.paused.update(partitions)

    def resume(self, partitions: Collection[TopicPartition]) -> None:
        for tp in partitions:
            self._require_assigned(tp, "resume")
        self._fetch.paused.difference_update(partitions)
        self._wake()

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self._require_assigned(tp, "seek")
        if offset < 0:
            raise ValueError(f"cannot seek {tp} to offset {offset}: offsets start at 0")
        self._positions[tp] = offset
        self._wake()

    def highwater(self, tp: TopicPartition) -> int | None:
        """The partition's current end offset (the broker is in-process: always known)."""
        if tp not in self._positions:
            return None
        return self._broker.end_offset(tp)

    async def position(self, tp: TopicPartition) -> int:
        self._require_assigned(tp, "ask the position of")
        return self._positions[tp]

    # -- offsets ------------------------------------------------------------------------

    async def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit ``offsets`` (next offset to read) for the group; all or none are stored.

        Raises :class:`CommitFailedError` for a partition this consumer does not hold now.
        Allowed inside the ``on_partitions_revoked`` that ``stop()`` runs.
        """
        if self._state is not ConsumerState.STOPPING:
            lifecycle.require_consumer_started(self._state, "commit")
        group_id = self.options.require_group("commit")
        with self._broker._lock:
            if self._member_id is not None and not self._group().is_member(self._member_id):
                raise CommitFailedError(
                    f"cannot commit {len(offsets)} offset(s) in group {group_id!r}: the group "
                    "dropped this member (its session expired) and may have given its "
                    "partitions to others; it rejoins at its next poll")
            for tp, offset in offsets.items():
                if offset < 0:
                    raise ValueError(f"cannot commit offset {offset} for {tp}: offsets start at 0")
                if tp not in self._positions:
                    raise CommitFailedError(
                        f"cannot commit offset {offset} for {tp} in group {group_id!r}: it is "
                        f"not assigned to this consumer (assignment: "
                        f"{sorted(map(str, self._positions))}). A rebalance moved it; the new "
                        "owner resumes from the last committed offset. Commit revoked "
                        "partitions inside on_partitions_revoked."
                    )
            self._broker.commit_offsets(group_id, offsets)

    async def committed(self, tp: TopicPartition) -> int | None:
        if self.options.group_id is None:
            return None
        return self._broker.committed(self.options.group_id, tp)

    async def end_offsets(
        self, partitions: Collection[TopicPartition]
    ) -> dict[TopicPartition, int]:
        return {tp: self._broker.end_offset(tp) for tp in partitions}

    async def beginning_offsets(
        self, partitions: Collection[TopicPartition]
    ) -> dict[TopicPartition, int]:
        return {tp: self._broker.beginning_offset(tp) for tp in partitions}

    # -- internals ----------------------------------------------------------------------

    def _reset_out_of_range(self, tp: TopicPartition, log_start: int, log_end: int) -> None:
        """Move ``tp``'s position, outside ``[log_start, log_end]``, per the policy (or
        raise under ``"fail"``, leaving it where it is)."""
        reset = plan_reset(tp, self._positions[tp], log_start, log_end,
                           self.options.out_of_range_policy)
        assert reset is not None, f"{tp}: position {self._positions[tp]} is in range"
        self._positions[tp] = self.offset_resets.apply(reset, self.options.group_id)

    async def _sync_group(self) -> None:
        """Run the revoke phase, then the acquire phase, of the two-phase handoff."""
        assert self._member_id is not None and self._listener is not None
        member_id, group, listener = self._member_id, self._group(), self._listener
        with self._broker._lock:
            revoked = group.revocations(member_id)
        if revoked:
            try:
                await listener.on_partitions_revoked(revoked)
            finally:
                with self._broker._lock:
                    if self._member_id == member_id:  # else a cancelled stop() left already
                        group.release(member_id, revoked)
                        self._set_positions(
                            {tp: p for tp, p in self._positions.items() if tp not in revoked}
                        )
        with self._broker._lock:
            if self._member_id != member_id:
                return
            assigned = group.acquirable(member_id)
            if assigned:
                group.acquire(member_id, assigned)
                self._generation = group.generation
                new = {tp: self._initial_position(tp) for tp in assigned}
                self._set_positions({**self._positions, **new})
            assert frozenset(self._positions) == group.owned(member_id)
        if assigned:
            await listener.on_partitions_assigned(assigned)
        await self._take_standbys(member_id)

    async def _take_standbys(self, member_id: str) -> None:
        """Hand this generation's standbys to the listener, once its revocations are done;
        a probing rebalance asked for is started after ``probing_rebalance_interval``."""
        listener, group = self._listener, self._group()
        with self._broker._lock:
            if self._member_id != member_id or group.revocations(member_id):
                return
            standbys = group.standby_pending(member_id)
            generation = group.generation
        if standbys is None or not isinstance(listener, PlacementListener):
            return
        await listener.on_standbys_assigned(standbys)
        with self._broker._lock:
            if self._member_id == member_id:
                group.standby_taken(member_id, generation)
        if standbys.probing_rebalance and self._probe is None:
            interval = listener.placement_report().probing_rebalance_interval
            self._probe = asyncio.get_running_loop().call_later(
                interval, self._probe_now, member_id)

    def _probe_now(self, member_id: str) -> None:
        self._probe = None
        with self._broker._lock:
            if self._member_id == member_id and self._group().is_member(member_id):
                self._group().rebalance()

    async def _rejoin_if_expelled(self) -> None:
        """The group dropped this member (:meth:`GroupCoordinator.expel`, a session timeout):
        revoke what it still believed it owned (commits are refused: the partitions may have
        new owners already), then join again as a new member."""
        member_id, listener = self._member_id, self._listener
        assert member_id is not None and listener is not None
        if self._group().is_member(member_id):
            return
        owned = frozenset(self._positions)
        try:
            if owned:
                await listener.on_partitions_revoked(owned)
        finally:
            with self._broker._lock:
                if self._member_id == member_id:
                    self._set_positions({})
                    self._member_id = None
                    assert self._subscription is not None
                    self._join(self._subscription)

    @property
    def member_id(self) -> str | None:
        """This member's id in its group (None: not a member now)."""
        return self._member_id

    def owns_assignment(self) -> bool:
        """Whether this member may still act as the owner of ``assignment()``: false once
        the group dropped it (until its next poll rejoins); always true without a group."""
        member_id = self._member_id
        return member_id is None or self._group().is_member(member_id)

    @property
    def generation(self) -> int:
        """The group generation of this member's assignment (-1: no group)."""
        return self._generation

    def _join(self, subscription: frozenset[str]) -> None:
        assert self._member_id is None
        group = self._broker.group(self.options.require_group("join"))
        member_id = (self.options.group_instance_id
                     or self._broker.new_member_id(self.options.client_id))
        listener = self._listener
        group.join(member_id, subscription, self._wake,
                   listener.placement_report if self.options.state_aware_assignment
                   and isinstance(listener, PlacementListener) else None)
        self._member_id = member_id

    def _group(self) -> GroupCoordinator:
        return self._broker.group(self.options.require_group("use"))

    def _initial_position(self, tp: TopicPartition) -> int:
        if self.options.group_id is not None:
            committed = self._broker.committed(self.options.group_id, tp)
            if committed is not None:
                return committed  # out of range: reset (loudly) by the next fetch
        return (self._broker.beginning_offset(tp) if self.options.auto_offset_reset == "earliest"
                else self._broker.end_offset(tp))

    def _set_positions(self, positions: dict[TopicPartition, int]) -> None:
        self._positions = positions
        self._fetch.assigned(positions.keys())

    def _wake(self) -> None:
        if self._waiter is not None:
            self._waiter.wake()

    def _transition(self, new: ConsumerState) -> None:
        lifecycle.check_consumer_transition(self._state, new)
        self._state = new

    def _require_assigned(self, tp: TopicPartition, action: str) -> None:
        if tp not in self._positions:
            raise TransportError(
                f"cannot {action} {tp}: it is not assigned to this consumer "
                f"(assignment: {sorted(map(str, self._positions))})"
            )
