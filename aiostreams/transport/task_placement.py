"""Where a group's tasks run: a pure planner that knows where their state is (Kafka
Streams' ``HighAvailabilityTaskAssignor``, rewritten for aiostreams). No I/O: the memory
group and the Kafka assignor call it with what the members reported.

Inputs: the members (member id -> its host, worker index and, per task, the changelog
offset it holds locally - the sum over the task's stores, as an active or a standby; a
missing entry or -1 means nothing), the tasks (and which of them keep state), the
changelog end offsets known, the previous active owners and the settings.

A member is **caught up** on a task when the task keeps no state, or what it holds (0
records when it holds none) is within ``acceptable_recovery_lag`` of the task's end (the
end known, else the highest offset any member reported): where a changelog is short, every
member is caught up, so a new group or a young app spreads its tasks at once.

Rules, in the order applied:

1. Each task has exactly one active member. A task stays with its previous owner when that
   owner is still a member; else it goes to a caught-up member (the least loaded host,
   then worker), or, none being caught up, to the member holding the highest offset.
2. Actives are balanced across **hosts** first (``--workers N`` on one host is one host):
   while a host has at least two tasks more than another, a task moves from the busier
   host to the idler one - but only to a member there that is caught up on it. Each move
   lowers the sum of squared host loads, so this ends. Then the same within each host,
   across its workers.
3. Where hosts stay unbalanced because no task of the busier host is caught up on the
   idler one, the idler host gets a **warm-up** standby of such a task (at most
   ``max_warmup_replicas`` in the group at once) and a **probing rebalance** is asked for:
   once the warm-up caught up, rule 2 moves the task.
4. Each stateful task gets ``num_standby_replicas`` standbys (fewer when there are fewer
   other hosts), on distinct hosts other than its active's host, preferring the hosts that
   hold the most of its state, then the least loaded with standbys. A warm-up on a host
   that already has a standby of the task is that standby.

Standbys and warm-ups go only to members that keep standbys (:attr:`MemberInfo.
keeps_standbys`: in a group part-way through a rolling change of ``num_standby_replicas``,
the members still without any have nowhere to keep a copy); a host without such a member
gets none, and is no warm-up target.

Invariants (asserted in :func:`plan_placement`): every task has one active; no member is
both active and standby of a task; standbys only on members that keep them; a task's
standbys are on distinct hosts, none on its active's host; at most
``max_warmup_replicas`` warm-ups; ``probing_rebalance`` iff any warm-up exists. Planning
again from the result (its actives as the previous owners, the same offsets) gives the
same result.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

__all__ = ["MemberInfo", "MemberPlan", "Placement", "PlacementSettings", "plan_placement"]

NO_OFFSET = -1
"""The offset a member reports for a task whose state it does not hold."""


@dataclass(frozen=True, slots=True)
class MemberInfo:
    """What a member reported: where it runs and what state it holds."""

    host: str
    worker: int = 0
    offsets: Mapping[str, int] = field(default_factory=dict)
    """Task id -> the changelog offset held locally (summed over the task's stores)."""
    keeps_standbys: bool = True
    """Whether it can be given standbys and warm-ups (False: actives only)."""

    def offset(self, task: str) -> int:
        return self.offsets.get(task, NO_OFFSET)


@dataclass(frozen=True, slots=True)
class PlacementSettings:
    num_standby_replicas: int = 0
    acceptable_recovery_lag: int = 10_000
    max_warmup_replicas: int = 2

    def __post_init__(self) -> None:
        if self.num_standby_replicas < 0 or self.acceptable_recovery_lag < 0 \
                or self.max_warmup_replicas < 0:
            raise ValueError(f"placement settings must not be negative: {self}")


@dataclass(frozen=True, slots=True)
class MemberPlan:
    active: frozenset[str] = frozenset()
    standby: frozenset[str] = frozenset()
    """Standby tasks, the warm-ups included."""
    warmup: frozenset[str] = frozenset()
    """The standbys that are warm-ups (a subset of ``standby``)."""


@dataclass(frozen=True, slots=True)
class Placement:
    members: dict[str, MemberPlan]
    probing_rebalance: bool

    def active_owner(self) -> dict[str, str]:
        """Task id -> its active member."""
        return {t: m for m, plan in self.members.items() for t in plan.active}


def plan_placement(members: Mapping[str, MemberInfo], tasks: Collection[str], *,
                   stateful: Collection[str], end_offsets: Mapping[str, int],
                   previous_active: Mapping[str, str],
                   settings: PlacementSettings) -> Placement:
    """Place ``tasks`` on ``members`` (see the module doc). ``stateful``: the tasks with
    logged stores (the others are caught up everywhere and get no standbys)."""
    if not members:
        return Placement({}, False)
    planner = _Planner(members, sorted(tasks), frozenset(stateful), end_offsets, settings)
    owner = planner.initial_actives(previous_active)
    planner.balance_hosts(owner)
    planner.balance_workers(owner)
    warmups = planner.warmups(owner)
    standbys = planner.standbys(owner, warmups)
    placement = planner.result(owner, standbys, warmups)
    _check(placement, members, planner.tasks, settings)
    return placement


class _Planner:
    def __init__(self, members: Mapping[str, MemberInfo], tasks: list[str],
                 stateful: frozenset[str], end_offsets: Mapping[str, int],
                 settings: PlacementSettings) -> None:
        self.members = members
        self.tasks = tasks
        self.stateful = stateful
        self.settings = settings
        self.ids = sorted(members)
        self.hosts = sorted({m.host for m in members.values()})
        self.on_host = {h: [m for m in self.ids if members[m].host == h] for h in self.hosts}
        self.keepers_on = {h: [m for m in ms if members[m].keeps_standbys]
                           for h, ms in self.on_host.items()}
        """Host -> its members that keep standbys."""
        self.end: dict[str, int] = {}
        for task in tasks:
            reported = max((m.offset(task) for m in members.values()), default=NO_OFFSET)
            self.end[task] = max(end_offsets.get(task, reported), 0)

    def caught_up(self, member: str, task: str) -> bool:
        if task not in self.stateful:
            return True
        # a member without the task's state lacks the whole changelog (Kafka Streams too):
        # where the changelog is short, every member is caught up
        held = max(self.members[member].offset(task), 0)
        return self.end[task] - held <= self.settings.acceptable_recovery_lag

    def host_loads(self, owner: Mapping[str, str]) -> dict[str, int]:
        loads = dict.fromkeys(self.hosts, 0)
        for member in owner.values():
            loads[self.members[member].host] += 1
        return loads

    def member_loads(self, owner: Mapping[str, str]) -> dict[str, int]:
        loads = dict.fromkeys(self.ids, 0)
        for member in owner.values():
            loads[member] += 1
        return loads

    def initial_actives(self, previous: Mapping[str, str]) -> dict[str, str]:
        owner: dict[str, str] = {}
        for task in self.tasks:
            if previous.get(task) in self.members:
                owner[task] = previous[task]
        for task in self.tasks:
            if task in owner:
                continue
            hosts, loads = self.host_loads(owner), self.member_loads(owner)
            ready = [m for m in self.ids if self.caught_up(m, task)]
            if ready:
                owner[task] = min(ready, key=lambda m: (hosts[self.members[m].host],
                                                        loads[m], m))
            else:
                owner[task] = min(self.ids, key=lambda m: (-self.members[m].offset(task),
                                                           hosts[self.members[m].host],
                                                           loads[m], m))
        return owner

    def _least_loaded_ready(self, task: str, candidates: list[str],
                            loads: Mapping[str, int]) -> str | None:
        ready = [m for m in candidates if self.caught_up(m, task)]
        return min(ready, key=lambda m: (loads[m], m)) if ready else None

    def balance_hosts(self, owner: dict[str, str]) -> None:
        while self._move_once(owner, by_host=True):
            pass

    def balance_workers(self, owner: dict[str, str]) -> None:
        while self._move_once(owner, by_host=False):
            pass

    def _move_once(self, owner: dict[str, str], *, by_host: bool) -> bool:
        """One move of a task from a place with at least two tasks more than another to a
        caught-up member of that other place; False when there is none."""
        member_loads = self.member_loads(owner)
        if by_host:
            loads = self.host_loads(owner)
            groups = [(h, self.on_host[h]) for h in self.hosts]
        else:
            loads = member_loads
            groups = [(m, [m]) for m in self.ids]
        place_of = ((lambda m: self.members[m].host) if by_host else (lambda m: m))
        order = sorted(loads, key=lambda p: (loads[p], p))
        for target in order:
            members_there = dict(groups)[target]
            for source in reversed(order):
                if loads[source] - loads[target] < 2:
                    break
                if not by_host and self.members[source].host != self.members[target].host:
                    continue
                for task in self.tasks:
                    if place_of(owner[task]) != source:
                        continue
                    chosen = self._least_loaded_ready(task, members_there, member_loads)
                    if chosen is not None:
                        owner[task] = chosen
                        return True
        return False

    def warmups(self, owner: Mapping[str, str]) -> dict[str, str]:
        """Task -> the member that warms up for it (rule 3)."""
        warm: dict[str, str] = {}
        budget = self.settings.max_warmup_replicas
        loads = self.host_loads(owner)  # counting each warm-up as if its task had moved
        member_loads = self.member_loads(owner)
        progress = True
        while progress and len(warm) < budget:
            progress = False
            order = sorted(self.hosts, key=lambda h: (loads[h], h))
            source = order[-1]
            targets = [h for h in order if self.keepers_on[h]]
            if not targets or loads[source] - loads[targets[0]] < 2:
                break
            target = targets[0]
            candidates = [t for t in self.tasks if t not in warm
                          and self.members[owner[t]].host == source and t in self.stateful]
            if not candidates:
                break
            there = self.keepers_on[target]
            # the task whose state the idler host holds most of warms up soonest
            task = min(candidates, key=lambda t: (
                -max(self.members[m].offset(t) for m in there), t))
            member = min(there, key=lambda m: (-self.members[m].offset(task),
                                               member_loads[m], m))
            warm[task] = member
            loads[source] -= 1
            loads[target] += 1
            progress = True
        return warm

    def standbys(self, owner: Mapping[str, str], warm: Mapping[str, str]
                 ) -> dict[str, list[str]]:
        """Task -> its standby members (rule 4), the warm-up (if any) included."""
        chosen: dict[str, list[str]] = {}
        standby_load = dict.fromkeys(self.hosts, 0)
        member_load = dict.fromkeys(self.ids, 0)
        for task in self.tasks:
            if task not in self.stateful:
                continue
            active_host = self.members[owner[task]].host
            picks: list[str] = []
            used = {active_host}
            for _ in range(self.settings.num_standby_replicas):
                hosts = [h for h in self.hosts if h not in used and self.keepers_on[h]]
                if not hosts:
                    break
                host = min(hosts, key=lambda h: (
                    -max(self.members[m].offset(task) for m in self.keepers_on[h]),
                    standby_load[h], h))
                member = min(self.keepers_on[host], key=lambda m: (
                    -self.members[m].offset(task), member_load[m], m))
                picks.append(member)
                used.add(host)
                standby_load[host] += 1
                member_load[member] += 1
            warm_member = warm.get(task)
            if warm_member is not None and self.members[warm_member].host not in used:
                picks.append(warm_member)
            chosen[task] = picks
        return chosen

    def result(self, owner: Mapping[str, str], standbys: Mapping[str, list[str]],
               warm: Mapping[str, str]) -> Placement:
        active: dict[str, set[str]] = {m: set() for m in self.ids}
        standby: dict[str, set[str]] = {m: set() for m in self.ids}
        warmup: dict[str, set[str]] = {m: set() for m in self.ids}
        for task, member in owner.items():
            active[member].add(task)
        for task, members in standbys.items():
            for member in members:
                standby[member].add(task)
        for task, member in warm.items():
            # the warm-up, or the standby already on its host, warms the task up
            host = self.members[member].host
            warmer = next(m for m in standbys[task] if self.members[m].host == host)
            warmup[warmer].add(task)
        plans = {m: MemberPlan(frozenset(active[m]), frozenset(standby[m]),
                               frozenset(warmup[m])) for m in self.ids}
        return Placement(plans, bool(warm))


def _check(placement: Placement, members: Mapping[str, MemberInfo], tasks: list[str],
           settings: PlacementSettings) -> None:
    owners = placement.active_owner()
    actives = sum(len(p.active) for p in placement.members.values())
    assert actives == len(owners) == len(tasks) and set(owners) == set(tasks), \
        "a task without exactly one active member"
    warmups = 0
    for task in tasks:
        hosts = [members[m].host for m, p in placement.members.items() if task in p.standby]
        assert members[owners[task]].host not in hosts, f"a standby of {task} on its host"
        assert len(hosts) == len(set(hosts)), f"two standbys of {task} on one host"
    for member_id, plan in placement.members.items():
        assert plan.warmup <= plan.standby and not plan.active & plan.standby
        assert members[member_id].keeps_standbys or not plan.standby, \
            f"standbys on {member_id}, which keeps none"
        warmups += len(plan.warmup)
    assert warmups <= settings.max_warmup_replicas, "too many warm-ups"
    assert placement.probing_rebalance == (warmups > 0)
