"""With both record caches on (Kafka Streams' ``statestore.cache.max.bytes`` and aiostreams'
``cache_max_bytes``, 10 MB each), grouped-stream, time-, session- and sliding-windowed
aggregations and cogroups end in the same table: the last value per key of the output
topic is equal. The intermediate updates each side emits depend on when its caches flush,
so only what is deterministic is compared - the final table - and that neither side emits
more than there were updates (for sessions and sliding windows, see :func:`check_final`)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from oracle_check import EXAMPLES, ORACLE_SETTINGS, oracle_outputs, prepare
from oracle_jvm import OracleJVM
from oracle_spec import Case, Out, build, key_bytes, value_bytes
from test_oracle_aggregate import aggregate_cases, session_cases, time_window_cases
from test_oracle_cogroup import cogroup_cases, windowed_cogroup_cases
from test_oracle_sliding import sliding_cases

from aiostreams import App
from aiostreams.testing.driver import TopologyTestDriver

pytestmark = [pytest.mark.oracle, pytest.mark.timeout(1800)]

CACHE = 10 * 1024 * 1024
CACHED_SETTINGS = settings(ORACLE_SETTINGS, max_examples=max(1, EXAMPLES // 6))
FEWER_SETTINGS = settings(ORACLE_SETTINGS, max_examples=max(1, EXAMPLES // 12))
"""For the families whose uncached semantics their own oracle tests already hold (sessions,
sliding windows, cogroups): half as many examples (``make test``'s time)."""


async def run_cached(case: Case, commits: frozenset[int] = frozenset()
                     ) -> dict[str, list[Out]]:
    """``case`` through aiostreams' driver with the cache on: all inputs, with a commit
    (the flush) after the inputs numbered in ``commits``, then a commit."""
    app = App(f"oracle-cache-{uuid.uuid4().hex[:8]}", broker=f"memory://{uuid.uuid4().hex}",
              default_partitions=1, cache_max_bytes=CACHE, commit_interval_ms=3_600_000)
    build(app, case, None)
    async with TopologyTestDriver(app) as driver:
        for i, record in enumerate(case["inputs"]):
            driver.pipe_raw_input(record["topic"], key_bytes(record["key"]),
                                  value_bytes(record["value"]), record["ts"] / 1000)
            if i in commits:
                await driver.process_all()
                await driver.commit()
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


def live_table(records: list[Out]) -> dict[str | None, str | None]:
    """The final table without its deleted keys."""
    return {k: v for k, v in final_table(records).items() if v is not None}


def check_final(oracle: OracleJVM, case: Case, *, ranged: bool = False,
                commits: frozenset[int] = frozenset()) -> None:
    """``ranged``: a session or sliding-window aggregate, which finds a key's windows by a
    range read. Its tables are compared without their deleted keys (a session made and
    merged away between two flushes is never sent by a cache that held it, and Kafka
    Streams' test driver flushes after every record), and only on cases where Kafka's cache
    does not change Kafka's own table: its cache answers for windows past the store's
    retention, aiostreams' never does (the deviation "a record cache never shows a window
    past its store's retention", tests/oracle/deviations.py)."""
    import asyncio

    case = prepare(case)
    expected = oracle_outputs(oracle, {**case, "config": {
        "statestore.cache.max.bytes": str(CACHE)}})
    table = live_table if ranged else final_table
    if ranged:
        uncached = oracle_outputs(oracle, {**case, "config": {
            "statestore.cache.max.bytes": "0"}})
        assume(all(table(expected.get(t, [])) == table(uncached.get(t, []))
                   for t in case["outputs"]))
    actual = asyncio.run(run_cached(case, commits))
    for topic in case["outputs"]:
        theirs, ours = expected.get(topic, []), actual.get(topic, [])
        assert table(ours) == table(theirs), (
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


COMMITS = st.frozensets(st.integers(0, 20), max_size=6)
"""After which inputs aiostreams' cached run also commits (and so flushes): a session
flushed there and merged later must be retracted by a later flush."""


@FEWER_SETTINGS
@given(case=session_cases(), commits=COMMITS)
def test_cached_session_aggregations_end_in_kafka_streams_cached_table(
        oracle: OracleJVM, case: dict[str, Any], commits: frozenset[int]) -> None:
    check_final(oracle, case, ranged=True, commits=commits)


@FEWER_SETTINGS
@given(case=sliding_cases(), commits=COMMITS)
def test_cached_sliding_aggregations_end_in_kafka_streams_cached_table(
        oracle: OracleJVM, case: dict[str, Any], commits: frozenset[int]) -> None:
    check_final(oracle, case, ranged=True, commits=commits)


@FEWER_SETTINGS
@given(case=st.one_of(cogroup_cases(), windowed_cogroup_cases()))
def test_cached_cogroups_end_in_kafka_streams_cached_table(
        oracle: OracleJVM, case: dict[str, Any]) -> None:
    check_final(oracle, case)
