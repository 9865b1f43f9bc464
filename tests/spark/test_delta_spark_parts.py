"""The Spark engine's pure parts: partition values read back from the directories Spark
names (Hive escapes, nulls), and the fields a table's schema lacks (merged before a batch)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiostreams.sinks.spark.delta_spark import missing_fields, partition_values

_SPARK_ESCAPED = set('"#%\'*/:=?\\\x7f{[]^')


def spark_escape(value: str) -> str:
    """How Spark names a partition directory's value (``ExternalCatalogUtils.escapePathName``:
    control characters and the characters above as ``%XX``)."""
    return "".join(f"%{ord(c):02X}" if c in _SPARK_ESCAPED or ord(c) < 0x20 else c
                   for c in value)


@given(st.lists(st.one_of(st.none(), st.text(min_size=1)), min_size=1, max_size=3))
def test_partition_values_undo_sparks_escapes_and_nulls(values: list[str | None]) -> None:
    columns = [f"c{i}" for i in range(len(values))]
    relative = Path(*[f"{c}={'__HIVE_DEFAULT_PARTITION__' if v is None else spark_escape(v)}"
                      for c, v in zip(columns, values, strict=True)])
    assert partition_values(relative, columns) == dict(zip(columns, values, strict=True))


@pytest.mark.parametrize(("relative", "message"), [
    ("region=eu/tier=gold", r"partitioned by \['region', 'tier'\], the table by \['region'\]"),
    ("eu", "is not a partition directory")])
def test_files_outside_the_tables_partition_directories_are_refused(
        relative: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        partition_values(Path(relative), ["region"])


def test_missing_fields_names_new_top_level_and_nested_fields() -> None:
    table = pa.schema([("id", pa.int64()), ("ship", pa.struct([("city", pa.string())]))])
    model = pa.schema([("id", pa.int64()), ("note", pa.string()),
                       ("ship", pa.struct([("city", pa.string()), ("zip", pa.int64())]))])
    assert missing_fields(table, model) == ["note", "ship.zip"]
    assert missing_fields(model, table) == []
