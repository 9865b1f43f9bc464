"""Read-only views of a running app, for metrics, the status line and tests.

``app.status()`` returns an :class:`AppStatus` snapshot: the app's lifecycle state, its
worker's (:class:`WorkerStatus`) and one :class:`TaskStatus` per task it runs now. The views
are frozen dataclasses holding copies: keeping one never keeps a task alive, and the
engine's objects (tasks, worker, buffers) are never handed out.

:class:`CommitRecord` (what one commit wrote, given to ``app.on_commit`` listeners and kept
in ``app.commit_log``) is public here; it is defined with the worker's commit.

Offsets follow Kafka's convention: an offset is the *next* record to read, so
``committed[tp] == 42`` means records up to 41 are done.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from aiostreams.engine.worker import CommitRecord
from aiostreams.lifecycle.state import AppState
from aiostreams.types import TopicPartition


@dataclass(frozen=True)
class TaskStatus:
    """One task (one partition of one sub-topology, e.g. ``"0_3"``) as it was when the
    snapshot was taken.

    Invariant: every partition in ``committable`` is one of ``partitions``."""

    task_id: str
    partitions: tuple[TopicPartition, ...]
    state: str
    """The task's lifecycle state: ``created``, ``restoring``, ``running``, ``suspended``,
    ``closed`` or ``failed``."""
    in_flight: int
    """Records issued and not yet retired (reorder-buffer slots in use)."""
    max_in_flight: int
    buffered: int
    """Records fetched and waiting in the partition queues, not yet issued."""
    committable: Mapping[TopicPartition, int] = field(
        default_factory=lambda: MappingProxyType({}))
    """Per partition, one past the last retired record: what the next commit commits."""
    oldest_unretired_timestamp: float | None = None
    """Event time (seconds) of the oldest record not retired; ``None`` when none is."""
    enforced_processing: int = 0
    """Records processed while a partition had no data, after ``max_task_idle_ms``."""
    counters: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    """The task's counters since it was created (``records_in``, ``records_out``,
    ``retries``, ``skipped``, ``dead_lettered``, ...)."""
    errors_by_node: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    """Records that failed for good, by the node that failed."""
    run: int = 0
    """Tells runs of a task apart: a task closed by a rebalance and created again gets a
    new ``run`` (numbered from 1 per app), so totals over closed tasks can be kept."""
    head_of_line_wait: float = 0.0
    """Seconds, summed over the records retired so far, that finished records waited to
    retire behind an earlier record still executing (head-of-line blocking; see
    :mod:`aiostreams.engine.head_of_line`)."""
    head_of_line_wait_max: float = 0.0
    """The longest such wait of one record, in seconds."""
    head_of_line_blocked: int = 0
    """Retired records that waited behind an earlier one at all."""

    def __post_init__(self) -> None:
        foreign = set(self.committable) - set(self.partitions)
        if foreign:
            raise ValueError(f"task {self.task_id}: committable offsets for partitions it "
                             f"does not own: {sorted(foreign)}")


@dataclass(frozen=True)
class WorkerStatus:
    """The worker that runs an app's tasks on this event loop."""

    state: AppState
    committed: Mapping[TopicPartition, int]
    """The offsets last committed for the partitions the worker owns now."""
    commits: int
    """Commits that committed offsets since the worker started."""
    failure: str | None = None
    """``"<type>: <message>"`` of what made the worker fail, else ``None``."""
    offset_resets: int = 0
    """Input positions found outside their partition's log and reset per
    ``offset_out_of_range`` since the worker started (each also logged at WARNING)."""


@dataclass(frozen=True)
class StandbyStatus:
    """One standby task: another worker's task whose stores this worker keeps up to date
    from their changelogs (``num_standby_replicas``; read-only, no source reads).

    Invariant: ``lag == sum(end[tp] - applied[tp])`` over its changelog partitions, >= 0."""

    task_id: str
    applied: Mapping[TopicPartition, int]
    """Per changelog partition, the offset its copy holds every record below."""
    end: Mapping[TopicPartition, int]
    """Per changelog partition, its end as the standby last saw it."""
    lag: int
    """Changelog records not applied yet (what a promotion here would restore)."""
    warmup: bool = False
    """Kept to warm this worker up for the task: the group moves the task here once
    caught up (at a probing rebalance)."""
    ready: bool = False
    """Its first catch-up (the restore from the local files) is done."""


@dataclass(frozen=True)
class AppStatus:
    """An app at one instant: its state, its worker (``None`` before ``start()``) and the
    tasks it runs, ordered by task id."""

    name: str
    state: AppState
    worker: WorkerStatus | None
    tasks: tuple[TaskStatus, ...]
    standbys: tuple[StandbyStatus, ...] = ()
    """The standby tasks this worker keeps, ordered by task id."""

    def task(self, task_id: str) -> TaskStatus:
        """The task ``task_id``; ``KeyError`` naming the tasks there are when absent."""
        for t in self.tasks:
            if t.task_id == task_id:
                return t
        raise KeyError(f"app {self.name!r} runs no task {task_id!r}; it runs "
                       f"{[t.task_id for t in self.tasks]}")


__all__ = ["AppStatus", "CommitRecord", "StandbyStatus", "TaskStatus", "WorkerStatus"]
