"""A record waiting for a service's permit is not executing: its executor is parked (another
record runs in its place) and its attempt's timeout is paused."""

from __future__ import annotations

import asyncio

import pytest

from aiostreams.engine.coarse_timeout import CoarseTimeouts
from aiostreams.engine.executor_pool import ExecutorPool
from aiostreams.runtime.permit_wait import bind_attempt, unbind_attempt, waiting_for_permit
from aiostreams.runtime.slot import Slot, SlotKind
from aiostreams.services import Service
from aiostreams.testing import ManualClock, settle


def slot(seq: int) -> Slot:
    s = Slot(SlotKind.RECORD, None, None, None)
    s.seq = seq
    return s


async def test_a_record_waiting_for_a_permit_gives_its_executor_to_another_record() -> None:
    service = Service("s", concurrency=1, clock=ManualClock())
    answers: dict[int, asyncio.Future[None]] = {}
    started: list[int] = []
    done: list[int] = []

    async def execute(s: Slot) -> None:
        if s.seq in (1, 2):  # these two call the service; 3 does not
            async def call() -> None:
                started.append(s.seq)
                await answers.setdefault(s.seq, asyncio.get_running_loop().create_future())
            await service.call(call)
        else:
            started.append(s.seq)

    pool = ExecutorPool(2, execute=execute, on_error=lambda s, e: None,
                        on_done=lambda s: done.append(s.seq))
    for seq in (1, 2, 3):
        pool.dispatch(slot(seq))
    await settle(6)
    # 1 holds the service's only place; 2 waits for it, parked: 3 runs although both
    # executors the pool allows are taken
    assert started == [1, 3] and done == [3] and service.waiting == 1
    answers[1].set_result(None)
    await settle(6)
    assert started == [1, 3, 2]
    answers[2].set_result(None)
    await settle(6)
    assert done == [3, 1, 2] and pool._parked == 0  # every park was undone
    await pool.cancel_all()


async def test_an_attempt_timeout_stands_still_while_the_record_waits_for_a_permit() -> None:
    timeouts = CoarseTimeouts(0.005)
    loop = asyncio.get_running_loop()
    permit = asyncio.Event()
    block = timeouts.bound(0.05)
    token = bind_attempt(block)
    started = loop.time()
    try:
        with pytest.raises(TimeoutError, match=r"0\.05 s timeout"), block:
            loop.call_later(0.15, permit.set)  # the permit comes 3x the timeout later
            with waiting_for_permit():
                await permit.wait()
            waited = loop.time() - started
            await asyncio.Event().wait()  # the call itself never answers
    finally:
        unbind_attempt(token)
    assert waited >= 0.15  # not timed out while waiting
    assert loop.time() - started >= waited + 0.05  # the full timeout ran after the wait
