"""What happens when a record fails: retry with backoff, then the error handler.

:func:`decide` is the policy (pure); the task carries its :class:`Decision` out.

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

from aiostreams.errors import TaskFailedError
from aiostreams.policies import OnError, Retry, suspected_outage
from aiostreams.types import Headers, OutgoingRecord, RawRecord


class Deferred(Exception):
    """Raised by ``ctx.defer(delay)``: re-execute this record after ``delay`` seconds.

    Not a failure: it does not count as an attempt, is never dead-lettered, and its slot
    keeps holding the commit point (and same-key records) while it waits, as a retry does.
    """

    def __init__(self, delay: float) -> None:
        super().__init__(f"deferred for {delay}s")
        self.delay = delay


class Action(enum.Enum):
    """What becomes of a failed attempt (see :func:`decide`)."""

    RETRY = "retry"  # run it again after ``Decision.delay``; counts as an attempt
    DEFER = "defer"  # run it again after ``Decision.delay``; not an attempt (``ctx.defer``)
    DEAD_LETTER = "dead_letter"  # its input goes to the dead-letter topic; it retires
    SKIP = "skip"  # it retires with no outputs
    FAIL = "fail"  # the task stops; nothing at or past it is committed


@dataclass(frozen=True)
class Decision:
    action: Action
    delay: float = 0.0  # seconds, for RETRY and DEFER


def decide(
    error: BaseException,
    *,
    is_record: bool,
    attempts: int,
    retry: Retry,
    on_error: OnError,
    dead_letter_topic: str | None,
    rng: Callable[[], float] = random.random,
) -> Decision:
    """The failure policy, a pure function of the failed attempt (``attempts`` made so
    far, including this one) and the policy; ``rng`` draws the retry jitter.

    Order of the rules: a :class:`Deferred` record is deferred (a punctuation cannot be);
    a record the ``retry`` policy still allows is retried; a record out of attempts whose
    service marked the failure as a suspected outage (:func:`~aiostreams.policies.
    mark_suspected_outage`: it failed in a row with no success between) is deferred with
    the retry's backoff, until its service's breaker opens and holds it or a success shows
    the failure is the record's own; then ``on_error`` decides, where ``dead_letter`` needs
    a record (not a punctuation) and a dead-letter topic, else fails.
    """
    if isinstance(error, Deferred) and is_record:
        return Decision(Action.DEFER, error.delay)
    if is_record and retry.should_retry(error, attempts):
        return Decision(Action.RETRY, retry.delay(attempts, rng))
    if is_record and suspected_outage(error):
        return Decision(Action.DEFER, retry.delay(attempts, rng))
    if on_error is OnError.DEAD_LETTER and dead_letter_topic and is_record:
        return Decision(Action.DEAD_LETTER)
    if on_error is OnError.SKIP:
        return Decision(Action.SKIP)
    return Decision(Action.FAIL)



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


def task_failed_error(task_id: str, node: str, raw: RawRecord | None, attempts: int,
                      error: Exception) -> TaskFailedError:
    """The error a task fails with (``fail``): which task, node and record (``raw``; None
    for a punctuation), after how many attempts, why, and what to do; caused by ``error``."""
    where = (f"{raw.topic}[{raw.partition}]@{raw.offset}" if raw is not None
             else "a punctuation")
    failure = TaskFailedError(
        f"task {task_id}: processor {node!r} failed on {where} after {attempts} "
        f"attempt(s): {type(error).__name__}: {error}. Nothing at or past this record was "
        "committed; fix the cause (or set on_error='skip' / 'dead_letter') and restart."
    )
    failure.__cause__ = error
    return failure


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
