"""The AIMD concurrency limit, the token bucket, the breaker and the retry budget, each as a
pure state machine driven by explicit times (no clock, no sleeps). The gradient limit (the
default) has its own tests, on a model service: ``test_gradient.py``."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiostreams.services.aimd import AimdLimit
from aiostreams.services.breaker import Breaker, BreakerState, CircuitBreaker
from aiostreams.services.budget import RetryBudget
from aiostreams.services.gradient import GradientLimit
from aiostreams.services.limit import Adaptive
from aiostreams.services.outcome import Outcome, Overloaded, classify
from aiostreams.services.rate import RateLimit, TokenBucket


def simulate(limit: AimdLimit, capacity_at, seconds: float, rtt: float = 0.01
             ) -> tuple[list[int], int, int]:
    """Rounds of one round trip: ``limit`` calls go out, those beyond the service's capacity
    are answered 429 at once. Returns the successes per round, the calls and the 429s."""
    now, served, calls, refused = 0.0, [], 0, 0
    while now < seconds:
        capacity, out = capacity_at(now), limit.limit
        ok = min(out, capacity)
        for i in range(out):
            outcome = Outcome.SUCCESS if i < capacity else Outcome.OVERLOADED
            limit.on_outcome(outcome, rtt if outcome is Outcome.SUCCESS else rtt / 10, out,
                             now)
        served.append(ok)
        calls += out
        refused += out - ok
        now += rtt
    return served, calls, refused


def test_aimd_limit_converges_near_capacity_with_few_rejections() -> None:
    limit = AimdLimit(Adaptive(initial=50, min=4, max=2000, algorithm="aimd"))
    served, calls, refused = simulate(limit, lambda t: 200, seconds=20.0)
    steady = served[len(served) // 2:]  # the second 10 s
    assert sum(steady) / len(steady) >= 0.9 * 200
    assert refused / calls < 0.01


def test_aimd_limit_follows_a_capacity_that_halves() -> None:
    limit = AimdLimit(Adaptive(initial=50, min=4, max=2000, algorithm="aimd"))
    served, calls, refused = simulate(limit, lambda t: 400 if t < 10 else 200, seconds=20.0)
    rounds_per_second = 100
    after_drop = served[11 * rounds_per_second:]  # a second after the drop, then on
    assert sum(after_drop) / len(after_drop) >= 0.9 * 200
    assert limit.limit <= 230
    assert refused / calls < 0.01


def test_one_congestion_episode_lowers_the_limit_once() -> None:
    limit = AimdLimit(Adaptive(initial=100, min=4, max=2000, algorithm="aimd"))
    limit.on_outcome(Outcome.SUCCESS, 0.05, 100, now=0.0)
    for _ in range(50):  # fifty 429s at the same moment: one episode
        limit.on_outcome(Outcome.OVERLOADED, 0.001, 100, now=1.0)
    assert limit.limit == 90
    limit.on_outcome(Outcome.TIMEOUT, 0.5, 100, now=1.2)  # a round trip later: a new one
    assert limit.limit == 81


def test_latency_growth_lowers_the_limit_and_an_idle_limit_does_not_grow() -> None:
    limit = AimdLimit(Adaptive(initial=100, min=4, max=2000, algorithm="aimd"))
    for i in range(100):
        limit.on_outcome(Outcome.SUCCESS, 0.01, 10, now=i * 0.01)  # 10 out of 100: idle
    assert limit.limit == 100
    limit.on_outcome(Outcome.SUCCESS, 0.05, 100, now=2.0)  # one slow call: noise
    assert limit.limit == 100
    for i in range(10):  # the average grows past 2 x the best: queueing
        limit.on_outcome(Outcome.SUCCESS, 0.05, 100, now=2.0 + i * 0.001)
    assert limit.limit == 90


def test_latency_noise_around_a_flat_mean_does_not_lower_the_limit() -> None:
    import random
    for limit in (AimdLimit(Adaptive(initial=50, min=4, max=2000, algorithm="aimd")),
                  GradientLimit(Adaptive(initial=50, min=4, max=2000))):
        rng = random.Random(7)
        for i in range(2000):  # uniform 0-40 ms: a raw minimum near 0, a mean of 20 ms
            limit.on_outcome(Outcome.SUCCESS, rng.uniform(0.0, 0.04), limit.limit,
                             now=i * 0.001)
        assert limit.limit > 50, type(limit).__name__


@given(st.lists(st.tuples(st.sampled_from(list(Outcome)),
                          st.floats(min_value=0.0001, max_value=5.0),
                          st.integers(min_value=0, max_value=3000),
                          st.floats(min_value=0.0, max_value=0.5)), max_size=300))
def test_adaptive_limits_stay_within_bounds_and_never_rise_on_congestion(  # type: ignore[no-untyped-def]
        events) -> None:
    for limit in (AimdLimit(Adaptive(initial=10, min=3, max=40)),
                  GradientLimit(Adaptive(initial=10, min=3, max=40))):
        now = 0.0
        for outcome, latency, in_flight, step in events:
            now += step
            before = limit.limit
            limit.on_outcome(outcome, latency, in_flight, now)
            assert 3 <= limit.limit <= 40
            if outcome.congestion:
                assert limit.limit <= before


@given(st.floats(min_value=0.5, max_value=500.0), st.floats(min_value=1.0, max_value=20.0),
       st.lists(st.floats(min_value=0.0, max_value=0.2), min_size=1, max_size=200))
def test_token_bucket_never_grants_more_than_burst_plus_rate_times_t(
        rate: float, burst: float, gaps: list[float]) -> None:
    bucket = TokenBucket(RateLimit(rate, per=1.0, burst=burst), now=0.0)
    now, granted = 0.0, []
    for gap in gaps:
        now += gap
        granted.append(now + bucket.delay(now))
    granted.sort()
    for i, start in enumerate(granted):
        for j in range(i, len(granted)):
            window = granted[j] - start
            assert j - i + 1 <= burst + rate * window + 1e-6


def test_token_bucket_queues_callers_in_order_one_interval_apart() -> None:
    bucket = TokenBucket(RateLimit(10, per=1.0, burst=1), now=0.0)
    assert [bucket.delay(0.0) for _ in range(4)] == pytest.approx([0.0, 0.1, 0.2, 0.3])


def test_breaker_walks_its_transition_table() -> None:
    breaker = Breaker(CircuitBreaker(failure_ratio=0.5, window=10.0, cool_down=5.0,
                                     min_calls=4, probes=1))
    for outcome in (Outcome.SUCCESS, Outcome.ERROR, Outcome.SUCCESS):
        breaker.on_outcome(outcome, now=1.0)
    assert breaker.state is BreakerState.CLOSED  # 3 calls: fewer than min_calls
    breaker.on_outcome(Outcome.TIMEOUT, now=1.5)
    assert breaker.state is BreakerState.OPEN  # 2 of 4 failed
    assert not breaker.try_acquire(now=6.4)
    assert breaker.retry_in(now=6.4) == pytest.approx(0.1)
    assert breaker.try_acquire(now=6.5)  # the probe
    assert breaker.state is BreakerState.HALF_OPEN
    assert not breaker.try_acquire(now=6.5)  # one probe at a time
    breaker.on_outcome(Outcome.OVERLOADED, now=6.6)
    assert breaker.state is BreakerState.OPEN  # the probe failed: cool down anew
    assert not breaker.try_acquire(now=11.0)
    assert breaker.try_acquire(now=11.6)
    breaker.on_outcome(Outcome.SUCCESS, now=11.7)
    assert breaker.state is BreakerState.CLOSED
    assert breaker.opened == 2


def test_breaker_forgets_failures_older_than_its_window() -> None:
    breaker = Breaker(CircuitBreaker(failure_ratio=0.5, window=10.0, min_calls=4))
    for t in (0.0, 0.1, 0.2):
        breaker.on_outcome(Outcome.ERROR, now=t)
    for t in (20.0, 20.1, 20.2):
        breaker.on_outcome(Outcome.SUCCESS, now=t)
    breaker.on_outcome(Outcome.ERROR, now=20.3)
    assert breaker.state is BreakerState.CLOSED  # 1 of 4 in the window


@given(st.lists(st.tuples(st.booleans(), st.floats(min_value=0.0, max_value=0.3)),
                max_size=400), st.sampled_from([0.0, 0.1, 0.2, 1.0]))
def test_retry_budget_keeps_retries_within_its_share(
        events: list[tuple[bool, float]], ratio: float) -> None:
    budget = RetryBudget(ratio, window=10.0, min_per_second=0.5)
    now, log = 0.0, []
    for is_retry, step in events:
        now += step
        if is_retry:
            if budget.try_retry(now):
                log.append((now, True))
        else:
            budget.on_call(now)
            log.append((now, False))
        recent = [r for t, r in log if t > now - 9.0]  # inside the window, whatever buckets
        retries = sum(recent)
        assert retries <= ratio * (len(recent) - retries) + 0.5 * 10.0 + 1


def test_overload_is_read_from_http_errors_without_importing_their_libraries() -> None:
    class AiohttpLike(Exception):
        status = 429

    class Response:
        status_code = 503

    class HttpxLike(Exception):
        response = Response()

    assert classify(AiohttpLike()) is Outcome.OVERLOADED
    assert classify(HttpxLike()) is Outcome.OVERLOADED
    assert classify(Overloaded("s")) is Outcome.OVERLOADED
    assert classify(TimeoutError()) is Outcome.TIMEOUT
    assert classify(ValueError()) is Outcome.ERROR
    assert classify(None) is Outcome.SUCCESS
