"""How an async step calls its user function through a declared service.

``map_values_async(fn, service=svc, coalesce_by=key_fn)`` gives the step a
:class:`ServiceCaller` in place of its plain :class:`StepLimiter` call. Each call:

1. takes the step's own ``concurrency`` place, if the step has a cap;
2. with ``coalesce_by``: joins the call already out for the same lookup key, if there is
   one (single-flight; the record still retires in its own order, with the shared result);
3. waits for the service's permit (breaker, concurrency place, token) - as a record that is
   not executing: its executor is parked and its attempt's timeout paused (see
   :mod:`aiostreams.runtime.permit_wait`);
4. dispatches ``fn``; the step's ``Retry(timeout=)`` (else the service's ``timeout``)
   starts here, at dispatch.

When the app records service answers (or replays them), the answer each record gets -
from its call, a coalesced one or the memo - passes the service's ``tap``
(:mod:`aiostreams.services.call_tap`).

With ``memoize=Memo(ttl=...)`` a fresh answer in the step's memo store is used before any
of that, and a new answer is stored (see :mod:`aiostreams.services.memo`).

A retry of the record (its slot's second attempt on) is marked as one, so the service's
retry budget applies. What the service's answers mean is its contract's to say, not the
step's (issue 35): :meth:`~aiostreams.services.service.Service.call` holds the record
across slow-down answers (429/503, :class:`~aiostreams.services.Overloaded`) and across
an open breaker - no attempt spent, never dead-lettered - and marks what it raises for the
step's ``Retry`` (transient: retried even if ``retry_on`` does not list it; permanent:
never), so ``retry_on`` is left for the user's own exceptions.

Coalescing assumes what the issue states for it: the function's result depends on the
lookup key only (a side-effect-free lookup); then outputs equal the serial
run's whatever the completion order. With ``combine=`` that holds by construction, and each
record still gets a result of its own: the step's function is then a *lookup* called with
the key (``fn(key)``), its answer is what is coalesced and memoized, and each record's
result is ``combine(value, answer)`` (``map_values_async(fetch_profile, service=svc,
coalesce_by=lambda o: o.customer_id, combine=enrich_with, memoize=Memo(ttl=60.0))``).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Hashable
from typing import Any

from aiostreams.processors.steps import StepLimiter, call_when_run
from aiostreams.runtime.slot import CURRENT_SLOT
from aiostreams.services.declared import DeclaredService
from aiostreams.services.memo import Memo
from aiostreams.services.single_flight import SingleFlight
from aiostreams.topology.processor import ProcessorContext

__all__ = ["ServiceCaller", "memo_store_name"]


def memo_store_name(node: str) -> str:
    """The store holding the memo of the step ``node``."""
    return f"{node}-memo"


class ServiceCaller:
    """The call path of one async step bound to a service (same ``call`` as a limiter)."""

    def __init__(self, limiter: StepLimiter, service: DeclaredService,
                 coalesce_by: Callable[..., Hashable] | None, memo: Memo | None = None,
                 combine: Callable[..., Any] | None = None) -> None:
        if not isinstance(service, DeclaredService):
            raise TypeError(f"service= takes what app.service(name, ...) returns, got "
                            f"{type(service).__name__}")
        if coalesce_by is not None and not callable(coalesce_by):
            raise TypeError(f"coalesce_by= takes a function of the step's arguments, got "
                            f"{type(coalesce_by).__name__}")
        if memo is not None and coalesce_by is None:
            raise TypeError("memoize= needs coalesce_by=: the memo is kept by lookup key")
        if combine is not None and (coalesce_by is None or not callable(combine)):
            raise TypeError("combine= takes a function (value, looked-up) -> result, and "
                            "needs coalesce_by=: the step's function then looks up by key")
        self.limiter = limiter
        self.service = service
        self.coalesce_by = coalesce_by
        self.memo = memo
        self.combine = combine
        self._flights: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop,
                                                 SingleFlight[Any]] = (
            weakref.WeakKeyDictionary())

    async def call(self, fn: Callable[..., Any], args: tuple[Any, ...],
                   timeout: float | None, context: ProcessorContext | None = None) -> Any:
        """``await fn(*args)`` through the service (with ``combine``: ``combine(*args,
        await fn(key))``); ``timeout`` counts from dispatch; ``context`` is the step's (its
        memo store and the record's stream time)."""
        key = self.coalesce_by(*args) if self.coalesce_by is not None else None
        call_args = (key,) if self.combine is not None else args
        tap = self.service.tap
        if tap is None:
            answer = await self._answer(fn, call_args, key, timeout, context)
        else:  # recorded, or answered from a recording (services.call_tap)
            answer = await tap.answer(
                self.service.name, key,
                lambda: self._answer(fn, call_args, key, timeout, context))
        return answer if self.combine is None else self.combine(*args, answer)

    async def _answer(self, fn: Callable[..., Any], args: tuple[Any, ...], key: Hashable,
                      timeout: float | None, context: ProcessorContext | None) -> Any:
        """The answer for lookup ``key``: from the memo when fresh, else by a call."""
        if self.memo is None:
            return await self.limiter.call(self._through_service, (fn, args, key, timeout),
                                           None)
        assert context is not None
        service = self.service.on_loop()
        store = context.store(memo_store_name(context.node_name))
        now = context.stream_time
        entry = await store.get(key)
        if self.memo.fresh(entry, now):
            service.stats.saved_by_memo += 1
            return entry[0]
        result = await self.limiter.call(self._through_service, (fn, args, key, timeout),
                                         None)
        store.put(key, [result, self.memo.expires_at(now)])
        return result

    async def _through_service(self, fn: Callable[..., Any], args: tuple[Any, ...],
                               key: Hashable, timeout: float | None) -> Any:
        service = self.service.on_loop()
        slot = CURRENT_SLOT.get(None)
        attempt = slot.attempts - 1 if slot is not None else 0

        async def once() -> Any:
            return await service.call(call_when_run(fn, *args), attempt=attempt,
                                      timeout=timeout)

        if self.coalesce_by is None:
            return await once()
        flights = self._flights_on_loop()
        if key in flights:
            service.stats.saved_by_coalescing += 1  # this record makes no call of its own
        return await flights.run(key, once)

    def _flights_on_loop(self) -> SingleFlight[Any]:
        loop = asyncio.get_running_loop()
        flights = self._flights.get(loop)
        if flights is None:
            flights = self._flights[loop] = SingleFlight()
        return flights
