"""Recording service answers: each record's answers land beside its source offset, in call
order; a retried call records its final answer; a dead-lettered record keeps its last
attempt's; the recording stays under its byte cap."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiostreams as ais
from aiostreams.replay.recording import Recording
from aiostreams.testing import TopologyTestDriver


class Flaky(Exception):
    pass


def make_app(directory: Path, **settings: Any) -> ais.App:
    """in -> score (risk) -> bump (risk again) -> out; 13's first call fails once (retried),
    66's second call fails for good (dead-lettered)."""
    app = ais.App("rec", broker="memory://", record_services_dir=str(directory),
                  on_error="dead_letter", dead_letter_topic="in-dlq", **settings)
    inputs = app.topic("in", key=str, value=int)
    out = app.topic("out", key=str, value=int)
    risk = app.service("risk")
    failed: set[int] = set()

    async def score(value: int) -> int:
        if value == 13 and 13 not in failed:
            failed.add(13)
            raise Flaky("first call of 13 fails")
        return value * 10

    async def bump(value: int) -> int:
        if value == 660:
            raise KeyError("no risk for 660")
        return value + 1

    retry = ais.Retry(attempts=2, backoff=0.0, jitter=0.0, retry_on=(Flaky,))
    (app.stream(inputs)
        .map_values_async(score, service=risk, retry=retry)
        .map_values_async(bump, service=risk, retry=retry)
        .to(out))
    return app


async def run(app: ais.App, values: list[int]) -> list[Any]:
    async with TopologyTestDriver(app) as driver:
        for i, v in enumerate(values):
            driver.pipe_input("in", f"k{i}", v)
        await driver.process_all()
        await driver.advance_wall_clock(1.0)  # the retry's backoff
        outputs = [r.value for r in driver.read_output("out")]
        await driver.commit()
    return outputs


async def test_each_record_records_its_answers_in_call_order_with_the_final_retry(
        tmp_path: Path) -> None:
    assert await run(make_app(tmp_path / "rec"), [1, 13, 66, 2]) == [11, 131, 21]
    rec = Recording.open(tmp_path / "rec")
    got = {(a.topic, a.offset, a.index): a.answer() if a.error is None else a.error
           for a in rec.answers()}
    assert got == {("in", 0, 0): 10, ("in", 0, 1): 11,
                   ("in", 1, 0): 130, ("in", 1, 1): 131,
                   ("in", 2, 0): 660, ("in", 2, 1): "KeyError: 'no risk for 660'",
                   ("in", 3, 0): 20, ("in", 3, 1): 21}
    assert all(a.service == "risk" and a.partition == 0 and a.latency >= 0
               for a in rec.answers())


async def test_nothing_is_recorded_when_the_setting_is_off(tmp_path: Path) -> None:
    app = make_app(tmp_path / "rec")
    app.settings = app.settings.model_copy(update={"record_services_dir": None})
    assert await run(app, [1, 2]) == [11, 21]
    assert not (tmp_path / "rec").exists()
    assert all(d.tap is None for d in app.services.values())


async def test_the_recording_keeps_the_latest_answers_under_its_byte_cap(
        tmp_path: Path) -> None:
    app = make_app(tmp_path / "rec", record_services_max_bytes=16 * 1024)
    values = list(range(100, 700))
    assert len(await run(app, values)) == len(values)
    segments = list((tmp_path / "rec").glob("answers-*.jsonl"))
    assert sum(p.stat().st_size for p in segments) <= 16 * 1024
    rec = Recording.open(tmp_path / "rec")
    assert rec.answer("risk", "in", 0, 599, 1) is not None  # the latest are kept
    assert rec.answer("risk", "in", 0, 0, 0) is None  # the oldest were dropped
