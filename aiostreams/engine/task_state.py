"""A task's lifecycle, its settings and its counters.

``CREATED → RESTORING → RUNNING → SUSPENDED → CLOSED``, ``FAILED`` from RESTORING, RUNNING
or SUSPENDED; :func:`check_transition` rejects every other move (a bug in the caller).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from aiostreams.policies import NO_RETRY, OnError, Ordering, Retry
from aiostreams.runtime.origin import OriginMarks

if TYPE_CHECKING:  # imported only when the app traces: it imports opentelemetry
    from aiostreams.engine.tracing import Tracing


class TaskState(enum.Enum):
    """``CREATED → RUNNING → SUSPENDED → CLOSED``; ``FAILED`` from RUNNING/SUSPENDED."""

    CREATED = "created"
    RESTORING = "restoring"
    RUNNING = "running"
    SUSPENDED = "suspended"  # no longer issuing; in-flight work drains
    CLOSED = "closed"
    FAILED = "failed"


_TRANSITIONS: dict[TaskState, frozenset[TaskState]] = {
    TaskState.CREATED: frozenset({TaskState.RESTORING, TaskState.RUNNING, TaskState.CLOSED}),
    TaskState.RESTORING: frozenset({TaskState.RUNNING, TaskState.CLOSED, TaskState.FAILED}),
    TaskState.RUNNING: frozenset({TaskState.SUSPENDED, TaskState.FAILED}),
    TaskState.SUSPENDED: frozenset({TaskState.CLOSED, TaskState.FAILED}),
    TaskState.FAILED: frozenset({TaskState.CLOSED}),
    TaskState.CLOSED: frozenset(),
}


def check_transition(task_id: str, old: TaskState, new: TaskState) -> TaskState:
    """``new``, when the lifecycle allows ``old → new``; else an AssertionError."""
    if new not in _TRANSITIONS[old]:
        raise AssertionError(f"task {task_id}: {old.value} -> {new.value}")
    return new


@dataclass
class TaskSettings:
    max_in_flight: int = 20_000
    ordering: Ordering = Ordering.KEY
    max_task_idle: float = 0.0
    max_buffered_per_partition: int = 1000
    retry: Retry = NO_RETRY
    on_error: OnError = OnError.FAIL
    dead_letter_topic: str | None = None
    processing_timeout: float | None = None
    max_record_bytes: int = 1_000_000
    max_concurrency: int | None = 1000  # None: max_in_flight
    max_task_buffer_bytes: int = 32 * 1024 * 1024
    tracing: Tracing | None = None  # OpenTelemetry spans per record (engine.tracing)
    lineage: bool = False  # a lineage header on every output (runtime.lineage)
    cache_max_bytes: int = 0  # each cached store's record cache per task (0: off)
    origins: OriginMarks | None = None  # origin headers on outputs (runtime.origin)


@dataclass
class TaskMetrics:
    records_in: int = 0
    records_out: int = 0
    retries: int = 0
    skipped: int = 0
    dead_lettered: int = 0
    punctuations: int = 0
    deferred: int = 0
    max_rob_depth: int = 0
    by_node_errors: dict[str, int] = field(default_factory=dict)
