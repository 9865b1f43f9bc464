"""The executor pool alone: bounded concurrency, oldest ready slot first, the gate's
extra executor, and how a slot's end is reported."""

from __future__ import annotations

import asyncio

from aiostreams.engine.executor_pool import ExecutorPool
from aiostreams.engine.reorder_buffer import CURRENT_SLOT, Slot, SlotKind
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
