"""A benchmark's HTTP service in a child process (so its CPU is not the app's): the parent's
handle, and the child's main loop.

``await start()`` spawns ``python -m <module> <args>`` and waits for the URL the child
prints; ``await stop()`` ends it (SIGTERM, then waits). Cancellation: a cancelled
``start()`` leaves no child behind.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from typing import Protocol

import aiohttp

__all__ = ["SpawnedService", "serve_until_terminated"]


class Served(Protocol):
    async def start(self) -> str: ...

    async def stop(self) -> None: ...


class SpawnedService:
    """The parent's handle; ``session`` talks to the child once started."""

    def __init__(self, module: str, *args: str) -> None:
        self.module = module
        self.args = args
        self.url = ""
        self._process: asyncio.subprocess.Process | None = None
        self._session: aiohttp.ClientSession | None = None

    @property
    def session(self) -> aiohttp.ClientSession:
        assert self._session is not None, "start() the service first"
        return self._session

    async def start(self) -> str:
        self._process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", self.module, *self.args, stdout=asyncio.subprocess.PIPE)
        try:
            assert self._process.stdout is not None
            line = await asyncio.wait_for(self._process.stdout.readline(), 30.0)
            if not line.startswith(b"http://"):
                raise RuntimeError(f"{self.module} did not start (it printed {line!r}); run "
                                   f"python -m {self.module} to see why")
            self.url = line.decode().strip()
            self._session = aiohttp.ClientSession()
        except BaseException:
            await self.stop()
            raise
        return self.url

    async def stop(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._process is not None and self._process.returncode is None:
            self._process.terminate()
            await self._process.wait()
        self._process = None


async def serve_until_terminated(service: Served) -> None:
    """The child's main: start ``service``, print its URL, serve until SIGTERM."""
    print(await service.start(), flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    try:
        await stop.wait()
    finally:
        await service.stop()
