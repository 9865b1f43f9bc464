"""``aiostreams explain TOPIC PARTITION OFFSET``: why does this output exist?

Reads that record, follows its lineage header (:mod:`aiostreams.runtime.lineage`, written
by apps with ``lineage=True``) to the input record whose processing produced it, reads
that one, and so on back through repartition topics, until a record without the header:
a source record, one that entered the app from outside. Per step it shows where the record
is, its key, and how it was made: with ``--app``, the sub-topology that read the input
record and its nodes from that input's source to the sink that wrote the record; with
``--recording``, the service answers recorded while the input record was processed (a
recording keys them by the record's place, :mod:`aiostreams.runtime.origin`: its own
position for a source record; for a repartition record the place its origin header names,
or, when it is gone, its parent's place the next record's header names, else the one path
of its depth recorded for its source)::

    card-counts[0]@3  key={"key": "c1", "start": 0.0, "end": 10.0}  ...T00:00:03.000Z
      <- fraud-by-card-repartition[0]@3 through sub-topology 1: by-card-source ->
         KSTREAM-AGGREGATE-0000000005 -> KSTREAM-SINK-0000000006
    fraud-by-card-repartition[0]@3  key="c1"  ...T00:00:03.000Z
      <- payments[1]@1 through sub-topology 0: KSTREAM-SOURCE-0000000000 ->
         KSTREAM-KEY-SELECT-0000000001 -> by-card-sink
    payments[1]@1  key="p3"  ...T00:00:03.000Z  (source: no lineage header)

A record the chain names may be gone: a repartition topic is purged once its records are
committed. The output's header carries the whole chain (see :mod:`aiostreams.runtime.lineage`),
so the walk goes on past it, showing the step as not readable, with why.

Errors a user can act on (exit code 1): the first record has no lineage header ("was
lineage on when it was written?"); the first record is not there (past the partition's end;
before its start: deleted by retention; or an offset with no record: compacted away, a
transaction marker, an aborted record); a topic or partition that does not exist.

Invariants: every step but the last names the step after it through its lineage header
(or, not readable, is named by the chain of a step before it);
the walk stops after :data:`MAX_STEPS` steps or at a record it has seen (a loop), saying so.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiostreams.app import App
from aiostreams.commands import CommandError
from aiostreams.commands.render import Decoder, decoder, show, timestamp, to_json
from aiostreams.replay.recording import RecordedAnswer, Recording
from aiostreams.runtime.lineage import LINEAGE_HEADER, LineageError, Origin, chain_of
from aiostreams.runtime.origin import Place, place_in
from aiostreams.topic import Topic
from aiostreams.topology.nodes import SubTopology
from aiostreams.transport.base import (
    Consumer,
    ConsumerOptions,
    IsolationLevel,
    Transport,
)
from aiostreams.types import RawRecord, TopicPartition
from aiostreams.windows import Windowed

MAX_STEPS = 64
"""How many records a walk reads at most (a chain longer than this is cut, saying so)."""
FETCH_TIMEOUT = 10.0
"""Seconds to wait for a record the partition's offsets say is there."""

@dataclass(frozen=True)
class Lookup:
    """A record whose recorded answers are wanted: its position, its place
    (:mod:`aiostreams.runtime.origin`: what a recording keys them by) when known, and the
    source record its lineage chain ends at with how many records lie between."""

    at: Origin
    place: Place | None
    source: Origin | None = None
    depth: int = 0


Answers = Callable[[Lookup], Sequence[RecordedAnswer]]
"""The recorded service answers used while processing a record."""


class ExplainError(CommandError):
    """A record explain cannot read or follow (exit code 1)."""


class RecordGone(ExplainError):
    """The record named is not there: past the end, deleted, compacted away, or its topic
    or partition does not exist."""


@dataclass
class Made:
    """How a record was made from the input record its lineage header names."""

    subtopology: int | None  # None: no sub-topology of the app reads the input's topic
    nodes: list[str]  # source to sink; empty when unknown


@dataclass
class Step:
    """One record of the chain: where it is, its key, and what it came from."""

    at: Origin
    timestamp: float | None  # None: not readable (see missing)
    key: Any
    came_from: Origin | None  # its lineage header; None: a source record
    made: Made | None = None  # with an app: how, from came_from
    answers: list[RecordedAnswer] = field(default_factory=list)  # recorded as it was processed
    missing: str | None = None  # why it could not be read (known from a later one's chain)


async def explain(transport: Transport, at: Origin, *, app: App | None = None,
                  answers: Answers | None = None) -> list[Step]:
    """The chain of records from the output ``at`` back to its source record, output
    first. Raises :class:`ExplainError` (see the module docstring).

    Cancellation: stops reading; the consumer it opened is stopped."""
    subs = app.build() if app is not None else []
    consumer = transport.consumer(options=ConsumerOptions(
        client_id="aiostreams-explain", isolation_level=IsolationLevel.READ_COMMITTED))
    await consumer.start()
    try:
        steps: list[Step] = []
        seen: set[Origin] = set()
        where: Origin | None = at
        ahead: list[Origin] = []  # the positions past ``where`` the last chain read names
        made_at: Place | None = None  # the place of the record read last, when it had one
        while where is not None:
            if where in seen:
                raise ExplainError(f"the lineage of {at} loops back to {where}: a record "
                                   "names one it came from")
            if len(steps) == MAX_STEPS:
                raise ExplainError(f"the lineage of {at} is longer than {MAX_STEPS} steps; "
                                   f"explain its step {where} on its own")
            seen.add(where)
            lookup = Lookup(where, None, ahead[-1] if ahead else None, len(ahead))
            try:
                raw = await read_record(transport, consumer, where,
                                        named_by=steps[-1].at if steps else None)
            except RecordGone as gone:
                if not steps:
                    raise
                # a purged repartition record: the chain read last says what it came from,
                # and the record made from it its place (its parent's)
                step = Step(where, None, None, ahead[0] if ahead else None, missing=str(gone))
                ahead = ahead[1:]
                made_at = made_at.parent() if made_at is not None else None
            else:
                made_at = place_in(raw.headers) if raw.headers else None
                lookup = Lookup(where, None)
                step, ahead = _step(raw, key_decoder(where.topic, app, subs))
                if step.came_from is None and not steps:
                    raise ExplainError(
                        f"{where} has no {LINEAGE_HEADER} header: was lineage on when it "
                        "was written? Start the app that writes it with lineage=True (or "
                        "AIOSTREAMS_LINEAGE=true); records written before keep none")
            if app is not None and step.came_from is not None:
                step.made = made_by(subs, step.came_from.topic, where.topic)
            if steps and answers is not None:
                step.answers = list(answers(Lookup(where, made_at, lookup.source,
                                                   lookup.depth)))
            steps.append(step)
            where = step.came_from
        assert all(a.came_from == b.at for a, b in itertools.pairwise(steps)), \
            "each step names the next"
        return steps
    finally:
        await consumer.stop()


def _step(raw: RawRecord, key: Decoder) -> tuple[Step, list[Origin]]:
    """The step of ``raw``, and the positions its chain names past the one it came from."""
    at = Origin(raw.topic, raw.partition, raw.offset)
    try:
        chain = chain_of(raw.headers)
    except LineageError as e:
        raise ExplainError(f"{at}: {e}; it was not written by aiostreams' lineage") from None
    return Step(at, raw.timestamp, key(raw.key), chain[0] if chain else None), chain[1:]


def key_decoder(topic: str, app: App | None, subs: Sequence[SubTopology]) -> Decoder:
    """The app's key serde for ``topic`` (declared, or of a sink or source node of an
    internal topic), else the generic decoder."""
    if app is None:
        return decoder("auto", None, "key")
    declared = app.topology.topic(topic)
    if declared is not None:
        return decoder("auto", declared, "key")
    serdes = [s.key_serde for sub in subs for s in sub.sinks if s.topic == topic]
    serdes += [s.key_serde for sub in subs for s in sub.sources if topic in s.topics]
    if serdes:
        return decoder("auto", Topic.of(topic, key=serdes[0], value=bytes), "key")
    return decoder("auto", None, "key")


def made_by(subs: Sequence[SubTopology], source_topic: str, sink_topic: str) -> Made:
    """The sub-topology reading ``source_topic`` and its nodes from that topic's source to
    the sink writing ``sink_topic`` (only the source when no sink writes it: a processor
    sent it with ``ctx.send``)."""
    for sub in subs:
        if source_topic not in sub.source_topics:
            continue
        children = {n.name: list(n.children) for n in sub.sources}
        children.update((n.name, list(n.children)) for n in sub.processors)
        sinks = {s.name for s in sub.sinks if s.topic == sink_topic}
        starts = [s.name for s in sub.sources if source_topic in s.topics]
        for start in starts:
            path = _path(start, children, sinks)
            if path:
                return Made(sub.id, path)
        return Made(sub.id, starts[:1])
    return Made(None, [])


def _path(start: str, children: dict[str, list[str]], ends: set[str]) -> list[str]:
    """A path of node names from ``start`` to one of ``ends`` (depth first), or []."""
    stack = [[start]]
    while stack:
        path = stack.pop()
        if path[-1] in ends:
            return path
        stack.extend([*path, c] for c in reversed(children.get(path[-1], []))
                     if c not in path)
    return []


async def read_record(transport: Transport, consumer: Consumer, at: Origin, *,
                      named_by: Origin | None) -> RawRecord:
    """The record at ``at`` (read committed); :class:`ExplainError` when it is not there."""
    tp = TopicPartition(at.topic, at.partition)
    whose = f" (named by {named_by}'s {LINEAGE_HEADER} header)" if named_by else ""
    admin = transport.admin()
    await admin.start()
    try:
        count = await admin.partitions_for(at.topic)
    finally:
        await admin.stop()
    if count is None:
        raise RecordGone(f"topic {at.topic!r} does not exist on {transport.url}{whose}")
    if not 0 <= at.partition < count:
        raise RecordGone(f"topic {at.topic!r} has {count} partition(s); there is no "
                           f"partition {at.partition}{whose}")
    start = (await consumer.beginning_offsets([tp]))[tp]
    end = (await consumer.end_offsets([tp]))[tp]
    if at.offset >= end:
        raise RecordGone(f"{at} is not found: offset {at.offset} is past the end of "
                           f"{tp} (its next offset is {end}){whose}")
    if at.offset < start:
        raise RecordGone(
            f"{at} is not found: {tp} starts at offset {start} now; the record was deleted "
            "(retention, or a repartition topic purged once its records were committed: "
            f"raise repartition_purge_interval_ms to keep them longer){whose}")
    consumer.assign([tp])
    consumer.seek(tp, at.offset)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + FETCH_TIMEOUT
    while loop.time() < deadline:
        for record in (await consumer.getmany(0.5)).get(tp, []):
            if record.offset == at.offset:
                return record
            if record.offset > at.offset:
                raise _no_record(at, tp, whose)
        if await consumer.position(tp) > at.offset:  # passed it, returning nothing there
            raise _no_record(at, tp, whose)
    raise ExplainError(f"{at}: {transport.url} returned no record of {tp} from offset "
                       f"{at.offset} within {FETCH_TIMEOUT} s, though its end is {end}; "
                       "try again")


def _no_record(at: Origin, tp: TopicPartition, whose: str) -> RecordGone:
    return RecordGone(
        f"{at} is not found: {tp} holds no record at offset {at.offset} (compacted away, "
        f"a transaction marker, or an aborted transaction's record){whose}")


def recorded_answers(where: str) -> Answers:
    """The answers of the recording in directory ``where``, by the record's place; else
    by its own position (a source record; or a previous version's recording, which keyed a
    repartition record so); else, for a purged record whose place no header gives, by the
    one path of its depth recorded for its source (none when a fan-out leaves several)."""
    try:
        recording = Recording.open(where)
    except FileNotFoundError as e:
        raise ExplainError(str(e)) from None

    def answers(lookup: Lookup) -> list[RecordedAnswer]:
        place, at, source = lookup.place, lookup.at, lookup.source
        if place is not None:
            found = recording.answers_for(*place)
            if found or not place.path:
                return found
        found = recording.answers_for(at.topic, at.partition, at.offset)
        if found or place is not None or source is None or lookup.depth == 0:
            return found
        # a purged record no header placed: the one path of its depth from its source
        paths = {p for p in recording.paths_from(*source)
                 if len(p.split(".")) == lookup.depth}
        return recording.answers_for(*source, paths.pop()) if len(paths) == 1 else []

    return answers


# -- showing it ---------------------------------------------------------------------


def render_text(steps: Sequence[Step]) -> str:
    lines = []
    for step in steps:
        if step.missing is not None:
            line = f"{step.at}  (not readable: {step.missing})"
        else:
            when = timestamp(step.timestamp) if step.timestamp is not None else "?"
            line = f"{step.at}  key={show(_plain(step.key))}  {when}"
            if step.came_from is None:
                line += "  (source: no lineage header)"
        lines.append(line)
        for answer in step.answers:
            lines.append(f"  answer: {_answer_text(answer)}")
        if step.came_from is not None:
            how = ""
            if step.made is not None:
                how = (" through sub-topology "
                       f"{step.made.subtopology}: {' -> '.join(step.made.nodes)}"
                       if step.made.subtopology is not None
                       else " (no sub-topology of the app reads that topic)")
            lines.append(f"  <- {step.came_from}{how}")
    return "\n".join(lines)


def _plain(key: Any) -> Any:
    """A key as JSON-ready data; a window's key as its key and bounds."""
    if isinstance(key, Windowed):
        return {"key": to_json(key.key), "start": key.start, "end": key.end}
    return to_json(key)


def render_json(steps: Sequence[Step]) -> str:
    return json.dumps({"steps": [_step_json(s) for s in steps]}, ensure_ascii=False,
                      default=str)


def _step_json(step: Step) -> dict[str, Any]:
    data: dict[str, Any] = {
        "topic": step.at.topic, "partition": step.at.partition, "offset": step.at.offset,
        "timestamp": step.timestamp, "key": _plain(step.key),
        "came_from": None if step.came_from is None else step.came_from._asdict(),
    }
    if step.missing is not None:
        data["missing"] = step.missing
    if step.made is not None:
        data["subtopology"] = step.made.subtopology
        data["nodes"] = step.made.nodes
    if step.answers:
        data["answers"] = [_answer_json(a) for a in step.answers]
    return data


def _answer_value(answer: RecordedAnswer) -> Any:
    """The recorded value as the call returned it (the recording is pickles: trusted as
    the app's own code, see :mod:`aiostreams.replay.recording`)."""
    if answer.error is not None or answer.value is None:
        return None
    try:
        return answer.answer()
    except Exception as e:  # a class the recording names that this process cannot load
        return f"<not loadable here: {type(e).__name__}: {e}>"


def _answer_json(answer: RecordedAnswer) -> dict[str, Any]:
    value = _answer_value(answer)
    return {"service": answer.service, "index": answer.index, "request": answer.request,
            "value": to_json(value),
            "error": answer.error, "latency": answer.latency}


def _answer_text(answer: RecordedAnswer) -> str:
    what = (f"error={answer.error}" if answer.error is not None
            else f"value={show(_answer_value(answer))}")
    request = f" request={answer.request!r}" if answer.request is not None else ""
    return (f"service {answer.service!r} call #{answer.index}{request}: {what} "
            f"({answer.latency * 1000:.1f} ms)")
