"""The task placement planner: one property test per rule of its module doc."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from aiostreams.transport.task_placement import (
    MemberInfo,
    Placement,
    PlacementSettings,
    plan_placement,
)


@dataclass
class Case:
    members: dict[str, MemberInfo]
    tasks: list[str]
    stateful: frozenset[str]
    ends: dict[str, int]
    previous: dict[str, str]
    settings: PlacementSettings

    def plan(self, previous: dict[str, str] | None = None) -> Placement:
        return plan_placement(self.members, self.tasks, stateful=self.stateful,
                              end_offsets=self.ends,
                              previous_active=self.previous if previous is None else previous,
                              settings=self.settings)

    def caught_up(self, member: str, task: str) -> bool:
        if task not in self.stateful:
            return True
        end = self.ends.get(task, max(m.offset(task) for m in self.members.values()))
        held = max(self.members[member].offset(task), 0)
        return max(end, 0) - held <= self.settings.acceptable_recovery_lag


@st.composite
def cases(draw: st.DrawFn) -> Case:
    host_count = draw(st.integers(1, 4))
    members: dict[str, MemberInfo] = {}
    tasks = [f"0_{p}" for p in range(draw(st.integers(0, 9)))]
    stateful = frozenset(t for t in tasks if draw(st.booleans()) or draw(st.booleans()))
    ends = {t: draw(st.integers(0, 300)) for t in stateful if draw(st.booleans())}
    for host in range(host_count):
        for worker in range(draw(st.integers(1, 3))):
            offsets = {t: draw(st.integers(-1, 300)) for t in tasks if draw(st.booleans())}
            # a quarter keep no standbys (part-way through a rolling change of the setting)
            keeps = draw(st.booleans()) or draw(st.booleans())
            members[f"m{host}-{worker}"] = MemberInfo(f"h{host}", worker, offsets, keeps)
    previous = {t: draw(st.sampled_from([*members, "gone"])) for t in tasks
                if draw(st.booleans())}
    settings = PlacementSettings(num_standby_replicas=draw(st.integers(0, 3)),
                                 acceptable_recovery_lag=draw(st.sampled_from([0, 10, 100])),
                                 max_warmup_replicas=draw(st.integers(0, 3)))
    return Case(members, tasks, stateful, ends, previous, settings)


def owners(placement: Placement) -> dict[str, str]:
    return placement.active_owner()


@given(cases())
def test_every_task_has_exactly_one_active_member(case: Case) -> None:
    placement = case.plan()
    actives = [t for plan in placement.members.values() for t in plan.active]
    assert sorted(actives) == sorted(case.tasks)


@given(cases())
def test_a_task_leaves_its_live_previous_owner_only_for_a_caught_up_member(case: Case) -> None:
    owner = owners(case.plan())
    for task, previous in case.previous.items():
        if previous in case.members and owner[task] != previous:
            assert case.caught_up(owner[task], task)


@given(cases())
def test_a_task_without_live_owner_goes_to_a_caught_up_member_else_the_most_caught_up(
        case: Case) -> None:
    owner = owners(case.plan())
    for task in case.tasks:
        if case.previous.get(task) in case.members:
            continue
        if any(case.caught_up(m, task) for m in case.members):
            assert case.caught_up(owner[task], task)
        else:
            best = max(m.offset(task) for m in case.members.values())
            assert case.members[owner[task]].offset(task) == best


@given(cases())
def test_hosts_stay_unbalanced_only_when_no_task_could_move_to_a_caught_up_member(
        case: Case) -> None:
    placement = case.plan()
    owner = owners(placement)
    host_of = {m: info.host for m, info in case.members.items()}
    loads = {h: 0 for h in host_of.values()}
    for member in owner.values():
        loads[host_of[member]] += 1
    for busy, busy_load in loads.items():
        for idle, idle_load in loads.items():
            if busy_load - idle_load < 2:
                continue
            for task, member in owner.items():
                if host_of[member] == busy:
                    assert not any(case.caught_up(m, task) for m in case.members
                                   if host_of[m] == idle)
            # what keeps it unbalanced is being warmed up, up to the limit (where the idle
            # host has a member that can warm up)
            assert placement.probing_rebalance or case.settings.max_warmup_replicas == 0 \
                or not any(i.keeps_standbys for i in case.members.values() if i.host == idle)


@given(cases())
def test_a_hosts_workers_stay_unbalanced_only_when_no_task_could_move(case: Case) -> None:
    owner = owners(case.plan())
    load = {m: 0 for m in case.members}
    for member in owner.values():
        load[member] += 1
    for busy in case.members:
        for idle in case.members:
            if case.members[busy].host != case.members[idle].host \
                    or load[busy] - load[idle] < 2:
                continue
            assert not any(case.caught_up(idle, t) for t, m in owner.items() if m == busy)


@given(cases())
def test_standbys_are_on_distinct_hosts_never_the_actives(case: Case) -> None:
    placement = case.plan()
    owner = owners(placement)
    keeping_hosts = {info.host for info in case.members.values() if info.keeps_standbys}
    for task in case.tasks:
        standby_members = [m for m, p in placement.members.items() if task in p.standby]
        assert all(case.members[m].keeps_standbys for m in standby_members)
        standby_hosts = [case.members[m].host for m in standby_members]
        assert case.members[owner[task]].host not in standby_hosts
        assert len(standby_hosts) == len(set(standby_hosts))
        warm = [m for m, p in placement.members.items() if task in p.warmup]
        if task not in case.stateful:
            assert not standby_members
        else:
            others = keeping_hosts - {case.members[owner[task]].host}
            wanted = min(case.settings.num_standby_replicas, len(others))
            extra = [m for m in warm if m in standby_members]
            assert len(standby_members) - len(extra) <= wanted <= len(standby_members)


@given(cases())
def test_warmups_are_at_most_the_limit_and_ask_for_a_probing_rebalance(case: Case) -> None:
    placement = case.plan()
    warmups = sum(len(p.warmup) for p in placement.members.values())
    assert warmups <= case.settings.max_warmup_replicas
    assert placement.probing_rebalance == (warmups > 0)
    for plan in placement.members.values():
        assert plan.warmup <= plan.standby
        assert not plan.active & plan.standby


@given(cases())
def test_planning_the_planners_own_result_again_changes_nothing(case: Case) -> None:
    first = case.plan()
    again = case.plan(previous=owners(first))
    assert again == first


def test_a_new_host_gets_warmups_not_tasks_until_it_caught_up() -> None:
    tasks = [f"0_{p}" for p in range(4)]
    full = dict.fromkeys(tasks, 1000)
    old = MemberInfo("a", 0, full)
    settings = PlacementSettings(num_standby_replicas=0, acceptable_recovery_lag=10,
                                 max_warmup_replicas=1)
    previous = dict.fromkeys(tasks, "old")
    fresh = plan_placement({"old": old, "new": MemberInfo("b")}, tasks, stateful=tasks,
                           end_offsets=full, previous_active=previous, settings=settings)
    assert fresh.members["new"].active == frozenset()
    assert len(fresh.members["new"].warmup) == 1 and fresh.probing_rebalance
    warm = next(iter(fresh.members["new"].warmup))
    warmed = plan_placement(
        {"old": old, "new": MemberInfo("b", 0, {warm: 995})}, tasks, stateful=tasks,
        end_offsets=full, previous_active=previous, settings=settings)
    assert warm in warmed.members["new"].active


def test_workers_of_one_host_count_as_one_host() -> None:
    tasks = [f"0_{p}" for p in range(4)]
    members = {"a0": MemberInfo("a", 0), "a1": MemberInfo("a", 1), "b0": MemberInfo("b", 0)}
    placement = plan_placement(members, tasks, stateful=(), end_offsets={},
                               previous_active={}, settings=PlacementSettings())
    assert len(placement.members["b0"].active) == 2
    assert len(placement.members["a0"].active) == len(placement.members["a1"].active) == 1


def test_one_standby_goes_to_the_host_that_holds_the_state() -> None:
    members = {"a": MemberInfo("a", 0, {"0_0": 50}), "b": MemberInfo("b", 0, {"0_0": 10}),
               "c": MemberInfo("c", 0, {"0_0": 40})}
    placement = plan_placement(members, ["0_0"], stateful=["0_0"], end_offsets={"0_0": 50},
                               previous_active={"0_0": "a"},
                               settings=PlacementSettings(num_standby_replicas=1))
    assert placement.members["c"].standby == {"0_0"}
    assert not placement.members["b"].standby


def test_members_that_keep_no_standbys_get_none_and_no_warmups() -> None:
    """Part-way through a rolling change of ``num_standby_replicas`` from 0: the member
    still at 0 has nowhere to keep a copy, so the standby goes to the other host that
    keeps them, and a warm-up never goes to it."""
    members = {"a": MemberInfo("a", 0, {"0_0": 50}), "b": MemberInfo("b", 0, {"0_0": 50},
                                                                    keeps_standbys=False),
               "c": MemberInfo("c", 0, {})}
    placement = plan_placement(members, ["0_0"], stateful=["0_0"], end_offsets={"0_0": 50},
                               previous_active={"0_0": "a"},
                               settings=PlacementSettings(num_standby_replicas=1))
    assert placement.members["c"].standby == {"0_0"} and not placement.members["b"].standby
    tasks = [f"0_{p}" for p in range(4)]
    full = dict.fromkeys(tasks, 1000)
    crowded = plan_placement({"old": MemberInfo("a", 0, full), "new": MemberInfo(
        "b", 0, keeps_standbys=False)}, tasks, stateful=tasks, end_offsets=full,
        previous_active=dict.fromkeys(tasks, "old"),
        settings=PlacementSettings(acceptable_recovery_lag=10))
    assert not crowded.members["new"].standby and not crowded.probing_rebalance
