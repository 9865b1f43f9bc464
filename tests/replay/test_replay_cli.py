"""``aiostreams replay`` and ``aiostreams diff`` as a user runs them: a call missing from
the recording is reported and fails the replay (unless allowed), never guessed; ``diff``
exits 1 when the runs differ and writes every difference to ``--json``, 0 when equal."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

from aiostreams.replay.inputs import save_inputs
from aiostreams.replay.recording import RecordedAnswer, segment_name
from aiostreams.types import RawRecord

REPO = Path(__file__).resolve().parents[2]

APP = '''
import os
import aiostreams as ais

def build(threshold):
    app = ais.App("cliapp", on_error="skip")
    src = app.topic("in", key=str, value=int)
    out = app.topic("out", key=str, value=int)
    risk = app.service("risk")

    async def never(value):  # the replay answers from the recording
        raise AssertionError("a recorded replay must not call the service")

    (app.stream(src).map_values_async(never, service=risk)
        .filter(lambda k, v: v >= threshold).to(out))
    return app

app = build(10)
app_v2 = build(5)
'''


def cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIOSTREAMS_")}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(REPO)])
    return subprocess.run([sys.executable, "-m", "aiostreams", *args], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120, check=False)


def make_recording(tmp_path: Path, answers: dict[int, int], inputs: int) -> Path:
    """Inputs 0..inputs-1 on in[0]; the risk answer of offset o is answers[o] (absent:
    not recorded)."""
    (tmp_path / "cliapp_mod.py").write_text(APP)
    rec = tmp_path / "rec"
    rec.mkdir()
    lines = [RecordedAnswer("risk", "in", 0, o, 0, None, pickle.dumps(v), None, 0.001)
             .to_line() + "\n" for o, v in answers.items()]
    (rec / segment_name(1)).write_text("".join(lines))
    save_inputs(rec, [RawRecord("in", 0, o, 1.7e9 + o, f"k{o}".encode(), (0).to_bytes(8, "big"))
                      for o in range(inputs)])
    return rec


def test_a_call_missing_from_the_recording_is_reported_and_fails_the_replay(
        tmp_path: Path) -> None:
    rec = make_recording(tmp_path, {0: 12, 2: 3}, inputs=3)
    done = cli(tmp_path, "replay", "cliapp_mod:app", "--from", str(rec), "--out", "a")
    assert done.returncode == 1, done.stderr
    assert "1 call(s) missing from the recording, first: risk call 0 of in[0]@1" in done.stderr
    run = json.loads((tmp_path / "a" / "run.json").read_text())
    assert (run["missing_count"], run["answered"]) == (1, 2)
    allowed = cli(tmp_path, "replay", "cliapp_mod:app", "--from", str(rec), "--out", "b",
                  "--allow-missing")
    assert allowed.returncode == 0, allowed.stderr
    out = [json.loads(line) for line in (tmp_path / "b" / "outputs" / "out.jsonl")
           .read_text().splitlines()]
    assert [(o["key_text"], o["value_text"], o["source"]) for o in out] == [
        ("k0", 12, ["in", 0, 0])]


def test_diff_exits_1_on_a_changed_threshold_and_0_on_the_same_version(
        tmp_path: Path) -> None:
    rec = make_recording(tmp_path, {0: 12, 1: 7, 2: 3, 3: 20}, inputs=4)
    for name, target, width in (("v1", "app", "1"), ("v1-wide", "app", "1000"),
                                ("v2", "app_v2", "7")):
        done = cli(tmp_path, "replay", f"cliapp_mod:{target}", "--from", str(rec),
                   "--out", name, "--max-in-flight", width)
        assert done.returncode == 0, done.stderr
    same = cli(tmp_path, "diff", "v1", "v1-wide")
    assert same.returncode == 0, same.stdout + same.stderr
    assert same.stdout.strip().endswith("equal")
    changed = cli(tmp_path, "diff", "v1", "v2", "--json", "diff.json", "--examples", "1")
    assert changed.returncode == 1, changed.stderr
    assert "out: 2 -> 3 records; 0 changed, 1 added, 0 removed, 2 unchanged" in changed.stdout
    report = json.loads((tmp_path / "diff.json").read_text())
    assert [(d["kind"], d["key"], d["source"]) for d in report["differences"]] == [
        ("added", "k1", ["in", 0, 1])]
    missing = cli(tmp_path, "diff", "v1", "nowhere")
    assert missing.returncode == 2 and "holds no run" in missing.stderr
