"""Issue 35's example end to end on the memory broker: a payments app scores each payment
through ``app.service(...)`` with a step that retries only ``TransientError``, against a
fake risk model (an in-process async function on the loop's clock) that answers 429 with
Retry-After above its rate, 5xx on 3% of calls and hangs on 1%. No payment is
dead-lettered for a slow-down answer, and every output is exact."""

from __future__ import annotations

import asyncio
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "dsl"))

from dslkit import In, broker_of, make_app, produce, run_app

from aiostreams import Adaptive, CircuitBreaker, Retry
from aiostreams.services import Outcome

RATE = 800.0  # calls/s the model allows: high, so the test waits little real time


class TransientError(Exception):
    """The user's own retryable error (what the flagship example lists in retry_on)."""


class HttpError(Exception):
    def __init__(self, status: int, headers: dict[str, str] | None = None) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.headers = headers or {}


class RiskModel:
    """429 + Retry-After above ``RATE`` (a token bucket on the loop's clock), 3% 500s,
    1% hangs; every call's fate is seeded by (card, attempt) so runs are alike."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.tokens, self.at = 5.0, self.loop.time()
        self.rng = random.Random(35)
        self.calls = self.refused = self.failed = self.hung = 0

    async def score(self, payment: str) -> str:
        self.calls += 1
        now = self.loop.time()
        self.tokens = min(5.0, self.tokens + (now - self.at) * RATE)
        self.at = now
        if self.tokens < 1.0:
            self.refused += 1
            raise HttpError(429, {"Retry-After": "0.01"})
        self.tokens -= 1.0
        draw = self.rng.random()
        if draw < 0.01:
            self.hung += 1
            await asyncio.Event().wait()  # hangs: the service's timeout ends it
        if draw < 0.04:
            self.failed += 1
            raise HttpError(500)
        await asyncio.sleep(0)
        return f"{payment}:risk={len(payment) % 7}"


async def test_no_payment_is_dead_lettered_for_slow_downs_and_every_output_is_exact() -> None:
    app = make_app(on_error="dead_letter", dead_letter_topic="payments-dlq",
                   max_in_flight=200)
    payments = app.topic("payments", key=str, value=str, partitions=2)
    scored = app.topic("payments-scored", key=str, value=str, partitions=2)
    dlq = app.topic("payments-dlq", partitions=1)
    risk = app.service("risk-model", concurrency=Adaptive(initial=50, min=2, max=400),
                       timeout=0.05, breaker=CircuitBreaker())
    model = RiskModel()
    (app.stream(payments)
        .map_values_async(model.score, service=risk,
                          retry=Retry(attempts=6, backoff=0.001, jitter=0.0,
                                      retry_on=(TransientError,)))
        .to(scored))
    values = [f"p{i:04d}" for i in range(600)]
    broker_of(app).create_topic("payments-dlq", 1)
    produce(app, payments, [In(f"card{i % 40}", v) for i, v in enumerate(values)])
    result = await run_app(app, [scored, dlq], timeout=60.0)
    service = risk.current
    assert service is not None
    assert model.refused > 0 and service.stats.outcomes[Outcome.OVERLOADED] == model.refused
    assert model.failed > 0 and model.hung > 0  # the trouble did happen
    assert result.outputs["payments-dlq"] == []  # 0 dead letters: 429s held, 5xx retried
    assert sorted(result.values("payments-scored")) == sorted(
        f"{v}:risk={len(v) % 7}" for v in values)
    for partition in result.by_partition("payments-scored").values():  # in offset order
        per_card: dict[str, list[str]] = {}
        for key, value, _ in partition:
            per_card.setdefault(key, []).append(value)
        for card, scored_values in per_card.items():
            assert scored_values == sorted(scored_values), card
    print(f"calls {model.calls} refused {model.refused} 5xx {model.failed} hung {model.hung} "
          f"limit {service.limit} rate {service.learned.rate}")
    assert service.held == 0 and service.limit > 2  # the limit not at its floor
