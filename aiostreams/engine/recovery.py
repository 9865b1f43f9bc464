"""A task's recovery from failed attempts: carries out what :func:`failure.decide
<aiostreams.engine.failure.decide>` decides, and holds the delay queue.

A failed attempt's buffered outputs and store writes are discarded first (the writes are
withdrawn from the overlays). Then, by the decision:

* ``retry`` / ``defer``: the slot goes to BACKOFF and waits in the delay queue (one clock
  timer per slot); when due, ``restart(slot)`` runs it again. A deferral does not count as
  an attempt. The slot keeps holding the commit point and the same-key records behind it.
* ``dead_letter``: the slot's only output becomes the dead-letter record (after the
  service answers its last attempt recorded, if the app records them); it finishes.
* ``skip``: it finishes with no output (but those recorded answers).
* ``fail``: ``fail(slot, error)`` (the task stops).

Invariant: a slot is in the delay queue exactly while it is in BACKOFF and the queue has
not been cancelled.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from aiostreams.engine.failure import Action, dead_letter_record, decide
from aiostreams.engine.task_state import TaskMetrics, TaskSettings
from aiostreams.engine.task_stores import TaskStores
from aiostreams.policies import Retry, marked_retryable
from aiostreams.runtime.clock import Clock, TimerHandle
from aiostreams.runtime.external_record import RECORDED_ANSWERS, ExternalRecord
from aiostreams.runtime.slot import Slot, SlotKind, SlotState

log = logging.getLogger("aiostreams.task")


class Recovery:
    def __init__(self, task_id: str, settings: TaskSettings, metrics: TaskMetrics,
                 clock: Clock, *, attempt_timeout: float | None,
                 node_retry: Callable[[str], Retry | None],
                 finish: Callable[[Slot], None], restart: Callable[[Slot], None],
                 fail: Callable[[Slot, Exception], None]) -> None:
        self._task_id = task_id
        self._settings = settings
        self._metrics = metrics
        self._clock = clock
        self._attempt_timeout = attempt_timeout
        self._node_retry = node_retry
        self._finish = finish
        self._restart = restart
        self._fail = fail
        self._delayed: dict[Slot, TimerHandle] = {}

    def on_error(self, slot: Slot, error: Exception) -> None:
        """``slot``'s attempt raised ``error`` (not a cancellation)."""
        TaskStores.withdraw(slot)
        recorded = _recorded_answers(slot.outputs) if slot.outputs else []
        slot.reset_buffers()
        if isinstance(error, TimeoutError) and self._attempt_timeout is not None \
                and marked_retryable(error) is None:  # a service call's timeout is its own
            error = TimeoutError(
                f"processing took longer than its {self._attempt_timeout}s timeout "
                "(processing_timeout / Retry.timeout)"
            )
        settings, metrics = self._settings, self._metrics
        decision = decide(
            error, is_record=slot.kind is SlotKind.RECORD, attempts=slot.attempts,
            retry=self._node_retry(slot.node) or settings.retry,
            on_error=settings.on_error, dead_letter_topic=settings.dead_letter_topic)
        action = decision.action
        if slot.trace is not None:
            slot.trace.failed(error, action.value, slot.attempts)
        if action is Action.DEFER or action is Action.RETRY:
            if action is Action.DEFER:
                slot.attempts -= 1  # a deferral is not an attempt
                metrics.deferred += 1
            else:
                metrics.retries += 1
                log.debug("task %s: %r failed (attempt %d), retrying in %.3fs: %s",
                          self._task_id, slot, slot.attempts, decision.delay, error)
            slot.state = SlotState.BACKOFF
            self._delayed[slot] = self._clock.call_later(decision.delay,
                                                         lambda: self._due(slot))
            return
        metrics.by_node_errors[slot.node] = metrics.by_node_errors.get(slot.node, 0) + 1
        if action is Action.DEAD_LETTER:
            topic = settings.dead_letter_topic
            assert slot.raw is not None and topic is not None
            metrics.dead_lettered += 1
            slot.outputs = [*recorded, dead_letter_record(
                slot.raw, error, topic=topic, attempts=slot.attempts, processor=slot.node,
                now=self._clock.wall_time(), max_bytes=settings.max_record_bytes)]
            log.warning("task %s: %r dead-lettered to %s after %d attempt(s): %s: %s",
                        self._task_id, slot, topic, slot.attempts, type(error).__name__,
                        error)
            self._finish(slot)
        elif action is Action.SKIP:
            metrics.skipped += 1
            slot.outputs = list(recorded)
            log.warning("task %s: %r skipped after %d attempt(s): %s: %s", self._task_id,
                        slot, slot.attempts, type(error).__name__, error)
            self._finish(slot)
        else:
            self._fail(slot, error)

    def _due(self, slot: Slot) -> None:
        self._delayed.pop(slot, None)
        if slot.state is SlotState.BACKOFF:
            self._restart(slot)

    def cancel_all(self) -> None:
        """Empty the delay queue: its slots are not run again."""
        for timer in self._delayed.values():
            timer.cancel()
        self._delayed.clear()


def _recorded_answers(outputs: list[Any]) -> list[Any]:
    """The service answers an attempt recorded (kept if the record ends dead-lettered or
    skipped; see :data:`~aiostreams.runtime.external_record.RECORDED_ANSWERS`)."""
    return [o for o in outputs if o.__class__ is ExternalRecord and o.sink == RECORDED_ANSWERS]
