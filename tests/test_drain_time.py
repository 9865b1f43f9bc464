"""The drain-time estimate an autoscaler reads (``aiostreams_drain_time_seconds``): lag over
the recent consuming pace."""

from __future__ import annotations

import asyncio
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_metrics import scrape, total, waiting_app

from aiostreams.ops.drain_time import DrainTime
from aiostreams.ops.metrics import MetricsServer
from aiostreams.runtime.clock import ManualClock
from aiostreams.testing import Sequencer
from aiostreams.types import TopicPartition


def test_lag_over_the_pace_of_the_window() -> None:
    clock = ManualClock(start=0.0)
    drain = DrainTime(window=60.0, min_span=5.0, clock=clock.monotonic)
    assert drain.observe(0, 1_000) is None  # no pace yet
    clock.advance(10.0)
    assert drain.observe(500, 1_000) == pytest.approx(20.0)  # 50/s: 1,000 take 20 s
    clock.advance(10.0)
    assert drain.observe(1_500, 0) == 0.0  # caught up


def test_the_pace_forgets_what_is_older_than_the_window() -> None:
    clock = ManualClock(start=0.0)
    drain = DrainTime(window=60.0, min_span=5.0, clock=clock.monotonic)
    consumed = 0
    for _ in range(12):  # two minutes at 100/s
        drain.observe(consumed, 10)
        clock.advance(10.0)
        consumed += 1_000
    for _ in range(7):  # then 70 s at 10/s
        drain.observe(consumed, 10)
        clock.advance(10.0)
        consumed += 100
    estimate = drain.observe(consumed, 600)
    assert estimate == pytest.approx(60.0, rel=0.2)  # 10/s, not the old 100/s (6 s)


def test_lag_with_nothing_consumed_is_infinite_and_a_counter_reset_forgets_the_pace() -> None:
    clock = ManualClock(start=0.0)
    drain = DrainTime(window=60.0, min_span=5.0, clock=clock.monotonic)
    drain.observe(100, 50)
    clock.advance(30.0)
    assert drain.observe(100, 50) == math.inf  # stalled
    clock.advance(1.0)
    assert drain.observe(3, 50) is None  # the worker started over: no pace known


@given(st.lists(st.tuples(st.floats(0.1, 30.0), st.integers(0, 10_000),
                          st.integers(0, 1_000_000)), min_size=1, max_size=40))
def test_estimates_are_never_negative_and_zero_exactly_without_lag(
        steps: list[tuple[float, int, int]]) -> None:
    clock = ManualClock(start=0.0)
    drain = DrainTime(window=60.0, min_span=5.0, clock=clock.monotonic)
    consumed = 0
    for wait, more, lag in steps:
        clock.advance(wait)
        consumed += more
        estimate = drain.observe(consumed, lag)
        if lag == 0:
            assert estimate == 0.0
        elif estimate is not None:
            assert estimate > 0


async def test_a_stuck_worker_shows_an_infinite_drain_time_and_a_caught_up_one_zero() -> None:
    """Over HTTP from a live app: while one record is stuck at the head (lag, nothing more
    consumed) the drain time is +Inf once the pace is known; caught up, 0."""
    sequencer = Sequencer()
    clock = ManualClock(start=1_000.0)
    app = waiting_app("drains", sequencer, clock, [(b"k", b"stuck", 999.0)])
    broker = app.transport.broker
    async with MetricsServer(app) as server:
        await app.start()
        try:
            await sequencer.wait_started("stuck")
            first = await scrape(server.url)
            assert total(first, "aiostreams_consumer_lag_records") == 1
            assert not [k for k in first if k[0] == "aiostreams_drain_time_seconds"]  # no pace
            clock.advance(10.0)
            stuck = await scrape(server.url)
            assert total(stuck, "aiostreams_drain_time_seconds", app="drains") == math.inf
            sequencer.release("stuck")
            async with asyncio.timeout(10):  # commits run on the manual clock's timer
                while (broker.committed(app.name, TopicPartition("in", 0)) or 0) < 1:
                    app.commit_log.changed.clear()
                    clock.advance(1.0)
                    await app.commit_log.changed.wait()
            caught_up = await scrape(server.url)
            assert total(caught_up, "aiostreams_drain_time_seconds", app="drains") == 0.0
        finally:
            sequencer.release("stuck")
            await app.stop()
