"""The one lifecycle enum of a running app and of its worker (a leaf module).

``CREATED → STARTING → RUNNING → STOPPING → STOPPED``; ``FAILED`` when a task failed or
the broker gave up (from STARTING or RUNNING); a failed worker still stops cleanly
(``FAILED → STOPPING → FAILED``). A start that fails before anything runs ends STOPPED
(``STARTING → STOPPED``), and stopping what never started is allowed (``CREATED →
STOPPED``). :data:`TRANSITIONS` is the whole table; :meth:`AppState.advance` checks a step
against it.
"""

from __future__ import annotations

import enum


class AppState(enum.Enum):
    """Where an app (or its worker) is in its life; see the module docstring."""

    CREATED = "created"
    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"
    FAILED = "failed"

    def advance(self, new: AppState, *, who: str) -> AppState:
        """``new``, when the table allows ``self → new``; else ``AssertionError`` naming
        ``who`` (an invariant of the code, not a user error)."""
        if new not in TRANSITIONS[self]:
            raise AssertionError(f"{who}: {self.value} -> {new.value} is not a lifecycle "
                                 f"step (allowed: {sorted(s.value for s in TRANSITIONS[self])})")
        return new


TRANSITIONS: dict[AppState, frozenset[AppState]] = {
    AppState.CREATED: frozenset({AppState.STARTING, AppState.STOPPED}),
    AppState.STARTING: frozenset({AppState.RUNNING, AppState.STOPPING, AppState.STOPPED,
                                  AppState.FAILED}),
    AppState.RUNNING: frozenset({AppState.STOPPING, AppState.FAILED}),
    AppState.STOPPING: frozenset({AppState.STOPPED, AppState.FAILED}),
    AppState.FAILED: frozenset({AppState.STOPPING}),
    AppState.STOPPED: frozenset(),
}
"""Every allowed lifecycle step: state → the states it may become next."""


__all__ = ["TRANSITIONS", "AppState"]
