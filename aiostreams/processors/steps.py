"""The processors behind the DSL's stateless stream operations.

Each class is one operation. Synchronous user functions give synchronous processors (a
plain ``def process``), so a chain of them stays on the engine's fast path (run inline, no
asyncio task per record). The ``*_async`` operations give ``async def process`` processors
that await the user's coroutine, optionally under a per-step concurrency cap
(:class:`StepLimiter`) and a per-attempt timeout (``Retry.timeout``).

Invariant of every processor here: it forwards only records derived from the record it is
processing, with that record's metadata (topic, partition, offset, timestamp, headers), in
the order the user function produced them.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, Protocol

from aiostreams.errors import ConfigError, TopologyError
from aiostreams.topology.processor import Processor
from aiostreams.types import Record

AnyRecord = Record[Any, Any]


def _pair(result: Any, op: str, node: str) -> tuple[Any, Any]:
    if not isinstance(result, tuple) or len(result) != 2:
        raise TypeError(
            f"{op} step {node!r} must return a (key, value) tuple, got "
            f"{type(result).__name__}: return (new_key, new_value)"
        )
    return result


def require_sync(fn: Callable[..., Any], op: str) -> None:
    """Raise :class:`TopologyError` unless ``fn`` is a plain (not async) function."""
    if not callable(fn):
        raise TopologyError(f"{op}() needs a function, got {type(fn).__name__}")
    if inspect.iscoroutinefunction(fn):
        raise TopologyError(
            f"{op}() got the coroutine function {getattr(fn, '__name__', fn)!r}: use "
            f"{op}_async() for async functions (or pass a plain def)"
        )


def require_callable(fn: Callable[..., Any], op: str) -> None:
    if not callable(fn):
        raise TopologyError(f"{op}() needs a function, got {type(fn).__name__}")


class Passthrough(Processor[Any, Any]):
    """Forwards every record unchanged (merge points, branch outlets)."""

    def process(self, record: AnyRecord) -> None:
        self.context.forward(record)


class FilterProcessor(Processor[Any, Any]):
    """Forwards the records for which ``predicate(key, value)`` is ``keep``."""

    def __init__(self, predicate: Callable[[Any, Any], Any], keep: bool) -> None:
        self.predicate = predicate
        self.keep = keep

    def process(self, record: AnyRecord) -> None:
        if bool(self.predicate(record.key, record.value)) is self.keep:
            self.context.forward(record)


class MapProcessor(Processor[Any, Any]):
    """``mapper(key, value) -> (new_key, new_value)``."""

    def __init__(self, mapper: Callable[[Any, Any], tuple[Any, Any]]) -> None:
        self.mapper = mapper

    def process(self, record: AnyRecord) -> None:
        key, value = _pair(self.mapper(record.key, record.value), "map",
                           self.context.node_name)
        self.context.forward(record.with_key_value(key, value))


class SelectKeyProcessor(Processor[Any, Any]):
    """``selector(key, value) -> new_key``."""

    def __init__(self, selector: Callable[[Any, Any], Any]) -> None:
        self.selector = selector

    def process(self, record: AnyRecord) -> None:
        self.context.forward(record.with_key_value(self.selector(record.key, record.value),
                                                   record.value))


class MapValuesProcessor(Processor[Any, Any]):
    """``mapper(value) -> new_value``."""

    def __init__(self, mapper: Callable[[Any], Any]) -> None:
        self.mapper = mapper

    def process(self, record: AnyRecord) -> None:
        self.context.forward(record.with_value(self.mapper(record.value)))


class FlatMapProcessor(Processor[Any, Any]):
    """``mapper(key, value) -> iterable of (key, value)``."""

    def __init__(self, mapper: Callable[[Any, Any], Iterable[tuple[Any, Any]]]) -> None:
        self.mapper = mapper

    def process(self, record: AnyRecord) -> None:
        node = self.context.node_name
        for item in self.mapper(record.key, record.value):
            key, value = _pair(item, "flat_map", node)
            self.context.forward(record.with_key_value(key, value))


class FlatMapValuesProcessor(Processor[Any, Any]):
    """``mapper(value) -> iterable of values``."""

    def __init__(self, mapper: Callable[[Any], Iterable[Any]]) -> None:
        self.mapper = mapper

    def process(self, record: AnyRecord) -> None:
        for value in self.mapper(record.value):
            self.context.forward(record.with_value(value))


class PeekProcessor(Processor[Any, Any]):
    """Calls ``action(key, value)``; forwards the record when ``forward`` (peek), not for
    ``foreach`` (a terminal step)."""

    def __init__(self, action: Callable[[Any, Any], Any], forwards: bool) -> None:
        self.action = action
        self.forwards = forwards

    def process(self, record: AnyRecord) -> None:
        self.action(record.key, record.value)
        if self.forwards:
            self.context.forward(record)


class BranchProcessor(Processor[Any, Any]):
    """Sends each record to the first branch whose predicate holds (in declaration
    order), else to the default branch, else drops it. Each branch is a named child."""

    def __init__(self, branches: Sequence[tuple[Callable[[Any, Any], Any], str]],
                 default: str | None) -> None:
        self.branches = tuple(branches)
        self.default = default

    def process(self, record: AnyRecord) -> None:
        for predicate, child in self.branches:
            if predicate(record.key, record.value):
                self.context.forward(record, child)
                return
        if self.default is not None:
            self.context.forward(record, self.default)


# -- async steps ------------------------------------------------------------------------


class StepLimiter:
    """At most ``limit`` calls of one DSL step at once, across all tasks of the app.

    One semaphore per event loop (an app runs on one loop; tests start a loop each), made
    on first use. ``limit=None``: no cap. Cancellation while waiting for a permit leaves
    the permit count unchanged (asyncio.Semaphore's guarantee)."""

    def __init__(self, limit: int | None) -> None:
        if limit is not None and limit < 1:
            raise ConfigError(f"concurrency must be >= 1 (or None for no cap), got {limit}")
        self.limit = limit
        self._semaphore: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.running = 0
        self.max_running = 0

    def _get(self) -> asyncio.Semaphore | None:
        if self.limit is None:
            return None
        loop = asyncio.get_running_loop()
        if self._semaphore is None or self._loop is not loop:
            self._semaphore = asyncio.Semaphore(self.limit)
            self._loop = loop
        return self._semaphore

    async def call(self, fn: Callable[..., Any], args: tuple[Any, ...],
                   timeout: float | None, context: Any = None) -> Any:
        """``await fn(*args)`` under the cap and ``timeout`` (seconds, per call);
        ``context`` (the step's) is not needed here."""
        semaphore = self._get()
        if semaphore is not None:
            await semaphore.acquire()
        self.running += 1
        self.max_running = max(self.max_running, self.running)
        try:
            if timeout is None:
                return await await_result(fn(*args))
            async with asyncio.timeout(timeout):
                return await await_result(fn(*args))
        finally:
            self.running -= 1
            if semaphore is not None:
                semaphore.release()


async def await_result(result: Any) -> Any:
    if inspect.isawaitable(result):
        return await result
    return result


def call_when_run(fn: Callable[..., Any], *args: Any) -> Callable[[], Awaitable[Any]]:
    """``fn(*args)``, awaited if awaitable, called only once the returned function's
    coroutine runs: a service call cancelled before it starts (at shutdown, with records
    held) creates no coroutine of the user's, so none is left never awaited."""
    async def invoke() -> Any:
        return await await_result(fn(*args))
    return invoke


class StepCaller(Protocol):
    """How an async step calls its function: :class:`StepLimiter`, or a service's caller
    (:class:`~aiostreams.processors.service_caller.ServiceCaller`)."""

    async def call(self, fn: Callable[..., Any], args: tuple[Any, ...],
                   timeout: float | None, context: Any = None) -> Any: ...


class AsyncStep(Processor[Any, Any]):
    """Base of the ``*_async`` processors: runs the user function through its caller."""

    def __init__(self, fn: Callable[..., Awaitable[Any] | Any], limiter: StepCaller,
                 timeout: float | None) -> None:
        self.fn = fn
        self.limiter = limiter
        self.timeout = timeout

    async def call(self, *args: Any) -> Any:
        return await self.limiter.call(self.fn, args, self.timeout, self.context)


class AsyncMapValues(AsyncStep):
    async def process(self, record: AnyRecord) -> None:
        self.context.forward(record.with_value(await self.call(record.value)))


class AsyncMap(AsyncStep):
    async def process(self, record: AnyRecord) -> None:
        result = await self.call(record.key, record.value)
        key, value = _pair(result, "map_async", self.context.node_name)
        self.context.forward(record.with_key_value(key, value))


class AsyncFilter(AsyncStep):
    async def process(self, record: AnyRecord) -> None:
        if await self.call(record.key, record.value):
            self.context.forward(record)


class AsyncFlatMapValues(AsyncStep):
    async def process(self, record: AnyRecord) -> None:
        for value in await self.call(record.value):
            self.context.forward(record.with_value(value))


class AsyncForeach(AsyncStep):
    async def process(self, record: AnyRecord) -> None:
        await self.call(record.key, record.value)


NO_VALUE: Any = object()
"""What a reduce's initializer gives: "no value yet" (Kafka's reduce initializer is null;
an old value that is this is no old value)."""


class Reducing:
    """What turns ``aggregate`` into ``reduce``: the first value of a key is its aggregate,
    each later one is ``reducer(aggregate, value)``. ``initial`` marks "no value yet"
    (:data:`NO_VALUE`)."""

    def __init__(self, reducer: Callable[[Any, Any], Any]) -> None:
        require_sync(reducer, "reduce")
        self.reducer = reducer
        self.first = NO_VALUE

    def initial(self) -> Any:
        return self.first

    def add(self, _key: Any, value: Any, old: Any) -> Any:
        return value if old is self.first else self.reducer(old, value)

    def merge(self, _key: Any, a: Any, b: Any) -> Any:
        """Two sessions' aggregates as one (either may still be the first marker)."""
        return b if a is self.first else self.reducer(a, b)

