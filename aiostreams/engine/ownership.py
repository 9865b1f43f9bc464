"""Whether this worker may still act as the owner of its tasks, and what it does when not.

A task's stores, changelog partitions and checkpoint belong to the one worker holding its
partitions in the group's current generation. The group can take them away without this
worker running its revoke - a process frozen past its session timeout, a network cut -
and the worker learns of it only from its consumer's membership lease
(:meth:`~aiostreams.transport.base.Consumer.owns_assignment`, see
:mod:`~aiostreams.transport.membership`). :class:`TaskOwnership` asks the lease before each
batch the output channels send (:meth:`owns`), after each fetch and in the revoke callback;
once it says no, it keeps saying no until every task was closed (:meth:`lose_all`): no output,
changelog record, commit or checkpoint of those tasks goes out meanwhile. Their checkpoints
are discarded (their files may hold writes that another owner redid differently), and their
partitions wait: a rebalance hands them out again, or, when the lease turns out to hold
after all, they start again from their last commit (:meth:`TaskTable.reopen`).

Invariant: while :attr:`lost` is set, :meth:`owns` is false; it is cleared only by
:meth:`lose_all` (every task closed) or :meth:`confirmed` (the group assigned partitions).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from aiostreams.engine.task_lifecycle import TaskTable
from aiostreams.errors import OwnershipLostError
from aiostreams.transport.base import Consumer
from aiostreams.types import TopicPartition


class TaskOwnership:
    """See the module docstring. ``consumer`` gives the worker's consumer of the moment (it
    is replaced when rebuilt); ``committed`` the offsets last committed or read."""

    def __init__(self, table: TaskTable, consumer: Callable[[], Consumer | None],
                 committed: Mapping[TopicPartition, int]) -> None:
        self._table = table
        self._consumer = consumer
        self._committed = committed
        self.lost = False

    def owns(self) -> bool:
        """Whether the worker may still act as the owner of its tasks (no I/O)."""
        if self.lost:
            return False
        consumer = self._consumer()
        if consumer is None or consumer.owns_assignment():
            return True
        self.lost = True
        return False

    def confirmed(self) -> None:
        """The group has just said what this member owns (an assignment)."""
        self.lost = False

    async def after_fetch(self) -> bool:
        """The fetch loop's check: lose every task when the worker may no longer own them.
        Returns whether it owns what it holds (lost partitions are reopened only then)."""
        table = self._table
        if not (table.tasks or table.orphans) or self.owns():
            return True
        if table.tasks:
            await self.lose_all()
        return False

    async def lose_all(self) -> None:
        """Close every task without committing (dropping in-flight work and unsent outputs;
        checkpoints discarded) and keep their partitions, at their last committed offsets,
        for :meth:`TaskTable.reopen`. Cancellation: the tasks closed so far stay closed."""
        error = OwnershipLostError(
            "the group may have moved this worker's partitions to others: no heartbeat "
            "succeeded within the session timeout, or the coordinator no longer knows this "
            "member (a frozen process, a long pause, a network cut)")
        tasks = list(self._table.tasks.values())
        committed = {tp: self._committed.get(tp) for task in tasks for tp in task.partitions}
        await self._table.lose(tasks, error, self._consumer())
        self._table.orphans.update(committed)
        self.lost = False
