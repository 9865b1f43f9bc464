"""The origin header: which record that entered the app a record comes from, and by which
path - what a recording keys its answers by and a replay looks them up by.

A service answer must be found again in a replay, which runs on a fresh broker where every
record the app writes to a topic it reads back (a repartition topic, an FK join's internal
topics, a ``through`` topic) gets a new offset, in an order that depends on how upstream
tasks interleave. So such a record is named not by its offset but by its **place**:

* the **origin**: the source record that entered the app (``topic``, ``partition``,
  ``offset`` in the recorded run: a record read from outside names itself; a replayed input
  names its recorded place, given by the replay's loader);
* the **path**: which of the records that origin led to - empty for the origin itself; for
  a record written to a topic the app reads back, its parent's path followed by its
  **ordinal**: its rank among the outputs to such topics of the slot that produced it
  (``"0"``, ``"2.1"``). A slot's outputs are appended in forward order whatever
  ``max_in_flight`` and the interleaving of other records, so the path is the same in the
  recorded run and in every replay; two records never share a place (induction on the
  path).

The header :data:`ORIGIN_HEADER` carries it, as ``topic/partition/offset`` or
``topic/partition/offset/path`` (a Kafka topic name has no ``/``).

**When.** Only when an app records (``record_services_dir``) or is replayed
(:class:`OriginMode`); :class:`OriginMarks` says which outputs get it, and the engine applies
it (:meth:`OriginMarks.stamp`) as a slot's outputs are released - after the processors
ran, so the header is never in what they see. A task strips the header from the records it
reads where they may carry one (:func:`without_origin`; an app's internal topics always,
where a run that marked may have left some), so processors, state stores and changelogs
never hold it and marking changes no state. A recording app's task that neither reads nor
has a sink to a topic the app reads back stamps nothing (:meth:`OriginMarks.for_task`),
so a pipeline without repartitions pays nothing for it.

Invariants: a stamped output carries exactly one origin header, after its lineage header
when it has one, else first (so headers a processor checks by position at the end, as the
FK join's, are untouched); the other headers keep their order.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from aiostreams.runtime.lineage import LINEAGE_HEADER
from aiostreams.types import Headers, OutgoingRecord, RawRecord

__all__ = ["ORIGIN_HEADER", "OriginMarks", "OriginMode", "Place", "origin_value",
           "parse_origin", "place_in", "place_of", "with_origin", "without_origin"]

ORIGIN_HEADER = "aiostreams.replay.origin"
"""The header naming a record's place (see the module docstring)."""

class Place(NamedTuple):
    """Where a record comes from: its origin and its path (see the module docstring)."""

    topic: str
    partition: int
    offset: int
    path: str = ""

    def child(self, ordinal: int) -> Place:
        """The place of this record's ``ordinal``-th output to a topic the app reads."""
        assert ordinal >= 0, ordinal
        path = f"{self.path}.{ordinal}" if self.path else str(ordinal)
        return Place(self.topic, self.partition, self.offset, path)

    def parent(self) -> Place | None:
        """The place of the record whose processing wrote this one (None: an origin)."""
        if not self.path:
            return None
        head, _, _ = self.path.rpartition(".")
        return Place(self.topic, self.partition, self.offset, head)

    def __str__(self) -> str:
        where = f"{self.topic}[{self.partition}]@{self.offset}"
        return f"{where}/{self.path}" if self.path else where


def origin_value(place: Place) -> bytes:
    """The header value naming ``place``."""
    own = f"{place.topic}/{place.partition}/{place.offset}"
    return f"{own}/{place.path}".encode() if place.path else own.encode()


def parse_origin(value: bytes) -> Place:
    """The place a header value names; ValueError when it is not one."""
    parts = value.decode("utf-8", "replace").split("/")
    path = parts[3] if len(parts) == 4 else ""
    if (len(parts) not in (3, 4) or not parts[0] or not parts[1].isdigit()
            or not parts[2].isdigit()
            or (path and not all(step.isdigit() for step in path.split(".")))):
        raise ValueError(f"the {ORIGIN_HEADER} header holds {value!r}, not "
                         "topic/partition/offset[/path], the path dot-separated ordinals")
    return Place(parts[0], int(parts[1]), int(parts[2]), path)


def place_in(headers: Headers) -> Place | None:
    """The place the (first) origin header of ``headers`` names, or None."""
    for name, value in headers:
        if name == ORIGIN_HEADER and value is not None:
            return parse_origin(value)
    return None


def place_of(raw: RawRecord) -> Place:
    """Where ``raw`` comes from: the place its header names, else its own position."""
    found = place_in(raw.headers) if raw.headers else None
    return found if found is not None else Place(raw.topic, raw.partition, raw.offset)


def without_origin(headers: Headers) -> Headers:
    """``headers`` without origin headers (the same tuple when it has none)."""
    for name, _ in headers:
        if name == ORIGIN_HEADER:
            return tuple(h for h in headers if h[0] != ORIGIN_HEADER)
    return headers


def with_origin(headers: Headers, value: bytes) -> Headers:
    """``headers`` with the origin header ``value`` (and no other one), after the lineage
    header when it leads them, else first."""
    mark = (ORIGIN_HEADER, value)
    if not headers:
        return (mark,)
    rest = without_origin(headers)
    if rest and rest[0][0] == LINEAGE_HEADER:
        return (rest[0], mark, *rest[1:])
    return (mark, *rest)


class OriginMode(enum.Enum):
    """Which outputs carry the header."""

    RECORD = "record"  # the records written to topics the app reads back, only
    REPLAY = "replay"  # those, and every other output (a replay's outputs name their input)


@dataclass(frozen=True)
class OriginMarks:
    """What a marking app stamps: every output to ``read_back`` (the topics the app reads
    back: written by its sinks, read by its sources) gets the place of its child; with
    :attr:`OriginMode.REPLAY` every other output the place of its slot's input record,
    with :attr:`OriginMode.RECORD` none."""

    mode: OriginMode
    read_back: frozenset[str] = frozenset()

    def reading(self, topics: Iterable[str]) -> OriginMarks:
        """These marks, for an app that reads back ``topics``."""
        return OriginMarks(self.mode, frozenset(topics))

    def for_task(self, reads: Iterable[str], writes: Iterable[str]) -> OriginMarks | None:
        """What a task that reads ``reads`` and has sinks to ``writes`` stamps: nothing
        (None) when recording and it touches no topic the app reads back - its inputs carry
        no header and its sinks need none, so it pays nothing (a ``ctx.send`` of its to such
        a topic goes unmarked: a call behind it is keyed by position, as before origins)."""
        if self.mode is OriginMode.RECORD and self.read_back.isdisjoint([*reads, *writes]):
            return None
        return self

    def stamp(self, raw: RawRecord, outputs: Sequence[Any], start: int = 0) -> None:
        """Stamp ``outputs[start:]``, the outputs of the slot whose input is ``raw``, in
        the order the slot produced them (its external records are passed over)."""
        place: Place | None = None
        ordinal = 0
        read_back = self.read_back
        replay = self.mode is OriginMode.REPLAY
        for i in range(start, len(outputs)):
            out = outputs[i]
            if out.__class__ is not OutgoingRecord:
                continue
            if out.topic in read_back:
                place = place or place_of(raw)
                value = origin_value(place.child(ordinal))
                ordinal += 1
            elif replay:
                place = place or place_of(raw)
                value = origin_value(place)
            else:  # a dead letter copies its input's headers: the app's outputs get none
                if out.headers:
                    out.headers = without_origin(out.headers)
                continue
            out.headers = with_origin(out.headers, value)
