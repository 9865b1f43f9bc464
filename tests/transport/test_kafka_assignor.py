"""The state-aware assignor inside aiokafka's group protocol (no broker: its three hooks
called as aiokafka's coordinator calls them)."""

from __future__ import annotations

from typing import Any

from aiokafka.coordinator.protocol import ConsumerProtocol
from hypothesis import given
from hypothesis import strategies as st

from aiostreams.transport.group_placement import PlacementReport, StandbyAssignment
from aiostreams.transport.kafka_assignor import (
    StateAwareAssignor,
    decode_report,
    encode_report,
)
from aiostreams.transport.task_placement import PlacementSettings

SETTINGS = PlacementSettings(num_standby_replicas=1, acceptable_recovery_lag=10)
GROUPS = {"0": ("orders", "payments"), "1": ("app-repartition",)}


class Cluster:
    def __init__(self, partitions: dict[str, int]) -> None:
        self._partitions = partitions

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        count = self._partitions.get(topic)
        return None if count is None else set(range(count))


def report(host: str, offsets: dict[str, int] | None = None,
           active: frozenset[str] = frozenset()) -> PlacementReport:
    return PlacementReport(host=host, worker=0, task_groups=GROUPS,
                           stateful_groups=frozenset({"1"}), settings=SETTINGS,
                           offsets=offsets or {}, active=active, end_offsets={"1_0": 500})


def join(reports: dict[str, PlacementReport]) -> dict[str, Any]:
    """Each member's JoinGroup metadata, through the wire format, as the leader gets it."""
    topics = [t for topics in GROUPS.values() for t in topics]
    return {m: ConsumerProtocol.METADATA.decode(
        StateAwareAssignor(lambda r=r: r).metadata(topics).encode())
        for m, r in reports.items()}


def received(assignment: Any) -> tuple[set[tuple[str, int]], StandbyAssignment | None]:
    """What a member gets: its partitions and, through ``on_assignment``, its standbys."""
    member = StateAwareAssignor(lambda: report("x"))
    decoded = ConsumerProtocol.ASSIGNMENT.decode(assignment.encode())
    member.on_assignment(decoded)
    return {(tp.topic, tp.partition) for tp in decoded.partitions()}, member.received


reports_strategy = st.builds(
    PlacementReport, host=st.text(max_size=5), worker=st.integers(0, 9),
    task_groups=st.dictionaries(st.text(max_size=3), st.lists(st.text(max_size=5)).map(tuple),
                                max_size=3),
    stateful_groups=st.frozensets(st.text(max_size=3), max_size=3),
    settings=st.builds(PlacementSettings, st.integers(0, 3), st.integers(0, 10**6),
                       st.integers(0, 3)),
    offsets=st.dictionaries(st.text(max_size=5), st.integers(-1, 2**62), max_size=4),
    active=st.frozensets(st.text(max_size=5), max_size=3),
    end_offsets=st.dictionaries(st.text(max_size=5), st.integers(0, 2**62), max_size=4),
    probing_rebalance_interval=st.floats(0.001, 1e6))


@given(reports_strategy)
def test_a_report_survives_its_wire_format(sent: PlacementReport) -> None:
    assert decode_report(encode_report(sent)) == sent


def test_co_partitioned_topics_of_a_task_go_to_one_member_with_its_standby_elsewhere() -> None:
    cluster = Cluster({"orders": 2, "payments": 2, "app-repartition": 2})
    members = join({"a": report("host-a", {"1_0": 500}, frozenset({"0_0", "1_0"})),
                    "b": report("host-b", {"1_0": 100})})
    leader = StateAwareAssignor(lambda: report("host-a"))
    assignments = leader.assign(cluster, members)  # type: ignore[arg-type]
    got = {m: received(a) for m, a in assignments.items()}
    every = set().union(*(parts for parts, _ in got.values()))
    assert len(every) == 6 and sum(len(parts) for parts, _ in got.values()) == 6
    for parts, _ in got.values():
        for p in (0, 1):
            assert (("orders", p) in parts) == (("payments", p) in parts)
    assert ("app-repartition", 0) in got["a"][0]  # stays with its caught-up owner
    standbys_b = got["b"][1]
    assert standbys_b is not None and "1_0" in standbys_b.standby
    standbys_a = got["a"][1]
    assert standbys_a is not None and "1_0" not in standbys_a.standby


def test_a_report_of_another_format_version_makes_the_leader_assign_round_robin() -> None:
    cluster = Cluster({"orders": 2, "payments": 2, "app-repartition": 2})
    members = join({"a": report("host-a"), "b": report("host-b")})
    members["b"] = ConsumerProtocol.METADATA(0, members["b"].subscription, b'{"v": 99}')
    leader = StateAwareAssignor(lambda: report("host-a"))
    assignments = leader.assign(cluster, members)  # type: ignore[arg-type]
    got = {m: received(a) for m, a in assignments.items()}
    assert all(standbys is None for _, standbys in got.values())
    assert sum(len(parts) for parts, _ in got.values()) == 6
