"""``benchmarks.retry_cost`` runs end to end at a tiny size and prints what it claims.
Figures at this size mean nothing; that they are produced and consistent does."""

from __future__ import annotations

import json
import subprocess
import sys


def test_retry_cost_reports_every_case_and_retries_only_where_records_fail() -> None:
    out = subprocess.run([sys.executable, "-m", "benchmarks.retry_cost", "--records", "2000",
                          "--repeats", "1", "--flaky-every", "50"],
                         capture_output=True, text=True, check=False, timeout=100)
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    cpu = summary["cpu_us_per_record"]
    assert set(cpu) == {"a", "b", "h", "b0"}
    assert all(value > 0 for value in cpu.values())
    retries = {case: runs[0]["retries"] for case, runs in summary["runs"].items()}
    # 1 in 50 of 2,000 records (by hash) fails 3 times in (b) and (b0), never in (a) or (h)
    assert retries["a"] == retries["h"] == 0
    assert retries["b"] == retries["b0"] > 0
    assert retries["b"] % 3 == 0
