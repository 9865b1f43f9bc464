"""What a table sink's maintenance reports (compaction, vacuum): plain figures the sink
updates on its writer thread and the metrics server reads at scrape time, so the operations
layer needs no import of the sinks (and of pyarrow, delta-rs or pyiceberg).

A sink with maintenance on exposes them as ``table_health`` (:class:`MaintainedSink`).
Invariant: the counters only grow; ``files_per_partition`` is replaced after each
maintenance task (a sample, not a running figure).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

__all__ = ["MaintainedSink", "TableHealth"]


@dataclass
class TableHealth:
    files_per_partition: dict[str, int] = field(default_factory=dict)  # sampled after a task
    compactions: int = 0  # compaction tasks that ran to the end (landed or found nothing)
    files_compacted: int = 0  # small files a landed compaction replaced
    files_rewritten: int = 0  # files a landed compaction wrote
    vacuums: int = 0
    files_deleted: int = 0  # by vacuums
    bytes_reclaimed: int = 0  # by vacuums
    conflicts: int = 0  # maintenance commits that lost a race (dropped, tried again)
    errors: int = 0  # maintenance tasks that failed otherwise (logged, tried again)
    maintenance_seconds: float = 0.0


@runtime_checkable
class MaintainedSink(Protocol):
    """A sink whose table is maintained: ``table_health`` is None when maintenance is off."""

    name: str

    @property
    def table_health(self) -> TableHealth | None: ...
