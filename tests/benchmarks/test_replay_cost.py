"""``benchmarks.replay_cost --memory``'s cases run at a tiny size: recording on writes about
a line per record of a service step, and nothing for a pipeline without one; off writes
nothing. Figures at this size mean nothing."""

from __future__ import annotations

from benchmarks.replay_cost import cpu_case


async def test_replay_cost_cases_record_only_with_recording_on_and_a_service() -> None:
    on, off = await cpu_case("p1-on", 2000), await cpu_case("p1-off", 2000)
    assert 100 < on["recorded_bytes_per_record"] < 400
    assert off["recorded_bytes_per_record"] == 0
    assert (await cpu_case("p2-on", 2000))["recorded_bytes_per_record"] == 0
    assert on["cpu_us_per_record"] > 0 and off["cpu_us_per_record"] > 0
