"""The :class:`ProcessorContext` a task gives each of its processor nodes.

One context per node per task. It answers for the *current* slot, found through the
``CURRENT_SLOT`` context variable, which each execution (an asyncio task per record, or
the inline fast path) sets to its own slot; so concurrent records never see each other's
metadata or buffers.

With lineage on, :meth:`NodeContext.send` stamps what it sends with the lineage header of
the current record, as a sink does (:mod:`aiostreams.runtime.lineage`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, NoReturn, Protocol

from aiostreams.engine.failure import Deferred
from aiostreams.errors import TopologyError
from aiostreams.runtime.clock import TimerHandle
from aiostreams.runtime.lineage import (
    lineage_of,
    lineage_value,
    with_lineage,
    without_lineage,
)
from aiostreams.runtime.slot import CURRENT_SLOT, Slot
from aiostreams.topology.processor import PunctuationType
from aiostreams.types import Headers, OutgoingRecord, Record


class TaskHost(Protocol):
    """What a context asks of its task (``StreamTask``), and no more."""

    @property
    def task_id(self) -> str: ...

    @property
    def stream_time(self) -> float: ...

    def serialize_for(self, topic: str, key: Any,
                      value: Any) -> tuple[bytes | None, bytes | None]: ...

    def schedule(self, node: str, interval: float,
                 callback: Callable[[float], Awaitable[None] | None],
                 kind: PunctuationType) -> TimerHandle: ...

    def request_commit(self) -> None: ...

    async def wait_for_earlier(self, slot: Slot) -> None: ...

    def record_cache(self, node: str, store: str,
                     flush: Callable[[], None]) -> tuple[Any, Any] | None: ...

    def cache_view(self, store: str) -> Any | None: ...


class ContextNode(Protocol):
    """What a context reads of its node (``NodeExec``)."""

    @property
    def name(self) -> str: ...

    @property
    def children_by_name(self) -> Mapping[str, Any]: ...

    @property
    def stores(self) -> Mapping[str, Any]: ...


class NodeContext:
    def __init__(self, task: TaskHost, node: ContextNode, *, lineage: bool = False) -> None:
        self._task = task
        self._node = node
        self._lineage = lineage
        # Set only while this node's synchronous ``process`` runs (no other record can run
        # it meanwhile: it does not await), so ``forward`` skips the context-variable lookup.
        self.sync_buffer: list[tuple[str | None, Record[Any, Any]]] | None = None

    def _record(self) -> Record[Any, Any]:
        record = CURRENT_SLOT.get().record
        if record is None:
            raise RuntimeError(
                f"processor {self._node.name!r}: there is no current record here "
                "(punctuations have no record metadata)"
            )
        return record

    @property
    def node_name(self) -> str:
        return self._node.name

    @property
    def task_id(self) -> str:
        return self._task.task_id

    @property
    def topic(self) -> str:
        return self._record().topic

    @property
    def partition(self) -> int:
        return self._record().partition

    @property
    def offset(self) -> int:
        return self._record().offset

    @property
    def timestamp(self) -> float:
        slot = CURRENT_SLOT.get()
        return slot.record.timestamp if slot.record is not None else self._task.stream_time

    @property
    def headers(self) -> Headers:
        return self._record().headers

    @property
    def stream_time(self) -> float:
        """Stream time as of the current record's issue (what a serial run would see), not
        the task's latest: later records may already have been issued."""
        slot = CURRENT_SLOT.get(None)
        if slot is not None and slot.record is not None:
            return slot.stream_time
        return self._task.stream_time

    async def wait_for_earlier_records(self) -> None:
        """Return once every record this task issued before the current one has finished
        executing (see :mod:`~aiostreams.engine.issue_order`): past it, this processor sees
        the records that reach it one at a time, in offset order. At once on a punctuation
        (punctuations start only after every earlier record finished). Cancellation: stops
        waiting, nothing else changes."""
        await self._task.wait_for_earlier(CURRENT_SLOT.get())

    def forward(self, record: Record[Any, Any], child: str | None = None) -> None:
        buffer = self.sync_buffer
        if buffer is None:
            slot = CURRENT_SLOT.get(None)
            buffer = slot.forward_buffer if slot is not None else None
        if buffer is None:
            raise RuntimeError(
                f"processor {self._node.name!r} called forward() outside process() or a "
                "punctuation; forward only while handling a record"
            )
        if child is not None and child not in self._node.children_by_name:
            raise TopologyError(
                f"processor {self._node.name!r} forwarded to {child!r}, which is not one of "
                f"its children {sorted(self._node.children_by_name)}"
            )
        buffer.append((child, record))

    def send(
        self,
        topic: str,
        key: Any,
        value: Any,
        *,
        timestamp: float | None = None,
        headers: Headers = (),
    ) -> None:
        slot = CURRENT_SLOT.get()
        out = self._task.serialize_for(topic, key, value)
        if timestamp is None:
            timestamp = slot.record.timestamp if slot.record is not None else None
        if self._lineage:
            raw = slot.raw
            headers = (with_lineage(headers, lineage_value(
                raw.topic, raw.partition, raw.offset,
                lineage_of(raw.headers) if raw.headers else None))
                       if raw is not None else without_lineage(headers))
        slot.outputs.append(OutgoingRecord(topic, out[0], out[1], timestamp, headers))

    def schedule(
        self,
        interval: float,
        callback: Callable[[float], Awaitable[None] | None],
        on: PunctuationType | str = PunctuationType.STREAM_TIME,
    ) -> TimerHandle:
        return self._task.schedule(self._node.name, interval, callback, PunctuationType(on))

    def commit(self) -> None:
        self._task.request_commit()

    def record_cache(self, store: str, flush: Callable[[], None]) -> tuple[Any, Any] | None:
        """Store ``store``'s record cache in this task and its view, ``flush`` registered
        as this node's (see :mod:`~aiostreams.engine.cache_flush`); None when caching is
        off. For the DSL's stateful processors, at init."""
        return self._task.record_cache(self._node.name, store, flush)

    def cache_view(self, store: str) -> Any | None:
        """The view of store ``store``'s record cache (None: the store is not cached)."""
        return self._task.cache_view(store)

    def defer(self, delay: float) -> NoReturn:
        """Process the current record again after ``delay`` seconds (KIP-311), without
        blocking other records; what this attempt buffered is discarded. Does not return."""
        if delay < 0:
            raise ValueError(f"defer() needs a delay >= 0 seconds, got {delay}")
        raise Deferred(delay)

    def store(self, name: str) -> Any:
        view = self._node.stores.get(name)
        if view is None:
            raise TopologyError(
                f"processor {self._node.name!r} asked for store {name!r}, which is not "
                f"connected to it (connected: {sorted(self._node.stores)}); connect it in "
                "the topology"
            )
        return view
