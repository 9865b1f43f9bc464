"""How long one call has been held by its service, and the bound the user set on it.

A call is *held* from its first slow-down answer, or its first failure in an outage (the
breaker not closed), until it returns or raises; held longer than the service's
``max_hold`` it fails with :class:`~aiostreams.services.outcome.HoldExpired`, which the
step does not retry (its ``on_error`` applies).

Invariant (asserted): ``since`` is set once and never moves.
"""

from __future__ import annotations

from aiostreams.policies import mark_retryable
from aiostreams.services.outcome import HoldExpired

__all__ = ["Hold"]


class Hold:
    __slots__ = ("max_hold", "since", "why")

    def __init__(self, max_hold: float | None) -> None:
        self.max_hold = max_hold
        self.since: float | None = None
        self.why = ""

    @property
    def deadline(self) -> float | None:
        """When the hold expires (None: it has not begun, or it is unbounded)."""
        if self.since is None or self.max_hold is None:
            return None
        return self.since + self.max_hold

    def begin(self, now: float, why: str) -> bool:
        """The call is held from ``now`` (for ``why``) unless it was already; True when
        this began the hold."""
        if self.since is not None:
            return False
        self.since, self.why = now, why
        return True

    def expired(self, service: str, now: float) -> HoldExpired:
        """The error of a call held past its ``max_hold``, marked not to be retried."""
        assert self.since is not None and self.max_hold is not None
        error = HoldExpired(service, now - self.since, self.max_hold, self.why)
        mark_retryable(error, False)
        return error

    def past(self, now: float) -> bool:
        deadline = self.deadline
        return deadline is not None and now >= deadline
