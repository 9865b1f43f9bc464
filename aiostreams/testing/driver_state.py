"""The test driver's lifecycle: its states, and which of its calls each state allows.

``CREATED → RUNNING → CLOSED``; ``FAILED`` (from RUNNING) once a task failed. Input, time
and commits need a RUNNING driver; processing is also allowed once FAILED (it raises the
failure). A call the state does not allow raises ``RuntimeError`` saying why and what to
do - never a silent no-op.
"""

from __future__ import annotations

import enum

__all__ = ["DriverState", "require_running"]


class DriverState(enum.Enum):
    """``CREATED → RUNNING → CLOSED``; ``FAILED`` (from RUNNING) once a task failed."""

    CREATED = "created"
    RUNNING = "running"
    FAILED = "failed"
    CLOSED = "closed"


def require_running(state: DriverState, action: str, failure: BaseException | None, *,
                    allow_failed: bool = False) -> None:
    """Return when a driver in ``state`` may ``action`` (also when FAILED, with
    ``allow_failed``); else raise ``RuntimeError`` naming ``failure`` or how to start it."""
    if state is DriverState.RUNNING:
        return
    if state is DriverState.FAILED:
        if allow_failed:
            return
        raise RuntimeError(f"cannot {action}: the driver failed ({failure})")
    raise RuntimeError(
        f"cannot {action}: the driver is {state.value}; use `async with "
        "TopologyTestDriver(app) as driver:` (or await driver.start())")
