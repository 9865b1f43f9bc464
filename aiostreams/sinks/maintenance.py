"""Scheduled table maintenance of the Delta and Iceberg sinks: compaction and vacuum.

::

    stream.to_delta("/data/orders", Order, partition_by=("region",),
                    maintenance=TableMaintenance(compact_every=600.0, vacuum_every=3600.0,
                                                 retention=7 * 86400.0))

A sink writing a batch every few seconds makes a small file per partition per batch, and a
killed write leaves files no commit lists; both make a table slower to read every day.
:class:`TableMaintenance` (off by default: no sink has one unless given) asks the sink to

* **compact** every ``compact_every`` seconds: bin-pack each partition's files smaller than
  ``target_file_size`` bytes into files of about that size, in ONE table commit that
  removes the small files and adds the rewritten ones (Delta: delta-rs' OPTIMIZE, a commit
  with ``dataChange=false``; Iceberg: a snapshot of operation ``replace``). Readers see the
  same rows before and after, each once: a commit is atomic, and the files it removes stay
  on disk until a vacuum past the retention;
* **vacuum** every ``vacuum_every`` seconds: delete the files no live commit lists that are
  older than ``retention`` seconds (files removed by compaction, orphans of killed writes;
  Iceberg first expires the snapshots older than ``retention``).

How it runs (:class:`MaintenanceRunner`): on the sink's writer thread, queued after a flush
that succeeded when a task is due, so it runs between two of the sink's writes and never
races its own commits. Against other writers of the table (``--workers N``: every worker
with maintenance compacts; only one needs to, the others' attempts conflict or find
nothing to do) the table format's conflict rules decide: a compaction whose commit lost is
dropped (counted in ``conflicts``) and tried again when next due; it never fails the sink
and never duplicates a row (its commit is made on the snapshot it read, not re-based).
Any other error of a maintenance task is logged and counted, never raised.

Invariants: a task runs only on the writer thread, at most one is queued at a time, and the
figures (:class:`aiostreams.runtime.table_health.TableHealth`) only grow, except the
files-per-partition gauge, sampled after each task.
"""

from __future__ import annotations

import enum
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from aiostreams.errors import ConfigError
from aiostreams.runtime.table_health import TableHealth

__all__ = ["DEFAULT_TARGET_FILE_SIZE", "MaintenanceConflict", "MaintenanceRunner",
           "MaintenanceStep", "TableMaintainer", "TableMaintenance"]

log = logging.getLogger("aiostreams.sinks.maintenance")

DEFAULT_TARGET_FILE_SIZE = 128 * 1024 * 1024
"""Bytes of a compacted file unless ``target_file_size`` says otherwise (Iceberg's and
Spark's usual 128 MiB)."""


class MaintenanceStep(enum.Enum):
    """The points of a maintenance task after which a crash leaves a distinct table state
    (the sink's ``_after_maintenance`` hook is called at each; fault-injection tests
    override it)."""

    CLAIMED = "claimed"  # a Delta compaction's claim landed; nothing rewritten yet
    REWRITTEN = "rewritten"  # compacted files written, not committed (Iceberg): orphans
    COMPACTED = "compacted"  # the compaction commit landed
    VACUUMED = "vacuumed"  # a vacuum deleted what it found


AfterStep = Callable[[MaintenanceStep], None]


def _no_hook(step: MaintenanceStep) -> None:
    """The default hook: nothing."""


class MaintenanceConflict(Exception):
    """A maintenance commit lost a race with another writer's commit; nothing of it
    landed. It is tried again when next due."""


@dataclass(frozen=True)
class TableMaintenance:
    """When a table sink compacts and vacuums its table (seconds; None: never).

    ``compact_every``: seconds between compactions; ``target_file_size``: bytes of a
    compacted file (files below it are compacted); ``min_files``: a partition is compacted
    once it has at least that many small files. ``vacuum_every``: seconds between
    vacuums; ``retention``: seconds a file no commit lists is kept (readers of an older
    snapshot, and other writers' files not committed yet, need it: keep it well above
    the longest read and the longest write). Delta counts retention in whole hours
    (delta-rs' vacuum), so a Delta table's is rounded up to the next hour.
    """

    compact_every: float | None = 600.0
    target_file_size: int = DEFAULT_TARGET_FILE_SIZE
    min_files: int = 2
    vacuum_every: float | None = 3600.0
    retention: float = 7 * 86400.0

    def __post_init__(self) -> None:
        for name in ("compact_every", "vacuum_every"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, (int, float)) and value > 0):
                raise ConfigError(f"TableMaintenance.{name} is seconds > 0 or None (never); "
                                  f"got {value!r}")
        if not isinstance(self.retention, (int, float)) or self.retention <= 0 \
                or math.isinf(self.retention):
            raise ConfigError(f"TableMaintenance.retention is seconds > 0; got "
                              f"{self.retention!r}. Keep it above the longest read and write")
        if not isinstance(self.target_file_size, int) or self.target_file_size < 1024:
            raise ConfigError(f"TableMaintenance.target_file_size is bytes >= 1024; got "
                              f"{self.target_file_size!r}")
        if not isinstance(self.min_files, int) or self.min_files < 2:
            raise ConfigError(f"TableMaintenance.min_files is >= 2 (compacting one file "
                              f"gains nothing); got {self.min_files!r}")

    @property
    def retention_hours(self) -> int:
        """The retention in whole hours, rounded up (what delta-rs' vacuum takes)."""
        return max(1, math.ceil(self.retention / 3600.0))


class TableMaintainer(Protocol):
    """The table-format side of maintenance, called on the writer thread only."""

    def compact(self, settings: TableMaintenance, health: TableHealth) -> None:
        """Compact the table; raise :class:`MaintenanceConflict` when the commit lost a
        race (nothing landed)."""
        ...

    def vacuum(self, settings: TableMaintenance, health: TableHealth) -> None:
        """Delete what no live commit lists and is older than the retention."""
        ...

    def files_per_partition(self) -> dict[str, int]:
        """Data files of the current snapshot per partition (``"region=eu"``; ``""``
        when the table is not partitioned)."""
        ...


class MaintenanceRunner:
    """Schedules one sink's maintenance: :meth:`due` and :meth:`queued` on the event loop
    (after a flush), :meth:`run` on the writer thread. ``clock``: monotonic seconds."""

    def __init__(self, settings: TableMaintenance, maintainer: Callable[[], TableMaintainer],
                 *, owner: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self.health = TableHealth()
        self.owner = owner
        self._maintainer = maintainer
        self._clock = clock
        now = clock()
        self._last_compact = now
        self._last_vacuum = now
        self._pending = threading.Event()  # a task is queued or running
        self._stopped = False

    def due(self) -> bool:
        """Whether a task is due and none is queued (event loop)."""
        if self._stopped or self._pending.is_set():
            return False
        return bool(self._due_tasks(self._clock()))

    def _due_tasks(self, now: float) -> list[str]:
        s = self.settings
        tasks = []
        if s.compact_every is not None and now - self._last_compact >= s.compact_every:
            tasks.append("compact")
        if s.vacuum_every is not None and now - self._last_vacuum >= s.vacuum_every:
            tasks.append("vacuum")
        return tasks

    def queued(self) -> None:
        """A :meth:`run` was queued on the writer thread."""
        assert not self._pending.is_set(), f"{self.owner}: maintenance queued twice"
        self._pending.set()

    def stop(self) -> None:
        """Queue nothing more (the sink stops)."""
        self._stopped = True

    def run(self) -> None:
        """Run the due tasks (writer thread). Never raises: a lost race is a conflict, any
        other error is logged; either way the task is tried again when next due."""
        try:
            if self._stopped:
                return
            maintainer = self._maintainer()
            for task in self._due_tasks(self._clock()):
                self._run_task(task, maintainer)
            self.health.files_per_partition = maintainer.files_per_partition()
        except Exception:
            self.health.errors += 1
            log.exception("%s: table maintenance failed; it runs again when next due",
                          self.owner)
        finally:
            self._pending.clear()

    def _run_task(self, task: str, maintainer: TableMaintainer) -> None:
        began = self._clock()
        try:
            if task == "compact":
                maintainer.compact(self.settings, self.health)
                self.health.compactions += 1
            else:
                maintainer.vacuum(self.settings, self.health)
                self.health.vacuums += 1
        except MaintenanceConflict as e:
            self.health.conflicts += 1
            log.info("%s: %s lost a race with another writer (%s); dropped, tried again "
                     "when next due", self.owner, task, e)
        finally:
            if task == "compact":
                self._last_compact = self._clock()
            else:
                self._last_vacuum = self._clock()
            self.health.maintenance_seconds += self._clock() - began
