"""A stream's async steps (``map_values_async``, ``map_async``, ``filter_async``,
``flat_map_values_async``, ``foreach_async``, ``map_values_batched_async``): how one is
added to the topology, with its caller, retry policy and memo store.

The ``*_async`` variants await the function for each record while the engine runs many
records at once. They take ``retry`` (this step's own :class:`~aiostreams.Retry` policy;
a retry re-executes the record's chain from its source in this sub-topology, so earlier
steps of the chain run again) and ``concurrency`` (a cap on how many of this step's calls
run at once, across the app's tasks). They take no ordering parameter on purpose:
ordering (``key``/``partition``/``unordered``) is decided per record when it is issued,
for the record's whole chain, by the app's ``ordering`` setting. A step cannot start a
record earlier than its chain does, and per-key state (aggregations, joins) is only
correct because same-key records never overlap anywhere in the chain; a per-step setting
could only pretend to loosen or tighten that.

They also take ``service`` (a service declared with ``app.service(name, ...)``: the call
waits for its permit without counting as executing, and its timeout starts at dispatch) and,
with a service, ``coalesce_by`` (a function of the step's arguments giving a lookup key:
records with the same key share one call that is out); ``map_values_async`` also takes
``memoize`` (a :class:`~aiostreams.services.memo.Memo`: a TTL cache by lookup key in a
changelogged store); see
:mod:`aiostreams.processors.service_caller` and ``docs/guides/services.md``.

Invariants (checked at build time, :class:`~aiostreams.errors.TopologyError` otherwise):
``coalesce_by``/``memoize`` need ``service``; ``memoize`` and ``combine`` need
``coalesce_by``. A step with ``memoize`` has its memo store connected to its node.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any

from aiostreams.errors import TopologyError
from aiostreams.policies import Retry
from aiostreams.processors.batch_caller import BatchCaller, RetryPer
from aiostreams.processors.service_caller import ServiceCaller, memo_store_name
from aiostreams.processors.steps import (
    AsyncMapValues,
    StepCaller,
    StepLimiter,
    require_callable,
)
from aiostreams.services.declared import DeclaredService
from aiostreams.services.memo import Memo
from aiostreams.state import kv_store
from aiostreams.topology.processor import Processor

if TYPE_CHECKING:
    from aiostreams.dsl.stream import Stream


def add_async_step(stream: Stream[Any, Any], kind: str,
                   make: Callable[[StepCaller, float | None], Processor[Any, Any]],
                   fn: Callable[..., Any], op: str, *, retry: Retry | None,
                   concurrency: int | None, name: str | None, key_changed: bool = False,
                   keep_value_serde: bool = True, service: DeclaredService | None = None,
                   coalesce_by: Callable[..., Hashable] | None = None,
                   memoize: Memo | None = None,
                   combine: Callable[..., Any] | None = None) -> Stream[Any, Any]:
    """The stream after the async step ``op`` (node kind ``kind``) calling ``fn``:
    ``make(caller, timeout)`` builds its processor around the step's caller (a
    :class:`StepLimiter`, or a :class:`ServiceCaller` with ``service``)."""
    require_callable(fn, op)
    limiter = StepLimiter(concurrency)
    if (coalesce_by is not None or memoize is not None) and service is None:
        raise TopologyError(f"{op}(coalesce_by=/memoize=) needs service=: coalesced and "
                            "memoized calls go through a declared service "
                            "(app.service(name, ...))")
    if memoize is not None and coalesce_by is None:
        raise TopologyError(f"{op}(memoize=...) needs coalesce_by=: the memo is kept by "
                            "lookup key")
    if combine is not None and coalesce_by is None:
        raise TopologyError(f"{op}(combine=...) needs coalesce_by=: the step's function "
                            "then looks up by that key")
    for option, helper in (("coalesce_by", coalesce_by), ("combine", combine)):
        if helper is not None and inspect.iscoroutinefunction(helper):
            raise TopologyError(
                f"{op}({option}=...) got the coroutine function "
                f"{getattr(helper, '__name__', helper)!r}: {option} is called, not awaited, "
                f"so it would leave a coroutine never awaited; pass a plain def (the "
                f"awaited work belongs in the step's function, "
                f"{getattr(fn, '__name__', fn)!r})")
    caller: StepCaller = (limiter if service is None
                          else ServiceCaller(limiter, service, coalesce_by, memoize,
                                             combine))
    timeout = retry.timeout if retry is not None else None
    step = stream._then(kind, lambda: make(caller, timeout), name=name,
                        key_changed=key_changed, keep_value_serde=keep_value_serde)
    if retry is not None:
        stream.builder.topology.set_retry(step.node, retry)
    if memoize is not None:
        stream.builder.add_store(kv_store(memo_store_name(step.node),
                                          key_serde=memoize.key_serde), step.node)
    return step


def add_batched_step(stream: Stream[Any, Any], fn: Callable[[list[Any]], Awaitable[Sequence[Any]]],
                     *, service: DeclaredService, max_batch: int, max_wait: float,
                     retry_per: RetryPer, retry: Retry | None,
                     name: str | None) -> Stream[Any, Any]:
    """The stream after ``map_values_batched_async(fn, ...)``: one call of ``fn`` through
    ``service`` per batch of values (see :mod:`aiostreams.processors.batch_caller`)."""
    require_callable(fn, "map_values_batched_async")
    caller = BatchCaller(service, max_batch=max_batch, max_wait=max_wait,
                         retry_per=retry_per,
                         attempts=retry.attempts if retry is not None else 1,
                         timeout=retry.timeout if retry is not None else None,
                         op="map_values_batched_async")
    step = stream._then("KSTREAM-MAPVALUES-BATCHED-ASYNC",
                        lambda: AsyncMapValues(fn, caller, None), name=name,
                        keep_value_serde=False)
    if retry is not None and retry_per == "value":
        stream.builder.topology.set_retry(step.node, retry)
    return step
