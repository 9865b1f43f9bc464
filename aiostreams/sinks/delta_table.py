"""The delta-rs calls of the Delta sink: open a table's newest snapshot, append one batch.

Blocking; called on the writer thread only (:mod:`aiostreams.sinks.spark.spark_thread`).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping, Sequence

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError

from aiostreams.sinks.delta_identity import TableIdentity

__all__ = ["CommitRace", "open_table", "record_identity", "write_batch"]


WRITER = f"{socket.gethostname()}:{os.getpid()}"
"""Who makes this process's commits (``aiostreams.writer`` in each commit's info)."""


class CommitRace(Exception):
    """A commit did not land because another writer's commit came first: one of the same
    app transaction (Delta's conflict check), or the creation of the table. Check again
    against the newest snapshot."""


def open_table(where: str, storage_options: Mapping[str, str]) -> DeltaTable | None:
    """The newest snapshot of the Delta table at ``where`` (a local path or an ``s3a://``
    URI, reached with ``storage_options``), or None when there is none."""
    options = dict(storage_options) or None
    if not DeltaTable.is_deltatable(where, storage_options=options):
        return None
    return DeltaTable(where, storage_options=options)


def record_identity(table: DeltaTable, identity: TableIdentity) -> None:
    """Write ``identity`` into the description of ``table`` (a metadata-only commit on that
    snapshot). Raises :class:`CommitRace` when another writer's commit came first."""
    try:
        table.alter.set_table_description(
            identity.to_description(),
            commit_properties=CommitProperties(custom_metadata={
                "aiostreams.app": identity.app, "aiostreams.writer": WRITER}))
    except CommitFailedError as e:
        raise CommitRace(str(e)) from e


def write_batch(table: DeltaTable | str, data: pa.Table, *, partition_by: Sequence[str],
                identity: TableIdentity, transactions: Mapping[str, int],
                target_file_size: int | None, storage_options: Mapping[str, str]) -> None:
    """Append ``data`` as one Delta commit carrying ``transactions`` (app id → version).

    ``table``: the snapshot the caller checked the transaction versions on (the commit is
    made against it, so a concurrent commit goes through Delta's conflict check), or the
    path of a table to create, with ``identity`` in its description (created by another
    writer meanwhile: :class:`CommitRace`, nothing written). New nullable columns merge into
    the table's schema (``schema_mode="merge"``). Raises :class:`CommitRace` when the commit
    lost a race."""
    creating = isinstance(table, str)
    try:
        _write(table, data, partition_by=partition_by, identity=identity,
               transactions=transactions, target_file_size=target_file_size,
               storage_options=storage_options)
    except CommitFailedError as e:
        raise CommitRace(str(e)) from e
    except DeltaError as e:
        if creating and isinstance(table, str) and DeltaTable.is_deltatable(
                table, storage_options=dict(storage_options) or None):
            raise CommitRace(f"the table was created by another writer meanwhile ({e})") from e
        raise


def _write(table: DeltaTable | str, data: pa.Table, *, partition_by: Sequence[str],
           identity: TableIdentity, transactions: Mapping[str, int],
           target_file_size: int | None, storage_options: Mapping[str, str]) -> None:
    creating = isinstance(table, str)
    write_deltalake(
        table, data, mode="error" if creating else "append", schema_mode="merge",
        partition_by=list(partition_by) or None,
        description=identity.to_description() if creating else None,
        target_file_size=target_file_size,
        storage_options=(dict(storage_options) or None) if creating else None,
        commit_properties=CommitProperties(
            app_transactions=[Transaction(app_id, version)
                              for app_id, version in sorted(transactions.items())],
            custom_metadata={"aiostreams.app": identity.app, "aiostreams.writer": WRITER}),
    )
