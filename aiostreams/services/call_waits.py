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

from aiostreams.runtime.clock import Clock
from aiostreams.runtime.permit_wait import waiting_for_permit

__all__ = ["CallWaits"]


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
        timer = None
        if deadline is not None:
            def expire() -> None:
                if not waiter.done():
                    waiter.set_result(None)  # the caller sees its deadline passed
            timer = self.clock.call_later(max(0.0, deadline - self.clock.monotonic()),
                                          expire)
        try:
            with waiting_for_permit():
                await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self.wake()  # woken, but leaving: the place goes to the next one
            else:
                waiter.cancel()
            raise
        finally:
            if timer is not None:
                timer.cancel()

    def wake(self) -> None:
        """Wake as many waiters as places are free (at least one), oldest first."""
        free = max(1, self.free())
        waiters = self._waiters
        while free and waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                free -= 1
