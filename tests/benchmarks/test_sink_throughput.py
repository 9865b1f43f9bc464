"""``python -m benchmarks.sink_throughput`` at a tiny size, in its own process: a row per
batch size and writer (the two ``write_table`` floors and each sink, each sink having
written every row with every source partition's durable offset recorded: the script checks
that itself), the whole pipeline per sink, the commit cost over a table's history, the
profile, and the JSON line with every figure."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
WRITERS = ("write_table", "to_table+write", "parquet", "delta", "iceberg")


def test_the_script_prints_every_writer_per_batch_size_and_every_pipeline() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get(
        "PYTHONPATH", "")])}
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.sink_throughput", "--rows", "3000",
         "--batch-rows", "1000", "1500", "--pipeline-rows", "1200", "--history-batches", "3",
         "--history-rows", "10", "--profile", "iceberg",
         "--profile-top", "5"],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=240, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    rows = [line.split(" | ") for line in lines if line.startswith("| 1,")]
    assert [(r[0], r[1]) for r in rows] == [
        (f"| {size}", writer) for size in ("1,000", "1,500") for writer in WRITERS]
    for r in rows:  # each printed figure is a number (a ratio may print as 0.00)
        assert all(float(v.strip(" |").replace(",", "")) >= 0 for v in r[2:]), r
    others = [line.split(" | ")[0] for line in lines if line.startswith("| ")
              and " | " in line and not line.startswith(("| 1,", "| batch", "| pipeline",
                                                         "| sink"))]
    assert others == ["| foreach (no sink)", "| parquet", "| delta", "| iceberg",  # pipeline
                      "| parquet", "| delta", "| iceberg"]  # commit cost over history
    assert "--- iceberg sink, writer thread (aiostreams-spark): top 5" in result.stdout
    figures = json.loads(lines[-1])
    assert set(figures["cases"]) == {"1000", "1500"}
    assert set(figures["cases"]["1000"]) == set(WRITERS)
    for size in figures["cases"].values():
        for fig in size.values():
            assert min(fig.values()) > 0, fig  # rows/s, both ratios, CPU µs/row
    assert figures["pipeline"]["rows"] == 1200
    assert set(figures["history"]["cases"]) == {"parquet", "delta", "iceberg"}
