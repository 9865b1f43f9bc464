"""StallWatch: a head that stays is a stall after ``after`` seconds; one that moves is not."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from aiostreams.engine.stall_watch import StallWatch
from aiostreams.types import RawRecord


@dataclass
class FakeTask:
    task_id: str
    oldest_unretired: RawRecord | None = None


def at(offset: int) -> RawRecord:
    return RawRecord("in", 0, offset, 0.0, None, None)


def test_a_head_that_keeps_moving_is_never_a_stall() -> None:
    watch, task = StallWatch(10.0), FakeTask("0_0")
    for second in range(100):
        task.oldest_unretired = at(second)
        assert watch.check([task], float(second)) == []


def test_a_head_that_stays_is_a_stall_from_after_seconds_until_it_retires() -> None:
    watch, task = StallWatch(10.0), FakeTask("0_0", at(5))
    assert watch.check([task], 100.0) == []
    assert watch.check([task], 109.0) == []
    (stall,) = watch.check([task], 110.0)
    assert (stall.task_id, stall.where, stall.seconds) == ("0_0", "in[0]@5", 10.0)
    task.oldest_unretired = at(6)
    assert watch.check([task], 111.0) == [] and watch.stalls == []
    task.oldest_unretired = None  # nothing in flight
    assert watch.check([task], 500.0) == []


def test_a_closed_task_drops_its_stall_and_none_turns_the_watch_off() -> None:
    watch = StallWatch(1.0)
    watch.check([FakeTask("a", at(1))], 0.0)
    assert len(watch.check([FakeTask("a", at(1))], 2.0)) == 1
    assert watch.check([], 3.0) == [] and watch.stalls == []
    assert StallWatch(None).check([FakeTask("a", at(1))], 1e9) == []
    with pytest.raises(ValueError, match="stuck_record_warning"):
        StallWatch(0.0)


def test_head_age_is_how_long_the_current_head_has_been_there_as_last_checked() -> None:
    watch, task = StallWatch(10.0), FakeTask("0_0", at(5))
    assert watch.head_age("0_0", 0.0) is None  # not checked yet
    watch.check([task], 100.0)
    watch.check([task], 103.0)
    assert watch.head_age("0_0", 104.5) == 4.5  # seen first at 100
    task.oldest_unretired = at(6)
    watch.check([task], 105.0)
    assert watch.head_age("0_0", 105.0) == 0.0  # a new head starts again
    task.oldest_unretired = None
    watch.check([task], 106.0)
    assert watch.head_age("0_0", 106.0) is None
    assert StallWatch(None).head_age("0_0", 1.0) is None
