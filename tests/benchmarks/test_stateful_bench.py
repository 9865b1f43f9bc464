"""The stateful benchmark runs every case end to end at a tiny size (rates are printed, not
judged here), and its floors do the work they claim: the outputs aiostreams produces."""

from __future__ import annotations

import pytest

from aiostreams.transport.memory import MemoryBroker
from benchmarks import stateful
from benchmarks.stateful_cases import CASES

N, KEYS = 2_500, 300  # keys recur; windows open and close


def outputs(broker: MemoryBroker) -> list[tuple[bytes | None, bytes | None, float]]:
    return [(r.key, r.value, r.timestamp) for r in broker.records("out", 0)]


@pytest.mark.parametrize("case", sorted(CASES))
async def test_each_case_and_its_floor_produce_the_same_outputs(case: str) -> None:
    ours, floors = MemoryBroker(), MemoryBroker()
    elapsed, cpu, inputs = await stateful.run_memory(case, N, KEYS, ours)
    assert elapsed > 0 and cpu > 0 and inputs == CASES[case].input_count(N, KEYS)
    stateful.floor(case, N, KEYS, floors)
    assert len(outputs(ours)) == CASES[case].outputs(N, KEYS)
    assert outputs(ours) == outputs(floors)


async def test_the_counted_run_reports_each_case_per_input_record() -> None:
    counts = await stateful.counted("count", N, KEYS)
    assert counts["store_writes"] == 1.0  # one aggregate update a record
    assert counts["changelog_records"] == 1.0
    assert counts["view_reads"] == 1.0
