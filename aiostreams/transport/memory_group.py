"""The consumer-group coordinator of the memory broker: generations, targets and handoffs.

Plain synchronous state, no asyncio: the broker calls it under its lock and members are
woken through the callback they registered, so it can be reasoned about (and tested) alone.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

from aiostreams.errors import TransportError
from aiostreams.transport.group_placement import (
    PlacementReport,
    StandbyAssignment,
    layout_conflict,
    plain_report,
    plan_group,
)
from aiostreams.types import TopicPartition

__all__ = ["GroupCoordinator"]


@dataclass(slots=True)
class _Member:
    member_id: str
    topics: frozenset[str]
    wake: Callable[[], None]
    owned: set[TopicPartition] = field(default_factory=set)
    target: frozenset[TopicPartition] = frozenset()
    report: Callable[[], PlacementReport] | None = None
    standby: StandbyAssignment | None = None
    """This generation's standbys (None: placement is not state-aware)."""
    standby_generation: int = -1
    """The generation whose standbys the member took last."""


class GroupCoordinator:
    """One consumer group: its members, who owns which partition, and committed offsets.

    Algorithm. Every change of membership or subscription, and every creation or deletion
    of a subscribed topic, starts a new *generation*: each member's *target* is recomputed
    by range assignment per topic over the members subscribed to it, sorted by member id.
    Range per topic gives partition ``p`` of equal-sized topics to the same member, so
    co-partitioned topics stay together. When a member reports its state
    (:class:`~aiostreams.transport.group_placement.PlacementReport`; the others count as
    :func:`~aiostreams.transport.group_placement.plain_report`), the targets and each
    member's standbys come from the state-aware planner instead
    (:func:`~aiostreams.transport.group_placement.plan_group`, the Kafka assignor's), which
    also keeps a task's partitions together - unless the members' subscriptions or task
    layouts differ (range then, as on Kafka); a member learns its standbys after its
    partitions (:meth:`standby_pending`, :meth:`standby_taken`). Members then converge on
    their targets in two phases, each driven by the member itself from inside ``getmany``:

    1. *revoke*: it runs ``on_partitions_revoked(owned - target)``, then :meth:`release`;
    2. *acquire*: it takes the target partitions nobody owns (:meth:`acquirable`,
       :meth:`acquire`), then runs ``on_partitions_assigned`` for them.

    A target partition still held by a slow old owner is acquired on a later poll, after
    that owner released it (releases wake the other members).

    Invariants (asserted):

    * a partition has at most one owner; members' ``owned`` sets are disjoint and agree
      with ``_owner``;
    * a member acquires only partitions of its target that nobody owns, so a partition
      changes hands only after its previous owner's ``on_partitions_revoked`` returned;
    * the targets are disjoint and cover every partition of every subscribed topic;
    * the generation never decreases.

    Committed offsets belong to the group, not to members: they outlive every member, as a
    Kafka group's do (there is no offset retention here).
    """

    def __init__(self, group_id: str, partition_count: Callable[[str], int | None]) -> None:
        self.group_id = group_id
        self.generation = 0
        self._partition_count = partition_count
        self._members: dict[str, _Member] = {}
        self._owner: dict[TopicPartition, str] = {}
        self._committed: dict[TopicPartition, int] = {}

    # -- membership -------------------------------------------------------------------

    def join(self, member_id: str, topics: Collection[str], wake: Callable[[], None],
             report: Callable[[], PlacementReport] | None = None) -> None:
        """Add a member subscribed to ``topics``; ``wake`` is called whenever it has work;
        ``report`` (read at each new generation) says what state it holds."""
        if member_id in self._members:
            raise TransportError(
                f"member id {member_id!r} is already live in group {self.group_id!r}; "
                "give each consumer instance a unique group_instance_id"
            )
        self._members[member_id] = _Member(member_id, frozenset(topics), wake, report=report)
        self._new_generation()

    def subscribe(self, member_id: str, topics: Collection[str]) -> None:
        """Change a member's subscription (a new generation if it differs)."""
        member = self._members[member_id]
        if member.topics != frozenset(topics):
            member.topics = frozenset(topics)
            self._new_generation()

    def leave(self, member_id: str) -> None:
        """Remove a member, releasing whatever it still owns, and rebalance the rest."""
        member = self._members.pop(member_id)
        for tp in member.owned:
            del self._owner[tp]
        member.owned.clear()
        self._new_generation()

    def expel(self, member_id: str) -> None:
        """Drop a member as Kafka's coordinator drops one whose session expired: whatever
        it owns goes to the others at once, without its ``on_partitions_revoked``. The
        member learns of it at its next poll (woken now); its commits are refused
        meanwhile."""
        wake = self._members[member_id].wake
        self.leave(member_id)
        wake()

    def topics_changed(self, topics: Collection[str]) -> None:
        """Topics were created or deleted: rebalance if a member subscribes to one."""
        changed = frozenset(topics)
        if any(member.topics & changed for member in self._members.values()):
            self._new_generation()

    def is_member(self, member_id: str) -> bool:
        return member_id in self._members

    @property
    def member_count(self) -> int:
        return len(self._members)

    # -- the two-phase handoff ----------------------------------------------------------

    def revocations(self, member_id: str) -> frozenset[TopicPartition]:
        """What the member owns but must give up in this generation."""
        member = self._members[member_id]
        return frozenset(member.owned - member.target)

    def acquirable(self, member_id: str) -> frozenset[TopicPartition]:
        """Target partitions the member lacks and whose previous owner has released them."""
        member = self._members[member_id]
        return frozenset(
            tp for tp in member.target if tp not in member.owned and tp not in self._owner
        )

    def needs_sync(self, member_id: str) -> bool:
        return bool(self.revocations(member_id) or self.acquirable(member_id)
                    or self.standby_pending(member_id) is not None)

    def standby_pending(self, member_id: str) -> StandbyAssignment | None:
        """The member's standbys of this generation, if it has not taken them yet."""
        member = self._members[member_id]
        if member.standby is None or member.standby_generation == self.generation:
            return None
        return member.standby

    def standby_taken(self, member_id: str, generation: int) -> None:
        self._members[member_id].standby_generation = generation

    def rebalance(self) -> None:
        """Start a new generation with nothing changed (a probing rebalance: members report
        their state again, and warmed-up standbys may take their tasks over)."""
        self._new_generation()

    def release(self, member_id: str, partitions: Collection[TopicPartition]) -> None:
        """The member finished revoking ``partitions``; hand them to their new owners."""
        member = self._members[member_id]
        for tp in partitions:
            assert self._owner.get(tp) == member_id, f"{member_id} releases {tp} it does not own"
            del self._owner[tp]
            member.owned.discard(tp)
        for other in self._members.values():
            if other is not member:
                other.wake()

    def acquire(self, member_id: str, partitions: Collection[TopicPartition]) -> None:
        member = self._members[member_id]
        for tp in partitions:
            assert tp in member.target, f"{member_id} acquires {tp} outside its target"
            assert tp not in self._owner, f"{member_id} acquires {tp} still owned elsewhere"
            self._owner[tp] = member_id
            member.owned.add(tp)

    def owned(self, member_id: str) -> frozenset[TopicPartition]:
        return frozenset(self._members[member_id].owned)

    def target(self, member_id: str) -> frozenset[TopicPartition]:
        return self._members[member_id].target

    # -- offsets ------------------------------------------------------------------------

    def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        self._committed.update(offsets)

    def committed(self, tp: TopicPartition) -> int | None:
        return self._committed.get(tp)

    def forget_topic(self, topic: str) -> None:
        """A topic was deleted: its committed offsets go with it."""
        for tp in [tp for tp in self._committed if tp.topic == topic]:
            del self._committed[tp]

    # -- internals ----------------------------------------------------------------------

    def _new_generation(self) -> None:
        self.generation += 1
        standbys: dict[str, StandbyAssignment] = {}
        reports = {m: plain_report(frozenset(member.owned)) if member.report is None
                   else member.report()
                   for m, member in self._members.items()}
        if any(m.report is not None for m in self._members.values()) \
                and len({m.topics for m in self._members.values()}) == 1 \
                and layout_conflict(reports) is None:
            targets, standbys = plan_group(
                reports, {m: member.topics for m, member in self._members.items()},
                self._partition_count)
        else:
            targets = self._range_assignment()
        for member_id, member in self._members.items():
            member.target = targets[member_id]
            # a plain member takes no standbys (it has nowhere to keep them)
            member.standby = None if member.report is None else standbys.get(member_id)
        self._check_invariants()
        for member in self._members.values():
            member.wake()

    def _range_assignment(self) -> dict[str, frozenset[TopicPartition]]:
        """Kafka's RangeAssignor: per topic, contiguous partition ranges in member order."""
        targets: dict[str, set[TopicPartition]] = {m: set() for m in self._members}
        topics = sorted({t for member in self._members.values() for t in member.topics})
        for topic in topics:
            count = self._partition_count(topic)
            if count is None:
                continue  # deleted since the member subscribed; nothing to assign
            subscribers = sorted(m for m, member in self._members.items() if topic in member.topics)
            per_member, extra = divmod(count, len(subscribers))
            start = 0
            for index, member_id in enumerate(subscribers):
                end = start + per_member + (1 if index < extra else 0)
                targets[member_id].update(TopicPartition(topic, p) for p in range(start, end))
                start = end
        return {m: frozenset(tps) for m, tps in targets.items()}

    def _check_invariants(self) -> None:
        seen: set[TopicPartition] = set()
        for member in self._members.values():
            assert not (member.target & seen), "targets overlap"
            seen |= member.target
            for tp in member.owned:
                assert self._owner[tp] == member.member_id, f"{tp} owned twice"
        assert len(self._owner) == sum(len(m.owned) for m in self._members.values())
        for topic in {t for member in self._members.values() for t in member.topics}:
            count = self._partition_count(topic) or 0
            assert all(TopicPartition(topic, p) in seen for p in range(count)), (
                f"partitions of {topic} left unassigned"
            )
