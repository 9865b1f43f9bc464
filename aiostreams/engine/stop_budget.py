"""How long a stopping worker waits for the broker: a stop is bounded, whatever the broker
does (issue 24).

The whole stop takes at most ``drain_timeout + STOP_GRACE`` seconds; a client whose close
does not return within its share is abandoned with a log line.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable

log = logging.getLogger("aiostreams.worker")

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
