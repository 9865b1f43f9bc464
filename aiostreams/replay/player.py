"""Answering service calls from a recording, in a replay (``--services recorded``).

The :class:`Player` is the tap (:class:`~aiostreams.services.call_tap.CallTap`) a replay
puts on every declared service: a step's call for a record is answered with what the
recording holds for (service, the record's **origin**, index) - never by calling, never by
the memo or a coalesced call (the recorded answer is what that record got from them).

**Origin.** A replay runs on a fresh memory broker, where the inputs get new offsets. Each
input is produced with the header :data:`ORIGIN_HEADER` naming its place in the recorded
run (``topic/partition/offset``), and the player looks answers up by that; a record without
it, or whose header names another topic (one read from a repartition topic carries its
source's), is looked up by its own position: a replay finds those calls when the
repartition topic gets its records in the recorded order (one upstream task per
partition of it, as with a single input partition). Records keep their headers through
the DSL's steps, so an output carries the header of the input that produced it: that is
how a replay's outputs name their input.

**Index.** The ``index``-th call of an attempt of a record (counted from 0 at each attempt,
as the recorder counts).

A recorded failure is raised again as :class:`RecordedFailure`; a call the recording lacks
raises :class:`MissingAnswer` and is counted with its first examples (:attr:`Player.missing`)
- never guessed. Both are marked not retryable: the record takes its error path (dead
letter, skip or fail) at once, as the recorded run's record did after its retries.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Any

from aiostreams.policies import mark_retryable
from aiostreams.replay.recording import Recording
from aiostreams.runtime.slot import CURRENT_SLOT
from aiostreams.types import Headers, RawRecord

__all__ = ["EXAMPLES", "ORIGIN_HEADER", "MissingAnswer", "MissingCall", "Player",
           "RecordedFailure", "origin_header", "origin_of"]

ORIGIN_HEADER = "aiostreams.replay.origin"
"""The header a replay's inputs carry: ``topic/partition/offset`` in the recorded run."""

EXAMPLES = 20
"""Missing calls the player keeps as examples (it counts them all)."""


def origin_header(topic: str, partition: int, offset: int) -> tuple[str, bytes]:
    return ORIGIN_HEADER, f"{topic}/{partition}/{offset}".encode()


def origin_of(headers: Headers) -> tuple[str, int, int] | None:
    """The recorded place named by :data:`ORIGIN_HEADER` in ``headers``, or None."""
    for name, value in headers:
        if name == ORIGIN_HEADER and value is not None:
            topic, partition, offset = value.decode().rsplit("/", 2)
            return topic, int(partition), int(offset)
    return None


@dataclass(frozen=True)
class MissingCall:
    """A call the recording has no answer for."""

    service: str
    topic: str
    partition: int
    offset: int
    index: int

    def __str__(self) -> str:
        return f"{self.service} call {self.index} of {self.topic}[{self.partition}]@{self.offset}"


class MissingAnswer(Exception):
    """The recording has no answer for this call (the replay reports it)."""


class RecordedFailure(Exception):
    """The recorded call failed for good; the message is the recorded ``Type: message``."""


class Player:
    """Answers calls from ``recording``; with ``latency_scale`` > 0 each answer takes its
    recorded latency times that (else it comes at the next turn of the loop)."""

    def __init__(self, recording: Recording, latency_scale: float = 0.0) -> None:
        if latency_scale < 0:
            raise ValueError(f"latency_scale must be >= 0; got {latency_scale}")
        self.recording = recording
        self.latency_scale = latency_scale
        self.answered = 0
        self.missing_count = 0
        self.missing: list[MissingCall] = []
        self._calls: dict[tuple[int, str, int, int, int, str], int] = {}

    async def answer(self, service: str, request: Hashable | None,
                     get: Callable[[], Awaitable[Any]]) -> Any:
        """The recorded answer of the running record's next call to ``service`` (``get``
        is not called). Raises :class:`RecordedFailure` or :class:`MissingAnswer`.
        Cancellation: nothing is counted as answered."""
        slot = CURRENT_SLOT.get(None)
        raw = slot.raw if slot is not None else None
        if slot is None or raw is None:
            return self._missing(MissingCall(service, "<punctuation>", -1, -1, 0))
        topic, partition, offset = self._place(raw)
        attempt = (id(slot), raw.topic, raw.partition, raw.offset, slot.attempts, service)
        index = self._calls.get(attempt, 0)
        self._calls[attempt] = index + 1
        recorded = self.recording.answer(service, topic, partition, offset, index)
        if recorded is None or (recorded.error is not None
                                and recorded.error.startswith("Unpicklable:")):
            return self._missing(MissingCall(service, topic, partition, offset, index))
        await asyncio.sleep(recorded.latency * self.latency_scale)
        self.answered += 1
        if recorded.error is not None:
            failure = RecordedFailure(recorded.error)
            mark_retryable(failure, False)
            raise failure
        return recorded.answer()

    @staticmethod
    def _place(raw: RawRecord) -> tuple[str, int, int]:
        """Where the recorded run had ``raw``: the origin its header names when it is a
        replayed input itself, else its own place (a repartition topic's record carries
        its source's header, but the recorder keyed its calls by the repartition record)."""
        origin = origin_of(raw.headers)
        if origin is not None and origin[0] == raw.topic:
            return origin
        return raw.topic, raw.partition, raw.offset

    def _missing(self, call: MissingCall) -> Any:
        self.missing_count += 1
        if len(self.missing) < EXAMPLES:
            self.missing.append(call)
        error = MissingAnswer(f"the recording has no answer for {call}")
        mark_retryable(error, False)
        raise error
