"""Delta file statistics from a Parquet footer: the ``stats`` JSON of an ``add`` action
(``numRecords``, ``minValues``, ``maxValues``, ``nullCount``), so that readers (Spark,
delta-rs, DuckDB) can skip files by their column ranges.

The footer already holds per row group, per leaf column, a null count and (for most types)
a min and a max; :func:`delta_stats` folds the row groups into one value per column, nested
as the table's structs are (``{"ship": {"city": ...}}``), as Delta's protocol lays them out.

What a column gets:

* ``nullCount``: every leaf column reached through structs only (not inside lists or maps),
  when every row group's footer has its null count. A struct's leaf counts the rows where
  it or its struct is null (the Parquet definition levels), as Delta and delta-rs count.
* ``minValues``/``maxValues``: integers, finite floats, strings, booleans, dates
  (``"2024-01-31"``), timestamps with a time zone (UTC, milliseconds, ``"...T...000Z"``),
  and decimals (exact JSON numbers), when every row group has them. Not binary (Delta does
  not compare it), not non-finite floats (not JSON), not naive timestamps.

Timestamps are truncated to milliseconds as Delta's writers do (Spark's Delta and delta-rs
both); Delta readers widen a timestamp max by 1 ms before skipping for that reason.

Invariants: a column is in ``minValues`` iff it is in ``maxValues``; for each, the min is
<= every non-null value of the file and the max >= (modulo the millisecond truncation of
timestamps' max described above); ``numRecords`` is the footer's row count.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import uuid
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["delta_stats"]

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def delta_stats(metadata: pq.FileMetaData) -> str:
    """The Delta ``stats`` JSON of the Parquet file whose footer is ``metadata``."""
    schema = metadata.schema.to_arrow_schema()
    leaves = dict(_leaves(list(schema), ()))
    mins: dict[tuple[str, ...], Any] = {}
    maxs: dict[tuple[str, ...], Any] = {}
    nulls: dict[tuple[str, ...], int] = {}
    no_range: set[tuple[str, ...]] = set()
    no_nulls: set[tuple[str, ...]] = set()
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        for c in range(group.num_columns):
            column = group.column(c)
            path = tuple(column.path_in_schema.split("."))
            if path not in leaves:
                continue  # inside a list or a map
            stats = column.statistics
            if stats is None or not stats.has_null_count:
                no_nulls.add(path)
            else:
                nulls[path] = nulls.get(path, 0) + stats.null_count
            low = high = None
            if stats is not None and stats.has_min_max:
                low, high = (_json_value(stats.min, leaves[path]),
                             _json_value(stats.max, leaves[path]))
            if low is None or high is None:
                if not (stats is not None and stats.has_min_max is False
                        and stats.null_count == group.num_rows):
                    no_range.add(path)  # an all-null row group has no range, and needs none
                continue
            mins[path] = low if path not in mins else min(mins[path], low)
            maxs[path] = high if path not in maxs else max(maxs[path], high)
    ranged = [p for p in mins if p not in no_range]
    assert all(p in maxs for p in ranged)
    tokens: dict[str, str] = {}
    out = {"numRecords": metadata.num_rows,
           "minValues": _nest({p: _encode(mins[p], tokens) for p in ranged}),
           "maxValues": _nest({p: _encode(maxs[p], tokens) for p in ranged}),
           "nullCount": _nest({p: n for p, n in nulls.items() if p not in no_nulls})}
    text = json.dumps(out, separators=(",", ":"))
    for token, number in tokens.items():  # decimals as exact JSON numbers
        text = text.replace(json.dumps(token), number)
    return text


def _leaves(fields: list[pa.Field], prefix: tuple[str, ...]
            ) -> Iterator[tuple[tuple[str, ...], pa.DataType]]:
    """The leaf columns reached through structs only, with their types."""
    for field in fields:
        path = (*prefix, field.name)
        if pa.types.is_struct(field.type):
            yield from _leaves(list(field.type), path)
        elif not pa.types.is_nested(field.type):
            yield path, field.type


def _json_value(value: Any, kind: pa.DataType) -> Any:
    """The footer's min or max as a comparable value Delta stats can hold, or None."""
    if pa.types.is_integer(kind) or pa.types.is_boolean(kind):
        return value if isinstance(value, int) else None
    if pa.types.is_floating(kind):
        return float(value) if isinstance(value, float) and math.isfinite(value) else None
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return value if isinstance(value, str) else None
    if pa.types.is_date(kind):
        return value if isinstance(value, dt.date) else None
    if pa.types.is_timestamp(kind) and kind.tz is not None:
        return value if isinstance(value, dt.datetime) and value.tzinfo else None
    if pa.types.is_decimal(kind):
        return value if isinstance(value, decimal.Decimal) and value.is_finite() else None
    return None


def _encode(value: Any, tokens: dict[str, str]) -> Any:
    if isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, dt.datetime):
        micros = (value - _EPOCH) // dt.timedelta(microseconds=1)
        millis = micros // 1000  # floor: truncated as Delta's writers truncate
        at = _EPOCH + dt.timedelta(milliseconds=millis)
        return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"
    if isinstance(value, dt.date):
        return value.isoformat()
    assert isinstance(value, decimal.Decimal), f"no Delta stat for {value!r}"
    token = f"aiostreams-decimal-{uuid.uuid4().hex}"
    tokens[token] = str(value)
    return token


def _nest(flat: dict[tuple[str, ...], Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path, value in flat.items():
        node = out
        for name in path[:-1]:
            node = node.setdefault(name, {})
        node[path[-1]] = value
    return out
