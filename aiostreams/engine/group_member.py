"""The worker as a member of its consumer group: its one consumer, the instance id it joins
with, and what it does when the group moves partitions.

It owns:

* the consumer: made, started and subscribed by :meth:`GroupMember.start`; replaced by
  :meth:`GroupMember.rebuild` when it died under the worker (every task lost, the old one
  closed within a bound, a fresh one that rejoins the group);
* a derived ``group_instance_id`` (static membership,
  :mod:`~aiostreams.engine.static_membership`): claimed before the first consumer is made,
  released by :meth:`GroupMember.release` when the worker stops;
* the rebalance callbacks (they run inside the consumer's fetch call): a revoke drains,
  retires and commits the revoked tasks while this member still owns them
  (:mod:`~aiostreams.engine.ownership`), else loses them all uncommitted; an assignment
  opens the tasks (:mod:`~aiostreams.engine.task_lifecycle`).

Invariants, asserted: at most one consumer at a time - a new one is made only once the
previous one was closed (or given up on); :meth:`GroupMember.after_revoke` returns only
when no revoke callback is running (or its bound passed), so a stop that cancels the fetch
loop after it never cuts a revoke half-way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Collection

from aiostreams.engine.ownership import TaskOwnership
from aiostreams.engine.static_membership import (
    InstanceClaim,
    claim_instance_id,
    derives_instance_id,
)
from aiostreams.engine.stop_budget import CLIENT_CLOSE_MIN, close_within
from aiostreams.engine.task import StreamTask
from aiostreams.engine.task_lifecycle import TaskTable
from aiostreams.engine.worker_config import WorkerConfig
from aiostreams.errors import ClientFailedError
from aiostreams.transport.base import Consumer, IsolationLevel, RebalanceListener, Transport
from aiostreams.transport.kafka_watchdog import Liveness
from aiostreams.types import TopicPartition

log = logging.getLogger("aiostreams.worker")

__all__ = ["GroupMember"]


class GroupMember:
    """One worker's membership of its group (see the module docstring). ``revoke`` drains,
    retires and commits the given tasks, then closes them (the worker's revoke)."""

    def __init__(self, transport: Transport, config: WorkerConfig, table: TaskTable,
                 ownership: TaskOwnership,
                 revoke: Callable[[list[StreamTask]], Awaitable[None]], *,
                 state_aware: bool) -> None:
        self.consumer: Consumer | None = None
        self.instance: InstanceClaim | None = None  # a derived group_instance_id's claim
        self.assigned = False  # set by the first assignment (even an empty one)
        self._transport = transport
        self._config = config
        self._table = table
        self._ownership = ownership
        self._revoke = revoke
        self._state_aware = state_aware
        self._listener: RebalanceListener | None = None
        self._outside_callback = asyncio.Event()  # clear while a revoke callback runs
        self._outside_callback.set()

    @property
    def group_instance_id(self) -> str | None:
        """The instance id this worker joins its group with (static membership), configured
        or derived (:mod:`~aiostreams.engine.static_membership`); None: dynamic."""
        if self.instance is not None:
            return self.instance.instance_id
        return self._config.group_instance_id

    def claim_instance_id(self) -> None:
        cfg = self._config
        if self.instance is None and derives_instance_id(
                static_membership=cfg.static_membership,
                group_instance_id=cfg.group_instance_id, state_dir=cfg.state_dir,
                kafka=self._transport.url.startswith("kafka://")):
            self.instance = claim_instance_id(cfg.app_id, cfg.state_dir)
            log.info("worker: static group membership as %r", self.instance.instance_id)

    def release(self) -> None:
        """Give up a derived instance id's claim (the worker stopped)."""
        if self.instance is not None:
            self.instance.release()

    async def start(self, listener: RebalanceListener) -> None:
        """A new consumer of the group, started and subscribed with ``listener`` (it joins
        at its first fetch)."""
        assert self.consumer is None, "one consumer at a time: close the previous one first"
        cfg = self._config
        self._listener = listener
        self.consumer = self._transport.consumer(
            cfg.app_id, client_id=cfg.client_id,
            isolation_level=IsolationLevel.of(cfg.exactly_once),
            group_instance_id=self.group_instance_id, max_poll_records=cfg.max_poll_records,
            offset_out_of_range=cfg.offset_out_of_range,
            state_aware_assignment=self._state_aware)
        await self.consumer.start()
        self.consumer.subscribe(list(self._table.sub_of_topic), listener)

    async def rebuild(self, dead: Liveness, rebuilds: int) -> None:
        """The consumer died (``dead`` says how; ``rebuilds``: how many times in a row):
        lose every task - closed without committing, as after a fence, so their records
        since the last commit are processed again - and replace the consumer by a fresh
        one that rejoins the group and starts the tasks again from the committed offsets.
        Closing the old one runs no revoke (the tasks are gone by then) and is bounded."""
        old, listener = self.consumer, self._listener
        assert listener is not None, "rebuilt before it started"
        await self._table.lose(list(self._table.tasks.values()),
                               ClientFailedError(dead.reason), None)
        self._table.orphans.clear()
        if old is not None:
            await close_within(old.stop(), CLIENT_CLOSE_MIN, "the dead consumer")
        self.consumer = None  # closed or given up on; no await until the new one is set
        await self.start(listener)
        log.warning("worker: the consumer was rebuilt (%d in a row); it rejoins the group",
                    rebuilds)

    async def after_revoke(self, seconds: float) -> None:
        """Return once no revoke callback is running, waiting at most ``seconds`` for one
        under way (its partitions are ours to commit only until it returns)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._outside_callback.wait()

    # -- rebalance (called by the consumer inside getmany) ------------------------------

    async def on_partitions_revoked(self, revoked: Collection[TopicPartition]) -> None:
        for tp in revoked:
            self._table.orphans.pop(tp, None)
        task_of = self._table.task_of
        affected = {task_of[tp].task_id: task_of[tp] for tp in revoked if tp in task_of}
        self._outside_callback.clear()
        try:
            if not self._ownership.owns():  # nothing to drain or commit: they may be others'
                await self._ownership.lose_all()
            else:
                await self._revoke(list(affected.values()))
        finally:
            self._outside_callback.set()

    async def on_partitions_assigned(self, assigned: Collection[TopicPartition]) -> None:
        self._ownership.confirmed()
        await self._table.open(assigned, self.consumer)
        self.assigned = True
        log.info("assigned %s", ", ".join(map(str, sorted(assigned))) or "nothing")
        # a line of its own: tools match the line above to its end
        log.info("assignment generation %d",
                 self.consumer.generation if self.consumer is not None else -1)
