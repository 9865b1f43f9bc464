"""Compaction and vacuum of a Delta table through delta-rs (the Delta sink's
:class:`~aiostreams.sinks.maintenance.TableMaintainer`; scheduling and the rules are
:mod:`aiostreams.sinks.maintenance`).

* Compaction is delta-rs' OPTIMIZE (``optimize.compact``): per partition, files smaller
  than the target are bin-packed into target-size files, as ONE commit that removes them
  and adds the new ones with ``dataChange=false``. App transactions (the sink's durable
  offsets) are table state the commit does not touch, so they read the same after it.
  A concurrent append by another writer does not conflict with it (Delta's rules: a blind
  append reads nothing the compaction removed); a concurrent compaction of the same files
  does, and the loser's commit fails: :class:`MaintenanceConflict`, nothing committed
  (its rewritten files are orphans, for a later vacuum).
* Vacuum is delta-rs' ``vacuum(full=True)``: files removed from the table more than the
  retention ago, and files in the table's directory no commit ever listed (orphans of a
  killed write) last modified more than the retention ago. delta-rs counts the retention
  in whole hours (:attr:`TableMaintenance.retention_hours`, rounded up, never 0, so a
  file another writer is writing now is never taken for an orphan).

Blocking; called on the writer thread only.
"""

from __future__ import annotations

import contextlib
import os
from collections import Counter
from collections.abc import Mapping

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable
from deltalake.exceptions import CommitFailedError

from aiostreams.runtime.table_health import TableHealth
from aiostreams.sinks.delta_table import WRITER, open_table
from aiostreams.sinks.maintenance import MaintenanceConflict, TableMaintenance

__all__ = ["DeltaMaintainer"]

MAINTENANCE_KEY = "aiostreams.maintenance"
"""Commit info naming the maintenance task that made the commit (``compaction``)."""


class DeltaMaintainer:
    """The Delta table at ``where`` (a local path or an ``s3a://`` URI reached with
    ``storage_options``); ``app`` names the app in the commits' info."""

    def __init__(self, where: str, storage_options: Mapping[str, str], app: str) -> None:
        self.where = where
        self.storage_options = dict(storage_options)
        self.app = app

    def _table(self) -> DeltaTable | None:
        return open_table(self.where, self.storage_options)

    def compact(self, settings: TableMaintenance, health: TableHealth) -> None:
        table = self._table()
        if table is None or not self._worth_compacting(table, settings):
            return
        try:
            done = table.optimize.compact(
                target_size=settings.target_file_size,
                commit_properties=CommitProperties(custom_metadata={
                    "aiostreams.app": self.app, "aiostreams.writer": WRITER,
                    MAINTENANCE_KEY: "compaction"}))
        except CommitFailedError as e:
            raise MaintenanceConflict(str(e)) from e
        health.files_compacted += int(done.get("numFilesRemoved", 0))
        health.files_rewritten += int(done.get("numFilesAdded", 0))

    def _worth_compacting(self, table: DeltaTable, settings: TableMaintenance) -> bool:
        """Whether some partition has ``min_files`` files below the target size."""
        small: Counter[str] = Counter()
        for partition, size in _files(table):
            if size < settings.target_file_size:
                small[partition] += 1
        return any(n >= settings.min_files for n in small.values())

    def vacuum(self, settings: TableMaintenance, health: TableHealth) -> None:
        table = self._table()
        if table is None:
            return
        hours = settings.retention_hours
        local = self.where if "://" not in self.where else None
        sizes: dict[str, int] = {}
        if local is not None:  # sizes before they go (an object store's are not counted)
            for rel in table.vacuum(retention_hours=hours, dry_run=True,
                                    enforce_retention_duration=False, full=True):
                with contextlib.suppress(OSError):
                    sizes[rel] = os.stat(os.path.join(local, rel)).st_size
        try:
            deleted = table.vacuum(retention_hours=hours, dry_run=False,
                                   enforce_retention_duration=False, full=True,
                                   commit_properties=CommitProperties(custom_metadata={
                                       "aiostreams.app": self.app,
                                       "aiostreams.writer": WRITER,
                                       MAINTENANCE_KEY: "vacuum"}))
        except CommitFailedError as e:  # its start/end commits raced another writer's
            raise MaintenanceConflict(str(e)) from e
        health.files_deleted += len(deleted)
        health.bytes_reclaimed += sum(sizes.get(rel, 0) for rel in deleted)

    def files_per_partition(self) -> dict[str, int]:
        table = self._table()
        if table is None:
            return {}
        return dict(sorted(Counter(partition for partition, _ in _files(table)).items()))


def _files(table: DeltaTable) -> list[tuple[str, int]]:
    """``(partition, size in bytes)`` of each data file of ``table``'s snapshot; the
    partition as ``"col=value/..."`` (``""`` for an unpartitioned table)."""
    actions = pa.table(table.get_add_actions(flatten=True)).to_pydict()
    columns = [c for c in actions if c.startswith("partition.")]
    out = []
    for i, size in enumerate(actions["size_bytes"]):
        partition = "/".join(f"{c.removeprefix('partition.')}={actions[c][i]}" for c in columns)
        out.append((partition, int(size)))
    return out
