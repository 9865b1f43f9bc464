"""The gate a service's calls pass once they hold a concurrency place: the learned pace.

Callers queue first come, first served; one timer waits for the head's turn (the pause a
``Retry-After`` asked for, then a token of the :class:`~aiostreams.services.learned_rate.
LearnedRate`), so a call costs O(1) wake-ups however many wait, and a change of the rate or
a new pause (:meth:`DispatchGate.changed`) applies to every caller still queued - a cut
slows the calls already waiting, not only the ones that come after it.

A caller may give a deadline (a record's ``max_hold``): past it the wait raises what
``expired()`` makes. Cancellation: a caller cancelled while queued takes no token and
leaves the queue; one cancelled after its turn came has spent its token.

Invariant: the head of the queue is never passed over while its turn is due (asserted by
the order in which :meth:`_release` resolves waiters).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

from aiostreams.runtime.clock import Clock, TimerHandle
from aiostreams.services.call_waits import await_turn
from aiostreams.services.learned_rate import LearnedRate

__all__ = ["DispatchGate"]


class DispatchGate:
    def __init__(self, rate: LearnedRate, clock: Clock) -> None:
        self.rate = rate
        self.clock = clock
        self._queue: deque[asyncio.Future[None]] = deque()
        self._timer: TimerHandle | None = None

    def __len__(self) -> int:
        return sum(1 for w in self._queue if not w.done())

    async def enter(self, deadline: float | None = None,
                    expired: Callable[[], BaseException] | None = None) -> None:
        """Wait for this caller's turn (see the module docstring)."""
        now = self.clock.monotonic()
        if not self._queue and self.rate.wait(now) <= 0.0:
            self.rate.take(now)
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append(waiter)
        self._release()

        def expire() -> None:
            waiter.set_exception(expired() if expired is not None
                                 else TimeoutError("held past its deadline"))
            self._release()
        await await_turn(waiter, self.clock, deadline, expire, left=self._release)

    def changed(self) -> None:
        """The rate or the pause moved: recompute the head's turn."""
        self._release()

    def _release(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        queue = self._queue
        while queue:
            if queue[0].done():  # cancelled or expired
                queue.popleft()
                continue
            now = self.clock.monotonic()
            wait = self.rate.wait(now)
            if wait > 0.0:
                self._timer = self.clock.call_later(wait, self._release)
                return
            self.rate.take(now)
            queue.popleft().set_result(None)
