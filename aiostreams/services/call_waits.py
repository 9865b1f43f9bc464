"""How a service's callers wait without executing: a sleep, or until a call ends.

Both waits are waits for a permit (:func:`~aiostreams.runtime.permit_wait.
waiting_for_permit`: the engine parks the record's executor and pauses its attempt's
timeout) and go through the service's :class:`~aiostreams.runtime.clock.Clock`, so tests
drive them with a manual clock.

Waiters for a call's end are woken first come, first served, as many as there are free
places (at least one): waking all of them on every call's end made each end cost
O(waiters) - with 500 records waiting on 40 places, the event loop spent itself on
wake-ups and the calls' measured latency grew tenfold. A waiter woken and then cancelled
passes its wake-up on. Cancellation: a cancelled wait leaves nothing behind.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

from aiostreams.runtime.clock import Clock, TimerHandle
from aiostreams.runtime.permit_wait import waiting_for_permit

__all__ = ["CallWaits", "await_turn"]


async def await_turn(waiter: asyncio.Future[None], clock: Clock, deadline: float | None,
                     expire: Callable[[], None], *,
                     passed_on: Callable[[], None] | None = None,
                     left: Callable[[], None] | None = None) -> None:
    """Await ``waiter``, a caller's turn in a first-come queue, as a wait for a permit.
    At ``deadline`` (None: none) ``expire()`` runs if the turn has not come (it resolves
    ``waiter``). A caller cancelled after its turn came calls ``passed_on()`` (the turn
    goes to the next one); one that leaves without a turn (cancelled, or ``expire`` set an
    error) cancels its waiter and calls ``left()`` (its queue drops it). Cancellation:
    re-raised, after the above."""
    timer: TimerHandle | None = None
    if deadline is not None and not waiter.done():
        def on_deadline() -> None:
            if not waiter.done():
                expire()
        timer = clock.call_later(max(0.0, deadline - clock.monotonic()), on_deadline)
    try:
        with waiting_for_permit():
            await waiter
    except BaseException:
        if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
            if passed_on is not None:
                passed_on()
        else:
            waiter.cancel()
            if left is not None:
                left()
        raise
    finally:
        if timer is not None:
            timer.cancel()


class CallWaits:
    def __init__(self, clock: Clock, free: Callable[[], int]) -> None:
        self.clock = clock
        self.free = free  # places free now (woken at a call's end: at least one)
        self._waiters: deque[asyncio.Future[None]] = deque()  # FIFO

    async def sleep(self, seconds: float, deadline: float | None = None) -> None:
        """Sleep ``seconds``, or until ``deadline`` if sooner."""
        if deadline is not None:
            seconds = min(seconds, deadline - self.clock.monotonic())
        if seconds <= 0:
            return
        done = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not done.done():
                done.set_result(None)

        timer = self.clock.call_later(seconds, wake)
        try:
            with waiting_for_permit():
                await done
        finally:
            timer.cancel()

    async def next_change(self, deadline: float | None = None) -> None:
        """Wait until a call ends or the breaker moves (:meth:`wake`: a place may have
        come free), or until ``deadline``."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        # past the deadline the caller sees it passed; woken, but leaving: the place goes
        # to the next one
        await await_turn(waiter, self.clock, deadline, lambda: waiter.set_result(None),
                         passed_on=self.wake)

    def wake(self) -> None:
        """Wake as many waiters as places are free (at least one), oldest first."""
        free = max(1, self.free())
        waiters = self._waiters
        while free and waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                free -= 1
