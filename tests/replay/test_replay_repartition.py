"""Calls made behind a repartition topic are keyed by the repartition record, and a replay
finds them when that topic gets its records in the recorded order (here: one input
partition, so one upstream task writes it); the outputs still name the source input."""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import aiostreams as ais
from aiostreams.replay import InputRange, Recording, diff_runs, read_outputs, read_ranges, replay


def build(broker: str, **settings: Any) -> ais.App:
    app = ais.App("reparts", broker=broker, commit_interval_ms=50, **settings)
    src = app.topic("in", key=str, value=int, partitions=1)
    out = app.topic("out", key=str, value=int)
    risk = app.service("risk")
    geo = app.service("geo")
    drift = itertools.count()

    async def score(value: int) -> int:
        await asyncio.sleep(0.001 * (value % 3))
        return value * 100 + next(drift) % 7  # drifts: a live rerun would differ

    async def region(value: int | None) -> int:
        assert value is not None  # a reduce's update, never a tombstone here
        await asyncio.sleep(0.001 * (value % 2))
        return value + next(drift) % 5

    (app.stream(src)
        .map_values_async(score, service=risk)
        .select_key(lambda key, value: f"r{value % 4}")  # a new key: a repartition
        .group_by_key()
        .reduce(lambda a, b: a + b)
        .to_stream()
        .map_values_async(region, service=geo)
        .to(out))
    return app


async def test_calls_behind_a_repartition_replay_from_the_recording(tmp_path: Path) -> None:
    broker = f"memory://reparts-{uuid.uuid4().hex[:8]}"
    app = build(broker, record_services_dir=str(tmp_path / "rec"))
    async with app.producer() as producer:
        for i in range(40):
            await producer.send("in", f"k{i % 6}", i, timestamp=1.7e9 + i)
    async with app:
        await app.wait_until_caught_up(timeout=60)
    recorded = Counter((r.key, r.value) for r in await read_ranges(
        broker, [InputRange("out", 0, 0, None)]))
    inputs = await read_ranges(broker, [InputRange("in", 0, 0, None)])
    recording = Recording.open(tmp_path / "rec")
    assert {a.service for a in recording.answers()} == {"risk", "geo"}
    for name, width in (("a", 1), ("b", 1000)):
        result = await replay(build("memory://"), inputs, tmp_path / name,
                              recording=recording, max_in_flight=width)
        assert result.missing_count == 0, result.missing
    a, b = read_outputs(tmp_path / "a"), read_outputs(tmp_path / "b")
    assert diff_runs(a, b).equal
    assert Counter((r.key, r.value) for r in a["out"]) == recorded
    assert all(r.source is not None and r.source[0] == "in" for r in a["out"])
