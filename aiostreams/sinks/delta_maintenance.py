"""Compaction and vacuum of a Delta table through delta-rs (the Delta sink's
:class:`~aiostreams.sinks.maintenance.TableMaintainer`; scheduling and the rules are
:mod:`aiostreams.sinks.maintenance`).

* Compaction is delta-rs' OPTIMIZE (``optimize.compact``): per partition, files smaller
  than the target are bin-packed into target-size files, as ONE commit that removes them
  and adds the new ones with ``dataChange=false``. App transactions (the sink's durable
  offsets) are table state the commit does not touch, so they read the same after it.
  A concurrent append by another writer does not conflict with it (Delta's rules: a blind
  append reads nothing the compaction removed).
* Two compactions at once (``--workers N``, each with maintenance). delta-rs 1.6 lets two
  OPTIMIZE commits that remove the same files both land (its conflict checker allows
  concurrent removes with ``dataChange=false``; seen here: the rows of the files both
  rewrote were then read twice). So a compaction first *claims* the table: a metadata
  commit setting :data:`CLAIM_PROPERTY` to a token of its own, and OPTIMIZE then runs on the
  snapshot of exactly that commit. A metadata change conflicts with every concurrent
  commit, so of two overlapping compactions the one whose snapshot predates the other's
  claim fails ("Metadata changed since last commit"): :class:`MaintenanceConflict`, nothing
  committed (its rewritten files are orphans, for a later vacuum); the other read the
  first's result, or committed before it. The price: an append of another worker that
  raced a claim is retried by its sink (``commit_conflicts``), once per compaction.
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
import uuid
from collections import Counter
from collections.abc import Mapping

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable
from deltalake.exceptions import CommitFailedError

from aiostreams.runtime.table_health import TableHealth
from aiostreams.sinks.delta_table import WRITER, open_table
from aiostreams.sinks.maintenance import (
    AfterStep,
    MaintenanceConflict,
    MaintenanceStep,
    TableMaintenance,
    _no_hook,
)

__all__ = ["CLAIM_PROPERTY", "DeltaMaintainer"]

MAINTENANCE_KEY = "aiostreams.maintenance"
"""Commit info naming the maintenance task that made the commit (``compaction``)."""
CLAIM_PROPERTY = "aiostreams.compaction"
"""The table property a compaction's claim sets (``<writer> <token>``)."""


class DeltaMaintainer:
    """The Delta table at ``where`` (a local path or an ``s3a://`` URI reached with
    ``storage_options``); ``app`` names the app in the commits' info; ``after`` is called
    after each :class:`MaintenanceStep`."""

    def __init__(self, where: str, storage_options: Mapping[str, str], app: str,
                 after: AfterStep = _no_hook) -> None:
        self.where = where
        self.storage_options = dict(storage_options)
        self.app = app
        self._after = after

    def _table(self) -> DeltaTable | None:
        return open_table(self.where, self.storage_options)

    def compact(self, settings: TableMaintenance, health: TableHealth) -> None:
        table = self._table()
        if table is None or not self._worth_compacting(table, settings):
            return
        claimed = self._claim(table)
        self._after(MaintenanceStep.CLAIMED)
        self._optimize(claimed, settings, health)

    def _claim(self, table: DeltaTable) -> DeltaTable:
        """Commit a claim on ``table`` (see the module docstring); the snapshot of exactly
        that commit. :class:`MaintenanceConflict` when another commit came first."""
        token = f"{WRITER} {uuid.uuid4().hex}"
        try:
            table.alter.set_table_properties(
                {CLAIM_PROPERTY: token}, raise_if_not_exists=False,
                commit_properties=self._info("compaction-claim"))
        except CommitFailedError as e:
            raise MaintenanceConflict(str(e)) from e
        claimed = DeltaTable(self.where, version=table.version(),
                             storage_options=self.storage_options or None)
        assert claimed.metadata().configuration.get(CLAIM_PROPERTY) == token, (
            f"version {table.version()} of {self.where} is not this compaction's claim")
        return claimed

    def _optimize(self, claimed: DeltaTable, settings: TableMaintenance,
                  health: TableHealth) -> None:
        """OPTIMIZE on the claim's snapshot; :class:`MaintenanceConflict` when a claim (or
        another metadata change) landed since."""
        try:
            done = claimed.optimize.compact(target_size=settings.target_file_size,
                                            commit_properties=self._info("compaction"))
        except CommitFailedError as e:
            raise MaintenanceConflict(str(e)) from e
        health.files_compacted += int(done.get("numFilesRemoved", 0))
        health.files_rewritten += int(done.get("numFilesAdded", 0))
        self._after(MaintenanceStep.COMPACTED)

    def _info(self, task: str) -> CommitProperties:
        return CommitProperties(custom_metadata={
            "aiostreams.app": self.app, "aiostreams.writer": WRITER, MAINTENANCE_KEY: task})

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
                                   commit_properties=self._info("vacuum"))
        except CommitFailedError as e:  # its start/end commits raced another writer's
            raise MaintenanceConflict(str(e)) from e
        health.files_deleted += len(deleted)
        health.bytes_reclaimed += sum(sizes.get(rel, 0) for rel in deleted)
        self._after(MaintenanceStep.VACUUMED)

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
