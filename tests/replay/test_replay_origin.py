"""Calls behind repartitions replay whatever the repartition topics' offsets and order: a
record written to a topic the app reads back carries its origin (the source record) and a
path, the recorder keys answers by them and the player finds them by them
(:mod:`aiostreams.runtime.origin`).

The app: input on 3 partitions; a service after a ``group_by`` + aggregate, one after each
of two chained repartitions, one after a fan-out (``flat_map``) before the repartition. It
is recorded on a broker whose repartition topics already hold an earlier run's records (so
offsets do not start at 0, and 3 upstream tasks interleave into each repartition
partition). Every answer drifts (a call made again would get another), so a call answered
from the wrong record, or missing, shows in the outputs.

``AIOSTREAMS_REPLAY_EXAMPLES`` sets the property's examples (default 4, a few seconds; set
100 or more for a long run)."""

from __future__ import annotations

import asyncio
import itertools
import os
import random
import uuid
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import aiostreams as ais
from aiostreams.replay import (
    InputRange,
    OutputRecord,
    Recording,
    diff_runs,
    read_outputs,
    read_ranges,
    replay,
)
from aiostreams.runtime.lineage import LINEAGE_HEADER, chain_of
from aiostreams.runtime.origin import ORIGIN_HEADER
from aiostreams.transport.memory import MemoryBroker
from aiostreams.types import RawRecord

EXAMPLES = int(os.environ.get("AIOSTREAMS_REPLAY_EXAMPLES", "4"))
PARTITIONS = 3
OUTPUTS = ("out-group", "out-chain", "out-fan")
SERVICES = {"after-group", "hop-1", "hop-2", "fan"}


def build(broker: str, seed: int = 0, **settings: Any) -> ais.App:
    app = ais.App("origins", broker=broker, commit_interval_ms=50, on_error="skip",
                  **settings)
    src = app.topic("in", key=str, value=int, partitions=PARTITIONS)
    outs = {name: app.topic(name, key=str, value=int, partitions=1) for name in OUTPUTS}
    services = {name: app.service(name) for name in sorted(SERVICES)}
    drift = itertools.count()
    rng = random.Random(seed)

    def asks(name: str, scale: int) -> Any:
        async def ask(value: int | None) -> int:
            assert value is not None
            await asyncio.sleep(rng.uniform(0, 0.002))
            return value * scale + next(drift) % 97  # drifts: a call made again differs
        return ask

    stream = app.stream(src)
    (stream.group_by(lambda key, value: f"g{value % 4}", name="by-residue")
        .aggregate(0, lambda key, value, total: total + value, value_serde=int)
        .to_stream()
        .map_values_async(asks("after-group", 1000), service=services["after-group"])
        .to(outs["out-group"]))
    (stream.select_key(lambda key, value: f"a{value % 5}")
        .repartitioned(name="hop-a")
        .map_values_async(asks("hop-1", 10), service=services["hop-1"])
        .select_key(lambda key, value: f"b{value % 3}")
        .repartitioned(name="hop-b")
        .map_values_async(asks("hop-2", 100), service=services["hop-2"])
        .to(outs["out-chain"]))
    (stream.flat_map(lambda key, value: [(f"{key}-{i}", value + i) for i in range(value % 3 + 1)])
        .repartitioned(name="fanned")
        .map_values_async(asks("fan", 7), service=services["fan"])
        .to(outs["out-fan"]))
    return app


async def run_once(app: ais.App, pairs: list[tuple[str, int]], start: float) -> None:
    async with app.producer() as producer:
        for i, (key, value) in enumerate(pairs):
            await producer.send("in", key, value, timestamp=start + i)
    async with app:
        await app.wait_until_caught_up(timeout=60)


async def ends(broker: str, topics: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """The next offset of each (topic, partition)."""
    records = await read_ranges(broker, [InputRange(t, p, 0, None) for t, p in topics])
    found = {tp: 0 for tp in topics}
    for r in records:
        found[(r.topic, r.partition)] = max(found[(r.topic, r.partition)], r.offset + 1)
    return found


async def record(directory: Path, earlier: list[tuple[str, int]],
                 pairs: list[tuple[str, int]], seed: int
                 ) -> tuple[list[RawRecord], dict[str, list[OutputRecord]]]:
    """An earlier run (not recorded), then the recorded one on the same broker: the
    recorded run's inputs, and its outputs with their source records (from lineage)."""
    broker = f"memory://origins-{uuid.uuid4().hex[:8]}"
    await run_once(build(broker, seed), earlier, 1.7e9)
    inputs_at = await ends(broker, [("in", p) for p in range(PARTITIONS)])
    outputs_at = await ends(broker, [(t, 0) for t in OUTPUTS])
    app = build(broker, seed, lineage=True, record_services_dir=str(directory / "rec"))
    await run_once(app, pairs, 1.8e9)
    inputs = await read_ranges(broker, [InputRange("in", p, inputs_at[("in", p)], None)
                                        for p in range(PARTITIONS)])
    outputs = await read_ranges(broker, [InputRange(t, 0, outputs_at[(t, 0)], None)
                                         for t in OUTPUTS])
    recorded: dict[str, list[OutputRecord]] = {t: [] for t in OUTPUTS}
    for r in outputs:
        assert all(name != ORIGIN_HEADER for name, _ in r.headers), \
            "a recording app's own outputs carry no origin header"
        source = chain_of(r.headers)[-1]  # the lineage chain ends at the source record
        recorded[r.topic].append(OutputRecord(
            r.topic, r.partition, r.offset, r.timestamp, r.key, r.value,
            tuple(h for h in r.headers if h[0] != LINEAGE_HEADER), tuple(source),
            None if r.key is None else r.key.decode()))
    return inputs, recorded


async def replay_and_diff(directory: Path, inputs: list[RawRecord],
                          recorded: dict[str, list[OutputRecord]], name: str,
                          max_in_flight: int) -> None:
    result = await replay(build("memory://"), inputs, directory / name,
                          recording=Recording.open(directory / "rec"),
                          max_in_flight=max_in_flight)
    assert result.missing_count == 0, [str(m) for m in result.missing]
    replayed = {t: rs for t, rs in read_outputs(directory / name).items() if t in OUTPUTS}
    diff = diff_runs(recorded, replayed)
    assert diff.equal, diff.summary(10)
    assert result.answered == len(Recording.open(directory / "rec"))


def pairs_of(count: int, seed: int) -> list[tuple[str, int]]:
    rng = random.Random(seed)
    return [(f"k{rng.randrange(7)}", rng.randrange(200)) for _ in range(count)]


async def test_calls_behind_group_by_chained_repartitions_and_fan_out_all_replay(
        tmp_path: Path) -> None:
    inputs, recorded = await record(tmp_path, pairs_of(30, 1), pairs_of(45, 2), seed=3)
    assert {r.partition for r in inputs} == set(range(PARTITIONS))
    assert min(r.offset for r in inputs) > 0  # the earlier run's records came first
    recording = Recording.open(tmp_path / "rec")
    assert {a.service for a in recording.answers()} == SERVICES
    depths = {s: {len(a.path.split(".")) if a.path else 0
                  for a in recording.answers() if a.service == s} for s in SERVICES}
    assert depths == {"after-group": {1}, "hop-1": {1}, "hop-2": {2}, "fan": {1}}, depths
    assert all(a.topic == "in" for a in recording.answers()), \
        "every answer is keyed by the source record, never by a repartition record"
    fans: dict[tuple[str, int, int], set[str]] = {}
    for a in recording.answers():
        if a.service == "fan":
            fans.setdefault((a.topic, a.partition, a.offset), set()).add(a.path)
    assert max(len(paths) for paths in fans.values()) == 3, "a fan-out: one source, 3 paths"
    for name, width in (("serial", 1), ("wide", 1000)):
        await replay_and_diff(tmp_path, inputs, recorded, name, width)


async def test_the_records_a_recording_app_reads_back_name_their_source_and_path(
        tmp_path: Path) -> None:
    name = f"origins-{uuid.uuid4().hex[:8]}"
    app = build(f"memory://{name}", record_services_dir=str(tmp_path / "rec"),
                repartition_purge_interval_ms=1e9)
    await run_once(app, [("k1", 5)], 1.7e9)  # 5 % 3 = 2: three fanned-out records
    broker = MemoryBroker.named(name)
    [source] = broker.records("in")
    where = f"in/{source.partition}/0"
    marks = {t: sorted(v.decode() for r in broker.records(t) for n, v in r.headers
                       if n == ORIGIN_HEADER and v is not None)
             for t in broker.topic_names()}
    # the source's outputs to topics read back, numbered in forward order: the group_by's,
    # hop-a's, then the three fanned-out records; hop-b's is hop-a's record's first
    assert marks == {
        "in": [], "out-group": [], "out-chain": [], "out-fan": [],
        "origins-by-residue-repartition": [f"{where}/0"],
        "origins-hop-a-repartition": [f"{where}/1"],
        "origins-hop-b-repartition": [f"{where}/1.0"],
        "origins-fanned-repartition": [f"{where}/2", f"{where}/3", f"{where}/4"],
        **{t: [] for t in broker.topic_names() if t.endswith("-changelog")}}


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(earlier=st.lists(st.tuples(st.sampled_from("abcdef"), st.integers(0, 300)),
                        max_size=20),
       pairs=st.lists(st.tuples(st.sampled_from("abcdef"), st.integers(0, 300)),
                      min_size=1, max_size=30),
       seed=st.integers(0, 2**32 - 1),
       max_in_flight=st.sampled_from([1, 7, 1000]))
def test_a_replay_diffs_empty_against_the_recorded_run_behind_any_repartitions(
        tmp_path_factory: Any, earlier: list[tuple[str, int]], pairs: list[tuple[str, int]],
        seed: int, max_in_flight: int) -> None:
    directory = tmp_path_factory.mktemp("origins")

    async def scenario() -> None:
        inputs, recorded = await record(directory, earlier, pairs, seed)
        await replay_and_diff(directory, inputs, recorded, "replay", max_in_flight)

    asyncio.run(scenario())
