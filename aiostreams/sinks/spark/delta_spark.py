"""The Spark engine of the Delta sink (``DeltaSink(engine="spark")``): Spark's executors
write a batch's Parquet files into the table's directory, and the driver commits them with
delta-rs in ONE Delta commit made on the very snapshot the sink's replay check read.

Why not delta-spark's own writer: its idempotent write (``txnAppId``/``txnVersion``) skips
a write whose version is not above the app id's, but not a partly replayed batch, so the
sink must drop the rows at or below the partition's version itself, on a snapshot it reads
first; Spark's write then starts its own transaction on a *newer* snapshot. A writer of the
same partition (a zombie after a rebalance) committing between the two is in that newer
snapshot, so Delta's conflict check never sees it and its rows land twice. No DataFrame
writer option makes a Delta write start from a given snapshot. Here the check and the
commit share one snapshot (``DeltaTable.create_write_transaction`` on the table object the
check read), and a commit carrying an app transaction that another commit set after that
snapshot fails delta-rs' conflict check ("Concurrent transaction"): the sink then checks
again on the newest snapshot and writes what is still above the version, exactly as the
delta-rs engine does. Both engines write the same app transactions, so they continue each
other's tables.

The steps of :meth:`SparkDeltaEngine.commit` (blocking; on the writer thread):

1. A table that does not exist yet is created (schema, partition columns, the sink's
   identity in its description) and the commit is built on its version 0; a table created
   meanwhile by another writer is a :class:`~aiostreams.sinks.delta_table.CommitRace`.
2. A model with fields the table lacks (new optional ones; :mod:`schema_evolution` refused
   the rest at start) first merges them into the table's schema in a commit of its own, with
   no rows, then raises ``CommitRace`` so the batch is checked again on that newer snapshot.
3. Spark writes the batch under ``<table>/aiostreams-spark-<uuid>/`` (Hive-style partition
   directories below it), split into tasks under ``spark.rpc.message.maxSize``
   (:func:`~aiostreams.sinks.parquet_writer.write_staged`); the driver counts the rows in the
   files it sees and raises ``UnreachableFilesError`` unless they are all the batch's, so a
   batch with rows and no files never commits.
4. :meth:`SparkDeltaEngine.files_written` (a no-op hook for fault-injection tests).
5. One commit: an ``add`` per file (its path, partition values from its directory,
   size, the stats Delta readers skip files by, read from its footer by
   :mod:`~aiostreams.sinks.file_stats`) and the batch's app transactions. A lost race
   removes the batch's directory (no commit lists its files) and raises ``CommitRace``.

Files of a write that crashed before its commit are in no commit: no Delta reader sees them;
``VACUUM`` in Spark, or delta-rs' ``vacuum(full=True)``, deletes them once older than the
retention period (delta-rs' default vacuum only deletes files that commits removed).

Invariants: every ``add`` of a commit names a file under this batch's directory whose footer
holds rows; the adds' rows sum to the batch's rows (asserted); a commit is only made on the
snapshot passed in (or the version 0 this engine created).
"""

from __future__ import annotations

import functools
import json
import logging
import shutil
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError
from deltalake.transaction import AddAction

from aiostreams.sinks.delta_identity import TableIdentity
from aiostreams.sinks.delta_table import WRITER, CommitRace
from aiostreams.sinks.file_stats import delta_stats
from aiostreams.sinks.object_store import s3_filesystem, s3_key
from aiostreams.sinks.parquet_writer import write_staged, write_staged_to_store
from aiostreams.sinks.spark.session import SparkConfig

__all__ = ["BATCH_DIR_PREFIX", "SparkDeltaEngine", "missing_fields"]

BATCH_DIR_PREFIX = "aiostreams-spark-"
"""Each batch's files go under ``<table>/<prefix><uuid>/``: visible to ``VACUUM`` (not a
hidden ``_``/``.`` directory), and listed by the driver without walking the table."""

_NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
log = logging.getLogger(__name__)


def missing_fields(table: pa.Schema, wanted: pa.Schema) -> list[str]:
    """Dotted names of the fields of ``wanted`` (recursively inside structs) that
    ``table`` lacks."""
    out: list[str] = []
    _missing(list(table), list(wanted), "", out)
    return out


def _missing(have: Sequence[pa.Field], want: Sequence[pa.Field], path: str,
             out: list[str]) -> None:
    found = {f.name: f for f in have}
    for field in want:
        old = found.get(field.name)
        if old is None:
            out.append(path + field.name)
        elif pa.types.is_struct(old.type) and pa.types.is_struct(field.type):
            _missing(list(old.type), list(field.type), f"{path}{field.name}.", out)


def partition_values(relative_dir: Path, partition_by: Sequence[str]) -> dict[str, str | None]:
    """The Delta ``partitionValues`` of a file in ``relative_dir`` (the Hive-style
    directories Spark made below the batch directory: ``col=escaped value``, a null as
    ``__HIVE_DEFAULT_PARTITION__``). Raises ``ValueError`` unless they name exactly
    ``partition_by``, in order."""
    values: dict[str, str | None] = {}
    for part in relative_dir.parts:
        column, sep, escaped = part.partition("=")
        if not sep:
            raise ValueError(f"{part!r} in {relative_dir} is not a partition directory")
        values[column] = None if escaped == _NULL_PARTITION else unquote(escaped)
    if tuple(values) != tuple(partition_by):
        raise ValueError(f"the files under {relative_dir} are partitioned by {list(values)}, "
                         f"the table by {list(partition_by)}")
    return values


class SparkDeltaEngine:
    """Writes batches to Delta tables with Spark (files) and delta-rs (the commit); see the
    module docstring. ``spark``: the session's config (None: the process's session, or
    defaults); ``compression``: the Parquet codec."""

    def __init__(self, spark: SparkConfig | None = None, *, compression: str = "snappy",
                 storage_options: Mapping[str, str] | None = None) -> None:
        self.spark = spark
        self.compression = compression
        self.storage_options = dict(storage_options or {})

    def commit(self, table: DeltaTable | None, root: Path | str, data: pa.Table, *,
               partition_by: Sequence[str], identity: TableIdentity,
               transactions: Mapping[str, int]) -> None:
        """Append ``data`` as one Delta commit carrying ``transactions`` (app id → version),
        made on ``table``, the snapshot of the table at ``root`` (a local directory or an
        ``s3a://`` URI) whose versions the caller checked (None: the caller found no table;
        it is created). Raises :class:`CommitRace` when the caller must check again on the
        newest snapshot; nothing of this batch is then committed."""
        assert data.num_rows > 0, "a commit holds rows"
        if table is None:
            table = self._create(str(root), data.schema, partition_by, identity)
        new = missing_fields(pa.schema(table.schema().to_arrow()), data.schema)
        if new:
            self._merge_schema(str(root), data.schema, partition_by)
            raise CommitRace(f"this sink added {new} to the table's schema; checking again "
                             "on the snapshot that has them")
        name = f"{BATCH_DIR_PREFIX}{uuid.uuid4().hex}"
        if isinstance(root, Path):
            batch_dir = root / name
            files = write_staged(data, batch_dir, engine="spark", partition_by=partition_by,
                                 compression=self.compression, spark=self.spark)
            self.files_written(batch_dir, files)
            actions = [self._add(root, batch_dir, f, partition_by) for f in files]
            forget = functools.partial(shutil.rmtree, batch_dir, ignore_errors=True)
        else:
            batch_uri = f"{root.rstrip('/')}/{name}"
            fs, fs_dir = s3_filesystem(self.storage_options), s3_key(batch_uri)
            found = write_staged_to_store(data, batch_uri, fs, fs_dir,
                                          partition_by=partition_by,
                                          compression=self.compression, spark=self.spark)
            self.files_written(batch_uri, [info.path for info, _ in found])
            actions = [self._add_stored(name, fs_dir, info, meta, partition_by)
                       for info, meta in found]
            forget = functools.partial(_delete_dir, fs, fs_dir)
        assert sum(json.loads(a.stats)["numRecords"] for a in actions) == data.num_rows
        try:
            table.create_write_transaction(
                list(actions), "append", table.schema(), list(partition_by) or None,
                commit_properties=CommitProperties(
                    app_transactions=[Transaction(app_id, version)
                                      for app_id, version in sorted(transactions.items())],
                    custom_metadata={"aiostreams.app": identity.app,
                                     "aiostreams.writer": WRITER,
                                     "aiostreams.engine": "spark"}))
        except CommitFailedError as e:
            forget()  # in no commit: the race was lost
            raise CommitRace(str(e)) from e

    def files_written(self, batch_dir: Path | str, files: Sequence[Path | str]) -> None:
        """Called after Spark wrote a batch's files and before their commit; a no-op.
        ``batch_dir``: a local directory or an ``s3a://`` URI (``files`` are then
        ``bucket/key`` paths). Tests override it to commit as another writer, or to crash,
        at that point."""

    def _create(self, where: str, schema: pa.Schema, partition_by: Sequence[str],
                identity: TableIdentity) -> DeltaTable:
        options = self.storage_options or None
        try:
            DeltaTable.create(where, schema, mode="error", partition_by=list(partition_by)
                              or None, description=identity.to_description(),
                              storage_options=options)
        except DeltaError as e:
            if DeltaTable.is_deltatable(where, storage_options=options):
                raise CommitRace(f"the table was created by another writer meanwhile "
                                 f"({e})") from e
            raise
        # what the caller's check saw: no table
        return DeltaTable(where, version=0, storage_options=options)

    def _merge_schema(self, where: str, schema: pa.Schema, partition_by: Sequence[str]
                      ) -> None:
        try:
            write_deltalake(where, schema.empty_table(), mode="append",
                            schema_mode="merge", partition_by=list(partition_by) or None,
                            storage_options=self.storage_options or None,
                            commit_properties=CommitProperties(
                                custom_metadata={"aiostreams.writer": WRITER}))
        except CommitFailedError as e:
            raise CommitRace(f"merging the schema lost a race ({e})") from e

    @staticmethod
    def _add(root: Path, batch_dir: Path, file: Path, partition_by: Sequence[str]
             ) -> AddAction:
        stat = file.stat()
        stats = delta_stats(pq.ParquetFile(file).metadata)
        return AddAction(
            path=file.relative_to(root).as_posix(),  # delta-rs URI-encodes it in the log
            size=stat.st_size,
            partition_values=partition_values(file.parent.relative_to(batch_dir),
                                              partition_by),
            modification_time=stat.st_mtime_ns // 1_000_000,
            data_change=True,
            stats=stats)

    @staticmethod
    def _add_stored(name: str, fs_dir: str, info: pafs.FileInfo, meta: pq.FileMetaData,
                    partition_by: Sequence[str]) -> AddAction:
        """The ``add`` of a file of the batch directory ``name`` (``fs_dir`` in the store)."""
        assert info.path.startswith(fs_dir + "/"), (info.path, fs_dir)
        relative = PurePosixPath(info.path[len(fs_dir) + 1:])
        mtime = info.mtime_ns
        assert info.size is not None and mtime is not None, info
        return AddAction(
            path=f"{name}/{relative.as_posix()}",
            size=info.size,
            partition_values=partition_values(Path(relative.parent), partition_by),
            modification_time=mtime // 1_000_000,
            data_change=True,
            stats=delta_stats(meta))


def _delete_dir(fs: pafs.FileSystem, fs_dir: str) -> None:
    """Delete a batch directory no commit lists; a failure leaves files no reader sees
    (vacuum deletes them), so it is logged, not raised over the lost race."""
    try:
        fs.delete_dir(fs_dir)
    except OSError as e:
        log.warning("could not delete %s, which no commit lists (%s); VACUUM deletes it", fs_dir,
                    e)
