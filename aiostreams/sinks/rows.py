"""Retired results as an Arrow table: the step both sinks (Parquet and Delta) share.

:func:`rows_to_table` checks each row against the sink's schema (unless a validating step
upstream already did, so bad values took the dead-letter path there) and converts the rows,
with the metadata columns the schema includes (key, source topic, partition, offset,
timestamp). A row that does not fit fails the whole batch with a :class:`SerializationError`
naming ``topic-partition@offset``; nothing is written then.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from aiostreams.errors import SerializationError
from aiostreams.runtime.external_record import ExternalRecord
from aiostreams.sinks.schema import RowSchema, SchemaMismatch


def rows_to_table(rows: Sequence[ExternalRecord], schema: RowSchema, *, sink: str,
                  table_kind: str, attach: str,
                  validate: Callable[[Any, Any], Any] | None) -> pa.Table:
    """The Arrow table of ``rows``; ``validate`` (None: validated upstream) checks each row.
    ``table_kind`` ("Parquet schema", "Delta table's schema") and ``attach`` (the function
    that puts a validating step before the sink) word the error."""
    if validate is not None:
        for r in rows:
            try:
                validate(r.value, r.key)
            except SchemaMismatch as e:
                raise SerializationError(
                    f"sink {sink!r}: the result of {r.source}@{r.offset} does not fit the "
                    f"{table_kind}: {e}. Nothing was written; attach the sink with "
                    f"aiostreams.sinks.{attach}(...) so such values are checked before it and "
                    "take the dead-letter path", topic=r.source.topic) from None
    return schema.to_table([r.value for r in rows], _metadata(rows, schema))


def _metadata(rows: Sequence[ExternalRecord], schema: RowSchema) -> dict[str, list[Any]]:
    columns: dict[str, list[Any]] = {}
    for column in schema.include:
        if column == "key":
            columns[column] = [r.key for r in rows]
        elif column == "topic":
            columns[column] = [r.source.topic for r in rows]
        elif column == "partition":
            columns[column] = [r.source.partition for r in rows]
        elif column == "offset":
            columns[column] = [r.offset for r in rows]
        else:
            columns[column] = [r.timestamp for r in rows]
    return columns
