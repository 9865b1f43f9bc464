"""The worker's vocabulary: its configuration, and what a commit wrote (its lifecycle is
the app's: :class:`~aiostreams.lifecycle.state.AppState`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aiostreams.engine.task import TaskSettings
from aiostreams.policies import Retry
from aiostreams.types import TopicPartition


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
    static_membership: bool = False  # see engine/static_membership.py (the App's default: on)
    client_id: str = "aiostreams"
    state_dir: Any = None
    node_retry: Mapping[str, Retry] = field(default_factory=dict)
    stuck_record_warning: float | None = None  # seconds; see engine/stall_watch.py
    offset_out_of_range: str = "earliest"  # see transport/offset_reset.py
    client_watchdog_interval: float | None = 1.0  # seconds; see engine/client_watchdog.py
    client_stall_timeout: float | None = 60.0  # seconds
    corrupt_fetch_limit: int = 5
    placement: Any = None  # PlacementConfig when standbys are kept; engine/placement_member.py


@dataclass
class CommitRecord:
    """What one commit wrote (kept for tests and metrics)."""

    offsets: dict[TopicPartition, int]
    duration: float
