"""The punctuation queue alone: when stream-time and wall-clock punctuations fall due."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiostreams.engine.punctuation import Punctuation, PunctuationQueue
from aiostreams.runtime.clock import ManualClock
from aiostreams.topology.processor import PunctuationType

STREAM, WALL = PunctuationType.STREAM_TIME, PunctuationType.WALL_CLOCK


def punctuation(interval: float, kind: PunctuationType = STREAM) -> Punctuation:
    return Punctuation("node", {}, interval, kind, lambda at: None)


def make_queue(running: list[bool] | None = None) -> tuple[PunctuationQueue, ManualClock,
                                                             list[int]]:
    clock = ManualClock()
    woken: list[int] = []
    state = running if running is not None else [True]
    queue = PunctuationQueue(clock, lambda: state[0], lambda: woken.append(1))
    return queue, clock, woken


def test_the_first_stream_time_only_sets_the_first_due_time() -> None:
    queue, _, _ = make_queue()
    p = queue.schedule(punctuation(10.0))
    queue.advance_stream_time(100.0)
    assert queue.due == [] and p.next_due == 110.0


def test_a_stream_time_punctuation_is_due_once_stream_time_reaches_it() -> None:
    queue, _, _ = make_queue()
    p = queue.schedule(punctuation(10.0))
    queue.advance_stream_time(100.0)
    queue.advance_stream_time(109.0)
    assert queue.due == []
    queue.advance_stream_time(110.0)
    assert queue.due == [p]
    assert p.next_due == 120.0


def test_a_jump_over_several_intervals_fires_once_and_moves_past_the_stream_time() -> None:
    queue, _, _ = make_queue()
    p = queue.schedule(punctuation(10.0))
    queue.advance_stream_time(0.0)
    queue.advance_stream_time(55.0)
    assert queue.due == [p]
    assert p.next_due == 60.0


def test_a_cancelled_punctuation_never_falls_due() -> None:
    queue, clock, woken = make_queue()
    stream, wall = queue.schedule(punctuation(1.0)), queue.schedule(punctuation(1.0, WALL))
    stream.cancel()
    wall.cancel()
    queue.advance_stream_time(0.0)
    queue.advance_stream_time(5.0)
    clock.advance(5.0)
    assert queue.due == [] and woken == []


def test_a_wall_clock_punctuation_falls_due_every_interval_and_wakes_the_task() -> None:
    queue, clock, woken = make_queue()
    p = queue.schedule(punctuation(2.0, WALL))
    clock.advance(1.9)
    assert queue.due == []
    clock.advance(0.1)
    assert queue.due == [p] and woken == [1]
    clock.advance(2.0)
    assert queue.due == [p, p] and woken == [1, 1]


def test_a_wall_clock_punctuation_does_not_fall_due_while_the_task_is_not_running() -> None:
    running = [False]
    queue, clock, woken = make_queue(running)
    queue.schedule(punctuation(1.0, WALL))
    clock.advance(3.0)
    assert queue.due == [] and woken == []


def test_stream_time_does_not_touch_wall_clock_punctuations() -> None:
    queue, _, _ = make_queue()
    queue.schedule(punctuation(1.0, WALL))
    queue.advance_stream_time(0.0)
    queue.advance_stream_time(100.0)
    assert queue.due == []


def test_a_non_positive_interval_is_refused() -> None:
    with pytest.raises(ValueError, match="interval must be > 0"):
        punctuation(0.0)


@given(interval=st.integers(min_value=1, max_value=10),
       steps=st.lists(st.integers(min_value=0, max_value=25), max_size=30))
def test_stream_time_punctuations_fire_once_per_interval_boundary_crossed(
        interval: int, steps: list[int]) -> None:
    """Over a non-decreasing stream time, the punctuation falls due once per advance that
    crosses at least one interval boundary after the first, never more."""
    queue, _, _ = make_queue()
    p = queue.schedule(punctuation(float(interval)))
    now = 0.0
    queue.advance_stream_time(now)
    expected = 0
    for step in steps:
        due_at = p.next_due
        assert due_at is not None
        now += step
        expected += now >= due_at
        queue.advance_stream_time(now)
        assert p.next_due is not None and p.next_due > now
    assert len(queue.due) == expected
