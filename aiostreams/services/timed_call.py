"""A service's call bounded by its timeout, counted on the service's clock from dispatch.

The call runs as a task of its own so the timer can cancel it; a call that did not answer
in time raises :class:`TimeoutError` (what the contract judges a timeout), one cancelled
from outside is cancelled. Cancellation: the call's task is cancelled with the caller.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from aiostreams.runtime.clock import Clock

__all__ = ["call_within"]

T = TypeVar("T")


async def call_within(fn: Callable[[], Awaitable[T]], timeout: float | None, clock: Clock,
                      service: str) -> T:
    """``await fn()``, raising :class:`TimeoutError` after ``timeout`` seconds (None: no
    bound)."""
    if timeout is None:
        return await fn()
    call = asyncio.ensure_future(fn())
    timed_out = False

    def expire() -> None:
        nonlocal timed_out
        if not call.done():
            timed_out = True
            call.cancel()

    timer = clock.call_later(timeout, expire)
    try:
        return await call
    except asyncio.CancelledError:
        if timed_out:
            raise TimeoutError(f"service {service!r} did not answer within {timeout} s of "
                               "the call's dispatch") from None
        raise
    finally:
        timer.cancel()
        if not call.done():
            call.cancel()
