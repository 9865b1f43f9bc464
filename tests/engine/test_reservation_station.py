"""The reservation station alone: which issued slot may start, and who starts next."""

from __future__ import annotations

from collections.abc import Hashable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiostreams.engine.reorder_buffer import ReorderBuffer
from aiostreams.engine.reservation_station import ReservationStation
from aiostreams.runtime.slot import Slot, SlotKind, SlotState
from aiostreams.types import RawRecord


def slot(offset: int, hazard: Hashable | None) -> Slot:
    raw = RawRecord("in", 0, offset, float(offset), None, b"")
    s = Slot(SlotKind.RECORD, raw, None, hazard)
    s.seq = offset
    return s


def test_a_slot_with_a_new_hazard_starts_at_once() -> None:
    station = ReservationStation()
    assert station.admit(slot(0, "a"))
    assert station.admit(slot(1, "b"))


def test_a_slot_without_hazard_starts_at_once_even_behind_a_running_one() -> None:
    station = ReservationStation()
    assert station.admit(slot(0, None))
    assert station.admit(slot(1, None))
    assert station.release(slot(2, None)) is None


def test_same_key_slot_waits_until_the_earlier_one_finishes() -> None:
    station = ReservationStation()
    first, second = slot(0, "k"), slot(1, "k")
    assert station.admit(first)
    assert not station.admit(second)
    assert station.release(first) is second


def test_same_key_slots_start_in_issue_order() -> None:
    station = ReservationStation()
    chain = [slot(i, "k") for i in range(4)]
    assert [station.admit(s) for s in chain] == [True, False, False, False]
    started = [chain[0]]
    while (nxt := station.release(started[-1])) is not None:
        started.append(nxt)
    assert started == chain


def test_a_partition_hazard_orders_every_slot_of_the_partition() -> None:
    station = ReservationStation()  # ordering="partition": the hazard is the partition
    a, b = slot(0, 0), slot(1, 0)
    other = slot(2, 1)
    assert station.admit(a)
    assert not station.admit(b)
    assert station.admit(other)
    assert station.release(a) is b


def test_the_hazard_is_forgotten_once_its_last_slot_finishes() -> None:
    station = ReservationStation()
    first = slot(0, "k")
    station.admit(first)
    assert station.release(first) is None
    assert station.admit(slot(1, "k")), "a finished slot must not block a later one"


def test_the_buffer_refuses_to_issue_past_its_capacity() -> None:
    rob = ReorderBuffer(capacity=2)
    rob.issue(slot(0, "a"))
    rob.issue(slot(1, "a"))
    assert rob.full
    with pytest.raises(AssertionError, match="full reorder buffer"):
        rob.issue(slot(2, "b"))


@given(
    hazards=st.lists(st.sampled_from(["a", "b", "c", None]), min_size=1, max_size=40),
    picks=st.lists(st.integers(min_value=0, max_value=10_000), max_size=80),
)
def test_at_most_one_slot_per_hazard_runs_and_each_hazard_runs_in_issue_order(
        hazards: list[str | None], picks: list[int]) -> None:
    """Issue into a capacity-bounded buffer, finish running slots in an arbitrary order:
    never two running slots of one hazard, and each hazard's slots start in issue order."""
    station = ReservationStation()
    rob = ReorderBuffer(capacity=8)
    pending = [slot(i, h) for i, h in enumerate(hazards)]
    running: list[Slot] = []
    started: list[Slot] = []
    picks_left = list(picks)

    def start(s: Slot) -> None:
        assert all(r.hazard is None or r.hazard != s.hazard for r in running)
        running.append(s)
        started.append(s)

    while pending or running:
        if pending and len(rob) < rob.capacity:
            s = pending.pop(0)
            rob.issue(s)
            if station.admit(s):
                start(s)
            continue
        assert running, "every issued slot waits for a running one, so one runs"
        done = running.pop((picks_left.pop(0) if picks_left else 0) % len(running))
        successor = station.release(done)
        if successor is not None:
            start(successor)
        done.state = SlotState.DONE
        rob.pop_retirable()
    assert len(started) == len(hazards)
    for h in {"a", "b", "c"}:
        order = [s.seq for s in started if s.hazard == h]
        assert order == sorted(order)
