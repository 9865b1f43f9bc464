"""A service's figures: outcomes by kind, a latency histogram, calls saved.

Read by the Prometheus exporter and the status line; written only by the service's own
event-loop code (no locks). Latency buckets are Prometheus-style upper bounds in seconds.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from aiostreams.services.outcome import Outcome

__all__ = ["LATENCY_BUCKETS", "ServiceStats"]

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                   10.0)


@dataclass
class ServiceStats:
    outcomes: dict[Outcome, int] = field(default_factory=lambda: dict.fromkeys(Outcome, 0))
    latency_counts: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS) + 1))
    latency_sum: float = 0.0
    retries_refused: int = 0  # retries the budget refused at first ask (then held)
    saved_by_coalescing: int = 0
    saved_by_memo: int = 0
    held_by_breaker: int = 0  # calls that failed in an outage and were held, not failed
    held_total: int = 0  # calls held (slow-down or outage) at least once
    hold_expired: int = 0  # held calls failed for passing max_hold
    permanent: int = 0  # answers the contract calls permanent (not retried)

    @property
    def calls(self) -> int:
        return sum(self.outcomes.values())

    def record(self, outcome: Outcome, latency: float) -> None:
        self.outcomes[outcome] += 1
        self.latency_counts[bisect.bisect_left(LATENCY_BUCKETS, latency)] += 1
        self.latency_sum += latency

    def latency_quantile(self, q: float) -> float:
        """The upper bound of the bucket holding quantile ``q`` (inf past the last)."""
        total = sum(self.latency_counts)
        if total == 0:
            return 0.0
        rank, seen = q * total, 0
        for i, count in enumerate(self.latency_counts):
            seen += count
            if seen >= rank:
                return LATENCY_BUCKETS[i] if i < len(LATENCY_BUCKETS) else float("inf")
        return float("inf")
