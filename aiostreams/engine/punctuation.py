"""A task's punctuation queue: ``ctx.schedule`` callbacks and when they fall due.

Two kinds (Kafka Streams' ``PunctuationType``):

* ``stream_time``: due when the task's stream time (the largest record timestamp issued)
  reaches ``next_due``; the first record seen sets ``next_due = stream_time + interval``, and
  a jump past several intervals fires once (``next_due`` then moves past the stream time);
* ``wall_clock``: due every ``interval`` seconds of the task's clock while the task runs.

A due punctuation waits in :attr:`PunctuationQueue.due`, oldest first, until the task
issues it into the reorder buffer as a barrier slot whose body is :func:`punctuation_body`,
so what it forwards is ordered with respect to the records around it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiostreams.engine.async_chain import Step, hand_over
from aiostreams.errors import ConfigError
from aiostreams.runtime.clock import Clock, TimerHandle
from aiostreams.runtime.slot import CURRENT_SLOT
from aiostreams.topology.processor import PunctuationType
from aiostreams.types import Record

PunctuationCallback = Callable[[float], Awaitable[None] | None]


class Punctuation:
    """One scheduled callback of a node; the handle ``ctx.schedule`` returns."""

    def __init__(self, node: str, steps: dict[str, Step], interval: float,
                 kind: PunctuationType, callback: PunctuationCallback) -> None:
        if interval <= 0:
            raise ConfigError(f"a punctuation interval must be > 0 seconds, got {interval}")
        self.node = node
        self.steps = steps  # the node's children's, for what the callback forwards
        self.interval = interval
        self.kind = kind
        self.callback = callback
        self.next_due: float | None = None
        self.timer: TimerHandle | None = None
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True
        if self.timer is not None:
            self.timer.cancel()


class PunctuationQueue:
    """``is_running()`` tells whether wall-clock punctuations may fall due now;
    ``on_due()`` is called when one does (the task schedules its pump)."""

    def __init__(self, clock: Clock, is_running: Callable[[], bool],
                 on_due: Callable[[], None]) -> None:
        self._clock = clock
        self._is_running = is_running
        self._on_due = on_due
        self.scheduled: list[Punctuation] = []
        self.due: list[Punctuation] = []

    def schedule(self, p: Punctuation) -> Punctuation:
        self.scheduled.append(p)
        if p.kind is PunctuationType.WALL_CLOCK:
            self._arm_wall_clock(p)
        return p

    def _arm_wall_clock(self, p: Punctuation) -> None:
        def fire() -> None:
            if p.cancelled or not self._is_running():
                return
            self.due.append(p)
            self._arm_wall_clock(p)
            self._on_due()

        p.timer = self._clock.call_later(p.interval, fire)

    def advance_stream_time(self, now: float) -> None:
        """The stream time moved to ``now``: queue the stream-time punctuations it reached."""
        for p in self.scheduled:
            if p.kind is not PunctuationType.STREAM_TIME or p.cancelled:
                continue
            if p.next_due is None:
                p.next_due = now + p.interval
            elif now >= p.next_due:
                while p.next_due <= now:
                    p.next_due += p.interval
                self.due.append(p)

    def cancel_all(self) -> None:
        for p in self.scheduled:
            p.cancel()


def punctuation_body(p: Punctuation, at: float) -> Callable[[], Awaitable[None]]:
    """What the punctuation's slot executes: the callback with time ``at``, then what it
    forwarded through the node's children, in forward order."""

    async def run() -> None:
        slot = CURRENT_SLOT.get()
        buffer: list[tuple[str | None, Record[Any, Any]]] = []
        slot.forward_buffer = buffer
        slot.node = p.node
        result = p.callback(at)
        if result is not None:
            await result
        slot.forward_buffer = None
        steps = p.steps
        await hand_over(buffer, slot, steps, list(steps.values()))

    return run
