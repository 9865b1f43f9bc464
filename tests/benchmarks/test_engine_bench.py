"""The engine benchmark's controls run end to end on small inputs (not timed: the rates are
printed, not judged here), and do the work they claim: the same outputs as the engine."""

from __future__ import annotations

from collections import Counter

from aiostreams.transport.memory import MemoryBroker
from aiostreams.types import RawRecord, TopicPartition
from benchmarks import engine, engine_controls

N = 1_234  # not a multiple of the loops' batch (500, 2,000) or commit (5,000) sizes


def outputs(broker: MemoryBroker) -> list[tuple[bytes | None, bytes | None, float]]:
    return [(r.key, r.value, r.timestamp) for r in broker.records("out", 0)]


def per_key(records: list[RawRecord]) -> dict[bytes | None, list[bytes | None]]:
    found: dict[bytes | None, list[bytes | None]] = {}
    for r in records:
        found.setdefault(r.key, []).append(r.value)
    return found


async def test_the_hand_rolled_async_loop_produces_every_record_once_and_commits_the_end() -> None:
    broker = MemoryBroker()
    assert await engine_controls.run_hand_rolled_async(N, 50, broker) > 0
    out = broker.records("out", 0)
    inputs = broker.records("in", 0)
    assert Counter((r.key, r.value) for r in out) == Counter((r.key, r.value) for r in inputs)
    assert broker.committed("raw-async", TopicPartition("in", 0)) == N


async def test_the_sync_api_floor_produces_what_the_hand_loop_and_the_engine_produce() -> None:
    hand, api, ours = MemoryBroker(), MemoryBroker(), MemoryBroker()
    assert await engine_controls.run_hand_rolled(N, hand) > 0
    assert await engine_controls.run_hand_rolled(N, api, api=True) > 0
    assert await engine.run_app(engine_controls.SyncIdentity, N, 50, ours) > 0
    assert len(outputs(hand)) == N
    # every record, once, in offset order, byte for byte: the floor does the same work
    assert outputs(api) == outputs(hand) == outputs(ours)
    assert api.committed("raw", TopicPartition("in", 0)) == N


async def test_the_async_api_floor_runs_each_record_through_the_processor_once() -> None:
    api, ours = MemoryBroker(), MemoryBroker()
    assert await engine_controls.run_hand_rolled_async(N, 50, api, api=True) > 0
    assert await engine.run_app(engine_controls.AsyncSleep, N, 50, ours) > 0
    inputs = api.records("in", 0)
    assert Counter(outputs(api)) == Counter((r.key, r.value, r.timestamp) for r in inputs)
    assert api.committed("raw-async", TopicPartition("in", 0)) == N
    # the floor keeps no key order (that is what it leaves out); the engine keeps it
    assert per_key(ours.records("out", 0)) == per_key(inputs)


async def test_the_engine_benchmark_reports_the_api_floors_and_the_engine_over_them() -> None:
    r = await engine.main_async(400, 50, 300, rounds=1)
    assert r["b3_hand_rolled_async"] > 0 and r["b_api_floor"] > 0 and r["a_api_floor"] > 0
    (round_,) = r["async_rounds"]
    assert round_["ratio_b3"] == round_["b"] / round_["b3"]
    assert round_["api_ratio"] == round_["b_api"] / round_["b2"] == r["b_api_ratio_median"]
    assert round_["ratio_api"] == round_["b"] / round_["b_api"] == r["b_ratio_api_median"]
    assert r["a_api_ratio"] == r["a_api_floor"] / r["a1_hand_rolled"]
    assert r["a_ratio_api"] == r["a_sync_engine"] / r["a_api_floor"]
    assert round_["cpu_b_api"] == engine_controls.cpu_us_per_record["api_async"] > 0
