"""A Delta Lake table as an external sink: one Delta commit per batch, idempotent by source
offsets, so every Delta reader (delta-rs, pandas, Spark, DuckDB) sees each input once.

::

    sink = DeltaSink("/data/orders", Order, partition_by=("region",))
    add_delta_sink(app.topology, "orders-delta", "enrich", sink)   # or stream.to_delta(...)

The algorithm (the contract is :mod:`aiostreams.engine.external_sink`), engine ``"pyarrow"``
through ``deltalake`` (delta-rs):

* :meth:`DeltaSink.add` (event loop, at retire) buffers the record; a record at or below its
  source partition's durable offset (as last read from the table) is a replay and dropped
  (the buffer, back-pressure and committable offsets: :mod:`aiostreams.sinks.sink_batching`).
* :meth:`DeltaSink.flush` (event loop, in a commit, before offsets are committed) hands the
  buffer to the writer thread (:mod:`aiostreams.sinks.spark.spark_thread`), which opens the table's
  newest snapshot, reads each source partition's durable offset from it again
  (``transaction_version`` of :func:`~aiostreams.sinks.delta_identity.transaction_app_id`),
  drops the rows at or below it, and appends the rest as ONE Delta commit carrying, per source
  partition, the app transaction ``(app_id, highest offset written)``. The Delta commit is the
  commit point: readers see all of the batch or none of it, and nothing staged. delta-rs does
  not skip a replayed app transaction by itself, so the re-read right before the commit is
  what makes a replay a no-op; the commit is made against the snapshot that was read.
* Several writers of one table (``--workers N``: source partitions move between processes
  at rebalances, and a revoked worker may still be finishing a write). Another writer's
  commit of *other* app transactions between the check and the commit is a blind append:
  delta-rs re-bases this commit on it by itself. A commit of the *same* app transaction (a
  partition's new owner wrote it) fails Delta's conflict check ("Concurrent transaction"),
  as does a race to create the table; the sink then opens the newest snapshot, checks again
  (dropping what the other writer made durable) and commits the rest, up to
  :data:`COMMIT_ATTEMPTS` times. So a row is committed only by a commit whose snapshot had
  its partition's version below its offset, and no commit of that app transaction came in
  between: never twice. (``ParquetSink`` keeps one writer per dataset, with a lock.)
* :meth:`DeltaSink.start` opens the table if it exists and refuses, before anything is
  written: a table written for another app or source, or for another incarnation of a
  source topic (:class:`TableIdentityError`; :mod:`aiostreams.sinks.incarnations`), other
  partition columns, or a model that no longer fits its schema
  (:class:`~aiostreams.sinks.schema_evolution.IncompatibleSchemaError`, naming the field). A
  new optional field is accepted and merged into the table's schema by the next commit
  (``schema_mode="merge"``).

Invariants (asserted): those of :mod:`aiostreams.sinks.sink_batching`, and a commit's
transaction version of a source partition is past its durable offset.

Cancellation: a cancelled :meth:`flush` raises ``CancelledError`` at once; its write runs to
completion on the writer thread and the commit that awaited it fails, so no offset is
committed. Its rows stay pending until a later flush succeeds (the thread is FIFO, and a
failed write fails every later one). Failure: any error in a write leaves the sink FAILED;
restart the app: the next sink reads the durable offsets from the table.
"""

from __future__ import annotations

import enum
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable
from pydantic import BaseModel

from aiostreams.errors import ConfigError
from aiostreams.runtime.external_record import ExternalRecord
from aiostreams.sinks.delta_identity import TableIdentity, transaction_app_id
from aiostreams.sinks.delta_maintenance import DeltaMaintainer
from aiostreams.sinks.delta_table import CommitRace, open_table, record_identity, write_batch
from aiostreams.sinks.incarnations import check_incarnations
from aiostreams.sinks.maintenance import MaintenanceRunner, TableMaintenance
from aiostreams.sinks.object_store import with_s3a_conf
from aiostreams.sinks.paths import parse_table_path
from aiostreams.sinks.rows import rows_to_table
from aiostreams.sinks.schema_evolution import check_appendable
from aiostreams.sinks.sink_batching import Batcher
from aiostreams.sinks.sink_columns import TableColumns
from aiostreams.sinks.sink_state import SinkFailedError, SinkMetrics, SinkState
from aiostreams.sinks.spark.delta_spark import SparkDeltaEngine
from aiostreams.sinks.spark.session import SparkConfig, get_session
from aiostreams.sinks.spark.spark_thread import run_on_spark_thread
from aiostreams.sinks.table_sink import COMMIT_ATTEMPTS, SnapshotTableSink, Written
from aiostreams.types import TopicPartition

__all__ = ["COMMIT_ATTEMPTS", "DEFAULT_BATCH_ROWS", "DeltaSink", "DeltaStep"]

log = logging.getLogger("aiostreams.sinks")


class DeltaStep(enum.Enum):
    """The points of a write after which a crash leaves a distinct table state."""

    CHECKED = "checked"  # replays dropped against the snapshot; nothing written yet
    COMMITTED = "committed"  # the Delta commit landed; offsets not committed yet


DEFAULT_BATCH_ROWS: dict[str, int] = {"pyarrow": 50_000, "spark": 200_000}
"""Rows per write unless ``batch_rows`` says otherwise. A Spark job has a large fixed cost,
so the Spark engine's batches are larger; not as large as the Parquet sink's 500k, because
this sink holds a filling batch as the records themselves (about 2 KB each for the
benchmark's orders: 200k rows ~ 400 MB). Measured in docs/guides/spark.md."""


class DeltaSink(SnapshotTableSink):
    """Writes the values reaching it (instances of ``model``) to the Delta table at ``path``
    (shared by every writer): a local or mounted directory, as a path or ``file:`` URI, or
    an object-store prefix ``s3a://bucket/key`` (``s3://`` names the same table) reached
    with ``storage_options`` (delta-rs' S3 options: ``AWS_ENDPOINT_URL``,
    ``AWS_ALLOW_HTTP``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``;
    unset ones come from the environment). See the module docstring.

    ``partition_by``: str, int, bool or date columns. ``include``/``key_type``/
    ``metadata_prefix``: metadata columns, as for :class:`~aiostreams.sinks.ParquetSink`.
    ``batch_rows`` (default :data:`DEFAULT_BATCH_ROWS` for the engine) and
    ``batch_interval`` (seconds): a write starts once that many rows wait,
    or once the oldest has waited ``batch_interval`` less the last write's duration.
    ``sources``: the topics feeding the sink, recorded in the table's identity when it is
    created (default: the topics of the first batch). ``target_file_size``: bytes per data
    file (delta-rs' default when None). ``engine``: ``"pyarrow"`` (delta-rs) or ``"spark"``
    (Spark writes the files, delta-rs commits them: :mod:`aiostreams.sinks.spark.delta_spark`;
    ``spark`` configures the session; on ``s3a://`` its ``fs.s3a.*`` settings are derived
    from ``storage_options`` unless ``spark.conf`` sets them:
    :mod:`aiostreams.sinks.object_store`; ``hadoop-aws`` must be on Spark's classpath).
    ``maintenance``: compaction and vacuum of the table, on the writer thread between
    batches (:class:`~aiostreams.sinks.maintenance.TableMaintenance`; None: off).
    """

    _race = CommitRace

    def __init__(
        self,
        path: str | Path,
        model: type[BaseModel],
        *,
        partition_by: Sequence[str] = (),
        include: Sequence[str] = (),
        key_type: Any = str,
        metadata_prefix: str = "",
        batch_rows: int | None = None,
        batch_interval: float = 5.0,
        sources: Sequence[str] = (),
        target_file_size: int | None = None,
        engine: str = "pyarrow",
        storage_options: Mapping[str, str] | None = None,
        spark: SparkConfig | None = None,
        maintenance: TableMaintenance | None = None,
    ) -> None:
        where = parse_table_path(path)
        if where.scheme not in ("file", "s3a"):
            raise ConfigError(
                f"DeltaSink writes to a local or mounted directory (a shared one on a "
                f"cluster) or to s3a://bucket/key; got {where.given!r}: delta-rs as "
                "installed here has no HDFS support. Mount it, or write to S3")
        options = dict(storage_options or {})
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in options.items()):
            raise ConfigError("storage_options maps option names to strings "
                              "(write True as 'true')")
        if options and where.local is not None:
            raise ConfigError(f"storage_options are for object stores; {where.given!r} is a "
                              "local path")
        if engine not in ("pyarrow", "spark"):
            raise ConfigError(f"DeltaSink's engine is 'pyarrow' (delta-rs) or 'spark'; got "
                              f"{engine!r}")
        if engine == "spark" and where.local is None:
            spark = with_s3a_conf(spark, options)
        if batch_rows is None:
            batch_rows = DEFAULT_BATCH_ROWS[engine]
        self.path: Path | str = where.local if where.local is not None else where.uri
        self.storage_options = options
        self.model = model
        self.columns = TableColumns(
            model, partition_by=partition_by, include=include, key_type=key_type,
            metadata_prefix=metadata_prefix, empty_partition="Delta writes it as null")
        self.schema = self.columns.schema
        self.partition_by = self.columns.partition_by
        self.batch_rows = batch_rows
        self.batch_interval = batch_interval
        self.sources = tuple(sorted(set(sources)))
        self.target_file_size = target_file_size
        self.engine = engine
        self.spark_engine = (SparkDeltaEngine(spark, storage_options=options)
                             if engine == "spark" else None)
        self.name = ""
        self.app_id: str | None = None  # set by bind_app (the worker, before start)
        self.topic_ids: dict[str, str] = {}  # set by bind_topic_ids (the worker, too)
        self.validated_upstream = False  # set by add_delta_sink
        self.state = SinkState.CREATED
        self.metrics = SinkMetrics()
        self._batch: Batcher[list[ExternalRecord]] = Batcher(
            f"DeltaSink({str(self.path)!r})", batch_rows=batch_rows,
            batch_interval=batch_interval, chunk_rows=batch_rows, metrics=self.metrics,
            hand_off=lambda records, firsts, lasts: records)
        self._identity: TableIdentity | None = None  # owned by the writer thread
        self._failure: BaseException | None = None
        if maintenance is not None and not isinstance(maintenance, TableMaintenance):
            raise ConfigError(f"maintenance is a TableMaintenance, got {maintenance!r}")
        if maintenance is not None:
            self._maintenance = MaintenanceRunner(
                maintenance, lambda: DeltaMaintainer(str(self.path), self.storage_options,
                                                     self.app, self._after_maintenance),
                owner=repr(self))

    def __repr__(self) -> str:
        return f"DeltaSink({str(self.path)!r}, {self.model.__name__}, state={self.state.value})"

    def validate(self, value: Any, key: Any = None) -> None:
        """Raise :class:`SchemaMismatch` unless ``value`` (and ``key``) fit the table's
        schema and its string partition values are not empty. Pure, a few µs."""
        self.columns.validate(value, key)

    # -- ExternalSink ---------------------------------------------------------------------

    async def start(self) -> None:
        """Open the table when it exists and check identity, partitioning and schema (see
        the module docstring). Cancellation: the check runs to completion on the writer
        thread; the sink stays CREATED."""
        if self.state is not SinkState.CREATED:
            raise RuntimeError(f"sink {self.name!r} starts once; it is {self.state.value}")
        await run_on_spark_thread(self._open_and_check)
        self._move_to(SinkState.RUNNING)

    def _open_and_check(self) -> None:
        where = str(self.path)
        if self.spark_engine is not None:
            get_session(self.spark_engine.spark)  # seconds: once, before the first batch
        try:
            table = open_table(where, self.storage_options)
        except OSError as e:
            if isinstance(self.path, Path):
                raise
            endpoint = self.storage_options.get("AWS_ENDPOINT_URL", "AWS's default")
            detail = re.sub(r"\x1b\[[0-9;]*m", "", str(e))  # delta-rs colours its causes
            raise ConfigError(
                f"{self!r} cannot reach {where} (endpoint {endpoint}): {detail}. Check the "
                "storage_options' AWS_ENDPOINT_URL, AWS_REGION and credentials") from e
        if table is None:
            return
        identity = TableIdentity.from_description(table.metadata().description, where)
        if identity is not None:
            self._check_identity(identity, self.sources, where)
        columns = tuple(table.metadata().partition_columns)
        if columns != self.partition_by:
            raise ConfigError(f"the Delta table at {where} is partitioned by {list(columns)}; "
                              f"this sink by {list(self.partition_by)}. Use the same columns "
                              "or another path")
        check_appendable(pa.schema(table.schema().to_arrow()), self.schema.arrow_schema,
                         model=self.model.__name__, dataset=where)
        if identity is not None:  # every check passed: record the ids it lacks
            self._record_topic_ids(table, where)

    def _check_identity(self, identity: TableIdentity, sources: Iterable[str],
                        where: str) -> None:
        identity.check(self.app, sources, where)
        check_incarnations(identity.ids, self.topic_ids, table=f"the Delta table at {where}",
                           recorded_in="its description")

    def _record_topic_ids(self, table: DeltaTable, where: str) -> None:
        """Record the topic ids the table's identity lacks (a table written before ids were
        recorded) as a metadata commit; on a race, check the newer snapshot's identity
        again and retry."""
        for _ in range(COMMIT_ATTEMPTS):
            identity = TableIdentity.from_description(table.metadata().description, where)
            assert identity is not None
            self._check_identity(identity, self.sources, where)
            recorded = identity.with_topic_ids(self.topic_ids)
            if recorded == identity:
                self._identity = identity
                return
            try:
                record_identity(table, recorded)
            except CommitRace:
                self.metrics.commit_conflicts += 1
                table = open_table(where, self.storage_options) or table
                continue
            log.info("sink %r: recorded topic ids %s in the identity of %s", self.name,
                     recorded.ids, where)
            self._identity = recorded
            return
        raise SinkFailedError(f"{self!r}: recording the topic ids in {where}'s identity lost "
                              f"{COMMIT_ATTEMPTS} races with other writers; restart the app")

    # -- the write, on the writer thread ---------------------------------------------------

    def _check_and_commit(self, records: list[ExternalRecord]) -> Written:
        where = str(self.path)
        table = open_table(where, self.storage_options)  # the snapshot this commit is on
        sources = sorted({r.source for r in records})
        durable: dict[TopicPartition, int] = {}
        if table is not None:
            if self._identity is None:
                self._identity = TableIdentity.from_description(
                    table.metadata().description, where)
            for source in sources:
                version = table.transaction_version(transaction_app_id(self.app, source))
                if version is not None:
                    durable[source] = version
        rows = [r for r in records if r.offset > durable.get(r.source, -1)]
        if self._identity is not None:
            self._check_identity(self._identity, {r.source.topic for r in rows}, where)
        identity = self._identity or TableIdentity.of(
            self.app, self.sources or {r.source.topic for r in rows}, self.topic_ids)
        self._after(DeltaStep.CHECKED)
        if rows:
            lasts: dict[TopicPartition, int] = {}
            for r in rows:
                lasts[r.source] = r.offset  # per source, offsets never decrease
            for source, last in lasts.items():
                assert last > durable.get(source, -1), f"{source}: {last} is not past durable"
            data = rows_to_table(
                rows, self.schema, sink=self.name, table_kind="Delta table's schema",
                attach="add_delta_sink",
                validate=None if self.validated_upstream else self.validate)
            transactions = {transaction_app_id(self.app, s): o for s, o in lasts.items()}
            if self.spark_engine is not None:
                self.spark_engine.commit(table, self.path, data,
                                         partition_by=self.partition_by, identity=identity,
                                         transactions=transactions)
            else:
                write_batch(table if table is not None else where, data,
                            partition_by=self.partition_by, identity=identity,
                            transactions=transactions, target_file_size=self.target_file_size,
                            storage_options=self.storage_options)
            self._identity = identity
            durable.update(lasts)
            self._after(DeltaStep.COMMITTED)
        return Written(len(rows), len(records) - len(rows), 0, durable)

    def _after(self, step: DeltaStep) -> None:
        """Called on the writer thread after each step of a write; a no-op. Fault-injection
        tests override it to raise or to kill the process, as a crash there would."""
