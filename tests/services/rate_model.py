"""A pure model of a rate-bound service, to drive a :class:`LearnedRate` on simulated time.

The server admits calls from a token bucket (``rate(t)`` calls/s, ``burst`` tokens) and
answers the others 429 at once (with ``Retry-After`` when ``retry_after`` is set, or with
``rounded_retry_after`` the wait for a token rounded up to whole seconds, as a real
token-bucket server says it); an
admitted call answers after a latency drawn uniformly from ``latency`` (seeded). The client
has an unbounded backlog and up to ``concurrency`` calls out; it sends whenever the learned
rate lets it. A heap of events, no clock, no sleeps: deterministic.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from aiostreams.services.contract import RateHint
from aiostreams.services.learned_rate import LearnedRate


@dataclass
class Second:
    accepted: int = 0
    refused: int = 0
    rates: list[float] = field(default_factory=list)


@dataclass
class RateBoundServer:
    rate: Callable[[float], float]
    burst: float = 1.0
    latency: tuple[float, float] = (0.01, 0.08)
    retry_after: float | None = None
    rounded_retry_after: bool = False  # Retry-After: the wait for a token, in whole seconds >= 1
    concurrency: int = 20
    seed: int = 0

    def run(self, learned: LearnedRate, seconds: float) -> list[Second]:
        rng = random.Random(self.seed)
        out = [Second() for _ in range(int(seconds) + 1)]
        ends: list[tuple[float, int, float, bool]] = []  # (end, seq, dispatched, accepted)
        tokens, at = self.burst, 0.0
        now, seq, out_now = 0.0, 0, 0
        while now < seconds:
            while out_now < self.concurrency and learned.wait(now) <= 0.0:
                learned.take(now)
                tokens = min(self.burst, tokens + (now - at) * self.rate(now))
                at = now
                seq += 1
                out_now += 1
                if tokens >= 1.0:
                    tokens -= 1.0
                    heapq.heappush(ends, (now + rng.uniform(*self.latency), seq, now, True))
                else:
                    heapq.heappush(ends, (now + 0.001, seq, now, False))
            wake = now + learned.wait(now) if out_now < self.concurrency else float("inf")
            if ends and ends[0][0] <= wake:
                now, _, sent, ok = heapq.heappop(ends)
                out_now -= 1
                second = out[min(int(now), len(out) - 1)]
                if ok:
                    second.accepted += 1
                    learned.on_answer(now, RateHint())
                else:
                    second.refused += 1
                    retry_after = self.retry_after
                    if self.rounded_retry_after:  # as a token-bucket server says it
                        retry_after = max(1.0, float(math.ceil(
                            (1.0 - tokens) / max(self.rate(now), 1e-9))))
                    learned.on_slow_down(sent, now, RateHint(retry_after=retry_after), out_now)
            else:
                now = max(wake, now + 1e-6)
            out[min(int(now), len(out) - 1)].rates.append(learned.pace(now) or 0.0)
        return out[:int(seconds)]


def throughput(seconds: list[Second]) -> float:
    return sum(s.accepted for s in seconds) / max(1, len(seconds))


def refused_share(seconds: list[Second]) -> float:
    accepted = sum(s.accepted for s in seconds)
    refused = sum(s.refused for s in seconds)
    return refused / max(1, accepted + refused)
