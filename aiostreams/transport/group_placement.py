"""What group members tell the assignor about their state, and what it tells them back:
the bridge between a consumer group's partitions and the :mod:`task_placement` planner.

A member that keeps standbys reports a :class:`PlacementReport` when it joins (Kafka: the
``user_data`` of its subscription; the memory group: a callback): its host and worker, its
tasks' layout (each task group - a sub-topology - and its co-partitioned source topics),
the local changelog offset of each task it holds state for, the tasks it runs now, and the
changelog end offsets it knows. The group's leader (:func:`plan_group`) turns the reports
into each member's partitions - a task's partitions always go to one member, so
co-partitioned topics stay together - and a :class:`StandbyAssignment`, which reaches
the member through :meth:`PlacementListener.on_standbys_assigned` after its partitions.

A task's id is ``f"{group}_{partition}"`` (the engine's task id); its partitions are
partition ``p`` of each of its group's topics that has one.

A member without standbys sends a :func:`plain_report` (no host, no task layout, no
state): the leader plans it all the same, so one group mixes both kinds - a rolling change
of ``num_standby_replicas`` forms the group at every step. What each kind gets:

* topics no report names (every member plain) are grouped by partition count: partition
  ``p`` of all the topics with ``n`` partitions is one task (``~n_p``), so co-partitioned
  topics (which have equal counts) are never split, as range assignment never split them;
* a plain member is a host of its own (it did not say where it runs), keeps no standbys and
  gets no warm-ups; a task's standbys number the highest ``num_standby_replicas`` any
  member asks for, and go to members that ask for some (see
  :attr:`~aiostreams.transport.task_placement.MemberInfo.keeps_standbys`); the other
  settings are those of the first member (by id) that asks for standbys, else defaults;
* a task stays where it was (:attr:`PlacementReport.active`, else the member whose latest
  assignment held its partitions, :attr:`PlacementReport.owned`) unless that unbalances the
  group: fewer moves across a rebalance than range assignment's.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from aiostreams.errors import ConfigError
from aiostreams.transport.base import RebalanceListener
from aiostreams.transport.task_placement import MemberInfo, PlacementSettings, plan_placement
from aiostreams.types import TopicPartition

__all__ = ["PlacementListener", "PlacementReport", "StandbyAssignment", "layout_conflict",
           "plain_report", "plan_group", "report_of", "task_partitions"]


@dataclass(frozen=True, slots=True)
class PlacementReport:
    host: str
    worker: int
    task_groups: Mapping[str, tuple[str, ...]]
    """Task group (sub-topology id) -> its source topics, co-partitioned."""
    stateful_groups: frozenset[str]
    """The task groups whose tasks keep logged stores."""
    settings: PlacementSettings
    offsets: Mapping[str, int] = field(default_factory=dict)
    """Task id -> changelog offset held locally (summed over its stores)."""
    active: frozenset[str] = frozenset()
    """The tasks this member runs now (the planner's previous owners)."""
    end_offsets: Mapping[str, int] = field(default_factory=dict)
    """Task id -> its changelog end (summed), where this member knows it."""
    probing_rebalance_interval: float = 600.0
    owned: frozenset[TopicPartition] = frozenset()
    """The partitions of this member's last assignment (what a plain member held)."""
    owned_generation: int = -1
    """The group generation of that assignment (-1: unknown)."""

    @property
    def keeps_standbys(self) -> bool:
        return self.settings.num_standby_replicas > 0


def plain_report(owned: frozenset[TopicPartition] = frozenset(),
                 owned_generation: int = -1) -> PlacementReport:
    """The report of a member without standbys: no host (a host of its own), no layout
    (the leader groups the topics it does not know by partition count), no state."""
    return PlacementReport(host="", worker=0, task_groups={}, stateful_groups=frozenset(),
                           settings=PlacementSettings(), owned=owned,
                           owned_generation=owned_generation)


@dataclass(frozen=True, slots=True)
class StandbyAssignment:
    standby: frozenset[str] = frozenset()
    """The tasks whose stores this member keeps up to date (warm-ups included)."""
    warmup: frozenset[str] = frozenset()
    probing_rebalance: bool = False
    """Rejoin after ``probing_rebalance_interval``: a warm-up may have caught up."""


@runtime_checkable
class PlacementListener(RebalanceListener, Protocol):
    """A rebalance listener that takes part in state-aware placement."""

    def placement_report(self) -> PlacementReport:
        """What this member holds now (called at each join; must not block)."""
        ...

    async def on_standbys_assigned(self, assignment: StandbyAssignment) -> None:
        """This member's standbys in the new generation (after its partitions; called at
        the end of every rebalance the member takes part in, changed or not)."""
        ...


def report_of(listener: RebalanceListener | None, *, state_aware: bool
              ) -> PlacementReport | None:
    """What a member subscribed with ``listener`` tells the group's assignor (at each
    JoinGroup); None: a member without standbys (``state_aware`` off: a plain report)."""
    if not state_aware:
        return None
    if not isinstance(listener, PlacementListener):
        raise ConfigError("state_aware_assignment needs a subscribing listener that is a "
                          "PlacementListener (it reports the member's state)")
    return listener.placement_report()


def task_partitions(task_groups: Mapping[str, tuple[str, ...]],
                    partition_count: Callable[[str], int | None]
                    ) -> dict[str, frozenset[TopicPartition]]:
    """Task id -> its partitions, for the topics that exist."""
    tasks: dict[str, frozenset[TopicPartition]] = {}
    for group, topics in sorted(task_groups.items()):
        counts = {t: partition_count(t) for t in topics}
        width = max((c for c in counts.values() if c is not None), default=0)
        for p in range(width):
            tasks[f"{group}_{p}"] = frozenset(
                TopicPartition(t, p) for t, c in counts.items() if c is not None and p < c)
    return tasks


def layout_conflict(reports: Mapping[str, PlacementReport]) -> str | None:
    """Why the members' task layouts cannot be planned together (None: they can): one
    task group named with different topics, or a topic in two task groups - members of
    two topologies (a rolling change of the app that renumbered its sub-topologies), whose
    tasks would share partitions."""
    groups: dict[str, tuple[str, ...]] = {}
    group_of: dict[str, str] = {}
    for member_id, report in sorted(reports.items()):
        for group, topics in report.task_groups.items():
            if groups.setdefault(group, topics) != topics:
                return f"task group {group} reads {list(groups[group])} at one member, " \
                       f"{list(topics)} at {member_id}"
            for topic in topics:
                if group_of.setdefault(topic, group) != group:
                    return f"topic {topic} is read by task groups {group_of[topic]} and {group}"
    return None


def plan_group(reports: Mapping[str, PlacementReport],
               subscriptions: Mapping[str, Collection[str]],
               partition_count: Callable[[str], int | None]
               ) -> tuple[dict[str, frozenset[TopicPartition]], dict[str, StandbyAssignment]]:
    """Each member's partitions and standbys (see the module doc for plain members and
    mixed settings). Every member must subscribe to every task's topics (an app's members
    subscribe alike; the Kafka assignor assigns by range when they do not), and their
    layouts must agree (:func:`layout_conflict`). Invariant (asserted): no partition goes
    to two members."""
    if not reports:
        return {}, {}
    assert layout_conflict(reports) is None, layout_conflict(reports)
    groups: dict[str, tuple[str, ...]] = {}
    stateful_groups: set[str] = set()
    for report in reports.values():
        groups.update(report.task_groups)
        stateful_groups |= report.stateful_groups
    named = {t for topics in groups.values() for t in topics}
    unnamed: dict[int, list[str]] = {}
    for topic in sorted({t for topics in subscriptions.values() for t in topics} - named):
        count = partition_count(topic)
        if count is not None:
            unnamed.setdefault(count, []).append(topic)
    for count, topics in unnamed.items():
        groups[f"~{count}"] = tuple(topics)
    tasks = task_partitions(groups, partition_count)
    stateful = {t for t in tasks if t.rsplit("_", 1)[0] in stateful_groups}
    ends: dict[str, int] = {}
    previous: dict[str, str] = {}
    for member_id, report in sorted(reports.items()):
        for task, end in report.end_offsets.items():
            ends[task] = max(end, ends.get(task, end))
        for task in report.active:
            # two claims (one member's may be stale: it lost the task in a rebalance that
            # gave it nothing new): the one holding more of the task's state wins
            other = previous.get(task)
            if other is None or report.offsets.get(task, -1) > \
                    reports[other].offsets.get(task, -1):
                previous[task] = member_id
    previous.update((t, m) for t, m in _holders(reports, tasks).items() if t not in previous)
    members = {m: MemberInfo(r.host or f"~{m}", r.worker, r.offsets, r.keeps_standbys)
               for m, r in reports.items()}
    settings = _group_settings(reports)
    placement = plan_placement(members, tasks, stateful=stateful, end_offsets=ends,
                               previous_active=previous, settings=settings)
    targets: dict[str, frozenset[TopicPartition]] = {}
    standbys: dict[str, StandbyAssignment] = {}
    for member_id, plan in placement.members.items():
        targets[member_id] = frozenset(tp for t in plan.active for tp in tasks[t])
        standbys[member_id] = StandbyAssignment(plan.standby, plan.warmup,
                                                placement.probing_rebalance)
    assert sum(map(len, targets.values())) == len(frozenset().union(*targets.values())), \
        "a partition assigned to two members"
    return targets, standbys


def _holders(reports: Mapping[str, PlacementReport],
             tasks: Mapping[str, frozenset[TopicPartition]]) -> dict[str, str]:
    """Task id -> the member whose last assignment held its partitions: of those claiming
    any, the one of the latest generation (an expelled member's claim is stale), then
    holding the most of them, then the lowest id."""
    holder: dict[str, str] = {}
    for task, partitions in tasks.items():
        held = {m: len(partitions & r.owned) for m, r in reports.items()}
        best = min(held, key=lambda m: (not held[m], -reports[m].owned_generation,
                                        -held[m], m))
        if held[best]:
            holder[task] = best
    return holder


def _group_settings(reports: Mapping[str, PlacementReport]) -> PlacementSettings:
    """The most standbys any member asks for, with the other settings of the first member
    (by id) that asks for standbys (else of the first member)."""
    keepers = sorted(m for m, r in reports.items() if r.keeps_standbys)
    first = reports[keepers[0] if keepers else min(reports)].settings
    most = max(r.settings.num_standby_replicas for r in reports.values())
    return PlacementSettings(most, first.acceptable_recovery_lag, first.max_warmup_replicas)
