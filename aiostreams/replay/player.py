"""Answering service calls from a recording, in a replay (``--services recorded``).

The :class:`Player` is the tap (:class:`~aiostreams.services.call_tap.CallTap`) a replay
puts on every declared service: a step's call for a record is answered with what the
recording holds for (service, the record's **place**, index) - never by calling, never by
the memo or a coalesced call (the recorded answer is what that record got from them).

**Place.** A replay runs on a fresh memory broker, where the inputs get new offsets, and so
does every record the app writes to a topic it reads back (a repartition topic), in an
order that depends on how the upstream tasks interleave. Each input is produced with the
header :data:`ORIGIN_HEADER` naming its place in the recorded run (``topic/partition/
offset``); the replayed app marks what it writes to the topics it reads back with the
origin of the record that led to it and a path (:mod:`aiostreams.runtime.origin`), as the
recording app did - so a record behind any number of repartitions, fan-outs included, is
looked up by the same (origin, path) the recorder keyed its calls by, whatever
``max_in_flight`` and the interleaving. A record without the header (one a punctuation or
a cache flush wrote: no input record led to it) is looked up by its own position.

**Recordings of the previous version** keyed a record read from a repartition topic by its
own position there: a call not found by (origin, path) for such a record is looked up by
its position in the replay, as that version did - found when the repartition topic gets
its records in the recorded order (one upstream task per partition of it).

The replayed app's outputs carry the header too, naming the input that produced them: that
is how a replay's outputs name their input (:mod:`aiostreams.replay.outputs`).

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
from aiostreams.runtime.origin import ORIGIN_HEADER, Place, place_in, place_of
from aiostreams.runtime.slot import CURRENT_SLOT
from aiostreams.types import Headers

__all__ = ["EXAMPLES", "ORIGIN_HEADER", "MissingAnswer", "MissingCall", "Player",
           "RecordedFailure", "origin_header", "origin_of"]

EXAMPLES = 20
"""Missing calls the player keeps as examples (it counts them all)."""


def origin_header(topic: str, partition: int, offset: int) -> tuple[str, bytes]:
    return ORIGIN_HEADER, f"{topic}/{partition}/{offset}".encode()


def origin_of(headers: Headers) -> tuple[str, int, int] | None:
    """The recorded source record named by :data:`ORIGIN_HEADER` in ``headers`` (its
    origin, without the path), or None."""
    place = place_in(headers)
    return None if place is None else (place.topic, place.partition, place.offset)


@dataclass(frozen=True)
class MissingCall:
    """A call the recording has no answer for."""

    service: str
    topic: str
    partition: int
    offset: int
    index: int
    path: str = ""

    def __str__(self) -> str:
        where = Place(self.topic, self.partition, self.offset, self.path)
        return f"{self.service} call {self.index} of {where}"


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
        place = place_of(raw)
        attempt = (id(slot), raw.topic, raw.partition, raw.offset, slot.attempts, service)
        index = self._calls.get(attempt, 0)
        self._calls[attempt] = index + 1
        recorded = self.recording.answer(service, *place[:3], index, place.path)
        if recorded is None and place.topic != raw.topic:  # a previous version's recording
            recorded = self.recording.answer(service, raw.topic, raw.partition, raw.offset,
                                             index)
        if recorded is None or (recorded.error is not None
                                and recorded.error.startswith("Unpicklable:")):
            return self._missing(MissingCall(service, *place[:3], index, place.path))
        await asyncio.sleep(recorded.latency * self.latency_scale)
        self.answered += 1
        if recorded.error is not None:
            failure = RecordedFailure(recorded.error)
            mark_retryable(failure, False)
            raise failure
        return recorded.answer()

    def _missing(self, call: MissingCall) -> Any:
        self.missing_count += 1
        if len(self.missing) < EXAMPLES:
            self.missing.append(call)
        error = MissingAnswer(f"the recording has no answer for {call}")
        mark_retryable(error, False)
        raise error
