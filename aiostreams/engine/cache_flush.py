"""A task's record caches and their flush barrier (Kafka Streams' record cache, KIP-63).

A DSL processor whose store is cached (``cache_max_bytes`` > 0) registers a
:class:`CacheFlusher` at init: its cache (:mod:`aiostreams.state.record_cache`) and the
callback that writes each dirty entry to the store and forwards it. A flush runs as a
**barrier slot** of the reorder buffer, like a punctuation (:mod:`~aiostreams.engine.punctuation`):
it starts once every earlier slot has finished, and no later slot is issued until it has
finished. Its body first retires the finished slots ahead of it (so each cache holds every
earlier record's update), then runs each flusher, parents first, handing what it forwarded
to the node's children; its store writes and outputs retire with the barrier, so a flushed
update is released after the records that made it and before any later record's.

Flush points (Kafka Streams'): before every commit's snapshot (:meth:`RecordPath.flush_caches
<aiostreams.engine.record_path.RecordPath.flush_caches>`, the task issuing nothing more until
the snapshot is taken), when a cache passes its budget (the barrier is queued after the
record being retired), and on a clean close (the closing commit); a dirty close discards
the caches with the uncommitted records, which the next owner reads again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from aiostreams.engine.async_chain import Step, hand_over
from aiostreams.runtime.slot import CURRENT_SLOT
from aiostreams.state.record_cache import RecordCacheStore
from aiostreams.types import Record

__all__ = ["CACHE_FLUSH", "CacheFlusher", "cache_flush_body"]


class CacheFlusher:
    """One node's cache and its flush callback (called in the barrier slot; it writes the
    store and forwards through ``ctx`` as a punctuation does)."""

    def __init__(self, node: str, steps: dict[str, Step], cache: RecordCacheStore,
                 flush: Callable[[], None]) -> None:
        self.node = node
        self.steps = steps
        self.cache = cache
        self.flush = flush


class _CacheFlushRequest:
    def __repr__(self) -> str:
        return "cache flush"


CACHE_FLUSH = _CacheFlushRequest()
"""What the punctuation queue's ``due`` list holds for a requested flush barrier."""


def cache_flush_body(flushers: Sequence[CacheFlusher], retire_finished: Callable[[], None]
                     ) -> Callable[[], Awaitable[None]]:
    """What a flush barrier executes (see the module docstring)."""

    async def run() -> None:
        retire_finished()  # every earlier slot has finished: their updates reach the caches
        slot = CURRENT_SLOT.get()
        for flusher in flushers:
            if not len(flusher.cache):
                continue
            buffer: list[tuple[str | None, Record[Any, Any]]] = []
            slot.forward_buffer = buffer
            slot.node = flusher.node
            flusher.flush()
            slot.forward_buffer = None
            steps = flusher.steps
            await hand_over(buffer, slot, steps, list(steps.values()))

    return run
