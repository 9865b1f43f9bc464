"""The worker as a member of a state-aware group: what it reports to the assignor and what
it does with the standbys it is given (see :mod:`~aiostreams.transport.group_placement`).

Used only when the app keeps standbys (``num_standby_replicas > 0``): the worker then
subscribes with this listener instead of itself; without it, the worker's consumer sends
the group a plain report (no standbys wanted), in the same group protocol. Partition
callbacks go to the worker; a task about to become active here is released by its standby
first (:meth:`PlacementMember.on_partitions_assigned`), so the active task opens the files
the standby flushed and restores only the tail.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiostreams.engine.standby import StandbyTable
from aiostreams.engine.task import StreamTask, task_id_for
from aiostreams.engine.task_lifecycle import MakeTask
from aiostreams.engine.topic_plan import changelog_names
from aiostreams.state.local_offsets import local_changelog_offsets
from aiostreams.topology.topology import SubTopology
from aiostreams.transport.base import RebalanceListener, Transport
from aiostreams.transport.group_placement import PlacementReport, StandbyAssignment
from aiostreams.transport.task_placement import PlacementSettings
from aiostreams.types import TopicPartition

if TYPE_CHECKING:
    from aiostreams.engine.worker_config import WorkerConfig

__all__ = ["PlacementConfig", "PlacementMember", "PlacementSettings"]


@dataclass(frozen=True)
class PlacementConfig:
    """Where this worker runs, and the group's placement settings."""

    host: str
    worker_index: int
    settings: PlacementSettings
    probing_rebalance_interval: float = 600.0


class PlacementMember:
    """A :class:`~aiostreams.transport.group_placement.PlacementListener` for one worker."""

    def __init__(self, worker: RebalanceListener, subs: Sequence[SubTopology], app_id: str,
                 config: PlacementConfig, standbys: StandbyTable,
                 actives: Mapping[str, object], active_ends: Mapping[str, int]) -> None:
        self._worker = worker
        self._config = config
        self.standbys = standbys
        self._actives = actives  # the worker's task table: task id -> active task
        self._active_ends = active_ends  # task id -> changelog end at its last commit
        self._sub_of_topic = {t: sub for sub in subs for t in sub.source_topics}
        self._groups = {str(sub.id): tuple(sorted(sub.source_topics)) for sub in subs}
        # a task whose logged stores are all in memory is placed as a stateless one: its
        # state lives in its active's memory only, so no other member holds any, no copy
        # would outlive a standby, and it costs a full restore wherever it goes
        self._stateful = frozenset(str(sub.id) for sub in subs
                                   if _keeps_files(sub, changelog_names(app_id, sub)))
        self.assignment = StandbyAssignment()
        self._revoked: frozenset[str] = frozenset()
        """The tasks active here when the rebalance under way revoked them (Kafka revokes
        everything before it rejoins: they are still this member's previous tasks)."""
        self.ends: dict[str, int] = {}
        """Task id -> its changelog end (summed), as last seen here."""
        self.on_disk: dict[str, int] = {}
        """Task id -> the offset its files here held when the worker started (read by
        :meth:`scan`; a restarted host gets its tasks back, restoring a tail)."""

    async def scan(self, state_dir: Any, exactly_once: bool) -> None:
        """Read what state the worker's directory holds from earlier runs."""
        found = await asyncio.to_thread(local_changelog_offsets, state_dir,
                                        exactly_once=exactly_once)
        self.on_disk = {t: o for t, o in found.items() if t.rsplit("_", 1)[0] in self._stateful}

    @classmethod
    def of(cls, worker: RebalanceListener, subs: Sequence[SubTopology], config: WorkerConfig,
           make_task: MakeTask, transport: Transport, actives: Mapping[str, object],
           active_ends: Mapping[str, int]) -> PlacementMember:
        """The placement member of a worker with ``config.placement`` set: its standby
        tasks are built by the worker's ``make_task`` (stores only: never initialized)."""
        assert config.placement is not None
        subs_by_id = {str(sub.id): sub for sub in subs}

        def make_standby(task_id: str) -> StreamTask:
            sub_id, partition = task_id.rsplit("_", 1)
            sub = subs_by_id[sub_id]
            assert task_id_for(sub, int(partition)) == task_id
            return make_task(sub, int(partition), [TopicPartition(t, int(partition))
                                                   for t in sorted(sub.source_topics)])

        standbys = StandbyTable(make_standby, transport, exactly_once=config.exactly_once,
                                state_dir=config.state_dir,
                                flush_interval=config.commit_interval)
        return cls(worker, subs, config.app_id, config.placement, standbys, actives,
                   active_ends)

    def placement_report(self) -> PlacementReport:
        ends = dict(self.ends)
        ends.update(self._active_ends)
        for task_id, standby in self.standbys.tasks.items():
            if standby.end:
                ends[task_id] = sum(standby.end.values())
        self.ends = ends
        offsets: dict[str, int] = dict(self.on_disk)
        for task_id, end in self._active_ends.items():
            # closed here since (its files stay): it holds what its last commit wrote
            offsets[task_id] = end
        offsets.update(self.standbys.offsets())
        active = frozenset(self._actives) | self._revoked
        for task_id in active:
            # its writer: it holds everything it wrote (what is not flushed yet is in
            # the changelog, which is where the next owner restores it from)
            offsets[task_id] = ends.get(task_id, 0)
        return PlacementReport(
            host=self._config.host, worker=self._config.worker_index,
            task_groups=self._groups, stateful_groups=self._stateful,
            settings=self._config.settings, offsets=offsets, active=active,
            end_offsets=ends,
            probing_rebalance_interval=self._config.probing_rebalance_interval)

    async def on_partitions_revoked(self, revoked: Collection[TopicPartition]) -> None:
        self._revoked |= frozenset(self._actives)
        await self._worker.on_partitions_revoked(revoked)

    async def on_partitions_assigned(self, assigned: Collection[TopicPartition]) -> None:
        for task_id in sorted({task_id_for(self._sub_of_topic[tp.topic], tp.partition)
                               for tp in assigned if tp.topic in self._sub_of_topic}):
            if task_id in self.standbys.tasks:
                await self.standbys.release(task_id)  # promotion: its files become the active's
        await self._worker.on_partitions_assigned(assigned)

    async def on_standbys_assigned(self, assignment: StandbyAssignment) -> None:
        """The end of a rebalance (called after every assignment)."""
        self._revoked = frozenset()
        self.assignment = assignment
        await self.standbys.assign([t for t in assignment.standby if t not in self._actives])


def _keeps_files(sub: SubTopology, logged: Mapping[str, str]) -> bool:
    """Whether a logged store of ``sub`` is persistent (a store made to ask: never opened)."""
    return any(getattr(spec.factory(), "persistent", False)
               for spec in sub.stores if spec.name in logged)
