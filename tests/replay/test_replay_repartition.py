"""Calls made behind a repartition topic replay from the recording, and the outputs still
name the source input; a recording of the previous version, which keyed them by the
repartition record's offset, replays as it did when the topic gets its records in the
recorded order (here: one input partition, so one upstream task writes it).
``test_replay_origin`` replays them whatever the order."""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import aiostreams as ais
from aiostreams.replay import (
    InputRange,
    RecordedAnswer,
    Recording,
    diff_runs,
    read_outputs,
    read_ranges,
    replay,
)
from aiostreams.replay.recording import segment_name
from aiostreams.runtime.origin import Place, place_in
from aiostreams.transport.memory import MemoryBroker


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


async def test_a_recording_of_the_previous_version_keyed_by_repartition_offsets_still_replays(
        tmp_path: Path) -> None:
    """The previous version keyed a call behind a repartition by the repartition record's
    own position, and wrote no path: such a segment (rewritten here from a recording of this
    version, as that version would have written it) replays as it did - one input
    partition, so the repartition topic gets its records in the recorded order."""
    name = f"reparts-{uuid.uuid4().hex[:8]}"
    app = build(f"memory://{name}", record_services_dir=str(tmp_path / "rec"),
                repartition_purge_interval_ms=1e9)
    async with app.producer() as producer:
        for i in range(30):
            await producer.send("in", f"k{i % 6}", i, timestamp=1.7e9 + i)
    async with app:
        await app.wait_until_caught_up(timeout=60)
    broker = MemoryBroker.named(name)
    position = {place_in(r.headers): (r.topic, r.partition, r.offset)
                for t in broker.topic_names() if t.endswith("-repartition")
                for r in broker.records(t)}
    old = []
    for a in Recording.open(tmp_path / "rec").answers():
        if a.path:
            topic, partition, offset = position[Place(a.topic, a.partition, a.offset, a.path)]
            a = RecordedAnswer(a.service, topic, partition, offset, a.index, a.request,
                               a.value, a.error, a.latency)
        old.append(a)
    assert any(a.topic.endswith("-repartition") for a in old)
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / segment_name(1)).write_text("".join(a.to_line() + "\n" for a in old))
    assert '"path"' not in (tmp_path / "old" / segment_name(1)).read_text()
    recorded = Counter((r.key, r.value) for r in broker.records("out"))
    inputs = await read_ranges(f"memory://{name}", [InputRange("in", 0, 0, None)])
    result = await replay(build("memory://"), inputs, tmp_path / "replayed",
                          recording=Recording.open(tmp_path / "old"), max_in_flight=1000)
    assert result.missing_count == 0, result.missing
    assert Counter((r.key, r.value) for r in read_outputs(tmp_path / "replayed")["out"]) \
        == recorded
