"""The engine's guarantee, seen through the DSL: a word count, a windowed aggregation and a
stream-table join give the same outputs and the same final store contents for every
``max_in_flight``, while an async step before the stateful one completes in a random order
(each call awaits a seeded-random number of loop turns).

Outputs are compared per key, in order: that is what one task decides. How the outputs of
*different* tasks interleave in a shared output partition depends on when each task's
commit flushes, for any ``max_in_flight`` (as in Kafka Streams)."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
from dslkit import In, RunResult, make_app, produce, random_yields, run_app

from aiostreams import App
from aiostreams.windows import TimeWindowedSerde, TumblingWindows

WINDOWS = [1, 64, 1024]


def word_count(app: App, seed: int) -> list[Any]:
    # One input partition: with two, the two upstream tasks would interleave a word's
    # records in the repartition topic in flush order (timestamps of the updates differ).
    lines = app.topic("lines", key=str, value=str, partitions=1)
    counts = app.topic("counts", key=str, value=int, partitions=2)
    (app.stream(lines).map_values_async(random_yields(seed))
     .flat_map_values(str.split).group_by(lambda _, word: word)
     .count(materialized="counts").to_stream().to(counts))
    rng = random.Random(seed)
    words = ["ant", "bee", "cat", "dog", "eel", "fox", "gnu"]
    produce(app, lines, [In(f"line{i % 13}", " ".join(rng.choices(words, k=rng.randint(1, 6))),
                            float(i)) for i in range(200)])
    return [counts]


def windowed(app: App, seed: int) -> list[Any]:
    clicks = app.topic("clicks", key=str, value=str, partitions=2)
    out = app.topic("per-window", key=TimeWindowedSerde(str, size=10.0), value=int, partitions=2)
    (app.stream(clicks).map_values_async(random_yields(seed)).group_by_key()
     .windowed_by(TumblingWindows(10.0, grace=3.0))
     .count(materialized="windows", retention=1000.0).to_stream().to(out))
    rng = random.Random(seed)
    # roughly increasing time, with out-of-order records some of which are late
    produce(app, clicks, [In(f"user{rng.randint(0, 9)}", "click",
                             max(0.0, i * 0.5 - rng.choice([0, 0, 0, 1, 4, 12])))
                          for i in range(300)])
    return [out]


def stream_table_join(app: App, seed: int) -> list[Any]:
    orders = app.topic("orders", key=str, value=int, partitions=2)
    tiers = app.topic("tiers", key=str, value=str, partitions=2)
    out = app.topic("enriched", key=str, value="json", partitions=2)
    table = app.table(tiers, materialized="tiers")
    (app.stream(orders).map_values_async(random_yields(seed))
     .left_join(table, lambda amount, tier: [amount, tier]).to(out))
    rng = random.Random(seed)
    produce(app, tiers, [In(f"c{rng.randint(0, 7)}", rng.choice(["gold", "silver"]),
                            float(2 * i)) for i in range(60)])
    produce(app, orders, [In(f"c{rng.randint(0, 7)}", i, float(i)) for i in range(150)])
    return [out]


SCENARIOS: dict[str, Callable[[App, int], list[Any]]] = {
    "word_count": word_count,
    "windowed_aggregation": windowed,
    "stream_table_join": stream_table_join,
}


async def run(scenario: str, max_in_flight: int, seed: int) -> tuple[Any, ...]:
    app = make_app(max_in_flight=max_in_flight, max_task_idle_ms=100.0)
    outputs = SCENARIOS[scenario](app, seed)
    result: RunResult = await run_app(app, outputs)
    late = app.late_records.total
    return ({t.name: per_key(result, t.name) for t in outputs}, result.stores, late)


def per_key(result: RunResult, topic: str) -> dict[Any, list[Any]]:
    sequences: dict[Any, list[Any]] = {}
    for _, key, value, ts in result.outputs[topic]:
        sequences.setdefault(key, []).append((value, ts))
    return sequences


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("scenario", [
    "word_count",
    "windowed_aggregation",
    "stream_table_join",
])
async def test_outputs_and_stores_are_identical_for_every_max_in_flight(
        scenario: str, seed: int) -> None:
    oracle = await run(scenario, 1, seed)
    outputs, stores, _ = oracle
    assert all(outputs.values()) and all(stores.values())  # the scenario did something
    for window in WINDOWS[1:]:
        assert await run(scenario, window, seed) == oracle, f"max_in_flight={window}"


async def test_the_windowed_scenario_has_late_records_to_drop() -> None:
    _, _, late = await run("windowed_aggregation", 1, 1)
    assert late > 0
