"""The user's processing policies: how records are ordered, retried and failed.

Public (re-exported by :mod:`aiostreams`): :class:`Ordering` (what an in-flight record
waits for), :class:`Retry` (how often and how late a failed record runs again) and
:class:`OnError` (what happens once its attempts are exhausted). The engine reads them;
nothing here knows the engine.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from aiostreams.errors import ConfigError, DeserializationError


class Ordering(enum.Enum):
    """Which records of a task may execute at once: never two of one key (``key``), one at
    a time per partition (``partition``), or any (``unordered``); outputs and commits stay
    in offset order either way."""

    KEY = "key"
    PARTITION = "partition"
    UNORDERED = "unordered"

    @classmethod
    def parse(cls, value: Ordering | str) -> Ordering:
        return _parse_choice(cls, value, "ordering")


class OnError(enum.Enum):
    """What a record that failed for good does: stop the task (``fail``), be dropped
    (``skip``), or go to the dead-letter topic (``dead_letter``)."""

    FAIL = "fail"
    SKIP = "skip"
    DEAD_LETTER = "dead_letter"

    @classmethod
    def parse(cls, value: OnError | str) -> OnError:
        return _parse_choice(cls, value, "on_error")


_E = TypeVar("_E", bound=enum.Enum)


def _parse_choice(cls: type[_E], value: _E | str, setting: str) -> _E:
    """``value`` as a member of ``cls``; a :class:`ConfigError` (a ``ValueError``) listing
    the choices when it is none of them."""
    if isinstance(value, cls):
        return value
    try:
        return cls(value)
    except ValueError:
        choices = ", ".join(repr(m.value) for m in cls)
        raise ConfigError(f"{setting} must be one of {choices}; got {value!r}") from None


@dataclass(frozen=True)
class Retry:
    """Retry policy for a processing step.

    ``attempts`` counts every execution (1 = no retry). The n-th retry waits
    ``min(max_backoff, backoff * multiplier**(n-1))`` seconds, randomised by ``jitter``
    (0.5 = anywhere from 50% to 150%). ``timeout`` bounds one attempt (async steps only);
    ``retry_on`` lists the exception types worth retrying.
    """

    attempts: int = 1
    backoff: float = 0.1
    max_backoff: float = 30.0
    multiplier: float = 2.0
    jitter: float = 0.5
    timeout: float | None = None
    retry_on: tuple[type[BaseException], ...] = (Exception,)

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ConfigError(f"Retry.attempts must be >= 1, got {self.attempts}")
        if self.backoff < 0 or self.max_backoff < 0:
            raise ConfigError("Retry.backoff and Retry.max_backoff must be >= 0 seconds")
        if self.multiplier < 1:
            raise ConfigError(f"Retry.multiplier must be >= 1, got {self.multiplier}")
        if not 0 <= self.jitter <= 1:
            raise ConfigError(f"Retry.jitter must be within [0, 1], got {self.jitter}")
        if self.timeout is not None and self.timeout <= 0:
            raise ConfigError(f"Retry.timeout must be > 0 seconds, got {self.timeout}")

    def should_retry(self, error: BaseException, attempts_made: int) -> bool:
        """While attempts remain: what a service's contract said of ``error`` when it
        judged it (:func:`mark_retryable`: transient yes, permanent no), else whether
        ``retry_on`` lists it."""
        if attempts_made >= self.attempts or isinstance(error, DeserializationError):
            return False
        told = marked_retryable(error)
        return told if told is not None else isinstance(error, self.retry_on)

    def delay(self, attempts_made: int, rng: Callable[[], float] = random.random) -> float:
        """Seconds to wait before attempt ``attempts_made + 1``."""
        base = min(self.max_backoff, self.backoff * self.multiplier ** (attempts_made - 1))
        if self.jitter:
            base *= 1 - self.jitter + 2 * self.jitter * rng()
        return max(0.0, base)


_RETRYABLE_MARK = "_aiostreams_retryable"


def mark_retryable(error: BaseException, retryable: bool | None) -> None:
    """Say whether ``error`` is worth another attempt whatever a step's ``retry_on`` lists
    (None: let ``retry_on`` decide). A declared service's contract marks what its calls
    raise (:mod:`aiostreams.services.contract`): its transient answers are retried, its
    permanent ones never, so steps need not list a service's errors in ``retry_on``."""
    setattr(error, _RETRYABLE_MARK, retryable)


def marked_retryable(error: BaseException) -> bool | None:
    """What :func:`mark_retryable` said of ``error`` (None: nothing, or let retry_on
    decide): a marked error came from a service's call and is that call's, not the
    attempt's (a call's own timeout is no processing timeout)."""
    told = getattr(error, _RETRYABLE_MARK, None)
    return None if told is None else bool(told)


_OUTAGE_MARK = "_aiostreams_suspected_outage"


def mark_suspected_outage(error: BaseException) -> None:
    """Say that ``error`` may be the start of its service's outage, not the record's own
    failure: the service failed this record's calls with no success between (at one
    record a second, the first record of an outage fails before the breaker has counted
    enough failures in a row to open). A record out of attempts is then deferred, not
    dead-lettered, so a breaker's ``consecutive_failures`` need not be at most the steps'
    ``Retry.attempts``."""
    setattr(error, _OUTAGE_MARK, True)


def suspected_outage(error: BaseException) -> bool:
    """What :func:`mark_suspected_outage` said of ``error``."""
    return bool(getattr(error, _OUTAGE_MARK, False))


NO_RETRY = Retry()
"""The default: one attempt, no retry."""

__all__ = ["NO_RETRY", "OnError", "Ordering", "Retry", "mark_retryable",
           "mark_suspected_outage", "marked_retryable", "suspected_outage"]
