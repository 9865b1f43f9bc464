"""The instruction-count gate (``python -m benchmarks.instruction_gate``): it fails on a rise of
more than 5% in a hot path's instructions a record over the committed baseline, passes a
fall, and the engine as committed passes it (counted by valgrind: deterministic, so the
gate cannot be noisy)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import instruction_gate as gate

REPO = Path(__file__).parents[2]


def test_a_rise_past_the_tolerance_fails_and_a_fall_passes() -> None:
    baseline = {"sync": 1.60, "async": 1.80}
    (sync, async_) = gate.judge(baseline, {"sync": 1.60 * 1.051, "async": 1.80 * 0.9})
    assert sync.failed and "REGRESSED" in sync.line()
    assert not async_.failed and "faster" in async_.line()
    assert not any(v.failed for v in gate.judge(baseline, {"sync": 1.60 * 1.049,
                                                           "async": 1.80}))


def test_a_deliberate_regression_fails_the_gate_and_says_what_to_do(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    committed = json.loads(gate.BASELINE.read_text())
    slower = dict(committed["counts"])
    slower["sync"] = round(slower["sync"] * 1.10)  # 10% more a record on the sync path
    monkeypatch.setattr(gate, "measure", lambda n=gate.RECORDS: slower)
    assert gate.main([]) == 1
    err = capsys.readouterr().err
    assert "rose more than 5%" in err and "sync" in err and "--update" not in err
    assert "update the baseline with a reason" in err


def test_updating_the_baseline_needs_a_reason() -> None:
    with pytest.raises(SystemExit):
        gate.main(["--update"])


def test_the_baseline_names_its_commit_and_reason_and_every_gated_case() -> None:
    committed = json.loads(gate.BASELINE.read_text())
    assert set(committed["ratios"]) == set(gate.GATED)
    assert committed["reason"] and committed["commit"]
    for name, (engine, hand) in gate.GATED.items():
        assert committed["ratios"][name] == pytest.approx(
            committed["counts"][engine] / committed["counts"][hand], abs=1e-4)


@pytest.mark.timeout(900)
def test_the_engine_as_committed_passes_the_gate() -> None:
    """The real count (about two minutes of CPU under valgrind)."""
    assert shutil.which("valgrind"), "the gate needs valgrind: apt-get install valgrind"
    done = subprocess.run([sys.executable, "-m", "benchmarks.instruction_gate"], cwd=REPO,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
