"""What a consumer does when its position on a partition is outside the partition's log.

A position goes out of range when the broker deleted records the application had not read
yet (retention, ``delete-records``): the position is below the log's start; or when the log
is shorter than the position (the topic was truncated, or deleted and created again): the
position is past the log's end. Kafka's consumer then resets to ``auto.offset.reset``
silently (aiokafka logs it at INFO); for a stream processor that is records skipped or read
again with no trace. Here it is never silent:

* the ``offset_out_of_range`` policy (:data:`OUT_OF_RANGE_POLICIES`) says where to go on:
  ``"earliest"`` (the log's start), ``"latest"`` (its end) or ``"fail"``
  (:class:`~aiostreams.errors.OffsetOutOfRangeError`, naming the partition, the position,
  the log's bounds, the records lost, and how to go on; the consumer's position does not
  move, so nothing past it is read or committed);
* every reset is a WARNING log line (partition, from -> to, records skipped or read again)
  and is counted per topic, partition and :class:`ResetReason` in :class:`OffsetResets`,
  which the metrics export.

Both transports call :func:`plan_reset` with the position the broker refused and the log's
bounds, and then :meth:`OffsetResets.apply` (or raise the error it returns under
``"fail"``): one decision, one log line and one counter for ``kafka://`` and
``memory://``.

Counts are offset differences: on Kafka transaction markers take offsets too, so under
exactly-once a count may exceed the records by the markers among them.
"""

from __future__ import annotations

import enum
import logging
from collections import Counter
from dataclasses import dataclass

from aiostreams.errors import ConfigError, OffsetOutOfRangeError
from aiostreams.types import TopicPartition

__all__ = ["OUT_OF_RANGE_POLICIES", "OffsetReset", "OffsetResets", "ResetReason",
           "check_policy", "plan_reset"]

log = logging.getLogger("aiostreams.offset_reset")

OUT_OF_RANGE_POLICIES = ("earliest", "latest", "fail")
GROUPS_RESET = ("aiostreams groups reset {group} --topic {topic} --to-earliest "
                "(or --to-datetime WHEN, or --shift N)")


def check_policy(policy: str, field: str = "offset_out_of_range") -> str:
    """``policy`` when it is one of :data:`OUT_OF_RANGE_POLICIES`, else ConfigError."""
    if policy not in OUT_OF_RANGE_POLICIES:
        raise ConfigError(f"{field} must be one of {OUT_OF_RANGE_POLICIES}, got {policy!r}")
    return policy


class ResetReason(enum.Enum):
    DELETED = "deleted"
    """The position is below the log's start: records were deleted before they were read."""
    PAST_END = "past_end"
    """The position is past the log's end: the log was truncated or created again."""


@dataclass(frozen=True, slots=True)
class OffsetReset:
    """A position (``from_offset``) outside ``[log_start, log_end]`` and where the policy
    moves it (``to_offset``: ``log_start`` or ``log_end``; under ``"fail"``, nowhere).

    Invariants (asserted): ``log_start <= log_end``; ``from_offset`` is outside the log;
    ``to_offset`` is one of its bounds.
    """

    tp: TopicPartition
    from_offset: int
    log_start: int
    log_end: int
    policy: str

    def __post_init__(self) -> None:
        assert 0 <= self.log_start <= self.log_end, f"{self.tp}: bad log bounds {self}"
        assert not self.log_start <= self.from_offset <= self.log_end, \
            f"{self.tp}: {self.from_offset} is in range {self.log_start}..{self.log_end}"
        check_policy(self.policy)

    @property
    def partition_name(self) -> str:
        """``topic[partition]``, as the log lines and errors name it."""
        return f"{self.tp.topic}[{self.tp.partition}]"

    @property
    def reason(self) -> ResetReason:
        return ResetReason.DELETED if self.from_offset < self.log_start else ResetReason.PAST_END

    @property
    def to_offset(self) -> int:
        """Where the consumer resumes (the position itself under ``"fail"``)."""
        if self.policy == "fail":
            return self.from_offset
        return self.log_start if self.policy == "earliest" else self.log_end

    @property
    def deleted(self) -> int:
        """Records between the position and the log's start, gone before they were read."""
        return max(0, self.log_start - self.from_offset)

    @property
    def skipped(self) -> int:
        """Records from the position up to where the consumer resumes, never to be read:
        the deleted ones, and under ``"latest"`` those still in the log too."""
        return max(0, self.to_offset - self.from_offset)

    @property
    def replayed(self) -> int:
        """Records the consumer reads although they lie below its position: past the end
        under ``"earliest"``, the whole log (read again, or a new incarnation's records)."""
        return max(0, min(self.from_offset, self.log_end) - self.to_offset)

    @property
    def _deleted_span(self) -> str:
        return (f"{self.deleted} records (offsets {self.from_offset}..{self.log_start - 1}) "
                "were deleted (retention or delete-records)")

    def describe(self) -> str:
        """The WARNING line of a reset: partition, from -> to, and what it costs."""
        where = (f"offset {self.from_offset} of {self.partition_name} is out of range "
                 f"(the log holds {self.log_start}..{self.log_end}): ")
        if self.reason is ResetReason.DELETED:
            what = f"{self._deleted_span} before they were read"
        else:
            what = (f"the position is {self.from_offset - self.log_end} past the log's end "
                    "(the topic was truncated, or deleted and created again)")
        cost = f"{self.skipped} records skipped, {self.replayed} read again"
        return (f"{where}{what}; reset {self.from_offset} -> {self.to_offset} per "
                f"offset_out_of_range={self.policy!r}: {cost}")

    def error(self, group_id: str | None) -> OffsetOutOfRangeError:
        """The error that stops a consumer under ``"fail"``: what happened, what is lost,
        and how to go on."""
        if self.reason is ResetReason.DELETED:
            what = f"{self._deleted_span} before the app read them: they are lost"
        else:
            what = (f"the offset is {self.from_offset - self.log_end} past the log's end: "
                    "the topic was truncated, or deleted and created again, and its "
                    f"{self.log_end - self.log_start} records are not the ones the offset "
                    "counted")
        whose = f"group {group_id!r}" if group_id is not None else "this consumer"
        fix = ("stop every member of the group, then move its offset with `"
               + GROUPS_RESET.format(group=group_id, topic=self.tp.topic) + "`, or "
               if group_id is not None else "seek elsewhere, or ")
        return OffsetOutOfRangeError(
            f"offset {self.from_offset} of {self.partition_name} for {whose} is out of "
            f"range: the log starts at {self.log_start} and ends at {self.log_end}; {what}. "
            "offset_out_of_range='fail', so the consumer stops here and nothing past "
            f"offset {self.from_offset} is read or committed. To go on, {fix}set "
            "offset_out_of_range='earliest' (resume at the log's start) or 'latest' "
            "(at its end) and restart",
            topic=self.tp.topic, partition=self.tp.partition, offset=self.from_offset,
            log_start=self.log_start, log_end=self.log_end)


def plan_reset(tp: TopicPartition, position: int, log_start: int, log_end: int,
               policy: str) -> OffsetReset | None:
    """The reset a position outside ``[log_start, log_end]`` needs, or None when it is in
    range (the broker's bounds moved since it refused the position: fetch again)."""
    if log_start <= position <= log_end:
        return None
    return OffsetReset(tp, position, log_start, log_end, policy)


class OffsetResets:
    """The resets one consumer made: counted per (topic, partition, reason), the last one
    kept. :meth:`apply` is the one place a reset is decided, logged and counted."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, int, ResetReason]] = Counter()
        self.last: OffsetReset | None = None

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def apply(self, reset: OffsetReset, group_id: str | None) -> int:
        """The offset to resume at; logs a WARNING and counts the reset. Under ``"fail"``
        raises :class:`~aiostreams.errors.OffsetOutOfRangeError` (nothing counted)."""
        if reset.policy == "fail":
            raise reset.error(group_id)
        log.warning("%s%s", f"group {group_id!r}: " if group_id else "", reset.describe())
        self.counts[(reset.tp.topic, reset.tp.partition, reset.reason)] += 1
        self.last = reset
        return reset.to_offset
