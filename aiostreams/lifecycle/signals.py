"""Running something until the process is told to stop: SIGINT and SIGTERM ask for a
graceful stop instead of killing the process.

:class:`SignalledRun` is a base (as :class:`~aiostreams.lifecycle.start_stop.StartStop`
is) for what a process runs until it is signalled - the :class:`~aiostreams.app.App`: it
adds :meth:`~SignalledRun.run_async` and :meth:`~SignalledRun.run` on top of ``start()``,
``wait()`` and ``request_stop()``.

Invariants: the handlers are in place before ``start()`` begins and removed however the
run ends, so a signal is never lost to a start under way (it asks for the stop as soon as
the start returned) and never handled by a run that is over.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from abc import abstractmethod

from aiostreams.lifecycle.event_loop import run_event_loop
from aiostreams.lifecycle.start_stop import StartStop

__all__ = ["STOP_SIGNALS", "SignalledRun"]

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""The signals that ask a run for a graceful stop."""


class SignalledRun(StartStop):
    """A base for what runs until a stop is requested: ``wait()`` returns (and raises what
    failed) once it stopped; ``request_stop()`` asks for the stop, from a signal handler
    too (it must not block)."""

    __slots__ = ()

    @abstractmethod
    async def wait(self) -> None: ...

    @abstractmethod
    def request_stop(self) -> None: ...

    async def run_async(self) -> None:
        """Start, then run until SIGINT/SIGTERM (or ``request_stop``), then stop gracefully.

        The handlers are in place before the start begins: a signal that arrives while the
        app starts (joining the group can take seconds) is kept, and the app stops as soon
        as it has started, instead of dying by the signal's default action."""
        loop = asyncio.get_running_loop()
        signalled = False

        def on_signal() -> None:
            nonlocal signalled
            signalled = True
            self.request_stop()  # reaches the worker once start has created it

        for sig in STOP_SIGNALS:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, on_signal)
        try:
            await self.start()
            if signalled:
                self.request_stop()
            await self.wait()
        finally:
            for sig in STOP_SIGNALS:
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.remove_signal_handler(sig)

    def run(self) -> None:
        """Run on a fresh event loop (uvloop when installed) until SIGINT/SIGTERM."""
        run_event_loop(self.run_async())
