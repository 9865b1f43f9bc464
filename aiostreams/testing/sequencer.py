"""Named gates a test opens one by one (:class:`Sequencer`), and :func:`settle`."""

from __future__ import annotations

import asyncio
from collections.abc import Hashable


class Sequencer:
    """Named gates. A processor awaits ``wait(name)``; the test calls ``release(name)``.

    ``started`` lists the names in the order their waits began, so a test can assert what
    the engine let run (and what it held back)."""

    def __init__(self) -> None:
        self._gates: dict[Hashable, asyncio.Event] = {}
        self._arrivals: dict[Hashable, asyncio.Event] = {}
        self.started: list[Hashable] = []

    def _gate(self, name: Hashable) -> asyncio.Event:
        return self._gates.setdefault(name, asyncio.Event())

    def _arrival(self, name: Hashable) -> asyncio.Event:
        return self._arrivals.setdefault(name, asyncio.Event())

    async def wait(self, name: Hashable) -> None:
        self.started.append(name)
        self._arrival(name).set()
        await self._gate(name).wait()

    def release(self, *names: Hashable) -> None:
        for name in names:
            self._gate(name).set()

    async def wait_started(self, name: Hashable) -> None:
        """Return once ``wait(name)`` has been entered."""
        await self._arrival(name).wait()


async def settle(rounds: int = 3) -> None:
    """Let every callback scheduled so far run (FIFO order of ``call_soon``), ``rounds``
    times over, so work they schedule in turn runs too. Not a sleep: no time passes."""
    loop = asyncio.get_running_loop()
    for _ in range(rounds):
        done = loop.create_future()
        loop.call_soon(done.set_result, None)
        await done


__all__ = ["Sequencer", "settle"]
