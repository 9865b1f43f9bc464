"""The partition queues alone: the choice of the next record, and task idling (KIP-353)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiostreams.engine.partition_queue import UNFETCHED_WAIT, PartitionGroup
from aiostreams.types import RawRecord, TopicPartition

LEFT, RIGHT = TopicPartition("left", 0), TopicPartition("right", 0)


def raw(tp: TopicPartition, offset: int, timestamp: float) -> RawRecord:
    return RawRecord(tp.topic, tp.partition, offset, timestamp, None, b"")


def test_the_head_with_the_lowest_timestamp_goes_first() -> None:
    group = PartitionGroup([LEFT, RIGHT], max_task_idle=0.0)
    group.add(LEFT, [raw(LEFT, 0, 5.0), raw(LEFT, 1, 6.0)])
    group.add(RIGHT, [raw(RIGHT, 0, 1.0), raw(RIGHT, 1, 7.0)])
    order = [group.next_record(0.0) for _ in range(4)]
    assert [(r.topic, r.timestamp) for r in order if isinstance(r, RawRecord)] == [
        ("right", 1.0), ("left", 5.0), ("left", 6.0), ("right", 7.0)]


def test_a_timestamp_tie_goes_to_the_partition_listed_first() -> None:
    group = PartitionGroup([LEFT, RIGHT], max_task_idle=0.0)
    group.add(RIGHT, [raw(RIGHT, 0, 1.0)])
    group.add(LEFT, [raw(LEFT, 0, 1.0)])
    first = group.next_record(0.0)
    assert isinstance(first, RawRecord) and first.topic == "left"


def test_with_a_partition_empty_the_task_idles_until_max_task_idle_passes() -> None:
    group = PartitionGroup([LEFT, RIGHT], max_task_idle=2.0)
    group.add(LEFT, [raw(LEFT, 0, 1.0)])
    assert group.next_record(10.0) == 12.0, "the deadline to wait for"
    assert group.next_record(11.9) == 12.0, "the deadline does not move while idling"
    assert group.enforced_processing_total == 0
    chosen = group.next_record(12.0)
    assert isinstance(chosen, RawRecord) and chosen.topic == "left"
    assert group.enforced_processing_total == 1


def test_a_record_arriving_while_idling_ends_the_wait_without_enforced_processing() -> None:
    group = PartitionGroup([LEFT, RIGHT], max_task_idle=2.0)
    group.add(LEFT, [raw(LEFT, 0, 3.0)])
    assert isinstance(group.next_record(0.0), float)
    group.add(RIGHT, [raw(RIGHT, 0, 1.0)])
    chosen = group.next_record(1.0)
    assert isinstance(chosen, RawRecord) and chosen.topic == "right"
    assert group.enforced_processing_total == 0


def test_idling_starts_afresh_after_the_queues_emptied() -> None:
    group = PartitionGroup([LEFT, RIGHT], max_task_idle=2.0)
    group.add(LEFT, [raw(LEFT, 0, 1.0)])
    assert group.next_record(0.0) == 2.0
    assert isinstance(group.next_record(2.0), RawRecord)
    assert group.next_record(2.0) is None
    group.add(LEFT, [raw(LEFT, 1, 2.0)])
    assert group.next_record(5.0) == 7.0, "a new idle period, not the old deadline"


def test_without_idling_an_empty_partition_does_not_hold_the_others() -> None:
    group = PartitionGroup([LEFT, RIGHT], max_task_idle=0.0)
    group.add(LEFT, [raw(LEFT, 0, 1.0)])
    assert isinstance(group.next_record(0.0), RawRecord)
    assert group.enforced_processing_total == 0


def test_an_empty_partition_with_unfetched_records_is_waited_for() -> None:
    unfetched = {RIGHT: 10}  # the broker's end offset
    group = PartitionGroup([LEFT, RIGHT], max_task_idle=0.0,
                           has_unfetched=lambda tp, offset: unfetched.get(tp, 0) > offset)
    group.seed_position(RIGHT, 4)
    group.add(LEFT, [raw(LEFT, 0, 1.0)])
    assert group.next_record(0.0) == UNFETCHED_WAIT
    unfetched[RIGHT] = 4  # caught up: nothing left to fetch
    assert isinstance(group.next_record(0.0), RawRecord)


def test_a_single_partition_never_waits() -> None:
    group = PartitionGroup([LEFT], max_task_idle=60.0)
    assert group.next_record(0.0) is None
    group.add(LEFT, [raw(LEFT, 0, 1.0)])
    assert isinstance(group.next_record(0.0), RawRecord)


def test_a_partition_queue_refuses_an_offset_that_goes_back() -> None:
    group = PartitionGroup([LEFT], max_task_idle=0.0)
    group.add(LEFT, [raw(LEFT, 5, 1.0)])
    with pytest.raises(AssertionError, match="only moves forward"):
        group.add(LEFT, [raw(LEFT, 5, 2.0)])


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="at least one partition"):
        PartitionGroup([], max_task_idle=0.0)
    with pytest.raises(ValueError, match="max_task_idle"):
        PartitionGroup([LEFT], max_task_idle=-1.0)


timestamps = st.lists(st.integers(min_value=0, max_value=20).map(float), max_size=12)


@given(left=timestamps, right=timestamps)
def test_each_partition_leaves_in_offset_order_and_every_choice_is_the_lowest_head(
        left: list[float], right: list[float]) -> None:
    group = PartitionGroup([LEFT, RIGHT], max_task_idle=0.0)
    group.add(LEFT, [raw(LEFT, i, t) for i, t in enumerate(left)])
    group.add(RIGHT, [raw(RIGHT, i, t) for i, t in enumerate(right)])
    queues = {"left": list(left), "right": list(right)}
    seen: dict[str, list[int]] = {"left": [], "right": []}
    while (chosen := group.next_record(0.0)) is not None:
        assert isinstance(chosen, RawRecord), "never waits with max_task_idle=0"
        heads = [q[0] for q in queues.values() if q]
        if all(queues.values()):
            assert chosen.timestamp == min(heads)
        queues[chosen.topic].pop(0)
        seen[chosen.topic].append(chosen.offset)
    assert seen == {"left": list(range(len(left))), "right": list(range(len(right)))}
