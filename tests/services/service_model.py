"""A pure model of a service with a capacity, to drive a concurrency limit on simulated time.

The service works on up to ``capacity`` calls at ``base`` seconds each; beyond that, calls
queue (latency ``base x in service / capacity``, processor sharing fixed at admission);
at ``refuse_at`` calls in service it answers 429 after ``reject_latency``. The client
keeps an unbounded backlog: whenever fewer than ``limit`` calls are out, it sends one.
Everything runs on a heap of events in simulated time: no clock, no sleeps, deterministic
(the optional jitter is seeded).
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from aiostreams.services.limit import Limit
from aiostreams.services.outcome import Outcome


@dataclass
class Second:
    served: int = 0
    refused: int = 0
    limits: list[int] = field(default_factory=list)


@dataclass
class ModelService:
    capacity: Callable[[float], int]  # C at time t
    base: float = 0.02
    refuse_over: float = 1.0  # refuse at refuse_over x C calls in service
    reject_latency: float = 0.001
    jitter: float = 0.0  # latency x uniform(1 - jitter, 1 + jitter)
    seed: int = 0
    slowdown: Callable[[float], float] = lambda t: 1.0  # the service's latency x this at t

    def run(self, limit: Limit, seconds: float) -> list[Second]:
        """Drive ``limit`` for ``seconds``; what happened in each second."""
        rng = random.Random(self.seed)
        out: list[Second] = [Second() for _ in range(int(seconds) + 1)]
        ends: list[tuple[float, int, float, bool, int]] = []  # (end, seq, start, ok, inflight)
        now, seq, in_flight, in_service = 0.0, 0, 0, 0
        while now < seconds:
            while in_flight < limit.limit:
                c = self.capacity(now)
                in_flight += 1
                seq += 1
                if in_service >= max(1, int(self.refuse_over * c)):
                    heapq.heappush(ends, (now + self.reject_latency, seq, now, False,
                                          in_flight))
                    continue
                in_service += 1
                latency = self.base * self.slowdown(now) * max(1.0, in_service / c)
                if self.jitter:
                    latency *= rng.uniform(1 - self.jitter, 1 + self.jitter)
                heapq.heappush(ends, (now + latency, seq, now, True, in_flight))
            now, _, start, ok, sent_with = heapq.heappop(ends)
            in_flight -= 1
            second = out[min(int(now), len(out) - 1)]
            if ok:
                in_service -= 1
                second.served += 1
            else:
                second.refused += 1
            limit.on_outcome(Outcome.SUCCESS if ok else Outcome.OVERLOADED, now - start,
                             sent_with, now)
            second.limits.append(limit.limit)
        return out[:int(seconds)]


def refused_share(seconds: list[Second]) -> float:
    served = sum(s.served for s in seconds)
    refused = sum(s.refused for s in seconds)
    return refused / max(1, served + refused)
