"""The I/O-edge benchmark runs end to end on small inputs (not timed: figures are printed,
not judged, except the dead letters of the outages and of 429s, which must be none
whatever the machine)."""

from __future__ import annotations

import re

import pytest

from benchmarks import io_edge, io_edge_contract

pytestmark = pytest.mark.chaos  # 20 s idle, 2 min at load 10: real HTTP services, seven apps

TINY = io_edge.Sizes(capacity=5, adaptive_seconds=1.0, hot_records=200, batch_records=200,
                     outage_seconds=0.5, outage_records=5_000,
                     # 2 attempts, fewer than the breaker's 5 failures in a row: the
                     # outage's first record runs out of attempts before the breaker opens
                     # (deferred as a suspected outage, not dead-lettered); one attempt
                     # where the service is rate-bound: a 429 that spent it is dead-lettered
                     contract=io_edge_contract.Sizes(rate_phase=2.0, hang_seconds=1.0,
                                                     outage_up=1.0, outage_down=2.0,
                                                     attempts=2, max_backoff=0.1,
                                                     rate_attempts=1))


async def test_every_scenario_prints_its_figures_and_the_outage_dead_letters_nothing(
        capsys: pytest.CaptureFixture[str]) -> None:
    await io_edge.main_async(TINY, contract=False)
    out = capsys.readouterr().out
    for label in ("service alone, 5 calls at once", "adaptive gradient [C] throughput / C's",
                  "adaptive aimd [C/2] 429 share",
                  "fixed 1,000 429 share", "hot keys [coalesce+memo] calls made",
                  "hot keys speed-up", "batching speed-up", "outage full rate again"):
        assert label in out, f"no {label!r} in:\n{out}"
    assert re.search(r"^outage dead-lettered\s+0 ", out, re.M), out
    memo_calls = int(re.search(r"hot keys \[coalesce\+memo\] calls made\s+([\d,]+)",
                               out).group(1).replace(",", ""))  # type: ignore[union-attr]
    bound = int(re.search(r"calls bound \(distinct x ceil\(run/TTL\)\)\s+([\d,]+)",
                          out).group(1).replace(",", ""))  # type: ignore[union-attr]
    assert memo_calls <= bound


async def test_the_contract_scenarios_dead_letter_no_429_and_hold_a_quiet_outage(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 35 (about 15 s): a 429 is held, never dead-lettered, even with one attempt;
    an outage under one record a second holds its records past their 2 quick attempts,
    though the breaker opens only after 5 failures in a row."""
    await io_edge_contract.run_all(TINY.contract)
    out = capsys.readouterr().out
    for label in ("rate-bound [R/2 = 20/s] 429 share after convergence",
                  "hangs 1%: concurrency limit (median of the 2nd half) / floor",
                  "quiet outage every payment finished"):
        assert label in out, f"no {label!r} in:\n{out}"
    assert re.search(r"^rate-bound dead-lettered for 429s\s+0 ", out, re.M), out
    assert re.search(r"^quiet outage dead-lettered\s+0 of", out, re.M), out
