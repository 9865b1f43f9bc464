"""The issue-order gate: lets a record wait until every record issued before it has
finished, so a processor can see the task's records in issue (offset) order.

Why: a processor whose result depends on records of *other* keys - a window that closes on
the stream time of the records that reached it, a join's outer-result buffer - cannot take
its decisions while an earlier record (of any key) may still reach it. Kafka Streams'
window and join processors track stream time over the records that reach *them*; a record
filtered out upstream, or still waiting for a REST call, must neither advance nor miss that
time. So such a processor awaits :meth:`IssueOrderGate.wait_for_earlier` first: past it,
every earlier record has finished executing (or was dead-lettered or skipped), and the
processor runs for the records that reach it one at a time, in issue order, as in a serial
run. What is upstream of it still runs out of order.

Invariant (asserted): ``done_upto`` never decreases, and every slot with a sequence number
below it is DONE or already retired. A waiter for slot ``s`` is released once
``done_upto >= s``; ``s`` itself is executing, so it never waits for itself, and it waits
only for earlier slots, which never wait for it: no cycle, hence no deadlock - provided
earlier slots can get an executor, which the task guarantees by letting one more executor
run for every slot that waits here (see ``StreamTask._gate_wait``).

Cost: nothing on the hot path while no record waits (the task calls ``finished`` only
while ``waiters`` is not empty); each slot is stepped over once by ``done_upto``.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable, Sequence

from aiostreams.runtime.slot import Slot, SlotState


class IssueOrderGate:
    """See the module docstring. ``slots`` is the reorder buffer's deque, oldest first,
    with consecutive sequence numbers; ``on_wait(+1 | -1)`` is told when a slot starts and
    stops waiting (the task widens its executor pool by as many)."""

    def __init__(self, slots: Sequence[Slot], on_wait: Callable[[int], None]) -> None:
        self._slots = slots
        self._on_wait = on_wait
        self.done_upto = 0
        self.waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        """Slots waiting, as a heap (seq, tie, future); the task calls :meth:`finished`
        only while it is not empty."""
        self._order = itertools.count()  # ties (one slot waiting twice) never compare futures

    @property
    def waiting(self) -> int:
        return len(self.waiters)

    def _advance(self) -> None:
        slots = self._slots
        if not slots:
            # everything issued so far has retired
            return
        head_seq = slots[0].seq
        upto = max(self.done_upto, head_seq)
        index = upto - head_seq
        done = SlotState.DONE
        while index < len(slots) and slots[index].state is done:
            index += 1
            upto += 1
        assert upto >= self.done_upto, "done_upto moved back"
        self.done_upto = upto

    def _issued_before_all_done(self, seq: int) -> bool:
        slots = self._slots
        if not slots or slots[0].seq >= seq:
            return True
        self._advance()
        return self.done_upto >= seq

    def finished(self) -> None:
        """A slot reached DONE (or retired): release the waiters it unblocked."""
        waiters = self.waiters
        if not waiters:
            return
        self._advance()
        slots = self._slots
        limit = self.done_upto if slots else None
        while waiters and (limit is None or waiters[0][0] <= limit):
            _, _, future = heapq.heappop(waiters)
            if not future.done():
                future.set_result(None)

    async def wait_for_earlier(self, slot: Slot) -> None:
        """Return once every slot issued before ``slot`` has finished. At once for a slot
        that is not in the buffer (the inline path runs only when the buffer is empty).

        Cancellation: stops waiting; the gate is unchanged but for the cancelled waiter,
        which the next :meth:`finished` drops."""
        seq = slot.seq
        if seq < 0 or self._issued_before_all_done(seq):
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self.waiters, (seq, next(self._order), future))
        self._on_wait(1)
        try:
            await future
        finally:
            self._on_wait(-1)
