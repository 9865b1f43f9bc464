"""The processor API (Kafka's KIP-28, made async).

A :class:`Processor` receives records one at a time *from its point of view*; the engine
runs many of them concurrently (one per in-flight record) but, by the ordering mode, never
two records with the same key at once. Whatever a processor forwards, sends or writes to a
store is buffered with its record and released only when that record retires, in order.

``process`` may be a plain ``def`` or an ``async def``. When every processor reachable from
a source is synchronous, the engine runs that chain inline with no asyncio task per record
(the fast path); an ``async def`` anywhere in the chain makes each record run on one of the
task's *executors*: a pool of at most ``max_concurrency`` (default ``max_in_flight``)
long-lived coroutines, reused from record to record (a task per record costs about twice as
much). When all of them are busy, the oldest waiting record runs next — a retried record
holds the commit point, so it goes before records issued after it.

Context variables: because executors are reused, a ``contextvars.ContextVar`` that
``process`` sets stays set for the next record that executor runs. Set and reset it in a
``try/finally`` (``token = var.set(x)`` ... ``var.reset(token)``), or carry per-record data
on the record. Variables set before the app started are visible everywhere.
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Generic, NoReturn, Protocol, TypeVar

from aiostreams.types import Headers, Record

if TYPE_CHECKING:
    from aiostreams.runtime.clock import TimerHandle

KIn = TypeVar("KIn")
VIn = TypeVar("VIn")


class PunctuationType(enum.Enum):
    """What a punctuation's interval is measured in: stream time (record timestamps) or
    the wall clock."""

    STREAM_TIME = "stream_time"
    WALL_CLOCK = "wall_clock"


class ProcessorContext(Protocol):
    """What a processor can do. One context per processor node; the *current record* it
    describes is the record this call of ``process`` (or this punctuation) is handling,
    even when many records execute at once."""

    @property
    def node_name(self) -> str: ...

    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...

    @property
    def offset(self) -> int: ...

    @property
    def timestamp(self) -> float: ...

    @property
    def headers(self) -> Headers: ...

    @property
    def stream_time(self) -> float: ...

    @property
    def task_id(self) -> str: ...

    async def wait_for_earlier_records(self) -> None:
        """Return once every record issued before the current one (of any key) has
        finished executing. A processor that awaits this first sees the records that reach
        it one at a time in offset order, whatever the concurrency upstream: for decisions
        that depend on other keys' records, such as stream time (Kafka Streams' window and
        join processors). It serialises that processor, not the steps before it."""
        ...

    def forward(self, record: Record[Any, Any], child: str | None = None) -> None:
        """Pass ``record`` to every child (or the one named ``child``). Children run after
        this call of ``process`` returns, depth first, in forward order."""
        ...

    def send(
        self,
        topic: str,
        key: Any,
        value: Any,
        *,
        timestamp: float | None = None,
        headers: Headers = (),
    ) -> None:
        """Produce to ``topic`` when this record retires (serdes of the app's topic)."""
        ...

    def schedule(
        self,
        interval: float,
        callback: Callable[[float], Awaitable[None] | None],
        on: PunctuationType | str = PunctuationType.STREAM_TIME,
    ) -> TimerHandle:
        """Call ``callback(time)`` every ``interval`` seconds of stream or wall-clock time.

        The call is issued into the reorder buffer like a record: it runs after every
        earlier record has executed, before any later one starts, and what it forwards is
        released in that position."""
        ...

    def commit(self) -> None:
        """Ask for a commit as soon as possible (after the current record retires)."""
        ...

    def defer(self, delay: float) -> NoReturn:
        """Process the current record again after ``delay`` seconds (KIP-311) without
        blocking other records. Not a failure: no attempt is counted. Does not return."""
        ...

    def store(self, name: str) -> Any:
        """The state store ``name``, as connected to this processor in the topology."""
        ...


class Processor(Generic[KIn, VIn]):
    """Base class for processors. Override ``process``; ``init``/``close`` are optional.

    Lifecycle per task: ``init`` once before the first record, ``process`` per record,
    ``close`` once when the task is closed (revocation or shutdown), after its last record
    retired. ``close`` runs even if ``init`` of a later processor failed.
    """

    context: ProcessorContext

    async def init(self, context: ProcessorContext) -> None:
        self.context = context

    def process(self, record: Record[KIn, VIn]) -> Awaitable[None] | None:
        raise NotImplementedError(f"{type(self).__name__} must implement process(record)")

    async def close(self) -> None:
        return None


def is_async_processor(processor: Processor[Any, Any]) -> bool:
    """Whether ``processor.process`` must be awaited (decided once, at build time)."""
    fn = getattr(processor, "process_is_async", None)
    if isinstance(fn, bool):
        return fn
    return inspect.iscoroutinefunction(processor.process)


ProcessorSupplier = Callable[[], Processor[Any, Any]]
"""Makes a fresh processor instance: one per task, so tasks share no processor state."""
