"""``aiostreams replay`` and ``aiostreams diff`` as a user runs them: a call missing from
the recording is reported and fails the replay (unless allowed), never guessed; ``diff``
exits 1 when the runs differ and writes every difference to ``--json``, 0 when equal."""

from __future__ import annotations

import json
import pickle
import uuid
from pathlib import Path

import pytest

from aiostreams.cli import main
from aiostreams.replay.inputs import save_inputs
from aiostreams.replay.recording import RecordedAnswer, segment_name
from aiostreams.types import RawRecord

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
app_again = build(10)  # an App starts once: a second replay needs another
app_v2 = build(5)
'''


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The app module's name (a new one per test: a module's Apps start once), importable
    from ``tmp_path``, which is the working directory."""
    name = f"cliapp_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(APP)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return name


def make_recording(tmp_path: Path, answers: dict[int, int], inputs: int) -> Path:
    """Inputs 0..inputs-1 on in[0]; the risk answer of offset o is answers[o] (absent:
    not recorded)."""
    rec = tmp_path / "rec"
    rec.mkdir()
    lines = [RecordedAnswer("risk", "in", 0, o, 0, None, pickle.dumps(v), None, 0.001)
             .to_line() + "\n" for o, v in answers.items()]
    (rec / segment_name(1)).write_text("".join(lines))
    save_inputs(rec, [RawRecord("in", 0, o, 1.7e9 + o, f"k{o}".encode(), (0).to_bytes(8, "big"))
                      for o in range(inputs)])
    return rec


def test_a_call_missing_from_the_recording_is_reported_and_fails_the_replay(
        tmp_path: Path, module: str, capsys: pytest.CaptureFixture[str]) -> None:
    rec = make_recording(tmp_path, {0: 12, 2: 3}, inputs=3)
    assert main(["replay", f"{module}:app", "--from", str(rec), "--out", "a"]) == 1
    err = capsys.readouterr().err
    assert "1 call(s) missing from the recording, first: risk call 0 of in[0]@1" in err
    run = json.loads((tmp_path / "a" / "run.json").read_text())
    assert (run["missing_count"], run["answered"]) == (1, 2)
    assert main(["replay", f"{module}:app_again", "--from", str(rec), "--out", "b",
                 "--allow-missing"]) == 0
    out = [json.loads(line) for line in (tmp_path / "b" / "outputs" / "out.jsonl")
           .read_text().splitlines()]
    assert [(o["key_text"], o["value_text"], o["source"]) for o in out] == [
        ("k0", 12, ["in", 0, 0])]


def test_diff_exits_1_on_a_changed_threshold_and_0_on_the_same_version(
        tmp_path: Path, module: str, capsys: pytest.CaptureFixture[str]) -> None:
    rec = make_recording(tmp_path, {0: 12, 1: 7, 2: 3, 3: 20}, inputs=4)
    for name, target, width in (("v1", "app", "1"), ("v1-wide", "app_again", "1000"),
                                ("v2", "app_v2", "7")):
        assert main(["replay", f"{module}:{target}", "--from", str(rec), "--out", name,
                     "--max-in-flight", width]) == 0
    capsys.readouterr()
    assert main(["diff", "v1", "v1-wide"]) == 0
    assert capsys.readouterr().out.strip().endswith("equal")
    assert main(["diff", "v1", "v2", "--json", "diff.json", "--examples", "1"]) == 1
    assert "out: 2 -> 3 records; 0 changed, 1 added, 0 removed, 2 unchanged" in \
        capsys.readouterr().out
    report = json.loads((tmp_path / "diff.json").read_text())
    assert [(d["kind"], d["key"], d["source"]) for d in report["differences"]] == [
        ("added", "k1", ["in", 0, 1])]
    assert main(["diff", "v1", "nowhere"]) == 2
    assert "holds no run" in capsys.readouterr().err
