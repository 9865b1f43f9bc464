"""What happens when a record fails: retry with backoff, then the error handler.

A failed attempt consults the :class:`Retry` policy. While attempts remain, the record's
slot goes to BACKOFF and is re-executed after an exponential backoff with jitter; the
records behind it keep executing, its slot holds the commit point, and same-key records
behind it keep waiting (so order is kept). When attempts are exhausted, or the error is not
retryable (a record that cannot be deserialized never is), :class:`OnError` decides:

* ``dead_letter``: the record's original key and value bytes go to the dead-letter topic
  with headers describing the failure, and the slot retires (nothing else it buffered is
  released);
* ``skip``: logged and counted, the slot retires with no outputs;
* ``fail``: the task stops; nothing at or past the record is committed.
"""

from __future__ import annotations

import enum
import random
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from hashlib import sha256

from aiostreams.errors import ConfigError, DeserializationError
from aiostreams.types import Headers, OutgoingRecord, RawRecord


class Deferred(Exception):
    """Raised by ``ctx.defer(delay)``: re-execute this record after ``delay`` seconds.

    Not a failure: it does not count as an attempt, is never dead-lettered, and its slot
    keeps holding the commit point (and same-key records) while it waits, as a retry does.
    """

    def __init__(self, delay: float) -> None:
        super().__init__(f"deferred for {delay}s")
        self.delay = delay


class OnError(enum.Enum):
    """What a record that failed for good does: stop the task (``fail``), be dropped
    (``skip``), or go to the dead-letter topic (``dead_letter``)."""

    FAIL = "fail"
    SKIP = "skip"
    DEAD_LETTER = "dead_letter"

    @classmethod
    def parse(cls, value: OnError | str) -> OnError:
        if isinstance(value, OnError):
            return value
        try:
            return cls(value)
        except ValueError:
            raise ConfigError(
                f"on_error must be one of 'fail', 'skip', 'dead_letter'; got {value!r}"
            ) from None


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
        if attempts_made >= self.attempts or isinstance(error, DeserializationError):
            return False
        return isinstance(error, self.retry_on)

    def delay(self, attempts_made: int, rng: Callable[[], float] = random.random) -> float:
        """Seconds to wait before attempt ``attempts_made + 1``."""
        base = min(self.max_backoff, self.backoff * self.multiplier ** (attempts_made - 1))
        if self.jitter:
            base *= 1 - self.jitter + 2 * self.jitter * rng()
        return max(0.0, base)


NO_RETRY = Retry()

DLQ_HEADER_PREFIX = "aiostreams.dlq."


RECORD_OVERHEAD = 64
"""Bytes a record costs Kafka beyond its key, value and headers, rounded up (the v2
format's length, attributes, timestamp and offset deltas, and key/value length varints)."""

HEADER_OVERHEAD = 10
"""Bytes a header costs beyond its name and value (two length varints), rounded up."""

MIN_RECORD_BYTES = 8192
"""The smallest ``max_record_bytes``: room for a dead letter's error and origin headers."""

_TRUNCATED = DLQ_HEADER_PREFIX + "truncated"
_SHORT_MESSAGE, _SHORT_TRACEBACK = 512, 2048  # what error headers keep when space runs out


def record_size(key: bytes | None, value: bytes | None, headers: Headers) -> int:
    """An upper bound of what the record costs against Kafka's size limits."""
    size = RECORD_OVERHEAD + len(key or b"") + len(value or b"")
    return size + sum(HEADER_OVERHEAD + _name_size(n) + len(v or b"") for n, v in headers)


def _name_size(name: str) -> int:
    """A header name's bytes as the producer writes it; a name that is not UTF-8 (decoded
    with ``surrogateescape``, or user-made) is bounded by 4 bytes a code point."""
    try:
        return len(name.encode("utf-8"))
    except UnicodeEncodeError:
        return 4 * len(name)


def dead_letter_record(
    raw: RawRecord,
    error: BaseException,
    *,
    topic: str,
    attempts: int,
    processor: str,
    now: float | None = None,
    max_bytes: int = 1_000_000,
) -> OutgoingRecord:
    """The dead-letter record of ``raw``: its original key and value bytes, with headers
    naming the error and the record's origin.

    It always fits ``max_bytes`` (:func:`record_size`), so the producer never refuses it:
    when the whole does not fit, the error headers are cut short first, then the value,
    then the key, then the record's own headers are dropped; header
    ``aiostreams.dlq.truncated`` lists what was cut (``error-headers``, ``value``, ``key``,
    ``headers``), and a cut key or value keeps its SHA-256 and original size in
    ``aiostreams.dlq.{key,value}.sha256`` / ``.size``.
    """
    if max_bytes < MIN_RECORD_BYTES:
        raise ValueError(f"max_record_bytes must leave room for a dead letter's headers "
                          f"(at least {MIN_RECORD_BYTES} bytes), got {max_bytes}")
    tb = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    message = str(error).encode("utf-8", "replace")[:4096]
    trace = tb.encode("utf-8", "replace")[-16384:]
    origin: Headers = (
        (DLQ_HEADER_PREFIX + "exception", _qualname(error).encode()),
        (DLQ_HEADER_PREFIX + "attempts", str(attempts).encode()),
        (DLQ_HEADER_PREFIX + "topic", raw.topic.encode()),
        (DLQ_HEADER_PREFIX + "partition", str(raw.partition).encode()),
        (DLQ_HEADER_PREFIX + "offset", str(raw.offset).encode()),
        (DLQ_HEADER_PREFIX + "processor", processor.encode()),
        (DLQ_HEADER_PREFIX + "timestamp", repr(time.time() if now is None else now).encode()),
    )
    key, value, own = raw.key, raw.value, raw.headers
    cut: list[str] = []
    extra: Headers = ()

    def fits() -> bool:
        return record_size(key, value, (*own, *error_headers(), *origin, *extra)) <= max_bytes

    def error_headers() -> Headers:
        return ((DLQ_HEADER_PREFIX + "message", message),
                (DLQ_HEADER_PREFIX + "traceback", trace),
                *(((_TRUNCATED, ",".join(cut).encode()),) if cut else ()))

    if not fits():
        cut.append("error-headers")
        message, trace = message[:_SHORT_MESSAGE], trace[-_SHORT_TRACEBACK:]
    for part in ("value", "key"):
        if fits():
            break
        data = value if part == "value" else key
        if not data:
            continue
        cut.append(part)
        extra = (*extra, (f"{DLQ_HEADER_PREFIX}{part}.sha256", sha256(data).hexdigest().encode()),
                 (f"{DLQ_HEADER_PREFIX}{part}.size", str(len(data)).encode()))
        room = max(0, max_bytes - (record_size(key, value, (*own, *error_headers(), *origin,
                                                            *extra)) - len(data)))
        if part == "value":
            value = data[:room]
        else:
            key = data[:room]
    if not fits():
        cut.append("headers")
        own = ()
    assert fits(), "error headers, origin and hashes alone fit in MIN_RECORD_BYTES"
    return OutgoingRecord(topic, key, value, raw.timestamp, (*own, *error_headers(), *origin,
                                                             *extra))


def _qualname(error: BaseException) -> str:
    t = type(error)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"
