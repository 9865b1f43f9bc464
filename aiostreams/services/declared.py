"""A service as an app declares it: its settings, and the live :class:`Service` per event loop.

``app.service(name, ...)`` returns a :class:`DeclaredService`; async steps take it as
``service=``. The declaration is made before any loop runs (at topology-building time), and
an app may be started on more than one loop over its life (each test starts its own), while
a :class:`Service` holds loop-bound waiters. So the live service is made on first use on a
loop (:meth:`DeclaredService.on_loop`) and kept for that loop: every step and every task of
the app running on it shares the one limit, bucket, breaker and budget.

Invariant: for a given running loop, ``on_loop()`` always returns the same object.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import TypedDict, Unpack

from aiostreams.runtime.clock import Clock
from aiostreams.services.breaker import CircuitBreaker
from aiostreams.services.call_tap import CallTap
from aiostreams.services.contract import ServiceContract
from aiostreams.services.limit import Adaptive
from aiostreams.services.rate import RateLimit
from aiostreams.services.service import Service

__all__ = ["DeclaredService", "ServiceOptions"]


class ServiceOptions(TypedDict, total=False):
    """:class:`Service`'s keywords, as a declaration keeps them to make one per loop."""

    concurrency: int | Adaptive
    rate: RateLimit | None
    breaker: CircuitBreaker | None
    timeout: float | None
    retry_budget: float | None
    contract: ServiceContract | None
    max_hold: float | None
    clock: Clock | None


class DeclaredService:
    """The settings of one named service of an app: ``Service``'s keywords (see
    :class:`Service` for each)."""

    def __init__(self, name: str, **options: Unpack[ServiceOptions]) -> None:
        self.name = name
        self._options = options
        Service(name, **self._options)  # validate now, where the user declared it
        self._live: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Service] = (
            weakref.WeakKeyDictionary())
        self._latest: Service | None = None
        self.tap: CallTap | None = None
        """What records (or, in a replay, answers) the steps' answers from this service
        (:mod:`aiostreams.services.call_tap`); None: nothing does."""

    def on_loop(self) -> Service:
        """The live service for the running loop (made on first use)."""
        loop = asyncio.get_running_loop()
        service = self._live.get(loop)
        if service is None:
            service = self._live[loop] = Service(self.name, **self._options)
            self._latest = service
        return service

    @property
    def current(self) -> Service | None:
        """The live service made last (what metrics and the status line show), or None
        before the app has called it."""
        return self._latest

    def __repr__(self) -> str:
        return f"DeclaredService({self.name!r})"
