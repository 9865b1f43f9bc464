"""The state-aware assignor on Kafka: :func:`~aiostreams.transport.group_placement.
plan_group` inside aiokafka's group protocol (``partition_assignment_strategy``).

* ``metadata()`` (each member, at each JoinGroup) puts the member's
  :class:`~aiostreams.transport.group_placement.PlacementReport` in its subscription's
  ``user_data``, as versioned compact JSON;
* ``assign()`` (the leader; synchronous, so it uses only what the reports carry: the end
  offsets the members cached, else the highest offset reported) plans every member's
  partitions and standbys; each member's standbys travel in its assignment's
  ``user_data``;
* ``on_assignment()`` (each member) keeps the standbys received, which the consumer hands
  to its listener after the partition callbacks.

Members list this assignor alone: aiokafka 0.14 sends one JoinGroup per listed assignor,
so a second one (round-robin, as before) made every join two rebalances (see
:data:`~aiostreams.transport.kafka_aio_consumer.CO_PARTITIONING_ASSIGNORS`). A group
mixing members with and without standbys therefore cannot form: the broker refuses the
join (``InconsistentGroupProtocolError``). A report this version cannot read (another
format version) makes the leader assign by range for everyone, with a warning: never a
placement from half-understood reports, and never co-partitioned topics split.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
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
    plan_group,
)
from aiostreams.transport.task_placement import PlacementSettings

log = logging.getLogger("aiostreams.transport")

__all__ = ["ASSIGNOR_NAME", "StandbyDelivery", "StateAwareAssignor", "assignment_strategy",
           "decode_report", "encode_report"]

ASSIGNOR_NAME = "aiostreams-state-aware"
FORMAT_VERSION = 1


def encode_report(report: PlacementReport) -> bytes:
    s = report.settings
    return dumps({
        "v": FORMAT_VERSION, "host": report.host, "worker": report.worker,
        "groups": {g: list(t) for g, t in report.task_groups.items()},
        "stateful": sorted(report.stateful_groups),
        "settings": [s.num_standby_replicas, s.acceptable_recovery_lag,
                     s.max_warmup_replicas],
        "offsets": dict(report.offsets), "active": sorted(report.active),
        "ends": dict(report.end_offsets), "probe": report.probing_rebalance_interval})


def decode_report(data: bytes) -> PlacementReport:
    """Raises ValueError for data of another format version or shape."""
    try:
        raw: Any = orjson.loads(data)
        if raw.get("v") != FORMAT_VERSION:
            raise ValueError(f"placement report of format version {raw.get('v')!r}, "
                             f"not {FORMAT_VERSION}")
        standbys, lag, warmups = raw["settings"]
        return PlacementReport(
            host=str(raw["host"]), worker=int(raw["worker"]),
            task_groups={str(g): tuple(map(str, t)) for g, t in raw["groups"].items()},
            stateful_groups=frozenset(map(str, raw["stateful"])),
            settings=PlacementSettings(int(standbys), int(lag), int(warmups)),
            offsets={str(k): int(v) for k, v in raw["offsets"].items()},
            active=frozenset(map(str, raw["active"])),
            end_offsets={str(k): int(v) for k, v in raw["ends"].items()},
            probing_rebalance_interval=float(raw["probe"]))
    except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError) as error:
        raise ValueError(f"unreadable placement report: {error}") from error


def encode_standbys(assignment: StandbyAssignment) -> bytes:
    return dumps({"v": FORMAT_VERSION, "standby": sorted(assignment.standby),
                  "warmup": sorted(assignment.warmup),
                  "probe": assignment.probing_rebalance})


def decode_standbys(data: bytes) -> StandbyAssignment | None:
    """None for an assignment without (readable) standbys."""
    if not data:
        return None
    try:
        raw: Any = orjson.loads(data)
        if raw.get("v") != FORMAT_VERSION:
            return None
        return StandbyAssignment(frozenset(map(str, raw["standby"])),
                                 frozenset(map(str, raw["warmup"])), bool(raw["probe"]))
    except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError):
        log.warning("an assignment carried unreadable standby data; keeping no standbys")
        return None


class StateAwareAssignor(AbstractPartitionAssignor):  # type: ignore[misc]  # untyped base
    """One member's assignor (an instance: it reads its member's report)."""

    name = ASSIGNOR_NAME
    version = FORMAT_VERSION

    def __init__(self, report: Callable[[], PlacementReport]) -> None:
        self._report = report
        self.received: StandbyAssignment | None = None
        """The standbys of the last assignment (None: none received yet)."""

    def metadata(self, topics: Iterable[str]) -> ConsumerProtocolMemberMetadata:
        return ConsumerProtocolMemberMetadata(self.version, sorted(topics),
                                              encode_report(self._report()))

    def assign(self, cluster: ClusterMetadata,
               members: Mapping[str, ConsumerProtocolMemberMetadata]
               ) -> dict[str, ConsumerProtocolMemberAssignment]:
        try:
            reports = {m: decode_report(meta.user_data) for m, meta in members.items()}
        except ValueError as error:
            log.warning("state-aware assignment: %s; assigning by range this time", error)
            return dict(RangePartitionAssignor.assign(cluster, members))

        def partition_count(topic: str) -> int | None:
            partitions = cluster.partitions_for_topic(topic)
            return len(partitions) if partitions else None

        subscriptions = {m: list(meta.subscription) for m, meta in members.items()}
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


def assignment_strategy(assignor: StateAwareAssignor) -> tuple[Any, ...]:
    """aiokafka's ``partition_assignment_strategy`` for a state-aware member."""
    return (assignor,)


class StandbyDelivery:
    """A consumer's side of the assignor: after each assignment's partition callbacks,
    hand the standbys received to the listener, and when they ask for a probing
    rebalance, rejoin after the report's ``probing_rebalance_interval``."""

    def __init__(self, assignor: StateAwareAssignor) -> None:
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
