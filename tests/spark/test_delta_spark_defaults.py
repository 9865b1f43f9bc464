"""The Delta sink's per-engine defaults: the Spark engine's batches are larger (a Spark job
has a large fixed cost), the pyarrow engine's stay small; an explicit ``batch_rows`` wins."""

from __future__ import annotations

from pathlib import Path

import pytest
from sparkkit import Order

from aiostreams.sinks import DeltaSink


@pytest.mark.parametrize(("engine", "rows"), [("pyarrow", 50_000), ("spark", 200_000)])
def test_batch_rows_defaults_to_the_engines_measured_size(
        tmp_path: Path, engine: str, rows: int) -> None:
    assert DeltaSink(tmp_path / "t", Order, engine=engine).batch_rows == rows
    assert DeltaSink(tmp_path / "t", Order, engine=engine, batch_rows=7).batch_rows == 7
