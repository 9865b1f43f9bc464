"""A service's contract: what its answers mean, declared once on ``app.service(...)``.

The API (stable; steps inherit it, the step's ``Retry(retry_on=)`` stays for the user's
own exceptions)::

    risk = app.service(
        "risk-model",
        concurrency=ais.Adaptive(initial=20, max=200),
        timeout=0.5,                           # seconds from dispatch: a hang is a timeout
        breaker=ais.CircuitBreaker(),          # opens after 5 failures in a row (or a ratio)
        max_hold=600.0,                        # held longer than this: the step's on_error
        contract=ais.ServiceContract(          # the defaults, spelled out
            slow_down_statuses=frozenset({429, 503}),
            busy_statuses=frozenset({503}),   # "all busy": a concurrency, not a rate
            transient_statuses=<408, 425 and every 5xx but 503>,
            permanent_statuses=<every 4xx but 408, 425, 429>,
            transient=(OSError, TimeoutError),  # socket errors: refused, reset (aiohttp's too)
            permanent=(),
            slow_down=None,                    # a predicate of what the call raised
            read_results=True,                 # a *returned* 429/503 response slows down too
            max_retry_after=300.0))

Each answer gets one :class:`Verdict` (:meth:`ServiceContract.judge`), first rule first:

1. ``SLOW_DOWN``: :class:`~aiostreams.services.outcome.Overloaded` raised by the user (with
   an optional ``retry_after`` seconds), the ``slow_down`` predicate, or an HTTP status in
   ``slow_down_statuses`` - raised (``error.status`` / ``error.status_code`` /
   ``error.response.status_code``) or, with ``read_results``, returned (a response object
   with an int ``status_code``, or ``status`` and ``headers``). The record is **held in
   place**: it spends no attempt, is never dead-lettered, and is called again once the
   service lets calls out (after ``Retry-After``, paced by the learned rate:
   :mod:`aiostreams.services.learned_rate`);
2. ``TIMEOUT``: the call did not answer within the service's (or step's) timeout. Transient;
3. ``PERMANENT``: an instance of ``permanent`` or a status in ``permanent_statuses``
   (404-like): no retry whatever the step's ``retry_on`` says - the step's ``on_error``
   (dead-letter, skip, fail) applies at once;
4. ``TRANSIENT``: an instance of ``transient`` or a status in ``transient_statuses``:
   retried by the step's ``Retry`` (its attempts and backoff) even when ``retry_on`` does
   not list it;
5. ``UNCLASSIFIED``: anything else (the user's own exceptions): the step's ``retry_on``
   decides, as before.

``Retry-After`` (seconds, or an HTTP date) and rate-limit headers (``RateLimit-Remaining``
/ ``RateLimit-Reset`` / ``RateLimit-Policy: 100;w=60`` and their ``X-RateLimit-*`` forms;
a reset past 10^9 is read as a Unix time) are read from the raised error's ``headers`` or
``response.headers``, or from a returned response's ``headers`` (:func:`read_headers`).
"""

from __future__ import annotations

import email.utils
import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiostreams.errors import ConfigError
from aiostreams.services.outcome import Overloaded

__all__ = ["DEFAULT_CONTRACT", "RateHint", "ServiceContract", "Verdict", "read_headers",
           "status_of"]

_OWN_STATUSES = frozenset({408, 425})  # request timeout, too early: worth another try


class Verdict(enum.Enum):
    """What one answer of a service means (see the module docstring)."""

    SUCCESS = "success"
    SLOW_DOWN = "slow_down"
    TIMEOUT = "timeout"
    TRANSIENT = "transient"
    PERMANENT = "permanent"
    UNCLASSIFIED = "unclassified"


@dataclass(frozen=True)
class RateHint:
    """What an answer's headers say of the service's rate: ``retry_after`` (seconds to
    wait before the next call), ``remaining`` calls until the window resets in
    ``reset_after`` seconds, and the policy (``limit`` calls per ``window`` seconds)."""

    retry_after: float | None = None
    remaining: float | None = None
    reset_after: float | None = None
    limit: float | None = None
    window: float | None = None

    @property
    def empty(self) -> bool:
        return all(v is None for v in (self.retry_after, self.remaining, self.reset_after,
                                       self.limit, self.window))


def _default_transient_statuses() -> frozenset[int]:
    return frozenset(range(500, 600)) - {503} | _OWN_STATUSES


def _default_permanent_statuses() -> frozenset[int]:
    return frozenset(range(400, 500)) - {429} - _OWN_STATUSES


@dataclass(frozen=True)
class ServiceContract:
    """Which answers of a service mean slow down, transient, permanent (module docstring).

    ``slow_down`` is a predicate of the raised exception (True: a slow-down); statuses are
    ints; ``transient``/``permanent`` are exception types; ``max_retry_after`` caps a
    ``Retry-After`` a service sends (seconds). ``busy_statuses`` are the slow-down statuses
    that say "too many calls *at once*" (503: every worker busy): without ``Retry-After``
    they lower the concurrency limit and teach the learned rate nothing (a concurrency-bound
    service is not rate-bound); the other slow-downs (429) are rate refusals.
    """

    slow_down_statuses: frozenset[int] = frozenset({429, 503})
    busy_statuses: frozenset[int] = frozenset({503})
    transient_statuses: frozenset[int] = field(default_factory=_default_transient_statuses)
    permanent_statuses: frozenset[int] = field(default_factory=_default_permanent_statuses)
    transient: tuple[type[BaseException], ...] = (OSError, TimeoutError)
    permanent: tuple[type[BaseException], ...] = ()
    slow_down: Callable[[BaseException], bool] | None = None
    read_results: bool = True
    max_retry_after: float = 300.0

    def __post_init__(self) -> None:
        overlap = (self.slow_down_statuses & self.transient_statuses
                   | self.slow_down_statuses & self.permanent_statuses
                   | self.transient_statuses & self.permanent_statuses)
        if overlap:
            raise ConfigError(f"ServiceContract: statuses {sorted(overlap)} are in more than "
                              "one of slow_down_statuses, transient_statuses and "
                              "permanent_statuses; give each status one meaning")
        if not self.max_retry_after > 0:
            raise ConfigError(f"ServiceContract max_retry_after is positive seconds; got "
                              f"{self.max_retry_after}")
        for name in ("transient", "permanent"):
            types = getattr(self, name)
            if not isinstance(types, tuple) or not all(
                    isinstance(t, type) and issubclass(t, BaseException) for t in types):
                raise TypeError(f"ServiceContract {name}= takes a tuple of exception types; "
                                f"got {types!r}")

    def judge(self, error: BaseException | None, result: Any = None) -> Verdict:
        """The verdict on a call that raised ``error`` (None: it returned ``result``)."""
        if error is None:
            if self.read_results and status_of(result) in self.slow_down_statuses:
                return Verdict.SLOW_DOWN
            return Verdict.SUCCESS
        if isinstance(error, Overloaded):
            return Verdict.SLOW_DOWN
        if self.slow_down is not None and self.slow_down(error):
            return Verdict.SLOW_DOWN
        if isinstance(error, TimeoutError):
            return Verdict.TIMEOUT
        status = status_of(error)
        if status in self.slow_down_statuses:
            return Verdict.SLOW_DOWN
        if isinstance(error, self.permanent) or status in self.permanent_statuses:
            return Verdict.PERMANENT
        if isinstance(error, self.transient) or status in self.transient_statuses:
            return Verdict.TRANSIENT
        return Verdict.UNCLASSIFIED

    def is_busy(self, answer: BaseException | Any, hint: RateHint) -> bool:
        """Is the slow-down ``answer`` (with its ``hint``) a refusal for a concurrency -
        a status in ``busy_statuses`` without ``Retry-After`` - rather than for a rate?"""
        return hint.retry_after is None and status_of(answer) in self.busy_statuses

    def hint(self, answer: BaseException | Any, wall_time: float) -> RateHint:
        """What ``answer`` (a raised error or a returned result) says of the rate, with
        ``Retry-After`` capped at ``max_retry_after``; ``wall_time`` reads HTTP dates."""
        hint = read_headers(answer, wall_time)
        retry_after = hint.retry_after
        if isinstance(answer, Overloaded) and answer.retry_after is not None:
            retry_after = answer.retry_after
        if retry_after is not None:
            retry_after = min(max(0.0, retry_after), self.max_retry_after)
        if retry_after == hint.retry_after:
            return hint
        return RateHint(retry_after, hint.remaining, hint.reset_after, hint.limit, hint.window)


DEFAULT_CONTRACT = ServiceContract()


def status_of(answer: Any) -> int | None:
    """The HTTP status a raised error or a returned response carries, if any: its int
    ``status_code``, its ``response.status_code`` (httpx), or its int ``status`` when it
    also has ``headers`` or is an exception (aiohttp's response and errors)."""
    if answer is None:
        return None
    status = getattr(answer, "status_code", None)
    if isinstance(status, int):
        return status
    status = getattr(answer, "status", None)
    if isinstance(status, int) and (isinstance(answer, BaseException)
                                    or hasattr(answer, "headers")):
        return status
    response = getattr(answer, "response", None)
    status = getattr(response, "status_code", None) if response is not None else None
    return status if isinstance(status, int) else None


def _headers(answer: Any) -> Mapping[str, Any] | None:
    for holder in (answer, getattr(answer, "response", None)):
        headers = getattr(holder, "headers", None) if holder is not None else None
        if headers is not None and hasattr(headers, "items"):
            return headers  # type: ignore[no-any-return]
    return None


def _header(headers: Mapping[str, Any], *names: str) -> str | None:
    wanted = {n.lower() for n in names}
    for name, value in headers.items():
        if isinstance(name, bytes):
            name = name.decode("latin-1")
        if isinstance(name, str) and name.lower() in wanted:
            return value.decode("latin-1") if isinstance(value, bytes) else str(value)
    return None


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text.split(",")[0].split(";")[0].strip())
    except ValueError:
        return None
    return value if value >= 0 else None


def _retry_after(text: str | None, wall_time: float) -> float | None:
    seconds = _number(text)
    if seconds is not None or text is None:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(text.strip())
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - wall_time)


def read_headers(answer: Any, wall_time: float) -> RateHint:
    """The :class:`RateHint` in ``answer``'s headers (empty when it has none)."""
    headers = _headers(answer)
    if headers is None:
        return RateHint()
    reset = _number(_header(headers, "RateLimit-Reset", "X-RateLimit-Reset"))
    if reset is not None and reset > 1e9:  # a Unix time (GitHub's style), not seconds
        reset = max(0.0, reset - wall_time)
    window = None
    policy = _header(headers, "RateLimit-Policy", "X-RateLimit-Policy")
    if policy is not None:
        for part in policy.split(";")[1:]:
            key, _, value = part.strip().partition("=")
            if key.strip() == "w":
                window = _number(value)
    limit = _number(_header(headers, "RateLimit-Limit", "X-RateLimit-Limit"))
    if limit is None and policy is not None:
        limit = _number(policy)
    return RateHint(
        retry_after=_retry_after(_header(headers, "Retry-After"), wall_time),
        remaining=_number(_header(headers, "RateLimit-Remaining", "X-RateLimit-Remaining")),
        reset_after=reset, limit=limit, window=window)
