"""A micro-batched step records each record's own result, and a replay answers each record
from it, whatever batches the replay would have made."""

from __future__ import annotations

import itertools
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import aiostreams as ais
from aiostreams.replay import InputRange, Recording, diff_runs, read_outputs, read_ranges, replay


def build(broker: str, **settings: Any) -> ais.App:
    app = ais.App("batched", broker=broker, commit_interval_ms=50, **settings)
    src = app.topic("in", key=str, value=int, partitions=2)
    out = app.topic("out", key=str, value=int)
    model = app.service("model")
    drift = itertools.count()

    async def score_all(values: list[int]) -> list[int]:
        shift = next(drift)  # per batch: which batch a value is in changes its answer
        return [v * 10 + shift for v in values]

    app.stream(src).map_values_batched_async(score_all, service=model, max_batch=4,
                                             max_wait=0.005).to(out)
    return app


async def test_batched_results_are_recorded_per_record_and_replayed(tmp_path: Path) -> None:
    broker = f"memory://batched-{uuid.uuid4().hex[:8]}"
    app = build(broker, record_services_dir=str(tmp_path / "rec"))
    async with app.producer() as producer:
        for i in range(30):
            await producer.send("in", f"k{i % 5}", i, timestamp=1.7e9 + i)
    async with app:
        await app.wait_until_caught_up(timeout=60)
    recorded = Counter((r.key, r.value) for r in await read_ranges(
        broker, [InputRange("out", 0, 0, None)]))
    inputs = await read_ranges(broker, [InputRange("in", p, 0, None) for p in range(2)])
    recording = Recording.open(tmp_path / "rec")
    assert len(recording) == 30
    for name, width in (("a", 1), ("b", 1000)):
        result = await replay(build("memory://"), inputs, tmp_path / name,
                              recording=recording, max_in_flight=width)
        assert result.missing_count == 0 and result.answered == 30
    a, b = read_outputs(tmp_path / "a"), read_outputs(tmp_path / "b")
    assert diff_runs(a, b).equal
    assert Counter((r.key, r.value) for r in a["out"]) == recorded
