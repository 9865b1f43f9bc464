"""Compaction and vacuum of an Iceberg table through pyiceberg 0.12 (the Iceberg sink's
:class:`~aiostreams.sinks.maintenance.TableMaintainer`; scheduling and the rules are
:mod:`aiostreams.sinks.maintenance`).

* **Compaction**: the current snapshot's data files below the target size are grouped per
  partition and bin-packed (smallest first, up to the target); each bin of at least
  ``min_files`` files is read through pyiceberg's Arrow scan (projected on the current
  schema) and written again as new data files. ONE snapshot then deletes the small files
  and adds the new ones: operation ``replace`` (the data is unchanged, so Spark's
  incremental reads skip it), built on the snapshot that was read, with pyiceberg's
  re-basing retries off (:func:`~aiostreams.sinks.iceberg_table.open_table`) and the
  catalog's check that ``main`` still points there: when another writer committed
  meanwhile the compaction is dropped (:class:`MaintenanceConflict`; its new files are
  deleted at once) and tried again next time. Its summary carries no source offsets, so
  :func:`~aiostreams.sinks.iceberg_table.durable_offsets` walks past it to the append below,
  which still records every durable offset: nothing lost, nothing invented.
* **Vacuum**: expire the snapshots older than the retention - except the current one and
  every snapshot from it back to the newest one recording source offsets (so the durable
  offsets stay readable however long compactions run alone) - then delete every file under
  the table's ``data/`` and ``metadata/`` directories that no remaining snapshot lists
  (data files, manifests, manifest lists; metadata files other than the current one and
  those the metadata log names) and that was last modified more than the retention ago.
  Orphan files are listed through pyarrow's filesystems (local warehouses; an object store
  pyarrow reaches with the environment's credentials).

pyiceberg 0.12 has no rewrite-files action: the replace snapshot is its overwrite producer
with the operation named ``replace`` in the summary and manifests holding only deleted
entries dropped (this module's one use of pyiceberg internals; the version is pinned).

Blocking; called on the writer thread only.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from urllib.parse import urlparse

import pyarrow.fs as pafs
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io.pyarrow import ArrowScan, _dataframe_to_data_files
from pyiceberg.manifest import DataFile, DataFileContent, ManifestFile
from pyiceberg.table import FileScanTask, Table
from pyiceberg.table.refs import MAIN_BRANCH
from pyiceberg.table.snapshots import Operation, Summary, ancestors_of
from pyiceberg.table.update.snapshot import _OverwriteFiles
from pyiceberg.typedef import EMPTY_DICT

from aiostreams.runtime.table_health import TableHealth
from aiostreams.sinks.delta_table import WRITER
from aiostreams.sinks.iceberg_table import APP_KEY, OFFSETS_KEY, WRITER_KEY
from aiostreams.sinks.maintenance import (
    AfterStep,
    MaintenanceConflict,
    MaintenanceStep,
    TableMaintenance,
    _no_hook,
)

__all__ = ["MAINTENANCE_KEY", "IcebergMaintainer"]

log = logging.getLogger("aiostreams.sinks.maintenance")

MAINTENANCE_KEY = "aiostreams.maintenance"
"""Snapshot summary property naming the maintenance task that made it (``compaction``)."""


class _RewriteFiles(_OverwriteFiles):
    """An overwrite that says what it is: ``replace`` (files rewritten, data unchanged),
    and drops manifests left with deleted entries only (else every compaction would leave
    one more manifest for each scan to read)."""

    def _summary(self, snapshot_properties: dict[str, str] = EMPTY_DICT) -> Summary:
        summary = super()._summary(snapshot_properties)
        return Summary(Operation.REPLACE, **summary.additional_properties)

    def _existing_manifests(self) -> list[ManifestFile]:
        return [m for m in super()._existing_manifests()
                if (m.added_files_count or 0) + (m.existing_files_count or 0) > 0
                or m.added_files_count is None]


class IcebergMaintainer:
    """The table ``load()`` returns (newest metadata, no re-basing retries), written by
    ``app``; ``after`` is called after each :class:`MaintenanceStep`."""

    def __init__(self, load: Callable[[], Table | None], app: str,
                 after: AfterStep = _no_hook) -> None:
        self._load = load
        self.app = app
        self._after = after

    # -- compaction ---------------------------------------------------------------------------

    def compact(self, settings: TableMaintenance, health: TableHealth) -> None:
        table = self._load()
        if table is None or table.current_snapshot() is None:
            return
        bins = _bins(_small_files(table, settings.target_file_size),
                     settings.target_file_size, settings.min_files)
        if not bins:
            return
        tx = table.transaction()
        properties = {APP_KEY: self.app, WRITER_KEY: WRITER, MAINTENANCE_KEY: "compaction"}
        rewrite = _RewriteFiles(operation=Operation.OVERWRITE, transaction=tx, io=table.io,
                                branch=MAIN_BRANCH, snapshot_properties=properties)
        written: list[DataFile] = []
        try:
            for group in bins:
                rows = ArrowScan(table.metadata, table.io, table.schema(), AlwaysTrue()
                                 ).to_table([FileScanTask(f) for f in group])
                expected = sum(f.record_count for f in group)
                assert rows.num_rows == expected, f"read {rows.num_rows} rows of {expected}"
                new = list(_dataframe_to_data_files(tx.table_metadata, rows, table.io,
                                                    write_uuid=rewrite.commit_uuid))
                written.extend(new)
                assert sum(f.record_count for f in new) == expected
                for f in group:
                    rewrite.delete_data_file(f)
                for f in new:
                    rewrite.append_data_file(f)
            rewrite.commit()
            self._after(MaintenanceStep.REWRITTEN)
            tx.commit_transaction()
        except CommitFailedException as e:
            _delete_quietly(table, (f.file_path for f in written))
            raise MaintenanceConflict(str(e)) from e
        except BaseException:
            _delete_quietly(table, (f.file_path for f in written))
            raise
        health.files_compacted += sum(len(group) for group in bins)
        health.files_rewritten += len(written)
        self._after(MaintenanceStep.COMPACTED)

    # -- vacuum ----------------------------------------------------------------------------

    def vacuum(self, settings: TableMaintenance, health: TableHealth) -> None:
        table = self._load()
        if table is None:
            return
        cutoff_ms = int((time.time() - settings.retention) * 1000)
        self._expire(table, cutoff_ms)
        table = self._load()
        assert table is not None
        self._delete_orphans(table, cutoff_ms / 1000.0, health)
        self._after(MaintenanceStep.VACUUMED)

    def _expire(self, table: Table, cutoff_ms: int) -> None:
        keep = set()
        for snapshot in ancestors_of(table.current_snapshot(), table.metadata):
            keep.add(snapshot.snapshot_id)  # back to the newest recording offsets
            if snapshot.summary is not None and snapshot.summary.get(OFFSETS_KEY) is not None:
                break
        heads = {ref.snapshot_id for ref in table.metadata.refs.values()}
        old = [s.snapshot_id for s in table.metadata.snapshots
               if s.timestamp_ms < cutoff_ms and s.snapshot_id not in keep | heads]
        if not old:
            return
        try:
            table.maintenance.expire_snapshots().by_ids(old).commit()
        except CommitFailedException as e:
            raise MaintenanceConflict(str(e)) from e

    def _delete_orphans(self, table: Table, cutoff: float, health: TableHealth) -> None:
        live = _live_files(table)
        try:
            fs, root = pafs.FileSystem.from_uri(table.metadata.location)
        except (OSError, ValueError) as e:  # no filesystem pyarrow reaches
            log.warning("%s: cannot list its files to delete orphans (%s); expired "
                        "snapshots only", table.name(), e)
            return
        for sub in ("data", "metadata"):
            selector = pafs.FileSelector(f"{root.rstrip('/')}/{sub}", allow_not_found=True,
                                         recursive=True)
            for info in fs.get_file_info(selector):
                if info.type != pafs.FileType.File or _key(info.path) in live:
                    continue
                if info.mtime is None or info.mtime.timestamp() >= cutoff:
                    continue  # recent: maybe a write not committed yet
                with contextlib.suppress(FileNotFoundError):
                    fs.delete_file(info.path)
                    health.files_deleted += 1
                    health.bytes_reclaimed += info.size or 0

    # -- the gauge ---------------------------------------------------------------------------

    def files_per_partition(self) -> dict[str, int]:
        table = self._load()
        if table is None or table.current_snapshot() is None:
            return {}
        counts: dict[str, int] = defaultdict(int)
        for task in table.scan().plan_files():
            counts[_partition_label(table, task.file)] += 1
        return dict(sorted(counts.items()))


def _small_files(table: Table, target: int) -> dict[tuple[int, str], list[DataFile]]:
    """The current snapshot's data files below ``target`` bytes without delete files,
    per (spec, partition)."""
    out: dict[tuple[int, str], list[DataFile]] = defaultdict(list)
    for task in table.scan().plan_files():
        f = task.file
        if f.content == DataFileContent.DATA and not task.delete_files \
                and f.file_size_in_bytes < target:
            out[(f.spec_id, _partition_label(table, f))].append(f)
    return out


def _bins(files: dict[tuple[int, str], list[DataFile]], target: int,
          min_files: int) -> list[list[DataFile]]:
    """Per partition, the files smallest first, cut into bins of at most ``target`` bytes;
    the bins of at least ``min_files`` files."""
    out = []
    for group in files.values():
        if len(group) < min_files:
            continue
        current: list[DataFile] = []
        size = 0
        for f in sorted(group, key=lambda f: (f.file_size_in_bytes, f.file_path)):
            if current and size + f.file_size_in_bytes > target:
                out.append(current)
                current, size = [], 0
            current.append(f)
            size += f.file_size_in_bytes
        out.append(current)
    return [b for b in out if len(b) >= min_files]


def _partition_label(table: Table, f: DataFile) -> str:
    spec = table.metadata.specs()[f.spec_id]
    return spec.partition_to_path(f.partition, table.schema()) if spec.fields else ""


def _live_files(table: Table) -> set[str]:
    """Every file a remaining snapshot or the metadata names (as :func:`_key`s)."""
    live = {_key(table.metadata_location)}
    live.update(_key(entry.metadata_file) for entry in table.metadata.metadata_log)
    live.update(_key(s.statistics_path) for s in table.metadata.statistics)
    seen: set[str] = set()
    for snapshot in table.metadata.snapshots:
        live.add(_key(snapshot.manifest_list))
        for manifest in snapshot.manifests(table.io):
            if manifest.manifest_path in seen:
                continue
            seen.add(manifest.manifest_path)
            live.add(_key(manifest.manifest_path))
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
                live.add(_key(entry.data_file.file_path))
    return live


def _key(location: str) -> str:
    """A file's location as pyarrow's filesystems name it: the path of a ``file:`` URI,
    ``bucket/key`` of an object store's."""
    if location.startswith("file:"):
        return urlparse(location).path
    return location.split("://", 1)[1] if "://" in location else location


def _delete_quietly(table: Table, paths: Iterable[str]) -> None:
    for path in paths:
        with contextlib.suppress(Exception):
            table.io.delete(path)

