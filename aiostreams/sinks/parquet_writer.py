"""Writing one batch of rows as Parquet files: complete in a staging directory first, then
renamed into the dataset. Blocking; runs on the Spark thread.

Both engines produce the same layout: Hive-style partition directories (``col=value``, a
null value as ``__HIVE_DEFAULT_PARTITION__``), the partition columns stored in the path and
not in the files, one file per partition value per batch.

* ``engine="spark"``: ``spark.createDataFrame(arrow_table)`` (the Arrow path, no pandas),
  ``coalesce(tasks)``, ``write.partitionBy(...).option("compression", ...).parquet(staging)``.
  The table is first sorted by the partition columns in Arrow (a stable sort, milliseconds):
  Spark sorts each write task's rows by them anyway, and a sorted input is its cheap case.
  A task carries its rows inside its own serialized form, which a cluster caps at
  ``spark.rpc.message.maxSize`` (128 MiB by default; ``local`` masters do not check): so a
  batch is split into the fewest tasks of at most a quarter of that each
  (:func:`split_plan`), one file per task (and partition value). A batch under the budget
  is one task and one file, as before;
* ``engine="pyarrow"``: ``pyarrow.parquet.write_table`` (or ``pyarrow.dataset.write_dataset``
  when partitioned), for when a JVM is not wanted.

Each staged file is fsynced before it is renamed; the directories that gained entries are
fsynced after. A rename within one filesystem is atomic, so a reader lists either no file or
a complete one.

After the engine returns, the driver counts the rows of the staged files it sees (their
Parquet footers) and raises :class:`UnreachableFilesError` unless they are exactly the rows
handed in. On a cluster whose executors write to a disk the driver does not see (a worker
on another host, a path that is not shared), Spark's job succeeds and the driver finds no
file: without this check the batch would be committed with its rows nowhere.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from aiostreams.errors import AiostreamsError
from aiostreams.sinks.commit_log import DataFile, fsync_path
from aiostreams.sinks.spark.session import SparkConfig, get_session

__all__ = ["COMPRESSIONS", "Engine", "UnreachableFilesError", "move_into_dataset",
           "write_staged", "write_staged_to_store"]

Engine = Literal["spark", "pyarrow"]
COMPRESSIONS = ("snappy", "zstd", "gzip", "none")
"""Codecs Spark and pyarrow both write and read back (Spark's ``lz4`` is not pyarrow's)."""

_EXTENSION = {"snappy": ".snappy", "zstd": ".zstd", "gzip": ".gz", "none": ""}
_MAX_MESSAGE_CONF = "spark.rpc.message.maxSize"  # MiB
_ARROW_BATCH_CONF = "spark.sql.execution.arrow.maxRecordsPerBatch"

TASK_BUDGET_FRACTION = 4
"""A write task carries at most ``spark.rpc.message.maxSize / TASK_BUDGET_FRACTION`` bytes
of Arrow data (see :func:`task_byte_budget`)."""


class UnreachableFilesError(AiostreamsError):
    """The engine reported a successful write, but the files the driver finds at the path do
    not hold the rows handed in: the executors wrote where the driver cannot read."""


def write_staged(table: pa.Table, staging: Path, *, engine: Engine,
                 partition_by: Sequence[str], compression: str,
                 spark: SparkConfig | None = None) -> list[Path]:
    """Write ``table`` under ``staging`` (which must not exist) and return the data files,
    fsynced. Raises what the engine raised; ``staging`` may then hold partial files."""
    if engine == "spark":
        _write_with_spark(table, staging.as_uri(), partition_by, compression, spark)
    else:
        _write_with_pyarrow(table, staging, partition_by, compression)
    files = sorted(p for p in staging.rglob("*.parquet")
                   if not p.name.startswith((".", "_")))
    found = sum(pq.ParquetFile(path).metadata.num_rows for path in files)
    _check_rows_visible(found, len(files), str(staging), table.num_rows, engine)
    for path in files:
        fsync_path(path)
    return files


def write_staged_to_store(table: pa.Table, staging_uri: str, fs: pafs.FileSystem,
                          fs_dir: str, *, partition_by: Sequence[str], compression: str,
                          spark: SparkConfig | None = None
                          ) -> list[tuple[pafs.FileInfo, pq.FileMetaData]]:
    """Write ``table`` with Spark under ``staging_uri`` (an object-store URI, which must not
    exist; ``fs_dir`` is the same directory as ``fs`` names it) and return each data file
    with its footer, as the driver lists and reads them through ``fs``. An object store has
    no rename and no fsync: a file is there, complete, once Spark's job committed it.
    Raises :class:`UnreachableFilesError` unless the files hold the table's rows."""
    _write_with_spark(table, staging_uri, partition_by, compression, spark)
    infos = sorted((info for info in fs.get_file_info(pafs.FileSelector(
                        fs_dir, allow_not_found=True, recursive=True))
                    if info.type == pafs.FileType.File and info.base_name.endswith(".parquet")
                    and not info.base_name.startswith((".", "_"))
                    and "/_" not in info.path[len(fs_dir):]),
                   key=lambda info: info.path)
    found = []
    for info in infos:
        with fs.open_input_file(info.path) as f:
            found.append((info, pq.ParquetFile(f).metadata))
    _check_rows_visible(sum(meta.num_rows for _, meta in found), len(found), staging_uri,
                        table.num_rows, "spark")
    return found


def _check_rows_visible(found: int, files: int, staging: str, expected: int,
                        engine: Engine) -> None:
    """Raise :class:`UnreachableFilesError` unless the ``files`` the driver found hold
    ``expected`` rows (``found``)."""
    if found == expected:
        return
    raise UnreachableFilesError(
        f"the {engine} engine reported writing {expected} row(s) under {staging}, but the "
        f"driver finds {found} row(s) in {files} file(s) there. The executors wrote "
        "to a disk the driver does not see: the table path must be reachable by driver and "
        "executors alike (a shared path mounted at the same place on every host, hdfs://, "
        "or s3a://). Nothing of this batch was committed; fix the path and restart the app")


def task_byte_budget(max_message_bytes: int) -> int:
    """Arrow bytes one write task may carry: a :data:`TASK_BUDGET_FRACTION` of Spark's
    ``spark.rpc.message.maxSize``, which leaves room for a task that gets one Arrow batch
    more than its share and for the task's own serialized fields."""
    return max(1, max_message_bytes // TASK_BUDGET_FRACTION)


def split_plan(num_rows: int, nbytes: int, budget: int) -> tuple[int, int]:
    """``(tasks, rows_per_arrow_batch)`` for a table of ``num_rows`` rows and ``nbytes``
    Arrow bytes: the fewest tasks whose even share of the bytes is within ``budget``, and
    Arrow batches (Spark's partitions before the coalesce) of at most one task's rows.

    Invariants: ``tasks >= 1``; ``tasks * budget >= nbytes``; ``rows_per_arrow_batch >= 1``
    and ``rows_per_arrow_batch * tasks >= num_rows``."""
    tasks = max(1, -(-nbytes // budget))
    rows = max(1, -(-num_rows // tasks))
    return tasks, rows


def _write_with_spark(table: pa.Table, staging_uri: str, partition_by: Sequence[str],
                      compression: str, config: SparkConfig | None) -> None:
    spark = get_session(config)
    if partition_by:
        table = table.sort_by([(column, "ascending") for column in partition_by])
    max_message = int(spark.sparkContext.getConf().get(_MAX_MESSAGE_CONF, "128")) * 2**20
    tasks, rows_per_batch = split_plan(table.num_rows, table.nbytes,
                                       task_byte_budget(max_message))
    with _arrow_batch_rows_at_most(spark, rows_per_batch):
        frame = spark.createDataFrame(table)  # one Spark partition per Arrow batch
    # coalesce groups neighbouring partitions, so with partition_by sorted a partition
    # value's rows stay in as few tasks (files) as the budget allows
    writer = frame.coalesce(tasks).write.mode("errorifexists")
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    writer.option("compression", compression).parquet(staging_uri)


@contextlib.contextmanager
def _arrow_batch_rows_at_most(spark: Any, rows: int) -> Iterator[None]:
    """Lower ``spark.sql.execution.arrow.maxRecordsPerBatch`` (how ``createDataFrame``
    slices an Arrow table) to ``rows`` while the block runs; restore it after. Safe: only the
    Spark thread uses the session."""
    before = spark.conf.get(_ARROW_BATCH_CONF)
    if int(before) <= rows:
        yield
        return
    spark.conf.set(_ARROW_BATCH_CONF, str(rows))
    try:
        yield
    finally:
        spark.conf.set(_ARROW_BATCH_CONF, before)


def _write_with_pyarrow(table: pa.Table, staging: Path, partition_by: Sequence[str],
                        compression: str) -> None:
    codec = None if compression == "none" else compression
    if not partition_by:
        staging.mkdir(parents=True)
        import pyarrow.parquet as pq

        pq.write_table(table, staging / "part-00000.parquet", compression=codec or "none")
        return
    import pyarrow.dataset as ds

    ds.write_dataset(
        table, staging, format="parquet", partitioning=list(partition_by),
        partitioning_flavor="hive", basename_template="part-{i}.parquet",
        file_options=ds.ParquetFileFormat().make_write_options(compression=codec),
        existing_data_behavior="error", preserve_order=True, use_threads=False,
        max_partitions=1_000_000)


def move_into_dataset(files: Sequence[Path], staging: Path, dataset: Path, *, batch: int,
                      token: str, compression: str) -> list[DataFile]:
    """Rename the staged ``files`` into ``dataset`` (same relative directories) under names
    no other batch uses, then fsync the directories that changed."""
    moved: list[DataFile] = []
    touched: set[Path] = set()
    for n, path in enumerate(files):
        rel_dir = path.parent.relative_to(staging)
        target_dir = dataset / rel_dir
        if not target_dir.exists():
            target_dir.mkdir(parents=True, exist_ok=True)
            parent = target_dir
            while parent != dataset:  # new directories are entries of their parents
                parent = parent.parent
                touched.add(parent)
        name = f"part-{batch:08d}-{token}-{n:05d}{_EXTENSION[compression]}.parquet"
        size = path.stat().st_size
        os.rename(path, target_dir / name)
        touched.add(target_dir)
        moved.append(DataFile((rel_dir / name).as_posix(), size))
    for directory in sorted(touched, key=lambda p: len(p.parts), reverse=True):
        fsync_path(directory)
    return moved


