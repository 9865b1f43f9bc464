"""The ``run`` number of ``TaskStatus`` (:class:`aiostreams.ops.app_status.TaskRuns`): one per
task object, 1, 2, ... in the order first seen, held weakly."""

from __future__ import annotations

import gc
import weakref

from aiostreams.ops.app_status import TaskRuns


class Task:
    """Stands for a ``StreamTask``: TaskRuns only keys a weak dict by it."""


def test_a_task_keeps_its_run_number_and_a_new_task_object_gets_the_next() -> None:
    runs = TaskRuns()
    first, reopened = Task(), Task()
    assert runs.of(first) == 1
    assert runs.of(reopened) == 2
    assert runs.of(first) == 1


def test_a_run_number_does_not_keep_a_closed_task_alive() -> None:
    runs = TaskRuns()
    task = Task()
    runs.of(task)
    gone = weakref.ref(task)
    del task
    gc.collect()
    assert gone() is None
