"""The reorder buffer on its own: retirement order and committable offsets per partition."""

from __future__ import annotations

import pytest

from aiostreams.engine.reorder_buffer import ReorderBuffer
from aiostreams.runtime.slot import Slot, SlotKind, SlotState, record_slot
from aiostreams.types import RawRecord, TopicPartition

A = TopicPartition("a", 0)
B = TopicPartition("b", 0)


def issued(rob: ReorderBuffer, tp: TopicPartition, offset: int) -> Slot:
    slot = Slot(SlotKind.RECORD, RawRecord(tp.topic, tp.partition, offset, 0.0, b"k", b"v"),
                None, None)
    rob.issue(slot)
    return slot


def test_retirement_pops_the_finished_prefix_and_stops_at_the_first_unfinished_slot() -> None:
    rob = ReorderBuffer(8, [A])
    slots = [issued(rob, A, offset) for offset in range(4)]
    for i in (0, 1, 3):
        slots[i].state = SlotState.DONE

    assert rob.pop_retirable() == slots[:2]
    assert rob.committable == {A: 2}
    assert rob.pop_retirable() == []  # slot 2 still executes; slot 3 waits behind it
    assert rob.committable == {A: 2}

    slots[2].state = SlotState.DONE
    assert rob.pop_retirable() == slots[2:]
    assert rob.committable == {A: 4}
    assert len(rob) == 0


def test_interleaved_partitions_each_commit_past_their_own_last_retired_record() -> None:
    rob = ReorderBuffer(8, [A, B])
    slots = [issued(rob, A, 5), issued(rob, B, 3), issued(rob, A, 6), issued(rob, B, 4),
             issued(rob, A, 7)]
    for slot in slots[:4]:
        slot.state = SlotState.DONE

    assert rob.pop_retirable() == slots[:4]
    assert rob.committable == {A: 7, B: 5}
    assert rob.oldest_unretired_offset(A) == 7
    assert rob.oldest_unretired_offset(B) is None


def test_a_punctuation_slot_retires_in_order_without_moving_any_offset() -> None:
    rob = ReorderBuffer(4, [A])
    record = issued(rob, A, 0)
    punctuation = Slot(SlotKind.PUNCTUATION, None, None, None)
    rob.issue(punctuation)
    record.state = punctuation.state = SlotState.DONE

    assert rob.pop_retirable() == [record, punctuation]
    assert rob.committable == {A: 1}


def test_the_committable_offset_refuses_to_move_back() -> None:
    rob = ReorderBuffer(4, [A])
    rob.advance(A, 9)
    with pytest.raises(AssertionError, match="move back from 10 to 5"):
        rob.advance(A, 4)


def test_a_record_slot_is_the_slot_the_class_call_builds() -> None:
    # record_slot stores every attribute itself: a slot attribute it forgot would be unset
    raw = RawRecord("a", 0, 7, 1.5, b"k", b"v", (("h", b"1"),))
    fast, slow = record_slot(raw, "source", b"k"), Slot(SlotKind.RECORD, raw, "source", b"k")
    for name in Slot.__slots__:
        assert getattr(fast, name) == getattr(slow, name), name
    assert fast.outputs is not slow.outputs  # a list of its own
