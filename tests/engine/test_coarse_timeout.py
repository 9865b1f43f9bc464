"""CoarseTimeouts keeps asyncio.timeout's contract with one sweep timer per owner."""

from __future__ import annotations

import asyncio

import pytest

from aiostreams.engine.coarse_timeout import CoarseTimeouts, granularity_for


async def test_a_block_past_its_deadline_raises_timeout_error_within_one_sweep() -> None:
    timeouts = CoarseTimeouts(0.01)
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(TimeoutError, match=r"0\.05 s timeout"), timeouts.bound(0.05):
        await asyncio.Event().wait()  # never returns by itself
    assert 0.05 <= loop.time() - started < 1.0  # deadline + one sweep, + a loaded loop
    assert timeouts.open_blocks == 0


async def test_blocks_that_finish_in_time_are_untouched_and_the_sweep_stops() -> None:
    timeouts = CoarseTimeouts(0.001)

    async def attempt(i: int) -> int:
        with timeouts.bound(10.0):
            await asyncio.sleep(0)
            return i

    assert await asyncio.gather(*(attempt(i) for i in range(1000))) == list(range(1000))
    assert timeouts.open_blocks == 0 and timeouts.sweep is None


async def test_a_cancellation_from_outside_stays_a_cancellation() -> None:
    timeouts = CoarseTimeouts(0.001)
    entered = asyncio.Event()

    async def attempt() -> None:
        with timeouts.bound(10.0):
            entered.set()
            await asyncio.Event().wait()

    task = asyncio.ensure_future(attempt())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert timeouts.open_blocks == 0


async def test_only_the_expired_block_of_many_times_out() -> None:
    timeouts = CoarseTimeouts(0.005)
    release = asyncio.Event()

    async def attempt(timeout: float) -> str:
        with timeouts.bound(timeout):
            await release.wait()
            return "done"

    slow = asyncio.ensure_future(attempt(0.02))
    patient = asyncio.ensure_future(attempt(60.0))
    with pytest.raises(TimeoutError):
        await slow
    release.set()
    assert await patient == "done"


def test_granularity_is_a_tenth_of_the_timeout_within_bounds() -> None:
    assert (granularity_for(300.0), granularity_for(0.05), granularity_for(1e-6)) == (
        1.0, 0.005, 0.001)
    with pytest.raises(ValueError, match="granularity"):
        CoarseTimeouts(0.0)
    with pytest.raises(ValueError, match="timeout"):
        CoarseTimeouts(1.0).bound(0.0)


async def test_a_block_entered_again_after_it_timed_out_times_out_again() -> None:
    # an executor reuses one block for all its attempts: a timeout must not stick to it
    timeouts = CoarseTimeouts(0.005)
    block = timeouts.bound(0.02)
    loop = asyncio.get_running_loop()
    for _ in range(2):
        started = loop.time()
        with pytest.raises(TimeoutError, match=r"0\.02 s timeout"):
            async with asyncio.timeout(3.0):  # only reached if the block never times out
                with block:
                    await asyncio.Event().wait()
        assert loop.time() - started < 2.0, "the block did not time out by itself"
    with block:
        await asyncio.sleep(0)  # in time: untouched
    assert timeouts.open_blocks == 0
