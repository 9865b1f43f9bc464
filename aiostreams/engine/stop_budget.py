"""How long a stopping worker waits for the broker: a stop is bounded, whatever the broker
does (issue 24).

The whole stop takes at most ``drain_timeout + STOP_GRACE`` seconds; a client whose close
does not return within its share is abandoned with a log line.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Coroutine
from typing import Any, TypeVar

log = logging.getLogger("aiostreams.worker")

T = TypeVar("T")

STOP_GRACE = 10.0
"""Seconds a stop may take beyond ``drain_timeout`` (commit, leaving the group, closing
the clients) before it gives up waiting for the broker."""
CLIENT_CLOSE_MIN = 2.0
"""Seconds each client still gets to close once the stop's budget is spent."""


async def close_within(closing: Awaitable[None], seconds: float, what: str) -> None:
    """Await ``closing`` for at most ``max(seconds, CLIENT_CLOSE_MIN)``; past that, log
    and give up on it (a broker that does not answer must not hold a stop).

    Cancellation: cancels ``closing`` and propagates."""
    try:
        async with asyncio.timeout(max(seconds, CLIENT_CLOSE_MIN)):
            await closing
    except TimeoutError:
        log.warning("worker: gave up waiting for %s to close (the broker did not answer)",
                    what)
    except Exception:  # a client that fails to close must not fail the stop
        log.warning("worker: closing %s failed", what, exc_info=True)


class Shielded:
    """Runs coroutines that must not be cut half-way (commits) as tasks of their own,
    awaited through :func:`asyncio.shield`: cancelling a caller cancels only its wait. A
    stop then :meth:`settle`\\ s them within its budget, or :meth:`abandon`\\ s them when the
    budget is spent."""

    def __init__(self) -> None:
        self._jobs: set[asyncio.Task[Any]] = set()

    async def run(self, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` to its end whatever happens to the caller; return its result.

        Cancellation: the caller stops waiting; ``work`` goes on."""
        job = asyncio.ensure_future(work)
        self._jobs.add(job)
        job.add_done_callback(self._jobs.discard)
        job.add_done_callback(_retrieve)  # its caller may be gone (cancelled)
        return await asyncio.shield(job)

    async def settle(self) -> None:
        """Wait for everything in flight to end (its errors are its callers')."""
        await asyncio.gather(*self._jobs, return_exceptions=True)

    async def abandon(self) -> None:
        """Cancel everything in flight and wait for it to end."""
        for job in list(self._jobs):
            job.cancel()
        await self.settle()


def _retrieve(job: asyncio.Future[Any]) -> None:
    """Mark a finished job's exception as seen (a caller still waiting re-raises it)."""
    if not job.cancelled():
        job.exception()
