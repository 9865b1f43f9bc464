"""Building ``App.status()``: the read-only views of :mod:`aiostreams.ops.status` from the
worker and its live tasks.

The views hold copies (``MappingProxyType`` over fresh dicts), never the engine's objects.
A task's ``run`` number counts the task objects the app has seen, 1, 2, ... in the order a
status first saw them: a task re-created after a rebalance gets a new number. Invariant:
the numbers are kept weakly (:class:`TaskRuns`), so a status never keeps a task alive.
"""

from __future__ import annotations

import dataclasses
import itertools
import weakref
from types import MappingProxyType

from aiostreams.engine.task import StreamTask
from aiostreams.engine.worker import Worker
from aiostreams.lifecycle.state import AppState
from aiostreams.ops.status import AppStatus, StandbyStatus, TaskStatus, WorkerStatus


class TaskRuns:
    """A run number per task object, 1, 2, ... in the order first asked for."""

    def __init__(self) -> None:
        self._runs: weakref.WeakKeyDictionary[StreamTask, int] = weakref.WeakKeyDictionary()
        self._numbers = itertools.count(1)

    def of(self, task: StreamTask) -> int:
        run = self._runs.get(task)
        if run is None:
            run = self._runs[task] = next(self._numbers)
        return run


def app_status(name: str, state: AppState, worker: Worker | None,
               runs: TaskRuns) -> AppStatus:
    """A snapshot of app ``name`` in ``state``, its worker and its tasks."""
    if worker is None:
        return AppStatus(name, state, None, ())
    tasks = tuple(task_status(task, runs.of(task))
                  for _, task in sorted(worker.tasks.items()))
    committed = {tp: offset for t in tasks for tp in t.partitions
                 if (offset := worker.committed_offset(tp)) is not None}
    failure = worker.failure
    return AppStatus(name, state, WorkerStatus(
        state=AppState(worker.state.value),
        committed=MappingProxyType(committed),
        commits=worker.commits,
        failure=None if failure is None else f"{type(failure).__name__}: {failure}",
        offset_resets=resets.total if (resets := worker.offset_resets) is not None else 0,
    ), tasks, standby_statuses(worker))


def standby_statuses(worker: Worker) -> tuple[StandbyStatus, ...]:
    """The worker's standby tasks (none when it keeps no standbys)."""
    placement = worker.placement
    if placement is None:
        return ()
    warm = placement.assignment.warmup
    return tuple(
        StandbyStatus(task_id, MappingProxyType(dict(s.applied)),
                      MappingProxyType(dict(s.end)), s.lag, task_id in warm,
                      s.ready.is_set())
        for task_id, s in sorted(placement.standbys.tasks.items()))


def task_status(task: StreamTask, run: int) -> TaskStatus:
    """A snapshot of ``task``, its ``run`` number given."""
    metrics = dataclasses.asdict(task.metrics)
    errors = metrics.pop("by_node_errors")
    oldest = task.oldest_unretired
    blocking = task.head_of_line
    return TaskStatus(
        task_id=task.task_id,
        partitions=tuple(task.partitions),
        state=task.state.value,
        in_flight=task.in_flight,
        max_in_flight=task.settings.max_in_flight,
        buffered=task.buffered(),
        committable=MappingProxyType(task.committable()),
        oldest_unretired_timestamp=None if oldest is None else oldest.timestamp,
        enforced_processing=task.enforced_processing_total,
        counters=MappingProxyType(metrics),
        errors_by_node=MappingProxyType(errors),
        run=run,
        head_of_line_wait=blocking.total,
        head_of_line_wait_max=blocking.longest,
        head_of_line_blocked=blocking.blocked,
    )
