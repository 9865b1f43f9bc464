"""Windows (public: ``from aiostreams.windows import ...``): every window specification
(:class:`TumblingWindows`, :class:`HoppingWindows`, :class:`SessionWindows`,
:class:`SlidingWindows`, :class:`JoinWindows`), the suppression specs
(:func:`until_window_closes`, :func:`until_time_limit`), the windowed key and its wire
formats, late-record accounting, and the time helpers the window processors share
(:func:`to_ms`, :func:`duration_ms`, :func:`restamped`).

Time is event time (record timestamps), in float seconds in the API; window arithmetic is
done in whole milliseconds (Kafka's unit) so window bounds are exact and the same float
every time. Time windows are ``[start, end)`` aligned to the epoch (Kafka's alignment);
session windows are ``[first, last]`` record times of a key with no gap larger than
``gap`` between them.

Wire formats are Kafka Streams' own, byte for byte, so a Java consumer with Kafka Streams'
deserializers reads aiostreams' windowed output and the other way round:

* :class:`TimeWindowedSerde` = ``TimeWindowedSerializer``: the inner key's bytes, then the
  window start as 8 bytes of big-endian milliseconds. The end is not on the wire: the
  deserializer needs the window size (``end = start + size``), as Kafka's does.
* :class:`SessionWindowedSerde` = ``SessionWindowedSerializer``: the inner key's bytes, then
  the session end, then its start (8 bytes each, big-endian milliseconds).
"""

from __future__ import annotations

import inspect
import math
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from aiostreams.errors import ConfigError, DeserializationError, SerializationError
from aiostreams.serde import JsonSerde, Serde, serde_for
from aiostreams.types import Headers, Record

K = TypeVar("K")

AnyRecord = Record[Any, Any]


def to_ms(seconds: float) -> int:
    return round(seconds * 1000)


def duration_ms(what: str, seconds: float, *, minimum: int = 0) -> int:
    """``seconds`` as whole milliseconds, checked (a ConfigError names ``what``)."""
    if not isinstance(seconds, int | float) or math.isnan(seconds) or math.isinf(seconds):
        raise ConfigError(f"{what} must be a finite number of seconds, got {seconds!r}")
    ms = to_ms(seconds)
    if ms < minimum:
        raise ConfigError(
            f"{what} must be at least {minimum / 1000} seconds (windows work in whole "
            f"milliseconds), got {seconds}"
        )
    return ms


def restamped(record: AnyRecord, key: Any, value: Any, ts_ms: int, *,
              headers: Headers | None = None) -> AnyRecord:
    """``record`` with a new key, value and timestamp (``ts_ms`` milliseconds), and its own
    headers unless ``headers`` are given."""
    return Record(key, value, record.topic, record.partition, record.offset, ts_ms / 1000,
                  record.headers if headers is None else headers)


@dataclass(frozen=True, slots=True)
class Windowed(Generic[K]):
    """A key of a windowed aggregate: the grouped key and its window (seconds;
    ``[start, end)`` for time windows, ``[start, end]`` for sessions)."""

    key: K
    start: float
    end: float


_MS = struct.Struct(">q")
_TWO_MS = struct.Struct(">qq")


class _WindowedSerdeBase:
    def __init__(self, inner: Any = None) -> None:
        self.inner: Serde[Any] = serde_for(inner) if inner is not None else JsonSerde()

    def _key_bytes(self, topic: str, value: Any) -> bytes:
        if not isinstance(value, Windowed):
            raise SerializationError(
                f"{type(self).__name__} for {topic!r} needs a Windowed key, got "
                f"{type(value).__name__}", topic=topic)
        return self.inner.serialize(topic, value.key) or b""

    def _split(self, topic: str, data: bytes, tail: int) -> tuple[Any, bytes]:
        if len(data) < tail:
            raise DeserializationError(
                f"a windowed key of {topic!r} needs at least {tail} bytes of window bounds, "
                f"got {len(data)} bytes", topic=topic)
        cut = len(data) - tail
        return self.inner.deserialize(topic, data[:cut]), data[cut:]


class TimeWindowedSerde(_WindowedSerdeBase):
    """A time window's :class:`Windowed` key as Kafka Streams writes it (see the module
    docstring). ``size`` (seconds) gives the end when reading; writing needs only the
    start."""

    def __init__(self, inner: Any = None, *, size: float) -> None:
        super().__init__(inner)
        self.size_ms = duration_ms("window size", size, minimum=1)

    def serialize(self, topic: str, value: Windowed[Any] | None) -> bytes | None:
        if value is None:
            return None
        return self._key_bytes(topic, value) + _MS.pack(to_ms(value.start))

    def deserialize(self, topic: str, data: bytes | None) -> Windowed[Any] | None:
        if data is None:
            return None
        key, bounds = self._split(topic, data, _MS.size)
        (start,) = _MS.unpack(bounds)
        return Windowed(key, start / 1000, (start + self.size_ms) / 1000)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, TimeWindowedSerde) and other.inner == self.inner
                and other.size_ms == self.size_ms)

    def __hash__(self) -> int:
        return hash(("TimeWindowedSerde", self.inner, self.size_ms))

    def __repr__(self) -> str:
        return f"TimeWindowedSerde({self.inner!r}, size={self.size_ms / 1000})"


class SessionWindowedSerde(_WindowedSerdeBase):
    """A session's :class:`Windowed` key as Kafka Streams writes it: key, end, start."""

    def serialize(self, topic: str, value: Windowed[Any] | None) -> bytes | None:
        if value is None:
            return None
        return self._key_bytes(topic, value) + _TWO_MS.pack(to_ms(value.end),
                                                             to_ms(value.start))

    def deserialize(self, topic: str, data: bytes | None) -> Windowed[Any] | None:
        if data is None:
            return None
        key, bounds = self._split(topic, data, _TWO_MS.size)
        end, start = _TWO_MS.unpack(bounds)
        return Windowed(key, start / 1000, end / 1000)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SessionWindowedSerde) and other.inner == self.inner

    def __hash__(self) -> int:
        return hash(("SessionWindowedSerde", self.inner))

    def __repr__(self) -> str:
        return f"SessionWindowedSerde({self.inner!r})"


class DroppedRecords:
    """Records a processor dropped without output or error, by task, node and reason, as
    Kafka Streams' task-level ``dropped-records-total`` counts them; what the Prometheus
    metric ``aiostreams_task_dropped_records_total{task, node, reason}`` exports. Reasons:
    ``late`` (its window had closed; see :class:`LateRecords`), ``null_key`` (a table
    source, a stream-table join or a windowed aggregation cannot place a record without
    a key), ``null_value`` (a stream-table join's record without a value), ``expired``
    (older than a versioned table's history retention).

    Counted when the record executes, once per window it was too late for; a record retried
    after it was counted is counted again. Invariant: ``total`` is the sum of the counts."""

    def __init__(self) -> None:
        self.by_task_node_reason: dict[tuple[str, str, str], int] = {}
        self.total = 0

    def record(self, node: str, *, task: str, reason: str) -> None:
        """Count one record dropped by ``node`` of task ``task`` (its id, e.g. ``0_1``)."""
        where = (task, node, reason)
        self.by_task_node_reason[where] = self.by_task_node_reason.get(where, 0) + 1
        self.total += 1

    def drop(self, context: Any, reason: str) -> None:
        """Count the record ``context`` (a processor's context) is processing now."""
        self.record(context.node_name, task=context.task_id, reason=reason)


class LateRecords:
    """Records dropped because their window had closed, per DSL node, summed over the
    app's tasks (``by_node``); each is also counted in :class:`DroppedRecords` (reason
    ``late``) per task. ``on_late(hook)`` registers ``hook(node, record)`` (a metrics
    exporter, a log).

    Counted as Kafka Streams' ``dropped-records`` is: once per window the record was too
    late for (a hopping window's record can be late for some of its windows only), when
    the record executes; a record retried after it was counted is counted again.
    Invariant: ``total`` is the sum of ``by_node``."""

    def __init__(self, dropped: DroppedRecords | None = None) -> None:
        self.by_node: dict[str, int] = {}
        self.dropped = dropped if dropped is not None else DroppedRecords()
        self._hooks: list[Callable[[str, AnyRecord], None]] = []

    @property
    def total(self) -> int:
        return sum(self.by_node.values())

    def on_late(self, hook: Callable[[str, AnyRecord], None]) -> None:
        """Call ``hook(node, record)`` for each late record, inside its processing: a
        plain function (an ``async def`` would be called and never awaited)."""
        if inspect.iscoroutinefunction(hook):
            raise ConfigError(
                f"on_late() got the coroutine function {getattr(hook, '__name__', hook)!r}: "
                "a late-record hook is called, not awaited; pass a plain def")
        self._hooks.append(hook)

    def record(self, node: str, record: AnyRecord, *, task: str) -> None:
        """Count ``record`` dropped by ``node`` of task ``task`` (its id, e.g. ``0_1``)."""
        self.by_node[node] = self.by_node.get(node, 0) + 1
        self.dropped.record(node, task=task, reason="late")
        for hook in self._hooks:
            hook(node, record)


# -- window specifications -------------------------------------------------------------


class TimeWindows:
    """Fixed-size windows of ``size`` seconds starting every ``advance`` seconds."""

    def __init__(self, size: float, advance: float, grace: float) -> None:
        self.size_ms = duration_ms("window size", size, minimum=1)
        self.advance_ms = duration_ms("window advance", advance, minimum=1)
        self.grace_ms = duration_ms("grace", grace)
        if self.advance_ms > self.size_ms:
            raise ConfigError(
                f"window advance ({advance}s) must not exceed the size ({size}s): records "
                "between windows would belong to none"
            )

    @property
    def size(self) -> float:
        return self.size_ms / 1000

    @property
    def grace(self) -> float:
        return self.grace_ms / 1000

    def windows_for(self, ts_ms: int) -> list[tuple[int, int]]:
        """``(start, end)`` in ms of every window containing ``ts_ms``, oldest first."""
        first = max(0, ts_ms - self.size_ms + self.advance_ms) // self.advance_ms
        first *= self.advance_ms
        return [(start, start + self.size_ms)
                for start in range(first, ts_ms + 1, self.advance_ms)]


class TumblingWindows(TimeWindows):
    """Back-to-back windows of ``size`` seconds; a record is in exactly one."""

    def __init__(self, size: float, *, grace: float = 0.0) -> None:
        super().__init__(size, size, grace)

    def __repr__(self) -> str:
        return f"TumblingWindows(size={self.size}, grace={self.grace})"


class HoppingWindows(TimeWindows):
    """Windows of ``size`` seconds every ``advance`` seconds (overlapping when
    ``advance < size``; a record is in ``size / advance`` of them)."""

    def __init__(self, size: float, advance: float, *, grace: float = 0.0) -> None:
        super().__init__(size, advance, grace)

    def __repr__(self) -> str:
        return (f"HoppingWindows(size={self.size}, advance={self.advance_ms / 1000}, "
                f"grace={self.grace})")


class SessionWindows:
    """Per-key sessions: records closer than ``gap`` seconds belong to one session."""

    def __init__(self, gap: float, *, grace: float = 0.0) -> None:
        self.gap_ms = duration_ms("session gap", gap, minimum=1)
        self.grace_ms = duration_ms("grace", grace)

    def __repr__(self) -> str:
        return f"SessionWindows(gap={self.gap_ms / 1000}, grace={self.grace_ms / 1000})"


class SlidingWindows:
    """Windows of ``time_difference`` seconds defined by the records (see the module
    docstring), accepting records ``grace`` seconds late."""

    def __init__(self, time_difference: float, *, grace: float) -> None:
        self.difference_ms = duration_ms("time difference", time_difference)
        self.grace_ms = duration_ms("grace", grace)

    @classmethod
    def of_time_difference_and_grace(cls, time_difference: float,
                                     grace: float) -> SlidingWindows:
        """Kafka's ``SlidingWindows.ofTimeDifferenceAndGrace`` (seconds)."""
        return cls(time_difference, grace=grace)

    @classmethod
    def of_time_difference_without_grace(cls, time_difference: float) -> SlidingWindows:
        return cls(time_difference, grace=0.0)

    def __repr__(self) -> str:
        return (f"SlidingWindows(time_difference={self.difference_ms / 1000}, "
                f"grace={self.grace_ms / 1000})")


class JoinWindows:
    """How close in time two records must be to join: a right record joins a left one at
    ``t`` when its timestamp is in ``[t - before, t + after]`` (seconds; ``after``
    defaults to ``before``). ``grace`` admits out-of-order records that late."""

    def __init__(self, before: float, after: float | None = None, *,
                 grace: float = 0.0) -> None:
        self.before_ms = duration_ms("join window 'before'", before)
        self.after_ms = duration_ms("join window 'after'",
                                     before if after is None else after)
        self.grace_ms = duration_ms("grace", grace)

    @classmethod
    def of(cls, difference: float, *, grace: float = 0.0) -> JoinWindows:
        """Records at most ``difference`` seconds apart, either way, join."""
        return cls(difference, difference, grace=grace)

    @property
    def retention(self) -> float:
        return (self.before_ms + self.after_ms + self.grace_ms) / 1000

    def __repr__(self) -> str:
        return (f"JoinWindows(before={self.before_ms / 1000}, after={self.after_ms / 1000}, "
                f"grace={self.grace_ms / 1000})")


# -- suppression: when a windowed table's updates go downstream ---------------------

WhenFull = Literal["emit_early", "shut_down"]


@dataclass(frozen=True)
class Suppressed:
    """How a suppression holds updates back; build it with :func:`until_window_closes` or
    :func:`until_time_limit`."""

    until: Literal["window_closes", "time_limit"]
    wait_ms: int
    max_records: int | None
    when_full: WhenFull


def until_window_closes(*, max_records: int | None = None) -> Suppressed:
    """Emit only each window's final result, once stream time passes its end + grace.
    The buffer is unbounded unless ``max_records`` is given; a full buffer then stops the
    task (``shut_down``: emitting early would not be a final result)."""
    return Suppressed("window_closes", 0, _max_records(max_records), "shut_down")


def until_time_limit(time_to_wait: float, *, max_records: int | None = None,
                     when_full: WhenFull = "emit_early") -> Suppressed:
    """Emit a key's latest update ``time_to_wait`` seconds (of stream time) after its first
    held update; at most ``max_records`` keys held (``emit_early`` the earliest when full,
    or ``shut_down``)."""
    if when_full not in ("emit_early", "shut_down"):
        raise ConfigError(f"until_time_limit(when_full={when_full!r}): use 'emit_early' or "
                          f"'shut_down'")
    return Suppressed("time_limit", duration_ms("time_to_wait", time_to_wait),
                      _max_records(max_records), when_full)


def _max_records(n: int | None) -> int | None:
    if n is not None and (not isinstance(n, int) or n < 0):
        raise ConfigError(f"max_records must be a non-negative int or None, got {n!r}")
    return n


__all__ = [
    "DroppedRecords",
    "HoppingWindows",
    "JoinWindows",
    "LateRecords",
    "SessionWindowedSerde",
    "SessionWindows",
    "SlidingWindows",
    "Suppressed",
    "TimeWindowedSerde",
    "TimeWindows",
    "TumblingWindows",
    "WhenFull",
    "Windowed",
    "duration_ms",
    "restamped",
    "to_ms",
    "until_time_limit",
    "until_window_closes",
]
