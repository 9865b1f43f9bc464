"""With both record caches on (Kafka Streams' ``statestore.cache.max.bytes`` and aiostreams'
``cache_max_bytes``, 10 MB each), grouped-stream and time-windowed aggregations end in the
same table: the last value per key of the output topic is equal. The intermediate updates
each side emits depend on when its caches flush, so only what is deterministic is
compared - the final table - and that neither side emits more than there were updates."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from oracle_check import EXAMPLES, ORACLE_SETTINGS, oracle_outputs, prepare
from oracle_jvm import OracleJVM
from oracle_spec import Case, Out, build, key_bytes, value_bytes
from test_oracle_aggregate import aggregate_cases, time_window_cases

from aiostreams import App
from aiostreams.testing.driver import TopologyTestDriver

pytestmark = [pytest.mark.oracle, pytest.mark.timeout(1800)]

CACHE = 10 * 1024 * 1024
CACHED_SETTINGS = settings(ORACLE_SETTINGS, max_examples=max(1, EXAMPLES // 6))


async def run_cached(case: Case) -> dict[str, list[Out]]:
    """``case`` through aiostreams' driver with the cache on: all inputs, then a commit
    (the flush)."""
    app = App(f"oracle-cache-{uuid.uuid4().hex[:8]}", broker=f"memory://{uuid.uuid4().hex}",
              default_partitions=1, cache_max_bytes=CACHE, commit_interval_ms=3_600_000)
    build(app, case, None)
    async with TopologyTestDriver(app) as driver:
        for record in case["inputs"]:
            driver.pipe_raw_input(record["topic"], key_bytes(record["key"]),
                                  value_bytes(record["value"]), record["ts"] / 1000)
        await driver.process_all()
        for _ in range(3):  # a flush feeds a repartitioned aggregate's task
            await driver.commit()
            await driver.process_all()
        return {topic: [{"k": None if r.key is None else r.key.hex(),
                         "v": None if r.value is None else r.value.hex()}
                        for r in driver.read_raw_output(topic)]
                for topic in case["outputs"]}


def final_table(records: list[Out]) -> dict[str | None, str | None]:
    table: dict[str | None, str | None] = {}
    for r in records:
        table[r["k"]] = r["v"]
    return table


def check_final(oracle: OracleJVM, case: Case) -> None:
    import asyncio

    case = prepare(case)
    expected = oracle_outputs(oracle, {**case, "config": {
        "statestore.cache.max.bytes": str(CACHE)}})
    actual = asyncio.run(run_cached(case))
    for topic in case["outputs"]:
        theirs, ours = expected.get(topic, []), actual.get(topic, [])
        assert final_table(ours) == final_table(theirs), (
            f"final tables differ on {topic}\nops: {case['ops']}\n"
            f"kafka: {theirs}\naiostreams: {ours}")
        assert len(ours) <= len(case["inputs"]) * 5  # at most an update per window


@CACHED_SETTINGS
@given(case=aggregate_cases())
def test_cached_aggregations_end_in_kafka_streams_cached_table(
        oracle: OracleJVM, case: dict[str, Any]) -> None:
    check_final(oracle, case)


@CACHED_SETTINGS
@given(case=time_window_cases())
def test_cached_windowed_aggregations_end_in_kafka_streams_cached_table(
        oracle: OracleJVM, case: dict[str, Any]) -> None:
    check_final(oracle, case)
