"""The gradient concurrency limit (the default of ``ais.Adaptive``) on a model service with
a capacity, in simulated time (``service_model.py``: no clock, no sleeps): it converges near
the capacity with few 429s, re-converges when the capacity halves, keeps a queueing
service's latency within its tolerance, and is not driven down by latency it cannot
lower."""

from __future__ import annotations

import pytest

from aiostreams.services.aimd import AimdLimit
from aiostreams.services.gradient import GradientLimit
from aiostreams.services.limit import Adaptive
from aiostreams.services.outcome import Outcome
from tests.services.service_model import ModelService, refused_share

BASE = 0.02  # 20 ms a call: C calls at once serve C / 20 ms a second


def gradient(initial: int = 4) -> GradientLimit:
    return GradientLimit(Adaptive(initial=initial, min=2, max=2000))


@pytest.mark.parametrize("jitter", [0.0, 0.2])
def test_converges_to_nine_tenths_of_a_bulkheads_throughput_within_seconds(
        jitter: float) -> None:
    full = 40 / BASE
    seconds = ModelService(capacity=lambda t: 40, jitter=jitter).run(gradient(), 12.0)
    assert all(s.served >= 0.9 * full for s in seconds[1:]), [s.served for s in seconds]
    assert refused_share(seconds) < 0.01


@pytest.mark.parametrize("jitter", [0.0, 0.2])
def test_reconverges_within_a_second_when_the_capacity_halves(jitter: float) -> None:
    limit = gradient()
    seconds = ModelService(capacity=lambda t: 40 if t < 10 else 20, jitter=jitter).run(
        limit, 20.0)
    after = seconds[11:]  # from one second after the halving
    assert all(s.served >= 0.9 * 20 / BASE for s in after), [s.served for s in after]
    assert refused_share(seconds[10:]) < 0.01
    assert max(max(s.limits) for s in after) <= 22  # it left the old capacity behind


def test_halving_costs_aimd_several_times_the_429s_it_costs_the_gradient_limit() -> None:
    """Why the gradient limit is the default: after the capacity halves, AIMD cuts once per
    round trip by 10% and is refused meanwhile; the gradient limit cuts on each refusal of
    a call sent at its new limit, down to the measured concurrency."""
    model = ModelService(capacity=lambda t: 40 if t < 10 else 20)
    aimd = model.run(AimdLimit(Adaptive(initial=4, min=2, max=2000, algorithm="aimd")), 20.0)
    ours = model.run(gradient(), 20.0)
    assert refused_share(aimd[10:]) > 3 * refused_share(ours[10:])


def test_keeps_a_queueing_services_latency_within_its_tolerance() -> None:
    """A service that queues beyond C (429 only at 3 x C): no 429s once converged, full
    throughput, and the limit where latency is at most ``tolerance`` (2) x the no-load."""
    limit = gradient()
    seconds = ModelService(capacity=lambda t: 40, refuse_over=3.0).run(limit, 12.0)
    assert all(s.served >= 0.9 * 40 / BASE for s in seconds[1:])
    assert sum(s.refused for s in seconds[2:]) == 0
    assert max(max(s.limits) for s in seconds[2:]) <= 2 * 40 + 4


def test_latency_that_cuts_do_not_lower_resets_the_baseline_instead_of_the_limit() -> None:
    """The service gets three times slower for good at t=5 (its capacity in calls at once
    unchanged): the limit may cut once, finds the latency did not fall, takes the new
    latency as its baseline and stays near C - not driven to ``min`` by a latency it
    cannot lower."""
    limit = gradient()
    seconds = ModelService(capacity=lambda t: 40, slowdown=lambda t: 1.0 if t < 5 else 3.0
                           ).run(limit, 15.0)
    after = seconds[7:]  # from two seconds after it slowed
    assert all(s.served >= 0.9 * 40 / (3 * BASE) for s in after), [s.served for s in after]
    assert min(min(s.limits) for s in after) >= 30


def test_one_slow_window_does_not_cut_the_second_in_a_row_does() -> None:
    limit = gradient(initial=40)
    now = 0.0
    for _ in range(200):  # a calm baseline of 20 ms, 40 out
        now += BASE / 40
        limit.on_outcome(Outcome.SUCCESS, BASE, 40, now)
    calm, first_slow = limit.limit, limit.windows + 1
    while limit.limit >= calm:  # 80 ms calls from now on: queueing
        now += 0.002
        limit.on_outcome(Outcome.SUCCESS, 0.08, 40, now)
    assert limit.windows == first_slow + 1  # cut at the end of the second slow window


def test_refusals_of_calls_sent_before_the_last_cut_do_not_cut_again() -> None:
    limit = gradient(initial=100)
    limit.on_outcome(Outcome.OVERLOADED, 0.001, 100, now=1.0)
    assert limit.limit == 90
    for i in range(20):  # sent before the cut at t=1.0, answered after it
        limit.on_outcome(Outcome.OVERLOADED, 0.01, 100, now=1.0 + i * 0.0001)
    assert limit.limit == 90
    limit.on_outcome(Outcome.OVERLOADED, 0.001, 90, now=1.01)  # sent at the new limit
    assert limit.limit == 81


def test_a_refusal_cuts_to_the_measured_concurrency_but_at_most_halves() -> None:
    limit = gradient(initial=100)
    now = 0.0
    for _ in range(400):  # 20 calls of 20 ms at once: 1,000 a second
        now += 0.001
        limit.on_outcome(Outcome.SUCCESS, BASE, 100, now)
    measured = limit.measured_concurrency
    assert measured is not None and measured == pytest.approx(20, rel=0.1)
    before = limit.limit
    limit.on_outcome(Outcome.OVERLOADED, 0.001, 100, now + 0.001)
    assert limit.limit == max(int(measured), before // 2)


def test_a_limit_not_in_use_does_not_grow() -> None:
    limit = gradient(initial=40)
    for i in range(1000):  # 10 out of 40: the limit is not what holds the calls back
        limit.on_outcome(Outcome.SUCCESS, BASE, 10, now=i * 0.002)
    assert limit.windows > 50 and limit.limit == 40


def test_a_window_with_a_refusal_does_not_grow_even_one_sent_before_the_cut() -> None:
    limit = gradient(initial=40)
    limit.on_outcome(Outcome.OVERLOADED, 0.001, 40, now=1.0)  # cut to 36, a new window
    assert limit.limit == 36
    windows, now = limit.windows, 1.0
    while limit.windows == windows:  # a full window of 36 out, and an old refusal
        now += 0.001
        limit.on_outcome(Outcome.SUCCESS, BASE, 36, now)
        limit.on_outcome(Outcome.OVERLOADED, now - 0.999, 36, now)  # sent at t=0.999
    assert limit.limit == 36
