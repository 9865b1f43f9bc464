"""Coalescing: callers asking for the same key while a call for it is out share that call.

Single-flight (Go's ``singleflight``): the first caller for a key starts the call, later
ones await the same result (or the same exception). The entry goes when the call ends, so
a later caller makes a new call — caching across time is the memo's job, not this one's.
Cancellation: a caller cancelled while it waits leaves the shared call running for the
others; the call is cancelled only when every caller waiting on it has gone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["SingleFlight"]

T = TypeVar("T")


class _Flight(Generic[T]):
    __slots__ = ("task", "waiters")

    def __init__(self, task: asyncio.Task[T]) -> None:
        self.task = task
        self.waiters = 0


class SingleFlight(Generic[T]):
    def __init__(self) -> None:
        self._flights: dict[Hashable, _Flight[T]] = {}
        self.shared = 0  # callers that joined a call already out (calls saved)

    def __len__(self) -> int:
        return len(self._flights)

    def __contains__(self, key: Hashable) -> bool:
        """Is a call for ``key`` out (a caller now would share it)?"""
        return key in self._flights

    async def run(self, key: Hashable, call: Callable[[], Awaitable[T]]) -> T:
        flight = self._flights.get(key)
        if flight is None:
            flight = _Flight(asyncio.ensure_future(call()))
            self._flights[key] = flight
            flight.task.add_done_callback(lambda _: self._landed(key, flight))
        else:
            self.shared += 1
        flight.waiters += 1
        try:
            return await asyncio.shield(flight.task)
        finally:
            flight.waiters -= 1
            if flight.waiters == 0 and not flight.task.done():
                flight.task.cancel()  # nobody is left to want the answer

    def _landed(self, key: Hashable, flight: _Flight[T]) -> None:
        if self._flights.get(key) is flight:
            del self._flights[key]
        if not flight.task.cancelled():
            flight.task.exception()  # retrieved: each waiter got it, or none was left
