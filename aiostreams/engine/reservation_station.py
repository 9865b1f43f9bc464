"""The reservation station: decides when an issued slot may start executing.

By ``ordering``:

* ``"key"``: a slot starts only after every earlier slot with the same key has finished;
* ``"partition"``: after every earlier slot of its partition (Kafka Streams' behaviour);
* ``"unordered"``: at once.

Algorithm: for each hazard (a key, a partition) the station remembers the *latest* issued
slot that has not finished. A new slot with that hazard becomes its successor and waits;
when a slot finishes it hands over to its successor. Each slot has at most one successor,
so same-hazard slots form a chain that runs strictly in issue order.

Invariant: at most one slot per hazard is executing (or in backoff) at any time.
"""

from __future__ import annotations

from collections.abc import Hashable

from aiostreams.runtime.slot import Slot


class ReservationStation:
    def __init__(self) -> None:
        self._latest: dict[Hashable, Slot] = {}

    def admit(self, slot: Slot) -> bool:
        """Register ``slot``; True when it may start now, False when it must wait."""
        hazard = slot.hazard
        if hazard is None:
            return True
        latest = self._latest
        previous = latest.get(hazard)
        latest[hazard] = slot
        if previous is None:
            return True
        if previous.successor is not None:
            raise AssertionError(f"{previous!r} already has a successor")
        previous.successor = slot
        return False

    def release(self, slot: Slot) -> Slot | None:
        """``slot`` finished executing; return the successor that may now start."""
        hazard = slot.hazard
        if hazard is None:
            return None
        successor = slot.successor
        if successor is None:
            if self._latest.get(hazard) is slot:
                del self._latest[hazard]
            return None
        slot.successor = None
        return successor
