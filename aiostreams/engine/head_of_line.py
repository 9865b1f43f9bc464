"""Head-of-line blocking: how long finished records wait to retire behind an unfinished one.

A record that finishes while an earlier record of its task is still executing (a slow call,
a retry's backoff) cannot retire: retirement is in issue order. The time it waits is its
*head-of-line wait*: from its own finish to the finish of the last earlier record to finish,
``wait(k) = max(0, max(finish(j) for j issued before k) - finish(k))``. It measures what
in-order semantics cost a pipeline; the time between a record's finish and the loop turn that
retires it is not counted (no earlier record holds it then).

Per task: the sum of the waits (seconds), the longest one, and how many records waited.

Cost: the task reads the clock when a slot finishes (``Slot.finished_at``), except when the
slot is the oldest in flight and no slot after it has finished: then every earlier record
has retired and every later one finishes after it, so its finish time changes no wait (it
stays None). :meth:`HeadOfLine.retired` does a comparison per retired slot.
Nothing is allocated per record. The inline path (a record that runs and retires at once)
never waits and is not seen here.

Invariants (asserted): the sum and the longest wait never decrease; slots are observed in
retirement (issue) order, so the running latest finish is over every earlier record.
"""

from __future__ import annotations

from collections.abc import Sequence

from aiostreams.runtime.slot import Slot


class HeadOfLine:
    """The head-of-line figures of one task (see the module docstring)."""

    __slots__ = ("_latest", "blocked", "longest", "total")

    def __init__(self) -> None:
        self.total = 0.0
        """Seconds, summed over every retired record, spent waiting behind an earlier one."""
        self.longest = 0.0
        """The longest single wait, in seconds."""
        self.blocked = 0
        """Retired records that waited at all."""
        self._latest = float("-inf")  # the latest finish among the records retired so far

    def retired(self, slots: Sequence[Slot]) -> None:
        """Account for ``slots``, retired in this order (oldest first)."""
        latest = self._latest
        total = self.total
        longest = self.longest
        blocked = self.blocked
        for slot in slots:
            finished = slot.finished_at
            if finished is None:  # its finish time changes no wait (module docstring)
                continue
            if finished >= latest:
                latest = finished
                continue
            wait = latest - finished  # > 0
            total += wait
            blocked += 1
            if wait > longest:
                longest = wait
        assert total >= self.total and longest >= self.longest, "a wait was negative"
        self._latest = latest
        self.total = total
        self.longest = longest
        self.blocked = blocked
