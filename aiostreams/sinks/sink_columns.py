"""The columns of a table sink (Delta or Parquet): the row schema of its model, the
partition columns checked once at construction, and the per-value check a processor runs
before the sink (:func:`~aiostreams.sinks.attach.add_parquet_sink`).

Partition columns are str, int, bool or date columns, named once each, and leave at least
one column for the files. An empty string cannot be a partition value: Hive-style
directories write ``col=`` for it (Spark reads it as null, or cannot read pyarrow's), and
Delta writes it as null; :meth:`TableColumns.validate` refuses it before the sink.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from pydantic import BaseModel

from aiostreams.errors import ConfigError
from aiostreams.sinks.schema import RowSchema, SchemaMismatch

__all__ = ["PARTITION_TYPES", "TableColumns"]

PARTITION_TYPES = ("string", "int64", "int32", "bool", "date32[day]")


class TableColumns:
    """``model``'s row schema (with the ``include``d metadata columns) and ``partition_by``;
    ``empty_partition`` says, in the error of :meth:`validate`, why an empty string cannot
    be a partition value in this table format."""

    def __init__(self, model: type[BaseModel], *, partition_by: Sequence[str],
                 include: Sequence[str], key_type: Any, metadata_prefix: str,
                 empty_partition: str) -> None:
        self.model = model
        self.schema = RowSchema(model, include=include, key_type=key_type,
                                metadata_prefix=metadata_prefix)
        self.partition_by = tuple(partition_by)
        self._check_partition_columns()
        self._key_column = self.schema.metadata_names.get("key")
        # string partition columns whose value comes from the model or the key:
        self._text_partitions = tuple(
            c for c in self.partition_by
            if pa.types.is_string(self.schema.arrow_schema.field(c).type)
            and (c == self._key_column or c in model.model_fields))
        self._empty_partition = empty_partition

    def _check_partition_columns(self) -> None:
        schema = self.schema.arrow_schema
        for column in self.partition_by:
            if column not in schema.names:
                raise ConfigError(f"partition_by: {column!r} is not a column; columns: "
                                  f"{schema.names}")
            kind = str(schema.field(column).type)
            if kind not in PARTITION_TYPES:
                raise ConfigError(f"partition_by: {column!r} is {kind}; partition by a "
                                  "str, int, bool or date column")
        if len(set(self.partition_by)) != len(self.partition_by):
            raise ConfigError(f"partition_by names a column twice: {self.partition_by}")
        if len(self.partition_by) >= len(schema.names):
            raise ConfigError("partition_by cannot take every column: no data would be left "
                              "in the files")

    def validate(self, value: Any, key: Any = None) -> None:
        """Raise :class:`SchemaMismatch` unless ``value`` (and ``key``, when the key is a
        column) fits the schema exactly and its string partition values are not empty.
        Pure and cheap (a few µs): safe on the event loop, per record."""
        self.schema.check(value, key)
        for column in self._text_partitions:
            text = key if column == self._key_column else getattr(value, column)
            if isinstance(text, enum.Enum):
                text = text.value
            if text == "":
                raise SchemaMismatch(
                    f"an empty string cannot be a partition value ({self._empty_partition}); "
                    "map it to None or a placeholder before the sink",
                    f"{self.model.__name__}.{column}" if column != self._key_column
                    else column)
