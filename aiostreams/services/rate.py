"""A hard cap on calls per second to a service: a token bucket.

Tokens accrue at ``calls / per`` a second up to ``burst`` (default: one second's worth, at
least 1); each call takes one. :meth:`TokenBucket.delay` says how long a call must wait for
its token and reserves it, so callers queue in the order they ask (no thundering herd when
tokens come back). Invariant: over any interval of length T, at most ``burst + rate x T``
calls are granted.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiostreams.errors import ConfigError

__all__ = ["RateLimit", "TokenBucket"]


@dataclass(frozen=True)
class RateLimit:
    """At most ``calls`` calls every ``per`` seconds, with bursts up to ``burst``."""

    calls: float
    per: float = 1.0
    burst: float | None = None

    def __post_init__(self) -> None:
        if self.calls <= 0 or self.per <= 0:
            raise ConfigError(f"RateLimit needs calls > 0 and per > 0 seconds; got "
                              f"RateLimit({self.calls}, per={self.per})")
        if self.burst is not None and self.burst < 1:
            raise ConfigError(f"RateLimit burst must be at least 1 call; got {self.burst}")

    @property
    def rate(self) -> float:
        return self.calls / self.per

    @property
    def capacity(self) -> float:
        return self.burst if self.burst is not None else max(1.0, self.rate)


class TokenBucket:
    def __init__(self, limit: RateLimit, now: float) -> None:
        self.limit = limit
        self._tokens = limit.capacity  # may go negative: reserved by callers still waiting
        self._at = now

    def _refill(self, now: float) -> None:
        if now > self._at:
            self._tokens = min(self.limit.capacity,
                               self._tokens + (now - self._at) * self.limit.rate)
            self._at = now

    def delay(self, now: float) -> float:
        """Take a token: 0.0 when one is here, else the seconds until the reserved one is."""
        self._refill(now)
        self._tokens -= 1.0
        if self._tokens >= 0.0:
            return 0.0
        return -self._tokens / self.limit.rate

    def available(self, now: float) -> float:
        self._refill(now)
        return self._tokens
