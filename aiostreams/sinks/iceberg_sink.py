"""An Apache Iceberg table as an external sink: one Iceberg snapshot per batch, idempotent by
source offsets, so every Iceberg reader (pyiceberg, DuckDB, pandas, Spark) sees each input
once.

::

    sink = IcebergSink("lake.orders", Order, warehouse="/data/lake",
                       partition_by=("region", "day(placed_at)"))
    add_iceberg_sink(app.topology, "orders-iceberg", "enrich", sink)  # or stream.to_iceberg

The catalog is pyiceberg's SQL catalog on SQLite (``<warehouse>/catalog.db``) unless
``catalog`` gives any pyiceberg :class:`~pyiceberg.catalog.Catalog` (REST, Glue, Hive, ...).

The algorithm (the contract is :mod:`aiostreams.runtime.sink_contract`; buffering, back-pressure
and committable offsets are :mod:`aiostreams.sinks.sink_batching`, as for the Delta sink):

* :meth:`IcebergSink.start` opens the table if it exists and refuses, before anything is
  written, a table of another app, source or topic incarnation
  (:class:`~aiostreams.sinks.delta_identity.TableIdentityError`), another partitioning, or
  a model that no longer fits the table's schema; then it reads the durable offsets
  (:func:`~aiostreams.sinks.iceberg_table.durable_offsets`), so :meth:`add` drops replays.
* :meth:`IcebergSink.flush` hands the buffer to the writer thread, which loads the table's
  newest metadata, reads the durable offsets from it again, drops the rows at or below them
  and appends the rest as ONE snapshot whose summary records every durable offset of the
  app after it. The catalog's atomic swap is the commit point: readers see all of the batch
  or none of it, never a file of a write that did not commit.
* Several writers of one table (``--workers N``): a commit is accepted only if ``main``
  still points at the snapshot its offsets were checked on (no re-basing: see
  :mod:`aiostreams.sinks.iceberg_table`). A commit that lost the race checks again on the
  newest snapshot (dropping what the other writer made durable) and appends the rest, up to
  :data:`COMMIT_ATTEMPTS` times. So a row is committed only by a snapshot whose parent had
  its partition's durable offset below the row's: never twice.

Invariants (asserted): those of :mod:`aiostreams.sinks.sink_batching`; per source partition,
a snapshot's recorded offset is past its parent's and never below it for other partitions.

Cancellation: a cancelled :meth:`flush` raises ``CancelledError`` at once; its write runs to
completion on the writer thread and the commit that awaited it fails, so no offset is
committed. Failure: any error in a write leaves the sink FAILED; restart the app: the next
sink reads the durable offsets from the table.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
from pydantic import BaseModel
from pyiceberg.catalog import Catalog
from pyiceberg.table import Table

from aiostreams.errors import ConfigError
from aiostreams.runtime.external_record import ExternalRecord
from aiostreams.sinks.attach import add_validated_sink
from aiostreams.sinks.delta_identity import TableIdentity
from aiostreams.sinks.delta_table import WRITER
from aiostreams.sinks.iceberg_maintenance import IcebergMaintainer
from aiostreams.sinks.iceberg_table import (
    IcebergCommitRace,
    Partitioning,
    append_batch,
    create_table,
    default_catalog,
    durable_offsets,
    open_table,
    parse_identifier,
    record_identity,
    table_identity,
    table_partitioning,
)
from aiostreams.sinks.incarnations import check_incarnations
from aiostreams.sinks.maintenance import MaintenanceRunner, TableMaintenance
from aiostreams.sinks.rows import rows_to_table
from aiostreams.sinks.schema_evolution import check_appendable
from aiostreams.sinks.sink_batching import Batcher
from aiostreams.sinks.sink_columns import TableColumns
from aiostreams.sinks.sink_state import SinkFailedError, SinkMetrics, SinkState
from aiostreams.sinks.spark.spark_thread import run_on_spark_thread
from aiostreams.sinks.table_sink import COMMIT_ATTEMPTS, SnapshotTableSink, Written
from aiostreams.topology.topology import Topology
from aiostreams.types import TopicPartition

__all__ = ["COMMIT_ATTEMPTS", "IcebergSink", "IcebergStep", "add_iceberg_sink"]

log = logging.getLogger("aiostreams.sinks")


class IcebergStep(enum.Enum):
    """The points of a write after which a crash leaves a distinct table state."""

    CHECKED = "checked"  # replays dropped against the snapshot; nothing written yet
    FILES_WRITTEN = "files-written"  # data files and manifests written, not committed
    COMMITTED = "committed"  # the snapshot landed; offsets not committed yet


class IcebergSink(SnapshotTableSink):
    """Writes the values reaching it (instances of ``model``) to the Iceberg table
    ``table`` (``"namespace.table"``), shared by every writer. See the module docstring.

    ``catalog``: a pyiceberg catalog; else ``warehouse`` (a directory) for the default SQL
    catalog on SQLite. ``partition_by``: identity columns (str, int, bool, date) and
    ``year``/``month``/``day``/``hour`` of a date or timestamp column, as ``"region"`` and
    ``"day(placed_at)"``. ``include``/``key_type``/``metadata_prefix``: metadata columns,
    as for :class:`~aiostreams.sinks.ParquetSink`. ``batch_rows`` and ``batch_interval``
    (seconds): as for :class:`~aiostreams.sinks.DeltaSink`. ``sources``: the topics feeding
    the sink, recorded in the table's identity when it is created (default: the topics of
    the first batch). ``maintenance``: compaction and vacuum of the table, on the writer
    thread between batches (:class:`~aiostreams.sinks.maintenance.TableMaintenance`;
    None: off).
    """

    _race = IcebergCommitRace

    def __init__(
        self,
        table: str,
        model: type[BaseModel],
        *,
        catalog: Catalog | None = None,
        warehouse: str | Path | None = None,
        partition_by: Sequence[str] = (),
        include: Sequence[str] = (),
        key_type: Any = str,
        metadata_prefix: str = "",
        batch_rows: int = 50_000,
        batch_interval: float = 5.0,
        sources: Sequence[str] = (),
        maintenance: TableMaintenance | None = None,
    ) -> None:
        parse_identifier(table)
        if (catalog is None) == (warehouse is None):
            raise ConfigError("IcebergSink needs a catalog (any pyiceberg Catalog) or a "
                              "warehouse directory (for the default SQL catalog on SQLite), "
                              "not both")
        if catalog is not None and not isinstance(catalog, Catalog):
            raise ConfigError(f"catalog must be a pyiceberg Catalog, got {catalog!r}")
        self.table = table
        self.path = table  # what the validation step names in its errors
        self.warehouse = None if warehouse is None else Path(warehouse)
        self._catalog = catalog
        self.model = model
        self.columns = TableColumns(
            model, partition_by=(), include=include, key_type=key_type,
            metadata_prefix=metadata_prefix, empty_partition="")
        self.schema = self.columns.schema
        self.partitioning = tuple(Partitioning.parse(p, self.schema.arrow_schema)
                                  for p in partition_by)
        if len({p.name for p in self.partitioning}) != len(self.partitioning):
            raise ConfigError(f"partition_by names a field twice: {list(partition_by)}")
        self.batch_rows = batch_rows
        self.batch_interval = batch_interval
        self.sources = tuple(sorted(set(sources)))
        self.name = ""
        self.app_id: str | None = None  # set by bind_app (the worker, before start)
        self.topic_ids: dict[str, str] = {}  # set by bind_topic_ids (the worker, too)
        self.validated_upstream = False  # set by add_iceberg_sink
        self.state = SinkState.CREATED
        self.metrics = SinkMetrics()
        self._batch: Batcher[list[ExternalRecord]] = Batcher(
            f"IcebergSink({table!r})", batch_rows=batch_rows, batch_interval=batch_interval,
            chunk_rows=batch_rows, metrics=self.metrics,
            hand_off=lambda records, firsts, lasts: records)
        self._identity: TableIdentity | None = None  # owned by the writer thread
        self._failure: BaseException | None = None
        if maintenance is not None and not isinstance(maintenance, TableMaintenance):
            raise ConfigError(f"maintenance is a TableMaintenance, got {maintenance!r}")
        if maintenance is not None:
            self._maintenance = MaintenanceRunner(
                maintenance,
                lambda: IcebergMaintainer(self.load, self.app, self._after_maintenance),
                owner=repr(self))

    def __repr__(self) -> str:
        return f"IcebergSink({self.table!r}, {self.model.__name__}, state={self.state.value})"

    @property
    def catalog(self) -> Catalog:
        """The catalog (the default one is opened on first use, on the writer thread)."""
        if self._catalog is None:
            assert self.warehouse is not None
            self._catalog = default_catalog(self.warehouse)
        return self._catalog

    def load(self) -> Table | None:
        """The table's newest metadata (None before it exists). Blocking."""
        return open_table(self.catalog, self.table)

    def validate(self, value: Any, key: Any = None) -> None:
        """Raise :class:`SchemaMismatch` unless ``value`` (and ``key``) fit the table's
        schema. Pure, a few µs."""
        self.columns.validate(value, key)

    # -- ExternalSink ---------------------------------------------------------------------

    async def start(self) -> None:
        """Open the table when it exists, check identity, partitioning and schema, and read
        the durable offsets. Cancellation: the check runs to completion on the writer
        thread; the sink stays CREATED."""
        if self.state is not SinkState.CREATED:
            raise RuntimeError(f"sink {self.name!r} starts once; it is {self.state.value}")
        durable = await run_on_spark_thread(self._open_and_check)
        for source, offset in durable.items():
            self._batch.advance(source, offset)
        self._move_to(SinkState.RUNNING)

    def _open_and_check(self) -> dict[TopicPartition, int]:
        table = self.load()
        if table is None:
            return {}
        identity = table_identity(table, self.table)
        if identity is not None:
            self._check_identity(identity, self.sources)
        found = table_partitioning(table)
        if found != self.partitioning:
            raise ConfigError(
                f"the Iceberg table {self.table} is partitioned by "
                f"{[f'{p.transform}({p.column})' for p in found]}; this sink by "
                f"{[f'{p.transform}({p.column})' for p in self.partitioning]}. Use the same "
                "partitioning or another table")
        check_appendable(table.schema().as_arrow(), self.schema.arrow_schema,
                         model=self.model.__name__, dataset=self.table)
        if identity is not None:
            table = self._record_topic_ids(table)
        return durable_offsets(table, self.app)

    def _check_identity(self, identity: TableIdentity, sources: Iterable[str]) -> None:
        identity.check(self.app, sources, self.table, kind="the Iceberg table")
        check_incarnations(identity.ids, self.topic_ids, table=f"the Iceberg table {self.table}",
                           recorded_in="its aiostreams.identity property")

    def _record_topic_ids(self, table: Table) -> Table:
        """Record the topic ids the identity lacks (on a race, check the newer metadata's
        identity again and retry)."""
        for _ in range(COMMIT_ATTEMPTS):
            identity = table_identity(table, self.table)
            assert identity is not None
            self._check_identity(identity, self.sources)
            recorded = identity.with_topic_ids(self.topic_ids)
            self._identity = recorded
            if recorded == identity:
                return table
            try:
                record_identity(table, recorded)
            except IcebergCommitRace:
                self.metrics.commit_conflicts += 1
                table = self.load() or table
                continue
            log.info("sink %r: recorded topic ids %s in the identity of %s", self.name,
                     recorded.ids, self.table)
            return self.load() or table
        raise SinkFailedError(f"{self!r}: recording the topic ids lost {COMMIT_ATTEMPTS} races "
                              "with other writers; restart the app")

    # -- the write, on the writer thread ---------------------------------------------------

    def _check_and_commit(self, records: list[ExternalRecord]) -> Written:
        table = self.load()  # the metadata this commit is built on
        durable: dict[TopicPartition, int] = {}
        if table is not None:
            if self._identity is None:
                self._identity = table_identity(table, self.table)
            durable = durable_offsets(table, self.app)
        rows = [r for r in records if r.offset > durable.get(r.source, -1)]
        if self._identity is not None:
            self._check_identity(self._identity, {r.source.topic for r in rows})
        identity = self._identity or TableIdentity.of(
            self.app, self.sources or {r.source.topic for r in records}, self.topic_ids)
        self._after(IcebergStep.CHECKED)
        files = 0
        if rows:
            lasts: dict[TopicPartition, int] = {}
            for r in rows:
                lasts[r.source] = r.offset  # per source, offsets never decrease
            for source, last in lasts.items():
                assert last > durable.get(source, -1), f"{source}: {last} is not past durable"
            data = rows_to_table(
                rows, self.schema, sink=self.name, table_kind="Iceberg table's schema",
                attach="iceberg_sink.add_iceberg_sink",
                validate=None if self.validated_upstream else self.validate)
            if table is None:  # (created by another writer meanwhile: IcebergCommitRace)
                table = create_table(self.catalog, self.table, self.schema.arrow_schema,
                                     self.partitioning, identity)
                self._identity = identity
            after = {**durable, **lasts}
            files = append_batch(table, _to_table_schema(data, table), app=self.app,
                                 writer=WRITER, offsets=after,
                                 files_written=lambda: self._after(IcebergStep.FILES_WRITTEN))
            durable = after
            self._after(IcebergStep.COMMITTED)
        return Written(len(rows), len(records) - len(rows), files,
                        {s: o for s, o in durable.items() if s in {r.source for r in records}})

    def _after(self, step: IcebergStep) -> None:
        """Called on the writer thread after each step of a write; a no-op. Fault-injection
        tests override it to raise or to kill the process, as a crash there would."""


def _to_table_schema(data: pa.Table, table: Table) -> pa.Table:
    """``data`` as the table expects it: same columns; pyiceberg matches by name, so only
    the order of the table's own columns matters, and extra (new) columns go last."""
    names = [f.name for f in table.schema().fields if f.name in data.schema.names]
    extra = [n for n in data.schema.names if n not in names]
    return data.select(names + extra)


def add_iceberg_sink(topology: Topology, name: str, parent: str, sink: IcebergSink) -> None:
    """Add the Iceberg ``sink`` to ``topology`` as node ``name``, fed by ``parent`` through
    a validation processor named ``"<name>-validate"`` (a value that does not fit the
    schema fails there and takes the dead-letter path)."""
    add_validated_sink(topology, name, parent, sink)
