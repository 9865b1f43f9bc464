"""aiostreams' one group protocol on Kafka (:data:`PROTOCOL_NAME`):
:func:`~aiostreams.transport.group_placement.plan_group` inside aiokafka's group protocol
(``partition_assignment_strategy``), for every member of every app, with or without
standbys.

* ``metadata()`` (each member, at each JoinGroup) puts the member's report in its
  subscription's ``user_data``, as versioned compact JSON: a member with standbys its
  :class:`~aiostreams.transport.group_placement.PlacementReport`, any other a
  :func:`~aiostreams.transport.group_placement.plain_report`; both say which partitions
  the member's last assignment gave it (the leader keeps tasks where they were);
* ``assign()`` (the leader; synchronous, so it uses only what the reports carry: the end
  offsets the members cached, else the highest offset reported) plans every member's
  partitions and standbys; each member's standbys travel in its assignment's
  ``user_data``;
* ``on_assignment()`` (each member) keeps the standbys and partitions received; the
  consumer hands the standbys to its listener after the partition callbacks.

**One protocol, one assignor.** aiokafka 0.14 sends one JoinGroup per listed assignor, so
a second one made every join two rebalances (see :func:`assignment_strategy`); and a
member listing another protocol than the group's is refused by the broker
(``InconsistentGroupProtocolError``). So every member lists this one, under one name
whatever its settings: a group mixing members with and without standbys forms, and a
rolling change of ``num_standby_replicas`` (0 -> 1 -> 0) works. Members of the versions
before it (``range``, ``aiostreams-state-aware``) cannot share a group with these: a
one-time stop-the-world upgrade.

**Versions roll too.** Each report and assignment says its format version (``v``) and the
oldest version that can read it (``r``): a later version that only adds fields keeps ``r``
and is read by older leaders, which ignore what they do not know; one that changes a
meaning raises ``r``, and a leader older than that assigns by range for everyone, with a
warning - never a placement from half-understood reports, and never co-partitioned topics
split (range keeps partition *p* of equal-count topics on one member). Members whose
subscriptions or task layouts differ (a rolling change of the topology) also get range for
everyone: the planner assumes every member reads every task's topics, laid out alike.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

import orjson
from aiokafka.cluster import ClusterMetadata
from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.assignors.range import RangePartitionAssignor
from aiokafka.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)

from aiostreams.compact_json import dumps
from aiostreams.transport.base import RebalanceListener
from aiostreams.transport.group_placement import (
    PlacementListener,
    PlacementReport,
    StandbyAssignment,
    layout_conflict,
    plain_report,
    plan_group,
)
from aiostreams.transport.task_placement import PlacementSettings
from aiostreams.types import TopicPartition

log = logging.getLogger("aiostreams.transport")

__all__ = ["FORMAT_VERSION", "OLD_PROTOCOLS", "PROTOCOL_NAME", "AiostreamsAssignor",
           "StandbyDelivery", "assignment_strategy", "decode_report", "encode_report"]

PROTOCOL_NAME = "aiostreams"
"""The group protocol of every aiostreams Kafka member (versions live in the user data)."""
OLD_PROTOCOLS = ("range", "aiostreams-state-aware")
"""What the version before this one listed (without and with standbys): such members and
these cannot share a group."""
FORMAT_VERSION = 2
"""This version's report and assignment format; 1 was ``aiostreams-state-aware``'s."""
READABLE_FROM = 2
"""The oldest format version that reads what this one writes (raise it only for a change
an older leader would misread; adding a field does not)."""
_PROTOCOL_SCHEMA = 0
"""Kafka's consumer-protocol schema version of the subscription and assignment structs
(0: the fields aiokafka writes; ours are in ``user_data``)."""

_DEFAULTS = PlacementSettings()


def encode_report(report: PlacementReport) -> bytes:
    s = report.settings
    return dumps({
        "v": FORMAT_VERSION, "r": READABLE_FROM, "host": report.host,
        "worker": report.worker,
        "groups": {g: list(t) for g, t in report.task_groups.items()},
        "stateful": sorted(report.stateful_groups),
        "settings": [s.num_standby_replicas, s.acceptable_recovery_lag,
                     s.max_warmup_replicas],
        "offsets": dict(report.offsets), "active": sorted(report.active),
        "ends": dict(report.end_offsets), "probe": report.probing_rebalance_interval,
        "owned": sorted([tp.topic, tp.partition] for tp in report.owned),
        "owned_gen": report.owned_generation})


def _readable(raw: Any) -> None:
    if not isinstance(raw, dict):
        raise TypeError(f"a {type(raw).__name__}, not an object")
    version = raw.get("v")
    readable_from = raw.get("r", version)
    if not isinstance(readable_from, int) or readable_from > FORMAT_VERSION:
        raise ValueError(f"format version {version!r}, readable from version "
                         f"{readable_from!r}; this version reads up to {FORMAT_VERSION}")


def decode_report(data: bytes) -> PlacementReport:
    """What a member reported; a missing field has its default, an unknown one is ignored
    (a later version's addition). Raises ValueError for data no version up to
    :data:`FORMAT_VERSION` can read, or of another shape."""
    try:
        raw: Any = orjson.loads(data)
        _readable(raw)
        standbys, lag, warmups = raw.get("settings", (
            _DEFAULTS.num_standby_replicas, _DEFAULTS.acceptable_recovery_lag,
            _DEFAULTS.max_warmup_replicas))
        return PlacementReport(
            host=str(raw.get("host", "")), worker=int(raw.get("worker", 0)),
            task_groups={str(g): tuple(map(str, t))
                         for g, t in raw.get("groups", {}).items()},
            stateful_groups=frozenset(map(str, raw.get("stateful", ()))),
            settings=PlacementSettings(int(standbys), int(lag), int(warmups)),
            offsets={str(k): int(v) for k, v in raw.get("offsets", {}).items()},
            active=frozenset(map(str, raw.get("active", ()))),
            end_offsets={str(k): int(v) for k, v in raw.get("ends", {}).items()},
            probing_rebalance_interval=float(raw.get("probe", 600.0)),
            owned=frozenset(TopicPartition(str(t), int(p)) for t, p in raw.get("owned", ())),
            owned_generation=int(raw.get("owned_gen", -1)))
    except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError) as error:
        raise ValueError(f"unreadable placement report: {error!r}") from error


def encode_standbys(assignment: StandbyAssignment) -> bytes:
    return dumps({"v": FORMAT_VERSION, "r": READABLE_FROM,
                  "standby": sorted(assignment.standby),
                  "warmup": sorted(assignment.warmup), "probe": assignment.probing_rebalance})


def decode_standbys(data: bytes) -> StandbyAssignment:
    """No standbys for an assignment without (readable) standby data (a range one)."""
    if not data:
        return StandbyAssignment()
    try:
        raw: Any = orjson.loads(data)
        _readable(raw)
        return StandbyAssignment(frozenset(map(str, raw.get("standby", ()))),
                                 frozenset(map(str, raw.get("warmup", ()))),
                                 bool(raw.get("probe", False)))
    except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError) as error:
        log.warning("an assignment carried standby data this version cannot read (%s); "
                    "keeping no standbys until the next assignment", error)
        return StandbyAssignment()


class AiostreamsAssignor(AbstractPartitionAssignor):  # type: ignore[misc]  # untyped base
    """One member's assignor (an instance: it reads its member's report). ``report``: the
    member's placement report, or None for a member without standbys; ``generation``: the
    member's group generation (read when an assignment arrives: a member expelled since
    claims its partitions with an older one, and the current holder's claim wins)."""

    name = PROTOCOL_NAME
    version = _PROTOCOL_SCHEMA

    def __init__(self, report: Callable[[], PlacementReport | None],
                 generation: Callable[[], int] = lambda: -1) -> None:
        self._report = report
        self._generation = generation
        self.received: StandbyAssignment | None = None
        """The standbys of the last assignment (None: none received, or unreadable)."""
        self.owned: frozenset[TopicPartition] = frozenset()
        """The partitions of the last assignment (kept across the revoke before a join)."""
        self.owned_generation = -1
        """The group generation of that assignment (-1: none)."""

    def metadata(self, topics: Iterable[str]) -> ConsumerProtocolMemberMetadata:
        report = self._report()
        owned, generation = self.owned, self.owned_generation
        report = plain_report(owned, generation) if report is None else replace(
            report, owned=owned, owned_generation=generation)
        return ConsumerProtocolMemberMetadata(self.version, sorted(topics),
                                              encode_report(report))

    def assign(self, cluster: ClusterMetadata,
               members: Mapping[str, ConsumerProtocolMemberMetadata]
               ) -> dict[str, ConsumerProtocolMemberAssignment]:
        try:
            reports = {m: decode_report(meta.user_data) for m, meta in members.items()}
        except ValueError as error:
            log.warning("group assignment: a member's report is unreadable here (%s): "
                        "assigning by range for everyone, without standbys, until every "
                        "member runs this version or a later one", error)
            return _by_range(cluster, members)
        subscriptions = {m: frozenset(meta.subscription) for m, meta in members.items()}
        conflict = layout_conflict(reports)
        if len(set(subscriptions.values())) > 1 or conflict is not None:
            log.info("group assignment: members run different topologies (a rolling change "
                     "of the app? %s): assigning by range for everyone",
                     conflict or "they subscribe to different topics")
            return _by_range(cluster, members)

        def partition_count(topic: str) -> int | None:
            partitions = cluster.partitions_for_topic(topic)
            return len(partitions) if partitions else None

        targets, standbys = plan_group(reports, subscriptions, partition_count)
        assignments: dict[str, ConsumerProtocolMemberAssignment] = {}
        for member_id in members:
            by_topic: dict[str, list[int]] = {}
            for tp in sorted(targets.get(member_id, ())):
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            assignments[member_id] = ConsumerProtocolMemberAssignment(
                self.version, sorted(by_topic.items()),
                encode_standbys(standbys.get(member_id, StandbyAssignment())))
        return assignments

    def on_assignment(self, assignment: ConsumerProtocolMemberAssignment) -> None:
        self.received = decode_standbys(assignment.user_data)
        self.owned_generation = self._generation()
        self.owned = frozenset(TopicPartition(tp.topic, tp.partition)
                               for tp in assignment.partitions())


def _by_range(cluster: ClusterMetadata, members: Mapping[str, ConsumerProtocolMemberMetadata]
              ) -> dict[str, ConsumerProtocolMemberAssignment]:
    """Kafka's range assignment (per topic, contiguous ranges over the sorted members)."""
    return dict(RangePartitionAssignor.assign(cluster, members))


def assignment_strategy(assignor: AiostreamsAssignor) -> tuple[Any, ...]:
    """aiokafka's ``partition_assignment_strategy`` of every aiostreams member: **one**
    assignor. Never list two: aiokafka 0.14 sends one JoinGroup per listed assignor, the
    first with only the first protocol, each waiting for its generation - every join is
    two rebalances, and members joining together chase each other's second join for ever
    (measured: three members, ``(range, roundrobin)``, 4 of 5 groups still rebalancing
    after 40 s at generation 190-320; either alone, 10 of 10 formed within 5 s)."""
    return (assignor,)


class StandbyDelivery:
    """A consumer's side of the assignor: after each assignment's partition callbacks,
    hand the standbys received to the listener, and when they ask for a probing
    rebalance, rejoin after the report's ``probing_rebalance_interval``."""

    def __init__(self, assignor: AiostreamsAssignor) -> None:
        self.assignor = assignor
        self._probe: asyncio.TimerHandle | None = None

    async def deliver(self, listener: RebalanceListener,
                      rejoin: Callable[[], None]) -> None:
        received = self.assignor.received
        if received is None or not isinstance(listener, PlacementListener):
            return
        await listener.on_standbys_assigned(received)
        if received.probing_rebalance and self._probe is None:
            interval = listener.placement_report().probing_rebalance_interval
            self._probe = asyncio.get_running_loop().call_later(interval, self._fire, rejoin)

    def _fire(self, rejoin: Callable[[], None]) -> None:
        self._probe = None
        rejoin()

    def cancel(self) -> None:
        if self._probe is not None:
            self._probe.cancel()
            self._probe = None
