"""A declared external service: the one place a pipeline's calls to it go through.

``Service.call(fn)`` waits for a permit, then calls. The permit is, in this order:

1. the **breaker** lets calls out (while it is OPEN the caller waits for the cool-down
   instead of failing: the record is held, not dead-lettered);
2. a **concurrency** place: fewer than ``limit`` calls out (fixed, or adaptive: it moves
   with the outcomes, see :mod:`aiostreams.services.limit`);
3. a **token** of the rate limit.

Only then is the call *dispatched*: its timeout and its latency start there, so time spent
queued for a permit never times a call out (once, with 1,000 records in flight and
``timeout=0.5`` the engine's own timeout used to count queueing, and 425 calls that had
answered were called again). A retry (``attempt > 0``) must first find room in the
**retry budget**; without it, the retry is *held* (as a record waiting for a permit: not
executing) until the budget refills - it is not failed, so a record the service would
answer is never dead-lettered because other records' retries spent the budget, and the
retries still never exceed the budget's share of the calls.

All waiting goes through the :class:`~aiostreams.runtime.clock.Clock`, so tests drive it
with a manual clock. Cancellation: a caller cancelled while waiting for a permit takes no
place; one cancelled during the call gives its place back and counts no outcome.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Literal, TypeVar

from aiostreams.runtime.clock import Clock, LoopClock
from aiostreams.runtime.permit_wait import traced_call, waiting_for_permit
from aiostreams.runtime.trace_hooks import CallTrace
from aiostreams.services.aimd import AimdLimit
from aiostreams.services.breaker import Breaker, BreakerState, CircuitBreaker
from aiostreams.services.budget import RetryBudget
from aiostreams.services.gradient import GradientLimit
from aiostreams.services.limit import Adaptive, FixedLimit, Limit
from aiostreams.services.outcome import classify
from aiostreams.services.rate import RateLimit, TokenBucket
from aiostreams.services.stats import ServiceStats

__all__ = ["Service", "make_limit"]

T = TypeVar("T")

BUDGET_RECHECK = 0.25
"""Seconds between two looks at the retry budget by a retry it holds."""


def make_limit(concurrency: int | Adaptive) -> Limit:
    """The limit a service's ``concurrency=`` declares."""
    if not isinstance(concurrency, Adaptive):
        return FixedLimit(concurrency)
    if concurrency.algorithm == "aimd":
        return AimdLimit(concurrency)
    return GradientLimit(concurrency)


class Service:
    def __init__(self, name: str, *, concurrency: int | Adaptive = 64,
                 rate: RateLimit | None = None, breaker: CircuitBreaker | None = None,
                 timeout: float | None = None, retry_budget: float | None = None,
                 clock: Clock | None = None) -> None:
        if not name:
            raise ValueError("a service needs a name (it labels its metrics)")
        if timeout is not None and timeout <= 0:
            raise ValueError(f"service {name!r}: timeout must be positive seconds; "
                             f"got {timeout}")
        self.name = name
        self.timeout = timeout
        self.clock: Clock = clock or LoopClock()
        self.limiter = make_limit(concurrency)
        now = self.clock.monotonic()
        self.bucket = TokenBucket(rate, now) if rate is not None else None
        self.breaker = Breaker(breaker) if breaker is not None else None
        self.budget = RetryBudget(retry_budget) if retry_budget is not None else None
        self.stats = ServiceStats()
        self.in_flight = 0
        self.waiting = 0
        self._waiters: deque[asyncio.Future[None]] = deque()  # FIFO, waiting for a place

    @property
    def limit(self) -> int:
        return self.limiter.limit

    @property
    def breaker_state(self) -> BreakerState:
        return self.breaker.state if self.breaker is not None else BreakerState.CLOSED

    async def call(self, fn: Callable[[], Awaitable[T]], *, attempt: int = 0,
                   timeout: float | None = None,
                   trace: CallTrace | Literal["record"] | None = "record") -> T:
        """Call ``fn()`` under the service's permit; ``attempt`` > 0 marks a retry;
        ``timeout`` (seconds from dispatch) replaces the service's own for this call (a
        step's ``Retry(timeout=)``); ``trace`` is the call's trace: by default the running
        record's (None unless it is traced), or the one given (a batch's, for its records)."""
        if trace == "record":
            trace = traced_call(self.name, attempt)
        if self.budget is not None:
            now = self.clock.monotonic()
            if attempt == 0:
                self.budget.on_call(now)
            elif not self.budget.try_retry(now):
                self.stats.retries_refused += 1
                await self._wait_for_budget(self.budget)
        await self._acquire()
        try:
            return await self._dispatch(fn, self.timeout if timeout is None else timeout,
                                        trace)
        finally:
            self.in_flight -= 1
            self._wake()

    async def _wait_for_budget(self, budget: RetryBudget) -> None:
        """Hold a retry until the budget lets it out, rechecking at least every
        ``BUDGET_RECHECK`` seconds (first calls make room before old ones leave the
        window). Cancellation: a cancelled wait takes nothing from the budget."""
        self.waiting += 1
        try:
            while True:
                now = self.clock.monotonic()
                if budget.try_retry(now):
                    return
                await self._sleep(min(BUDGET_RECHECK, budget.refill_in(now)))
        finally:
            self.waiting -= 1

    async def _acquire(self) -> None:
        """Wait for the breaker, a concurrency place and a token, in that order."""
        self.waiting += 1
        try:
            while True:
                now = self.clock.monotonic()
                if self.breaker is not None and self.breaker.state is BreakerState.OPEN:
                    await self._sleep(self.breaker.retry_in(now))
                    if self.breaker.state is BreakerState.OPEN:
                        if not self.breaker.try_acquire(self.clock.monotonic()):
                            continue
                        break  # a half-open probe place
                if self.in_flight >= self.limit:
                    await self._next_change()
                    continue
                if self.breaker is not None and not self.breaker.try_acquire(now):
                    await self._next_change()
                    continue
                break
            self.in_flight += 1
        finally:
            self.waiting -= 1
        if self.bucket is not None:
            delay = self.bucket.delay(self.clock.monotonic())
            if delay > 0:
                try:
                    await self._sleep(delay)
                except BaseException:
                    self.in_flight -= 1
                    self._wake()
                    raise

    async def _dispatch(self, fn: Callable[[], Awaitable[T]], timeout: float | None,
                        trace: CallTrace | None = None) -> T:
        started = self.clock.monotonic()
        if trace is not None:
            trace.dispatched()
        in_flight = self.in_flight
        error: BaseException | None = None
        try:
            return await self._timed(fn, timeout)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            error = exc
            raise
        finally:
            if trace is not None:
                trace.ended("cancelled" if error is None and _cancelling()
                            else classify(error).value, error)
            if error is not None or not _cancelling():
                latency = self.clock.monotonic() - started
                outcome = classify(error)
                self.limiter.on_outcome(outcome, latency, in_flight, self.clock.monotonic())
                if self.breaker is not None:
                    self.breaker.on_outcome(outcome, self.clock.monotonic())
                self.stats.record(outcome, latency)

    async def _timed(self, fn: Callable[[], Awaitable[T]], timeout: float | None) -> T:
        if timeout is None:
            return await fn()
        call = asyncio.ensure_future(fn())
        timed_out = False

        def expire() -> None:
            nonlocal timed_out
            if not call.done():
                timed_out = True
                call.cancel()

        timer = self.clock.call_later(timeout, expire)
        try:
            return await call
        except asyncio.CancelledError:
            if timed_out:
                raise TimeoutError(f"service {self.name!r} did not answer within "
                                   f"{timeout} s of the call's dispatch") from None
            raise
        finally:
            timer.cancel()
            if not call.done():
                call.cancel()

    async def _sleep(self, seconds: float) -> None:
        if seconds <= 0:
            return
        done = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not done.done():
                done.set_result(None)

        timer = self.clock.call_later(seconds, wake)
        try:
            with waiting_for_permit():  # the engine parks the record's executor
                await done
        finally:
            timer.cancel()

    async def next_call_end(self) -> None:
        """Wait (as for a permit: not executing) until a call to the service ends: how a
        record held after a 429 paces its next call instead of spinning on refusals."""
        await self._next_change()

    async def _next_change(self) -> None:
        """Wait until a call ends or the breaker moves (a place may have come free).

        Waiters are woken first come, first served, as many as there are free places (at
        least one): waking all of them on every call's end made each end cost O(waiters)
        -- with 500 records waiting on 40 places, the event loop spent itself on wake-ups
        and the calls' measured latency grew tenfold. A waiter woken and then cancelled
        passes its wake-up on."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            with waiting_for_permit():  # the engine parks the record's executor
                await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self._wake()  # woken, but leaving: the place goes to the next one
            else:
                waiter.cancel()
            raise

    def _wake(self) -> None:
        free = max(1, self.limit - self.in_flight)
        waiters = self._waiters
        while free and waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                free -= 1


def _cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
