"""The executor pool alone: bounded concurrency, oldest ready slot first, the gate's
extra executor, and how a slot's end is reported."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from aiostreams.engine.coarse_timeout import CoarseTimeouts
from aiostreams.engine.executor_pool import ExecutorPool
from aiostreams.runtime.permit_wait import waiting_for_permit
from aiostreams.runtime.slot import CURRENT_SLOT, Slot, SlotKind
from aiostreams.testing import settle


class Harness:
    """Each slot's execution awaits its own future; the test resolves them."""

    def __init__(self, max_concurrency: int) -> None:
        self.release: dict[int, asyncio.Future[None]] = {}
        self.started: list[int] = []
        self.done: list[int] = []
        self.errors: list[tuple[int, str]] = []
        self.pool = ExecutorPool(max_concurrency, execute=self.execute,
                                 on_error=lambda s, e: self.errors.append((s.seq, str(e))),
                                 on_done=lambda s: self.done.append(s.seq))

    async def execute(self, slot: Slot) -> None:
        assert CURRENT_SLOT.get() is slot, "the executor binds the slot it runs"
        self.started.append(slot.seq)
        future = self.release.setdefault(slot.seq, asyncio.get_running_loop().create_future())
        await future

    def finish(self, seq: int, error: Exception | None = None) -> None:
        future = self.release.setdefault(seq, asyncio.get_running_loop().create_future())
        if error is None:
            future.set_result(None)
        else:
            future.set_exception(error)


def slot(seq: int) -> Slot:
    s = Slot(SlotKind.RECORD, None, None, None)
    s.seq = seq
    return s


async def test_no_more_slots_run_at_once_than_max_concurrency() -> None:
    h = Harness(max_concurrency=2)
    for seq in range(4):
        h.pool.dispatch(slot(seq))
    await settle(10)
    assert h.started == [0, 1]
    assert len(h.pool) == 2
    await h.pool.cancel_all()


async def test_a_freed_executor_takes_the_oldest_ready_slot() -> None:
    h = Harness(max_concurrency=1)
    h.pool.dispatch(slot(0))
    for seq in (7, 3, 5):
        h.pool.dispatch(slot(seq))
    await settle(10)
    for expected in (0, 3, 5):
        h.finish(expected)
        await settle(10)
    assert h.started == [0, 3, 5, 7]
    assert h.done == [0, 3, 5]
    await h.pool.cancel_all()


async def test_ready_slots_in_and_out_of_sequence_order_are_served_oldest_first() -> None:
    # 2, 4, 6 wait in sequence order, 3 and 5 arrive after a newer one (a key's successor):
    # the pool keeps them apart and must still interleave them by age
    h = Harness(max_concurrency=1)
    h.pool.dispatch(slot(1))
    for seq in (2, 4, 3, 6, 5):
        h.pool.dispatch(slot(seq))
    await settle(10)
    for expected in (1, 2, 3, 4, 5):
        h.finish(expected)
        await settle(10)
    assert h.started == [1, 2, 3, 4, 5, 6]
    await h.pool.cancel_all()


async def test_a_failed_slot_goes_to_on_error_and_the_executor_carries_on() -> None:
    h = Harness(max_concurrency=1)
    h.pool.dispatch(slot(0))
    h.pool.dispatch(slot(1))
    await settle(10)
    h.finish(0, ValueError("boom"))
    await settle(10)
    h.finish(1)
    await settle(10)
    assert h.errors == [(0, "boom")]
    assert h.done == [1]
    await h.pool.cancel_all()


async def test_an_executor_parked_in_the_gate_lets_one_more_run() -> None:
    h = Harness(max_concurrency=1)
    h.pool.dispatch(slot(0))
    h.pool.dispatch(slot(1))
    await settle(10)
    assert h.started == [0]
    h.pool.parked(+1)  # slot 0 waits for earlier records: slot 1 must get an executor
    await settle(10)
    assert h.started == [0, 1]
    h.finish(1)
    await settle(10)
    h.pool.parked(-1)
    h.finish(0)
    await settle(10)
    assert len(h.pool) == 1, "the extra executor ends once nobody is parked"
    await h.pool.cancel_all()


async def test_cancel_all_ends_every_executor() -> None:
    h = Harness(max_concurrency=3)
    for seq in range(3):
        h.pool.dispatch(slot(seq))
    await settle(10)
    await h.pool.cancel_all()
    assert len(h.pool) == 0
    assert h.done == [] and h.errors == []


# -- the executor's timeout block (coarse_timeout.ExecutorBlock), opened per attempt inline --


class _Later:
    """The running loop, with its clock ``ahead`` seconds on: a sweep run through it
    sees every deadline before then as passed (no waiting for real time)."""

    def __init__(self, ahead: float) -> None:
        self._loop = asyncio.get_running_loop()
        self._ahead = ahead

    def time(self) -> float:
        return self._loop.time() + self._ahead

    def call_later(self, delay: float, callback: Any, *args: Any) -> asyncio.TimerHandle:
        return self._loop.call_later(delay, callback, *args)


def timed_harness(timeouts: CoarseTimeouts, timeout: float = 10.0) -> Harness:
    h = Harness(max_concurrency=1)
    h.pool = ExecutorPool(1, execute=h.execute,
                          on_error=lambda s, e: h.errors.append((s.seq, type(e).__name__)),
                          on_done=lambda s: h.done.append(s.seq),
                          block=lambda: timeouts.executor_block(timeout))
    return h


def sweep_past_deadlines(timeouts: CoarseTimeouts) -> None:
    timeouts._expire(_Later(1e6))  # type: ignore[arg-type]
    if timeouts.sweep is not None:  # the next sweeps on the real clock again
        timeouts.sweep.cancel()
        timeouts.sweep = None
        timeouts.arm()


async def test_an_attempt_past_its_timeout_ends_in_timeout_error_and_the_next_runs() -> None:
    timeouts = CoarseTimeouts(1.0)
    h = timed_harness(timeouts)
    h.pool.dispatch(slot(0))
    h.pool.dispatch(slot(1))
    await settle(10)
    assert timeouts.open_blocks == 1
    sweep_past_deadlines(timeouts)  # slot 0 never answers: its attempt is cancelled
    await settle(10)
    assert h.errors == [(0, "TimeoutError")] and h.started == [0, 1]
    h.finish(1)  # its clock started afresh: the sweep passed before it began
    await settle(10)
    assert h.done == [1] and timeouts.open_blocks == 0
    await h.pool.cancel_all()


async def test_an_idle_executor_is_never_timed_out() -> None:
    timeouts = CoarseTimeouts(1.0)
    h = timed_harness(timeouts)
    h.pool.dispatch(slot(0))
    await settle(10)
    h.finish(0)
    await settle(10)
    (executor,) = h.pool._executors
    sweep_past_deadlines(timeouts)  # the executor waits for work: its block is closed
    await settle(10)
    assert not executor.done(), "a sweep cancelled an executor between attempts"
    h.pool.dispatch(slot(1))
    h.finish(1)
    await settle(10)
    assert h.done == [0, 1] and h.errors == []
    await h.pool.cancel_all()


async def test_cancelling_the_pool_stays_a_cancellation_and_releases_the_blocks() -> None:
    timeouts = CoarseTimeouts(1.0)
    h = timed_harness(timeouts)
    h.pool.dispatch(slot(0))
    await settle(10)
    await h.pool.cancel_all()
    assert h.errors == [] and h.done == []
    assert timeouts.open_blocks == 0 and not timeouts._executors


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(["done", "error", "timeout"]), min_size=1, max_size=12))
def test_each_attempt_ends_as_it_should_and_only_attempts_hold_a_deadline(
        outcomes: list[str]) -> None:
    """Whatever the sequence of attempts on one executor (finished, failed, timed out),
    each is reported as what it did, and the block is open exactly during an attempt."""

    async def run() -> None:
        timeouts = CoarseTimeouts(1.0)
        h = timed_harness(timeouts)
        expected_errors: list[tuple[int, str]] = []
        expected_done: list[int] = []
        for seq, outcome in enumerate(outcomes):
            h.pool.dispatch(slot(seq))
            await settle(6)
            assert h.started[-1] == seq and timeouts.open_blocks == 1
            if outcome == "done":
                h.finish(seq)
                expected_done.append(seq)
            elif outcome == "error":
                h.finish(seq, ValueError("boom"))
                expected_errors.append((seq, "ValueError"))
            else:
                sweep_past_deadlines(timeouts)
                expected_errors.append((seq, "TimeoutError"))
            await settle(6)
            assert timeouts.open_blocks == 0, f"the block stayed open after {outcome}"
            assert (h.done, h.errors) == (expected_done, expected_errors)
        assert len(h.pool) == 1, "one executor ran every attempt"
        await h.pool.cancel_all()

    asyncio.run(run())


async def test_an_attempt_waiting_for_a_permit_is_not_timed_out_until_it_resumes() -> None:
    timeouts = CoarseTimeouts(1.0)
    permit = asyncio.get_running_loop().create_future()
    errors: list[str] = []

    async def execute(s: Slot) -> None:
        with waiting_for_permit():  # the executor's block is paused meanwhile
            await permit
        await asyncio.get_running_loop().create_future()  # the call never answers

    pool = ExecutorPool(1, execute=execute, on_error=lambda s, e: errors.append(type(e).__name__),
                        on_done=lambda s: None, block=lambda: timeouts.executor_block(10.0))
    pool.dispatch(slot(0))
    await settle(10)
    sweep_past_deadlines(timeouts)
    await settle(10)
    assert errors == [] and timeouts.open_blocks == 1, "timed out while waiting for a permit"
    permit.set_result(None)
    await settle(10)
    assert timeouts.sweep is not None, "the resumed attempt is swept again"
    sweep_past_deadlines(timeouts)
    await settle(10)
    assert errors == ["TimeoutError"]
    await pool.cancel_all()
