"""Every example runs in the suite, as a user would run it."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import aiostreams

REPO = Path(__file__).resolve().parents[2]


def run_example(*args: str, timeout: float = 240.0) -> str:
    return run_example_process(*args, timeout=timeout).stdout


def run_example_process(*args: str, timeout: float = 240.0) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    done = subprocess.run([sys.executable, *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.mark.spark
def test_enrichment_example_accounts_for_every_order_and_spark_reads_the_dataset() -> None:
    done = run_example_process("examples/enrich_rest.py", "--orders", "600")
    out = done.stdout
    # Spark's JVM start-up chatter goes to a log file; the working directory is named,
    # then removed; no progress bar off a terminal
    workdir = re.search(r"^working directory (\S+) \(removed at the end", done.stderr, re.M)
    assert workdir, done.stderr
    assert not Path(workdir.group(1)).exists()
    assert done.stderr.strip().splitlines() == [workdir.group(0) + "; --keep keeps it)"]

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


def test_word_count_example_counts_every_word() -> None:
    out = run_example("examples/word_count.py")
    counts = {w: int(n) for w, n in (line.split() for line in out.splitlines() if line.strip())}
    assert counts["the"] == 3 and counts["dog"] == 3 and counts["fox"] == 2
    assert sum(counts.values()) == 9 + 3 + 9


def test_windowed_totals_example_drops_the_late_sale_only() -> None:
    out = run_example("examples/windowed_totals.py")
    assert " north minute 0:   15.00" in out  # the late 99.00 did not change it
    assert " south minute 0:    7.00" in out  # the out-of-order 3.00 (within grace) did
    assert "late records dropped: 1" in out


def test_dead_letter_walkthrough_replays_after_the_fix() -> None:
    out = run_example("examples/dead_letters.py")
    assert "converted: 2, dead-lettered: 3" in out
    assert "exception  __main__.UnknownCurrency: no exchange rate for GBP" in out
    assert "replayed 3 dead letter(s)" in out
    assert "converted: 4, dead-letter topic now holds: 4" in out


PUBLIC_MODULES = {"aiostreams", "aiostreams.cli", "aiostreams.sinks", "aiostreams.replay"}
INTERNAL_ATTRIBUTES = {"transport", "tasks", "worker", "_transport", "topology"}


@pytest.mark.parametrize("path", sorted((REPO / "examples").glob("*.py")),
                         ids=lambda p: p.name)
def test_example_uses_the_public_api_only(path: Path) -> None:
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and \
                node.module.startswith("aiostreams"):
            assert node.module in PUBLIC_MODULES, f"{path.name}:{node.lineno} imports " \
                f"{node.module}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("aiostreams"):
                    assert alias.name in PUBLIC_MODULES, f"{path.name}:{node.lineno}"
        elif isinstance(node, ast.Attribute):
            assert node.attr not in INTERNAL_ATTRIBUTES, \
                f"{path.name}:{node.lineno} uses .{node.attr}"
            if isinstance(node.value, ast.Name) and node.value.id == "ais":
                assert node.attr in aiostreams.__all__, \
                    f"{path.name}:{node.lineno}: ais.{node.attr} is not in aiostreams.__all__"


def test_examples_take_the_broker_from_the_environment() -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    env["AIOSTREAMS_BROKER"] = "nats://not-a-kafka"  # refused: proves it was read
    done = subprocess.run([sys.executable, "examples/word_count.py"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "setting 'broker'" in done.stderr and "nats://not-a-kafka" in done.stderr


def test_fraud_replay_example_diffs_exactly_the_changed_alerts_and_empty_unchanged() -> None:
    out = run_example("examples/fraud_replay.py", "--payments", "600")
    assert "v1 replayed gives the recorded run's alerts: True" in out
    assert re.search(r"^v1 at max_in_flight 1 vs 1000: alerts: (\d+) -> \1 records; "
                     r"0 changed, 0 added, 0 removed, \1 unchanged\nequal$", out, re.M), out
    exact = re.search(r"^the diff lists exactly the alerts scored in \[0.55, 0.6\): True "
                      r"\((\d+) added, \1 scored there\)$", out, re.M)
    assert exact and int(exact.group(1)) > 0, out
