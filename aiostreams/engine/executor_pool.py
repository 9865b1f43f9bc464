"""The executor pool: long-lived coroutines that run a task's async slots one after another.

A task per record would cost an ``asyncio.Task``, its registration and a context copy each;
an executor instead takes the next slot when it finishes one. The pool holds at most
``max_concurrency`` executors, plus one for every executor parked in the issue-order gate
(see :mod:`~aiostreams.engine.issue_order`): a parked executor runs nothing, and without a
replacement every executor could wait for an earlier slot that sits in the ready heap.

Slots waiting for an executor are served oldest first (by reorder-buffer sequence): a
retried or long-blocked record holds the commit point, so it goes before newer ones. They
wait in a deque while they arrive in sequence order (newly issued records, the common
case), and in a heap when one arrives older than the deque's newest (a successor of its
key, a retry): the older of the two heads is served. A deque append and pop cost a few
dozen instructions; a pop from a heap of thousands of slots, its sift through the levels,
thousands.

A slot with a ``source`` (a record of an async chain) runs as ``source.begin_async(slot.raw,
slot)``, awaiting what that returns, then ``source.end_async(slot)``: for the fused shape
(:class:`~aiostreams.engine.async_chain.FusedSource`) the only coroutine below the executor
is the record's own ``process``. Any other slot runs ``execute(slot)``. ``on_error(slot,
error)`` and ``on_done(slot)`` are told how it ended. An executor binds ``CURRENT_SLOT``
to each slot it runs; its context is reused from slot to slot (see
:mod:`aiostreams.topology.processor` on user context variables). When attempts are
bounded, ``block()`` gives each executor, as it starts, the
:class:`~aiostreams.engine.coarse_timeout.ExecutorBlock` it opens and closes around every
attempt, inline (see :mod:`~aiostreams.engine.attempt`); it is bound once for the permit
hooks and released when the executor ends.

Invariant (asserted): the number of parked executors never drops below zero.
"""

from __future__ import annotations

import asyncio
import heapq
from collections import deque
from collections.abc import Awaitable, Callable

from aiostreams.engine.coarse_timeout import ExecutorBlock
from aiostreams.runtime.permit_wait import bind_attempt, bind_executor
from aiostreams.runtime.slot import CURRENT_SLOT, Slot


class ExecutorPool:
    def __init__(self, max_concurrency: int, *,
                 execute: Callable[[Slot], Awaitable[None]],
                 on_error: Callable[[Slot, Exception], None],
                 on_done: Callable[[Slot], None],
                 block: Callable[[], ExecutorBlock | None] = lambda: None) -> None:
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
        self.max_concurrency = max_concurrency
        self._execute = execute
        self._on_error = on_error
        self._on_done = on_done
        self._block = block
        self._executors: set[asyncio.Task[None]] = set()
        self._idle: list[asyncio.Future[Slot]] = []
        self._in_order: deque[Slot] = deque()  # ready slots, ascending sequence
        self._ready: list[tuple[int, Slot]] = []  # the other ready slots, a heap
        self._parked = 0  # executors waiting in the issue-order gate

    def __len__(self) -> int:
        """Executors alive (running a slot, idle, or parked in the gate)."""
        return len(self._executors)

    def dispatch(self, slot: Slot) -> None:
        """Hand ``slot`` to an idle executor, or start one (within the limit); with all of
        them busy the slot waits, ready (in the deque or the heap, see the module docstring)."""
        idle = self._idle
        while idle:
            waiter = idle.pop()
            if not waiter.done():
                waiter.set_result(slot)
                return
        if len(self._executors) < self.max_concurrency + self._parked:
            self._spawn(slot)
        else:
            in_order = self._in_order
            if not in_order or slot.seq > in_order[-1].seq:
                in_order.append(slot)
            else:
                heapq.heappush(self._ready, (slot.seq, slot))

    def parked(self, delta: int) -> None:
        """An executor starts (+1) or stops (-1) waiting in the issue-order gate; while it
        waits, one more executor may run (the oldest ready slot gets it at once)."""
        self._parked += delta
        assert self._parked >= 0, "an executor left the gate it never entered"
        if delta > 0 and (self._in_order or self._ready):
            self._spawn(self._pop_ready())

    def _pop_ready(self) -> Slot:
        """The oldest ready slot (there is one)."""
        in_order, ready = self._in_order, self._ready
        if in_order and (not ready or in_order[0].seq < ready[0][0]):
            return in_order.popleft()
        return heapq.heappop(ready)[1]

    async def cancel_all(self) -> None:
        """Cancel every executor and wait for them to end. Cancellation: the executors are
        cancelled already; stops waiting for them."""
        running = list(self._executors)
        for t in running:
            t.cancel()
        if running:
            await asyncio.gather(*running, return_exceptions=True)

    def _spawn(self, slot: Slot) -> None:
        executor = asyncio.get_running_loop().create_task(self._run(slot))
        self._executors.add(executor)
        executor.add_done_callback(self._executors.discard)

    async def _run(self, slot: Slot) -> None:
        """Run slots until cancelled (per-slot errors go to ``on_error``, never out)."""
        loop = asyncio.get_running_loop()
        time = loop.time
        closed = float("inf")
        in_order = self._in_order
        ready = self._ready
        idle = self._idle
        execute = self._execute
        set_current = CURRENT_SLOT.set
        bind_executor(self.parked)  # waiting for a service's permit parks this executor
        block = self._block()
        if block is not None:
            bind_attempt(block)  # and pauses the timeout of the attempt it runs
        try:
            while True:
                set_current(slot)
                if block is not None:  # open the block (its protocol, inline)
                    block.deadline = time() + block.timeout
                    block.cancelling = block.task.cancelling()
                    if block.owner.sweep is None:
                        block.owner.arm()
                source = slot.source
                try:
                    if source is not None:
                        pending = source.begin_async(slot.raw, slot)
                        if pending is not None:
                            await pending
                        source.end_async(slot)
                    else:
                        await execute(slot)
                except asyncio.CancelledError as cancelled:
                    if block is None or not block.expired:
                        raise
                    block.deadline = closed
                    self._on_error(slot, block.timed_out(cancelled))
                except Exception as error:
                    if block is not None:
                        block.deadline = closed
                        if block.expired:
                            block.settle()
                    self._on_error(slot, error)
                else:
                    if block is not None:
                        block.deadline = closed
                        if block.expired:
                            block.settle()
                    self._on_done(slot)
                if len(self._executors) > self.max_concurrency + self._parked:
                    return  # an executor added while others waited in the gate
                if in_order and (not ready or in_order[0].seq < ready[0][0]):
                    slot = in_order.popleft()  # _pop_ready(), without a call per slot
                    continue
                if ready:
                    slot = heapq.heappop(ready)[1]
                    continue
                waiter: asyncio.Future[Slot] = loop.create_future()
                idle.append(waiter)
                slot = await waiter
        finally:
            if block is not None:
                block.release()
