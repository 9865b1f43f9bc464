"""Restoring tasks in the background (Kafka Streams' *state updater*), so that a task
replaying a large changelog never stops the worker's other tasks.

A task with logged stores is handed over right after its stores opened (it is
``RESTORING``); a job of its own replays the changelogs (:class:`~aiostreams.engine.restore.
Restorer`), then initializes the processors (``RESTORING → RUNNING``) and calls
``on_restored``, which lets the task's held records flow. Meanwhile the fetch loop, the
other tasks and the commits go on: the restore yields to the event loop after every
fetched batch.

While a task is held here:

* its partitions are paused by the caller (what was fetched before waits in the task's
  queues: a task that is not running issues nothing and pauses what it holds);
* it takes part in no commit (:meth:`StateUpdater.holds`): its offsets stay at the group's
  committed position, and no checkpoint claims its half-restored stores;
* a failure (of the restore, or of a processor's ``init``) is reported through
  ``on_failed`` as a :class:`~aiostreams.errors.TaskFailedError` naming the task and what
  failed (the worker then stops); the task stays held (never committed) until closed.

At most :data:`PARALLEL_RESTORES` tasks restore at once (each holds a consumer and a
bounded buffer of restored records, see :mod:`~aiostreams.engine.restore`); the others
wait their turn in the order they were assigned.

Invariant: a task is held exactly from :meth:`StateUpdater.add` until it is restored
(``on_restored`` ran) or :meth:`StateUpdater.cancel` returned for it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from aiostreams.engine.restore import Restorer
from aiostreams.engine.task import StreamTask
from aiostreams.engine.task_state import TaskState
from aiostreams.errors import TaskFailedError

log = logging.getLogger("aiostreams.restore")

PARALLEL_RESTORES = 2
"""Tasks restoring at the same time. Restores share the worker's one event loop, so more
would not restore faster; two overlap one's SQLite flush (on its thread) with the other's
fetching."""


class StateUpdater:
    def __init__(self, restorer: Restorer, *, on_restored: Callable[[StreamTask], None],
                 on_failed: Callable[[StreamTask, TaskFailedError], None]) -> None:
        self._restorer = restorer
        self._on_restored = on_restored
        self._on_failed = on_failed
        self._jobs: dict[StreamTask, asyncio.Task[None]] = {}
        self._slots = asyncio.Semaphore(PARALLEL_RESTORES)

    def holds(self, task: StreamTask) -> bool:
        """Whether ``task`` is restoring, or failed to, and so must not be committed."""
        return task in self._jobs

    def add(self, task: StreamTask) -> None:
        """Restore ``task`` (``RESTORING``, its stores open) in a job of its own."""
        if task.state is not TaskState.RESTORING:
            raise AssertionError(f"task {task.task_id} is {task.state.value}, not restoring")
        if task in self._jobs:
            raise AssertionError(f"task {task.task_id} is already restoring")
        self._jobs[task] = asyncio.get_running_loop().create_task(
            self._restore(task), name=f"aiostreams-restore-{task.task_id}")

    async def _restore(self, task: StreamTask) -> None:
        try:
            async with self._slots:
                await self._restorer.restore(task)
            await task.initialize()  # the processors' init: RESTORING -> RUNNING
        except asyncio.CancelledError:
            raise
        except Exception as error:
            self._fail(task, error)
            return
        if task not in self._jobs:
            return  # cancelled just as it ended
        try:
            self._on_restored(task)
        except Exception as error:  # a bug: fail the task rather than lose the job's error
            self._fail(task, error)
            return
        del self._jobs[task]

    def _fail(self, task: StreamTask, error: Exception) -> None:
        if isinstance(error, TaskFailedError):
            failure = error
        else:
            failure = TaskFailedError(
                f"task {task.task_id}: starting it after its restore failed (processor init): "
                f"{type(error).__name__}: {error}")
            failure.__cause__ = error
        log.error("%s", failure)
        # The task stays RESTORING (StreamTask has no public move to FAILED for a failure
        # outside its record path); it stays held, so it is never committed, until closed.
        self._on_failed(task, failure)

    async def cancel(self, task: StreamTask) -> None:
        """Stop restoring ``task`` (when it is held) and wait until its job has ended; its
        stores stay open for the caller to close. What was restored stays in them: the
        checkpoint still describes what the files held before (at-least-once), or is gone
        (exactly-once), so the next restore replays from there.

        Cancellation: the job is cancelled all the same and the task no longer held; only
        the wait for its end is cut short."""
        job = self._jobs.pop(task, None)
        if job is None:
            return
        job.cancel()
        await asyncio.wait([job])
        if not job.cancelled() and job.exception() is not None:
            log.error("task %s: its restore job ended with an error while being cancelled",
                      task.task_id, exc_info=job.exception())
