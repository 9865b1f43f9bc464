"""The test driver's clock: a :class:`~aiostreams.runtime.clock.ManualClock` that says when
its next timer falls due, so the driver can move wall-clock time from one due timer to the
next (firing each at its own time) instead of jumping past them.

Invariant: :meth:`DriverClock.next_due` is the earliest due time of the timers not
cancelled (None when there is none); asking changes nothing.
"""

from __future__ import annotations

from aiostreams.runtime.clock import ManualClock

__all__ = ["DriverClock"]


class DriverClock(ManualClock):
    """A :class:`ManualClock` that can say when its next timer falls due."""

    def next_due(self) -> float | None:
        pending = [due for due, _, timer in self._timers if not timer.cancelled]
        return min(pending, default=None)
