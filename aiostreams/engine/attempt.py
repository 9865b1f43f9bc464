"""One attempt of an async slot: the awaitable an executor runs, and the timeout bounding it.

An attempt is bounded by the smaller of ``processing_timeout`` and ``Retry.timeout`` (both
bound one attempt). The bound is a coarse timeout
(:mod:`~aiostreams.engine.coarse_timeout`: 4x cheaper than ``asyncio.timeout`` here), paused
while the record waits for a service's permit (:mod:`~aiostreams.runtime.permit_wait`), so
the timeout measures the call and not the queue before it.

An executor runs one attempt at a time, so it takes one block from :meth:`AttemptRunner.
executor_block` when it starts, binds it for the permit hooks once, and opens it around
every attempt it runs (each a fresh deadline, with attribute stores: see
:class:`~aiostreams.engine.coarse_timeout.ExecutorBlock`): no block, call, context-variable
change or wrapper coroutine per record. With neither timeout set there is no block. A
record's attempt is its source's ``run_async`` (the executor runs it in its two halves: see
:mod:`~aiostreams.engine.executor_pool`); the runner's ``__call__`` gives the same
awaitable for any slot (punctuations take that path).

Invariant: a punctuation attempt runs ``slot.punctuate``, a record attempt the slot's
source; a timed-out attempt raises ``TimeoutError`` out of the executor's block (recovery
decides what follows).
"""

from __future__ import annotations

from collections.abc import Awaitable

from aiostreams.engine.coarse_timeout import CoarseTimeouts, ExecutorBlock, granularity_for
from aiostreams.runtime.slot import Slot, SlotKind

__all__ = ["AttemptRunner", "attempt_timeout"]


def attempt_timeout(processing_timeout: float | None,
                    retry_timeout: float | None) -> float | None:
    """Seconds one attempt may take: the smaller of the two that are set, else None."""
    timeouts = [t for t in (processing_timeout, retry_timeout) if t]
    return min(timeouts) if timeouts else None


class AttemptRunner:
    def __init__(self, timeout: float | None) -> None:
        self.timeout = timeout
        self._timeouts = CoarseTimeouts(granularity_for(timeout or 1.0))

    def executor_block(self) -> ExecutorBlock | None:
        """The timeout block of the executor calling it (its task), to open around each of
        its attempts; None when attempts are unbounded."""
        if self.timeout is None:
            return None
        return self._timeouts.executor_block(self.timeout)

    def __call__(self, slot: Slot) -> Awaitable[None]:
        """What an executor awaits for ``slot``'s attempt."""
        if slot.kind is SlotKind.RECORD:
            run: Awaitable[None] = slot.source.run_async(slot.raw, slot)
            return run
        assert slot.punctuate is not None, "a punctuation slot without its body"
        punctuation: Awaitable[None] = slot.punctuate()
        return punctuation
