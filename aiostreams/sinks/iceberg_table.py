"""The pyiceberg calls of the Iceberg sink: a catalog, a table created from the sink's Arrow
schema with its partitioning, the durable source offsets read back from the snapshot
summaries, and one append per batch that never lands on a snapshot it was not checked on.

Blocking; called on the writer thread only (:mod:`aiostreams.sinks.spark.spark_thread`).

Source offsets. Each append's snapshot summary (string properties, kept by every Iceberg
client) carries :data:`APP_KEY` (the app id) and :data:`OFFSETS_KEY`: compact JSON
``{topic: {partition: offset}}`` of the highest source offset durable per source partition
*after* this snapshot - every partition the app ever wrote, not only this batch's. So the
newest snapshot of the app in the current snapshot's ancestry holds all of them
(:func:`durable_offsets` walks back to it, skipping snapshots other engines made: a
compaction's ``replace``, a delete), and expiring older snapshots loses nothing.

No rebase. pyiceberg (0.12) retries a commit that lost a race by re-basing the same append
on the newer snapshot (``commit.retry.num-retries``, default 4): that would commit rows
whose offsets were checked against a snapshot that is no longer the parent, so a partition's
new owner and the old one could both commit the same offsets. :func:`open_table` therefore
hands out tables whose in-memory properties set the retries to 0 (the catalog's copy is not
changed, other writers keep their own setting), and the append's requirement that ``main``
still points at the snapshot it was built on (Iceberg's ``assert-ref-snapshot-id``, checked
by the catalog in the same atomic swap) makes a lost race a :class:`IcebergCommitRace`:
nothing committed, the files it wrote deleted by pyiceberg (or, after a kill, orphans that no
snapshot lists: invisible to readers).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import (
    CommitFailedException,
    NamespaceAlreadyExistsError,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from pyiceberg.table import Table, TableProperties
from pyiceberg.table.snapshots import ancestors_of
from pyiceberg.transforms import (
    DayTransform,
    HourTransform,
    MonthTransform,
    Transform,
    YearTransform,
)

from aiostreams.errors import ConfigError
from aiostreams.sinks.delta_identity import TableIdentity
from aiostreams.types import TopicPartition

__all__ = ["APP_KEY", "IDENTITY_PROPERTY", "OFFSETS_KEY", "IcebergCommitRace", "Partitioning",
           "append_batch", "create_table", "default_catalog", "durable_offsets", "open_table",
           "parse_identifier", "record_identity", "table_identity"]

APP_KEY = "aiostreams.app"
OFFSETS_KEY = "aiostreams.offsets"
WRITER_KEY = "aiostreams.writer"
IDENTITY_PROPERTY = "aiostreams.identity"
"""The table property holding the :class:`TableIdentity` JSON (as a Delta description)."""

_TRANSFORMS: dict[str, Callable[[], Transform[Any, Any]]] = {
    "year": YearTransform, "month": MonthTransform, "day": DayTransform, "hour": HourTransform,
}
_TIME_TYPES = ("timestamp", "date")
_SPEC = re.compile(r"^\s*(?:(year|month|day|hour)\(\s*([A-Za-z_]\w*)\s*\)|([A-Za-z_]\w*))\s*$")


class IcebergCommitRace(Exception):
    """A commit did not land because another writer's commit (or the table's creation)
    came first. Check again against the newest snapshot."""


@dataclass(frozen=True)
class Partitioning:
    """One partition field: ``transform`` (``identity``, ``year``, ``month``, ``day``,
    ``hour``) of ``column``; written ``"region"`` or ``"day(placed_at)"``."""

    column: str
    transform: str

    @property
    def name(self) -> str:
        return self.column if self.transform == "identity" else f"{self.column}_{self.transform}"

    @classmethod
    def parse(cls, spec: str, schema: pa.Schema) -> Partitioning:
        """The partition field ``spec`` names, checked against ``schema``'s columns."""
        found = _SPEC.match(spec)
        if found is None:
            raise ConfigError(f"partition_by: {spec!r} is not a column or year/month/day/"
                              "hour(column), e.g. 'region' or 'day(placed_at)'")
        transform, timed, plain = found.groups()
        column = timed or plain
        if column not in schema.names:
            raise ConfigError(f"partition_by: {column!r} is not a column; columns: "
                              f"{schema.names}")
        kind = schema.field(column).type
        if transform is None:
            if pa.types.is_nested(kind) or pa.types.is_floating(kind):
                raise ConfigError(f"partition_by: {column!r} is {kind}; partition by a str, "
                                  "int, bool, date or timestamp column")
            return cls(column, "identity")
        if not str(kind).startswith(_TIME_TYPES):
            raise ConfigError(f"partition_by: {transform}({column}) needs a date or "
                              f"timestamp column; {column!r} is {kind}")
        return cls(column, transform)


def parse_identifier(table: str) -> tuple[str, str]:
    """``"namespace.table"`` as (namespace, table); ConfigError for anything else."""
    parts = table.split(".") if isinstance(table, str) else []
    if len(parts) != 2 or not all(re.fullmatch(r"[A-Za-z_]\w*", p) for p in parts):
        raise ConfigError(f"an Iceberg table is named 'namespace.table' (letters, digits, _); "
                          f"got {table!r}")
    return parts[0], parts[1]


CATALOG_LOCK_WAIT = 30.0
"""Seconds a commit waits for SQLite's lock on the catalog (sqlite3's default is 5): several
workers, or a reader's catalog, may hold it a while under load; past this the commit fails
with ``database is locked``."""


def default_catalog(warehouse: Path) -> Catalog:
    """pyiceberg's SQL catalog on SQLite: ``<warehouse>/catalog.db``, tables' files under
    ``warehouse`` (created if missing). Every process writing the tables opens its own."""
    warehouse.mkdir(parents=True, exist_ok=True)
    return SqlCatalog("aiostreams",
                      uri=f"sqlite:///{warehouse / 'catalog.db'}?timeout={CATALOG_LOCK_WAIT}",
                      warehouse=warehouse.resolve().as_uri())


def _without_retries(table: Table) -> Table:
    properties = {**table.metadata.properties, TableProperties.COMMIT_NUM_RETRIES: "0"}
    metadata = table.metadata.model_copy(update={"properties": properties})
    return Table(table.name(), metadata, table.metadata_location, table.io, table.catalog)


def open_table(catalog: Catalog, identifier: str) -> Table | None:
    """The table's newest metadata, committing without pyiceberg's re-basing retries (see
    the module docstring), or None when there is no such table."""
    try:
        return _without_retries(catalog.load_table(identifier))
    except NoSuchTableError:
        return None


def create_table(catalog: Catalog, identifier: str, schema: pa.Schema,
                 partitioning: Sequence[Partitioning], identity: TableIdentity) -> Table:
    """Create ``identifier`` (and its namespace) with ``schema``, ``partitioning`` and
    ``identity`` in its properties, atomically; :class:`IcebergCommitRace` when another
    writer created it first."""
    namespace, _ = parse_identifier(identifier)
    with contextlib.suppress(NamespaceAlreadyExistsError):  # another writer's, just now
        catalog.create_namespace_if_not_exists(namespace)
    try:
        tx = catalog.create_table_transaction(
            identifier, schema, properties={IDENTITY_PROPERTY: identity.to_description()})
        if partitioning:
            with tx.update_spec() as spec:
                for p in partitioning:
                    if p.transform == "identity":
                        spec.add_identity(p.column)
                    else:
                        spec.add_field(p.column, _TRANSFORMS[p.transform](), p.name)
        tx.commit_transaction()
    except (TableAlreadyExistsError, CommitFailedException) as e:
        raise IcebergCommitRace(f"the table was created by another writer meanwhile ({e})"
                                ) from e
    table = open_table(catalog, identifier)
    assert table is not None, identifier
    return table


def table_partitioning(table: Table) -> tuple[Partitioning, ...]:
    """The partition fields of ``table``'s current spec, as :class:`Partitioning`."""
    schema = table.schema()
    out = []
    for field in table.spec().fields:
        transform = str(field.transform).split("[")[0]
        out.append(Partitioning(schema.find_column_name(field.source_id) or "?", transform))
    return tuple(out)


def table_identity(table: Table, where: str) -> TableIdentity | None:
    """The identity in ``table``'s properties (None: not created by aiostreams)."""
    return TableIdentity.from_description(table.properties.get(IDENTITY_PROPERTY), where,
                                          kind="the Iceberg table")


def record_identity(table: Table, identity: TableIdentity) -> None:
    """Write ``identity`` into ``table``'s properties (a metadata-only commit on that
    metadata); :class:`IcebergCommitRace` when another writer's commit came first."""
    try:
        with table.transaction() as tx:
            tx.set_properties({IDENTITY_PROPERTY: identity.to_description()})
    except CommitFailedException as e:
        raise IcebergCommitRace(str(e)) from e


def durable_offsets(table: Table, app: str) -> dict[TopicPartition, int]:
    """Per source partition, the highest offset ``app`` made durable in ``table``'s current
    snapshot: what the newest snapshot of ``app`` in its ancestry records (see the module
    docstring); empty when there is none."""
    for snapshot in ancestors_of(table.current_snapshot(), table.metadata):
        summary = snapshot.summary
        # (``in`` does not look into a pyiceberg Summary's properties: ask with get)
        offsets = None if summary is None or summary.get(APP_KEY) != app else summary.get(
            OFFSETS_KEY)
        if offsets is None:  # another engine's, or a compaction of ours: it records none
            continue
        return decode_offsets(str(offsets))
    return {}


def encode_offsets(offsets: Mapping[TopicPartition, int]) -> str:
    """``offsets`` as compact, sorted JSON ``{topic: {partition: offset}}``."""
    nested: dict[str, dict[str, int]] = {}
    for tp, offset in sorted(offsets.items()):
        nested.setdefault(tp.topic, {})[str(tp.partition)] = offset
    return json.dumps(nested, separators=(",", ":"), sort_keys=True)


def decode_offsets(text: str) -> dict[TopicPartition, int]:
    """The inverse of :func:`encode_offsets`; ConfigError for a malformed value."""
    try:
        nested = json.loads(text)
        return {TopicPartition(topic, int(p)): int(o)
                for topic, parts in nested.items() for p, o in parts.items()}
    except (ValueError, AttributeError, TypeError) as e:
        raise ConfigError(f"a snapshot summary's {OFFSETS_KEY} is malformed ({text[:200]!r}):"
                          " it was not written by aiostreams; write to another table") from e


def append_batch(table: Table, data: pa.Table, *, app: str, writer: str,
                 offsets: Mapping[TopicPartition, int],
                 files_written: Callable[[], None]) -> int:
    """Append ``data`` to ``table`` as one snapshot whose parent is ``table``'s current
    snapshot and whose summary records ``offsets`` (every durable offset of ``app`` after
    it). Columns of ``data`` the table lacks (new optional model fields) are added in the
    same commit. ``files_written`` is called once the data files are written, before the
    commit. Returns the number of data files added. Raises :class:`IcebergCommitRace` when
    another commit came first (nothing committed)."""
    summary = {APP_KEY: app, WRITER_KEY: writer, OFFSETS_KEY: encode_offsets(offsets)}
    try:
        tx = table.transaction()
        missing = set(data.schema.names) - {f.name for f in table.schema().fields}
        if missing:
            with tx.update_schema() as update:
                update.union_by_name(data.schema)
        tx.append(data, snapshot_properties=summary)
        files_written()
        committed = tx.commit_transaction()
    except CommitFailedException as e:
        raise IcebergCommitRace(str(e)) from e
    snapshot = committed.current_snapshot()
    assert snapshot is not None and snapshot.summary is not None
    assert snapshot.summary.get(OFFSETS_KEY) == summary[OFFSETS_KEY]
    return int(snapshot.summary.get("added-data-files", "0") or 0)
