"""Every example runs in the suite, as a user would run it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def run_example(*args: str, timeout: float = 240.0) -> str:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    done = subprocess.run([sys.executable, *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.spark
def test_enrichment_example_accounts_for_every_order_and_spark_reads_the_dataset() -> None:
    out = run_example("examples/enrich_rest.py", "--orders", "600")
    def count(label: str) -> int:
        match = re.search(rf"^  {re.escape(label)}\s+(\d+)", out, re.M)
        assert match, f"no {label!r} line in:\n{out}"
        return int(match.group(1))

    produced, enriched = count("orders produced"), count("enriched")
    dead, filtered = count("dead-lettered"), count("filtered (amount <= 0)")
    assert produced == 600
    assert enriched > 0 and dead > 0 and filtered > 0
    assert enriched + dead + filtered == produced
    assert count("Parquet dataset (Spark)") == enriched
