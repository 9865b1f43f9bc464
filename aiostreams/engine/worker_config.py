"""The worker's vocabulary: its lifecycle, its configuration, and what a commit wrote."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aiostreams.engine.task import TaskSettings
from aiostreams.policies import Retry
from aiostreams.types import TopicPartition


class WorkerState(enum.Enum):
    """``CREATED → STARTING → RUNNING → STOPPING → STOPPED``; ``FAILED`` when a task failed
    or the broker gave up on us (it still stops cleanly)."""

    CREATED = "created"
    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"
    FAILED = "failed"


@dataclass
class WorkerConfig:
    app_id: str
    task: TaskSettings
    commit_interval: float = 1.0
    purge_interval: float = 30.0
    poll_timeout: float = 0.1
    max_poll_records: int = 2000
    drain_timeout: float = 30.0
    broker_timeout: float = 120.0
    exactly_once: bool = False
    default_partitions: int = 1
    group_instance_id: str | None = None
    client_id: str = "aiostreams"
    state_dir: Any = None
    node_retry: Mapping[str, Retry] = field(default_factory=dict)
    stuck_record_warning: float | None = None  # seconds; see engine/stall_watch.py


@dataclass
class CommitRecord:
    """What one commit wrote (kept for tests and metrics)."""

    offsets: dict[TopicPartition, int]
    duration: float
