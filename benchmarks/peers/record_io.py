"""The I/O each record awaits in P1: ``asyncio.sleep`` or a GET of the local I/O server.

Used by the async contenders (aiostreams, Faust, raw aiokafka); Quix Streams has no async
processing, so :func:`blocking_wait` is its equivalent (``time.sleep`` / ``urllib``).
aiohttp and the standard library only (imported by contenders in the peers venv).
"""

from __future__ import annotations

import asyncio
import random
import time
import urllib.request
from collections.abc import Callable
from typing import Any

from benchmarks.peers.options import TAIL_SECONDS, TAIL_SHARE, ContenderOptions


class RecordIO:
    """``await wait()`` once per record. Start it inside the contender's event loop (the
    HTTP session belongs to that loop) and close it there; ``io="none"`` does nothing."""

    def __init__(self, options: ContenderOptions) -> None:
        self.options = options
        self._session: Any = None

    async def start(self) -> None:
        if self.options.io == "http" and self._session is None:
            import aiohttp

            # no connection limit: the contender's own concurrency is what is measured
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, force_close=False))

    async def wait(self) -> None:
        if self.options.io == "sleep":
            await asyncio.sleep(self.options.io_seconds)
        elif self.options.io == "jitter":
            await asyncio.sleep(self.options.io_seconds * random.uniform(0.2, 1.8))
        elif self.options.io == "tail":
            await asyncio.sleep(TAIL_SECONDS if random.random() < TAIL_SHARE
                                else self.options.io_seconds)
        elif self.options.io == "http":
            if self._session is None:
                await self.start()
            async with self._session.get(self.options.io_url) as response:
                response.raise_for_status()
                await response.read()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def blocking_wait(options: ContenderOptions) -> Callable[[], None]:
    """The blocking equivalent of :meth:`RecordIO.wait`, for a synchronous contender."""
    if options.io == "sleep":
        seconds = options.io_seconds
        return lambda: time.sleep(seconds)
    if options.io == "jitter":
        mean = options.io_seconds
        return lambda: time.sleep(mean * random.uniform(0.2, 1.8))
    if options.io == "tail":
        seconds = options.io_seconds
        return lambda: time.sleep(TAIL_SECONDS if random.random() < TAIL_SHARE else seconds)
    if options.io == "http":
        url = options.io_url

        def get() -> None:
            with urllib.request.urlopen(url) as response:
                response.read()
        return get
    return lambda: None
