"""The engine benchmark's controls run end to end on small inputs (not timed: the rates are
printed, not judged here)."""

from __future__ import annotations

from collections import Counter

from aiostreams.transport.memory import MemoryBroker
from aiostreams.types import TopicPartition
from benchmarks import engine


async def test_the_hand_rolled_async_loop_produces_every_record_once_and_commits_the_end() -> None:
    broker = MemoryBroker()
    n = 1_234  # not a multiple of the loop's batch (500) or commit (5,000) sizes
    assert await engine.run_hand_rolled_async(n, 50, broker) > 0
    out = broker.records("out", 0)
    inputs = broker.records("in", 0)
    assert Counter((r.key, r.value) for r in out) == Counter((r.key, r.value) for r in inputs)
    assert broker.committed("raw-async", TopicPartition("in", 0)) == n


async def test_the_engine_benchmark_reports_both_async_ratios_and_the_composed_bound() -> None:
    r = await engine.main_async(400, 50, 300, rounds=1)
    assert r["b3_hand_rolled_async"] > 0
    (round_,) = r["async_rounds"]
    assert round_["ratio_b3"] == round_["b"] / round_["b3"]
    # in CPU: (b) does (a)'s work and (b'')'s per record, within the concurrency bound
    assert round_["bound"] == engine.composed_bound(r["b1_bound"], r["cpu_a"], round_["cpu_b2"],
                                                    round_["b2"])
    assert r["composed_bound"] == round_["bound"] > 0


def test_the_composed_bound_is_the_cpu_bound_or_the_concurrency_bound_whichever_is_lower(
        ) -> None:
    # (a) 2 us + (b'') 3 us of CPU a record: 200,000/s; capped at (b') 150,000/s
    assert engine.composed_bound(150_000, 2.0, 3.0, 100_000) == 1.5
    assert engine.composed_bound(400_000, 2.0, 3.0, 100_000) == 2.0
    assert engine.composed_bound(400_000, 6.0, 4.0, 200_000) == 0.5
