"""The promise of replay: the same version over the same recording gives the same outputs
(an empty diff) at any ``max_in_flight`` and any answer latencies, and the outputs the
recorded run gave - a property over random inputs, answers and latencies.

``AIOSTREAMS_REPLAY_EXAMPLES`` sets how many examples (default 6, a few seconds: the suite
runs that; set 100 or more for a long run)."""

from __future__ import annotations

import asyncio
import os
import random
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import aiostreams as ais
from aiostreams.replay import InputRange, Recording, diff_runs, read_outputs, read_ranges, replay
from aiostreams.types import RawRecord

EXAMPLES = int(os.environ.get("AIOSTREAMS_REPLAY_EXAMPLES", "6"))
PARTITIONS = 3


class NoRisk(Exception):
    pass


def build(broker: str, seed: int, **settings: Any) -> ais.App:
    """in (3 partitions) -> risk service (random answers and latencies; values divisible by
    13 fail for good: dead-lettered) -> per-key running sum of the answers -> out."""
    app = ais.App("replayprop", broker=broker, on_error="dead_letter",
                  dead_letter_topic="in-dlq", commit_interval_ms=50, **settings)
    inputs = app.topic("in", key=str, value=int, partitions=PARTITIONS)
    out = app.topic("out", key=str, value=int)
    risk = app.service("risk", concurrency=16)
    rng = random.Random(seed)

    async def ask(value: int) -> int:
        await asyncio.sleep(rng.uniform(0, 0.003))
        if value % 13 == 0:
            raise NoRisk(f"no risk for {value}")
        return value + rng.randrange(1000)  # drifts: a live rerun would differ

    (app.stream(inputs)
        .map_values_async(ask, service=risk)
        .group_by_key()
        .aggregate(0, lambda key, answer, total: total + answer, value_serde=int)
        .to_stream()
        .to(out))
    return app


async def record(directory: Path, payments: list[tuple[str, int]], seed: int
                 ) -> tuple[list[RawRecord], Counter[tuple[bytes | None, bytes | None]]]:
    """Run once, recording; the inputs as the broker holds them, and the outputs."""
    broker = f"memory://replayprop-{uuid.uuid4().hex[:8]}"
    app = build(broker, seed, record_services_dir=str(directory / "recording"))
    async with app.producer() as producer:
        for i, (key, value) in enumerate(payments):
            await producer.send("in", key, value, timestamp=1_700_000_000.0 + i)
    async with app:
        await app.wait_until_caught_up(timeout=60)
    inputs = await read_ranges(broker, [InputRange("in", p, 0, None)
                                        for p in range(PARTITIONS)])
    outs = await read_ranges(broker, [InputRange("out", 0, 0, None)])
    return inputs, Counter((r.key, r.value) for r in outs)


async def replay_once(directory: Path, inputs: list[RawRecord], name: str,
                      max_in_flight: int, latency_scale: float) -> None:
    await replay(build("memory://", 0), inputs, directory / name,
                     recording=Recording.open(directory / "recording"),
                     max_in_flight=max_in_flight, latency_scale=latency_scale)


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(payments=st.lists(st.tuples(st.sampled_from("abcdefg"), st.integers(0, 500)),
                         min_size=1, max_size=60),
       seed=st.integers(0, 2**32 - 1),
       max_in_flight=st.sampled_from([1, 7, 1000]),
       latency_scale=st.sampled_from([0.0, 1.0]))
def test_replaying_the_same_version_gives_an_empty_diff_at_any_max_in_flight(
        tmp_path_factory: Any, payments: list[tuple[str, int]], seed: int,
        max_in_flight: int, latency_scale: float) -> None:
    directory = tmp_path_factory.mktemp("replay")

    async def scenario() -> None:
        inputs, recorded = await record(directory, payments, seed)
        await replay_once(directory, inputs, "serial", 1, 0.0)
        await replay_once(directory, inputs, "wide", max_in_flight, latency_scale)
        serial, wide = read_outputs(directory / "serial"), read_outputs(directory / "wide")
        assert diff_runs(serial, wide).equal, diff_runs(serial, wide).summary(5)
        assert Counter((r.key, r.value) for r in serial["out"]) == recorded
        dead = sum(1 for _, v in payments if v % 13 == 0)
        assert len(serial["in-dlq"]) == dead
        assert all(r.source is not None for r in serial["out"] + serial["in-dlq"])

    asyncio.run(scenario())
