"""One attempt of an async slot: the awaitable an executor runs, bounded by its timeout.

An attempt is bounded by the smaller of ``processing_timeout`` and ``Retry.timeout`` (both
bound one attempt); with neither set, the executor awaits the source's run directly, with no
frame of ours in between. The bound is a coarse timeout
(:mod:`~aiostreams.engine.coarse_timeout`: 4x cheaper than ``asyncio.timeout`` here), paused
while the record waits for a service's permit (:mod:`~aiostreams.engine.permit_wait`), so
the timeout measures the call and not the queue before it.

Invariant: a punctuation attempt runs ``slot.punctuate``, a record attempt the slot's
source; a timed-out attempt raises ``TimeoutError`` out of the awaitable (recovery decides
what follows).
"""

from __future__ import annotations

from collections.abc import Awaitable

from aiostreams.engine.coarse_timeout import CoarseTimeouts, granularity_for
from aiostreams.engine.permit_wait import bind_attempt, unbind_attempt
from aiostreams.engine.reorder_buffer import Slot, SlotKind


def attempt_timeout(processing_timeout: float | None,
                    retry_timeout: float | None) -> float | None:
    """Seconds one attempt may take: the smaller of the two that are set, else None."""
    timeouts = [t for t in (processing_timeout, retry_timeout) if t]
    return min(timeouts) if timeouts else None


class AttemptRunner:
    def __init__(self, timeout: float | None) -> None:
        self.timeout = timeout
        self._timeouts = CoarseTimeouts(granularity_for(timeout or 1.0))

    def __call__(self, slot: Slot) -> Awaitable[None]:
        """What an executor awaits for ``slot``'s attempt."""
        if self.timeout is None and slot.kind is SlotKind.RECORD:
            run: Awaitable[None] = slot.source.run_async(slot.raw, slot)
            return run
        return self._timed(slot)

    async def _timed(self, slot: Slot) -> None:
        """A punctuation, or any slot under a per-attempt timeout."""
        timeout = self.timeout
        if timeout is None:
            assert slot.punctuate is not None
            await slot.punctuate()
            return
        block = self._timeouts.bound(timeout)
        token = bind_attempt(block)  # paused while the record waits for a service's permit
        try:
            with block:
                if slot.kind is SlotKind.PUNCTUATION:
                    assert slot.punctuate is not None
                    await slot.punctuate()
                else:
                    await slot.source.run_async(slot.raw, slot)
        finally:
            unbind_attempt(token)
