"""How long a stopping worker waits for the broker: a stop is bounded, whatever the broker
does.

The whole stop takes at most ``drain_timeout + STOP_GRACE`` seconds; a client whose close
does not return within its share is abandoned with a log line.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Coroutine, Mapping
from typing import Any, TypeVar

from aiostreams.errors import UncommittedStopError
from aiostreams.types import TopicPartition

log = logging.getLogger("aiostreams.worker")

T = TypeVar("T")

STOP_GRACE = 10.0
"""Seconds a stop may take beyond ``drain_timeout`` (commit, leaving the group, closing
the clients) before it gives up waiting for the broker."""
CLIENT_CLOSE_MIN = 2.0
"""Seconds kept, at the end of the stop's budget, for closing the clients (together); a
client still closing then is abandoned."""


async def close_within(closing: Awaitable[None], seconds: float, what: str, *,
                       at_least: float = CLIENT_CLOSE_MIN) -> None:
    """Await ``closing`` for at most ``max(seconds, at_least)``; past that, log and give
    up on it (a broker that does not answer must not hold a stop).

    Cancellation: cancels ``closing`` and propagates."""
    try:
        async with asyncio.timeout(max(seconds, at_least)):
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


def not_committed(processed: Mapping[TopicPartition, int],
                  committed: Mapping[TopicPartition, int]
                  ) -> dict[TopicPartition, tuple[int, int]]:
    """Per partition, ``(committed, processed)`` where the tasks processed past the last
    commit (``processed``: each partition's committable offset)."""
    return {tp: (committed.get(tp, 0), offset) for tp, offset in sorted(processed.items())
            if offset > committed.get(tp, 0)}


def uncommitted_stop(pending: Mapping[TopicPartition, tuple[int, int]], why: str
                     ) -> UncommittedStopError:
    """The error a stop ends with when its last commit did not land (``why``)."""
    shown = ", ".join(f"{tp} offsets {first}..{end - 1}"
                      for tp, (first, end) in sorted(pending.items()))
    count = sum(end - first for first, end in pending.values())
    return UncommittedStopError(
        f"stopped without committing the last {count} record(s) processed ({why}): "
        f"{shown}. Nothing is lost: they are processed again at the next start "
        "(at-least-once: their outputs may repeat; exactly-once: their transaction was "
        "aborted). If the broker is down, start again once it is back",
        {(tp.topic, tp.partition): span for tp, span in pending.items()})
