"""Head-of-line blocking time: what finished records wait to retire behind an earlier one."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from taskkit import MakeTask, feed, gated_topology, raw

from aiostreams.engine.head_of_line import HeadOfLine
from aiostreams.runtime.slot import Slot, SlotKind
from aiostreams.testing import Sequencer, settle
from aiostreams.types import TopicPartition

IN = TopicPartition("in", 0)


async def test_records_finished_behind_a_slow_head_count_their_wait_until_it_finishes(
        make_task: MakeTask) -> None:
    seq = Sequencer()
    h = make_task(gated_topology(seq))
    await h.task.initialize()
    n = 6
    feed(h.task, IN, [raw("in", 0, i, f"k{i}", f"v{i}") for i in range(n)])
    await seq.wait_started(f"v{n - 1}")
    finished_at = []
    for i in range(1, n):  # slots 1..5 finish early, 1.5 s apart; slot 0 is still running
        h.clock.advance(1.5)
        seq.release(f"v{i}")
        await settle()
        finished_at.append(h.clock.monotonic())
    h.clock.advance(4.0)
    head_done = h.clock.monotonic()
    seq.release("v0")
    await settle()

    assert h.values() == [f"V{i}" for i in range(n)]
    hol = h.task.head_of_line
    expected = [head_done - t for t in finished_at]  # 10, 8.5, 7, 5.5, 4 s
    assert hol.total == sum(expected) == 35.0
    assert hol.longest == max(expected) == 10.0
    assert hol.blocked == n - 1


async def test_records_finishing_in_issue_order_never_wait(make_task: MakeTask) -> None:
    seq = Sequencer()
    h = make_task(gated_topology(seq))
    await h.task.initialize()
    feed(h.task, IN, [raw("in", 0, i, f"k{i}", f"v{i}") for i in range(4)])
    await seq.wait_started("v3")
    for i in range(4):
        h.clock.advance(2.0)
        seq.release(f"v{i}")
        await settle()
    assert h.values() == ["V0", "V1", "V2", "V3"]
    assert (h.task.head_of_line.total, h.task.head_of_line.blocked) == (0.0, 0)


def _slot(finished_at: float | None) -> Slot:
    slot = Slot(SlotKind.RECORD, None, None, None)
    slot.finished_at = finished_at
    return slot


@given(st.lists(st.integers(0, 1000), min_size=1, max_size=40),
       st.lists(st.integers(1, 5), min_size=1, max_size=10))
def test_each_wait_is_the_latest_earlier_finish_minus_its_own(
        finishes: list[int], batches: list[int]) -> None:
    """Against the definition, however retirement is cut into batches:
    ``wait(k) = max(0, max(finish(j) for j < k) - finish(k))``."""
    hol = HeadOfLine()
    slots = [_slot(float(f)) for f in finishes]
    start, b = 0, 0
    while start < len(slots):
        size = batches[b % len(batches)]
        hol.retired(slots[start:start + size])
        start += size
        b += 1
    waits = [max(0, max(finishes[:k], default=0) - f) for k, f in enumerate(finishes)]
    assert hol.total == sum(waits)
    assert hol.longest == max(waits)
    assert hol.blocked == sum(1 for w in waits if w > 0)


def test_a_slot_whose_finish_time_was_not_taken_changes_no_wait() -> None:
    hol = HeadOfLine()
    hol.retired([_slot(5.0), _slot(None), _slot(3.0), _slot(None), _slot(9.0)])
    assert (hol.total, hol.longest, hol.blocked) == (2.0, 2.0, 1)
