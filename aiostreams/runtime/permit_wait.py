"""Records waiting for a service's permit are not executing.

A record whose async step calls a declared service
(:class:`~aiostreams.services.service.Service`) may have to wait before its call goes out:
for the breaker to let calls through, for a concurrency place, for a token of the rate limit.
While it waits it must not hold what an executing record holds:

- **an executor**: the waiting executor counts as *parked* in the
  :class:`~aiostreams.engine.executor_pool.ExecutorPool` (as one waiting in the issue-order
  gate does), so one more executor may run a record that does not need the service (or
  whose service has room);
- **its per-attempt timeout**: the coarse ``processing_timeout`` / ``Retry.timeout`` block
  of the attempt is paused while the record waits, and resumes with the time that was left.

Fetching: waiting records keep their places in the reorder buffer, so when every record in
flight waits on a service (its breaker is open) the buffer fills and the task stops taking
input - back-pressure instead of records burnt into the dead-letter topic.

The engine binds its hooks per executor (:func:`bind_executor`) and per timed attempt
(:func:`bind_attempt`); the service wraps each wait in :func:`waiting_for_permit`. Outside
an executor (a test calling the service directly) the wait changes nothing.

Invariant (asserted by the pool): each ``park(+1)`` made here is matched by one ``park(-1)``,
also when the waiting record is cancelled.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from typing import Protocol

from aiostreams.runtime.slot import CURRENT_SLOT
from aiostreams.runtime.trace_hooks import CallTrace, SlotTrace

__all__ = ["bind_attempt", "bind_executor", "held_in_place", "record_trace", "traced_call",
           "unbind_attempt", "waiting_for_permit"]


class Pausable(Protocol):
    def pause(self) -> None: ...

    def resume(self) -> None: ...


_PARK: ContextVar[Callable[[int], None] | None] = ContextVar("aiostreams_permit_park",
                                                               default=None)
_ATTEMPT: ContextVar[Pausable | None] = ContextVar("aiostreams_permit_attempt", default=None)
_HELD: ContextVar[bool] = ContextVar("aiostreams_permit_held", default=False)


def bind_executor(park: Callable[[int], None]) -> None:
    """Called once by each executor, in its own context: ``park(+1)`` / ``park(-1)`` tell
    its pool that it stops / resumes running a record."""
    _PARK.set(park)


def bind_attempt(timeout: Pausable) -> Token[Pausable | None]:
    """The attempt now running in this executor is bounded by ``timeout``."""
    return _ATTEMPT.set(timeout)


def unbind_attempt(token: Token[Pausable | None]) -> None:
    _ATTEMPT.reset(token)


@contextmanager
def waiting_for_permit() -> Iterator[None]:
    """The block during which the current record waits for a service's permit: its
    executor is parked and its attempt's timeout paused."""
    park = _PARK.get()
    attempt = None if _HELD.get() else _ATTEMPT.get()  # held: paused already
    if attempt is not None:
        attempt.pause()
    if park is not None:
        park(1)
    try:
        yield
    finally:
        if park is not None:
            park(-1)
        if attempt is not None:
            attempt.resume()


@contextmanager
def held_in_place() -> Iterator[None]:
    """The rest of a call its service holds (after a slow-down answer or in an outage):
    the record's attempt timeout stays paused, also while the held call is re-dispatched
    (time held never counts against ``processing_timeout``; the service's own timeout
    and ``max_hold`` bound it), and its executor keeps running it. Nests: an inner
    :func:`waiting_for_permit` leaves the attempt paused."""
    attempt = _ATTEMPT.get()
    if attempt is None or _HELD.get():
        yield
        return
    attempt.pause()
    token = _HELD.set(True)
    try:
        yield
    finally:
        _HELD.reset(token)
        attempt.resume()


def record_trace() -> SlotTrace | None:
    """The trace of the record running in this context; None when tracing is off or no
    record runs here (a batch's call, a test calling a service directly)."""
    slot = CURRENT_SLOT.get(None)
    return slot.trace if slot is not None else None


def traced_call(service: str, attempt: int) -> CallTrace | None:
    """The trace of a call to ``service`` that starts waiting for its permit now, when the
    record running in this context is traced (see :mod:`~aiostreams.engine.tracing`);
    None otherwise."""
    record = record_trace()
    return record.call(service, attempt) if record is not None else None
