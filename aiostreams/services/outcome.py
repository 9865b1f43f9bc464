"""What became of one call to a service, as the limits, the breaker and the metrics see it.

A call ends in one :class:`Outcome`. ``OVERLOADED`` (the service said 429 or 503, or the
user raised :class:`Overloaded`) and ``TIMEOUT`` are the congestion signals: the adaptive
limit lowers on them and the breaker counts them. ``ERROR`` (any other exception) counts
against the breaker but says nothing about load. ``SUCCESS`` carries the measured latency.
"""

from __future__ import annotations

import enum

from aiostreams.errors import ConfigError

__all__ = ["CircuitOpenError", "HoldExpired", "Outcome", "Overloaded", "classify"]

OVERLOAD_STATUSES = frozenset({429, 503})


class Outcome(enum.Enum):
    SUCCESS = "success"
    OVERLOADED = "overloaded"
    TIMEOUT = "timeout"
    ERROR = "error"

    @property
    def congestion(self) -> bool:
        """True for the outcomes that say the service has more work than it can take."""
        return self in (Outcome.OVERLOADED, Outcome.TIMEOUT)


class Overloaded(Exception):
    """Raise from a call to say the service refused it for load (as a 429 or 503 would):
    the record is held, not failed, and the service's calls pause ``retry_after`` seconds
    when given (else its learned rate and a short backoff pace them)."""

    def __init__(self, service: str = "", detail: str = "", *,
                 retry_after: float | None = None) -> None:
        if retry_after is not None and not retry_after >= 0:
            raise ConfigError(f"Overloaded retry_after is seconds >= 0; got {retry_after}")
        super().__init__(f"service {service!r} is overloaded{': ' + detail if detail else ''}")
        self.service = service
        self.retry_after = retry_after


class CircuitOpenError(Exception):
    """A call was not made: the service's circuit breaker is open. The engine does not
    dead-letter a record for this; it waits for the breaker to half-open."""

    def __init__(self, service: str, retry_in: float) -> None:
        super().__init__(f"the circuit breaker of service {service!r} is open after repeated "
                         f"failures; the next probe is in {retry_in:.1f} s")
        self.service = service
        self.retry_in = retry_in


class HoldExpired(Exception):
    """A record was held by its service (slow-down answers, an open breaker) longer than
    the service's ``max_hold``: it now fails to the step's ``on_error`` (dead letter, skip
    or fail), without further retries. Raise ``max_hold`` (or leave it None: hold for
    ever) if the service's outages last longer."""

    def __init__(self, service: str, held: float, max_hold: float, why: str) -> None:
        super().__init__(f"service {service!r} held this record {held:.1f} s ({why}), past "
                         f"its max_hold of {max_hold} s; raise max_hold in "
                         f"app.service({service!r}, max_hold=...) to hold it longer")
        self.service = service


def classify(error: BaseException | None) -> Outcome:
    """The outcome of a call that raised ``error`` (None: it returned).

    HTTP errors of aiohttp and httpx with status 429 or 503 are ``OVERLOADED`` (found by
    their ``status``/``response.status_code`` attribute, so neither library is imported).
    """
    if error is None:
        return Outcome.SUCCESS
    if isinstance(error, Overloaded):
        return Outcome.OVERLOADED
    if isinstance(error, TimeoutError):
        return Outcome.TIMEOUT
    status = getattr(error, "status", None)
    if status is None:
        response = getattr(error, "response", None)
        status = getattr(response, "status_code", None)
    if isinstance(status, int) and status in OVERLOAD_STATUSES:
        return Outcome.OVERLOADED
    return Outcome.ERROR
