"""``aiostreams explain TOPIC PARTITION OFFSET``: why does this output exist?

Reads that record, follows its lineage header (:mod:`aiostreams.runtime.lineage`, written
by apps with ``lineage=True``) to the input record whose processing produced it, reads
that one, and so on back through repartition topics, until a record without the header:
a source record, one that entered the app from outside. Per step it shows where the record
is, its key, and how it was made: with ``--app``, the sub-topology that read the input
record and its nodes from that input's source to the sink that wrote the record; with
``--recording``, the service answers recorded while the input record was processed::

    per-card[1]@2  key='c0'  2026-05-01T12:00:04.000Z
      <- lin-by-card-repartition[0]@4 through sub-topology 1: by-card-repartition-source
         -> count -> to-stream -> to-per-card
    lin-by-card-repartition[0]@4  key='c0'  ...
      <- payments[0]@2 through sub-topology 0: payments -> by-card-select -> ...
    payments[0]@2  key='p4'  ...  (source: no lineage header)

Errors a user can act on (exit code 1): the first record has no lineage header ("was
lineage on when it was written?"); a record named is not there (past the partition's end;
before its start: deleted by retention, or a repartition topic purged once its records were
committed; or an offset with no record: compacted away, a transaction marker, an aborted
record); a topic or partition that does not exist.

Invariants: every step but the last names the step after it through its lineage header;
the walk stops after :data:`MAX_STEPS` steps or at a record it has seen (a loop), saying so.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiostreams.app import App
from aiostreams.commands import CommandError
from aiostreams.commands.render import Decoder, decoder, show, timestamp, to_json
from aiostreams.replay.recording import RecordedAnswer, Recording
from aiostreams.runtime.lineage import LINEAGE_HEADER, LineageError, Origin, origin_of
from aiostreams.topic import Topic
from aiostreams.topology.nodes import SubTopology
from aiostreams.transport.base import (
    Consumer,
    ConsumerOptions,
    IsolationLevel,
    Transport,
)
from aiostreams.types import RawRecord, TopicPartition

MAX_STEPS = 64
"""How many records a walk reads at most (a chain longer than this is cut, saying so)."""
FETCH_TIMEOUT = 10.0
"""Seconds to wait for a record the partition's offsets say is there."""

Answers = Callable[[Origin], Sequence[RecordedAnswer]]
"""The recorded service answers used while processing the record at an origin."""


class ExplainError(CommandError):
    """A record explain cannot read or follow (exit code 1)."""


@dataclass
class Made:
    """How a record was made from the input record its lineage header names."""

    subtopology: int | None  # None: no sub-topology of the app reads the input's topic
    nodes: list[str]  # source to sink; empty when unknown


@dataclass
class Step:
    """One record of the chain: where it is, its key, and what it came from."""

    at: Origin
    timestamp: float
    key: Any
    came_from: Origin | None  # its lineage header; None: a source record
    made: Made | None = None  # with an app: how, from came_from
    answers: list[RecordedAnswer] = field(default_factory=list)  # recorded as it was processed


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
        while where is not None:
            if where in seen:
                raise ExplainError(f"the lineage of {at} loops back to {where}: a record "
                                   "names one it came from")
            if len(steps) == MAX_STEPS:
                raise ExplainError(f"the lineage of {at} is longer than {MAX_STEPS} steps; "
                                   f"explain its step {where} on its own")
            seen.add(where)
            raw = await read_record(transport, consumer, where,
                                    named_by=steps[-1].at if steps else None)
            step = _step(raw, app, subs)
            if step.came_from is None and not steps:
                raise ExplainError(
                    f"{where} has no {LINEAGE_HEADER} header: was lineage on when it was "
                    "written? Start the app that writes it with lineage=True (or "
                    "AIOSTREAMS_LINEAGE=true); records written before keep none")
            if steps and answers is not None:
                step.answers = list(answers(where))
            steps.append(step)
            where = step.came_from
        return steps
    finally:
        await consumer.stop()


def _step(raw: RawRecord, app: App | None, subs: list[SubTopology]) -> Step:
    at = Origin(raw.topic, raw.partition, raw.offset)
    try:
        came_from = origin_of(raw.headers)
    except LineageError as e:
        raise ExplainError(f"{at}: {e}; it was not written by aiostreams' lineage") from None
    key = _key_decoder(raw.topic, app, subs)(raw.key)
    step = Step(at, raw.timestamp, key, came_from)
    if came_from is not None and app is not None:
        step.made = made_by(subs, came_from.topic, raw.topic)
    return step


def _key_decoder(topic: str, app: App | None, subs: Sequence[SubTopology]) -> Decoder:
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
        raise ExplainError(f"topic {at.topic!r} does not exist on {transport.url}{whose}")
    if not 0 <= at.partition < count:
        raise ExplainError(f"topic {at.topic!r} has {count} partition(s); there is no "
                           f"partition {at.partition}{whose}")
    start = (await consumer.beginning_offsets([tp]))[tp]
    end = (await consumer.end_offsets([tp]))[tp]
    if at.offset >= end:
        raise ExplainError(f"{at} is not found: offset {at.offset} is past the end of "
                           f"{tp} (its next offset is {end}){whose}")
    if at.offset < start:
        raise ExplainError(
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


def _no_record(at: Origin, tp: TopicPartition, whose: str) -> ExplainError:
    return ExplainError(
        f"{at} is not found: {tp} holds no record at offset {at.offset} (compacted away, "
        f"a transaction marker, or an aborted transaction's record){whose}")


def recorded_answers(where: str) -> Answers:
    """The answers of the recording in directory ``where``, by source record."""
    try:
        recording = Recording.open(where)
    except FileNotFoundError as e:
        raise ExplainError(str(e)) from None
    return lambda at: recording.answers_for(at.topic, at.partition, at.offset)


# -- showing it ---------------------------------------------------------------------


def render_text(steps: Sequence[Step]) -> str:
    lines = []
    for step in steps:
        line = f"{step.at}  key={show(step.key)}  {timestamp(step.timestamp)}"
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


def render_json(steps: Sequence[Step]) -> str:
    return json.dumps({"steps": [_step_json(s) for s in steps]}, ensure_ascii=False,
                      default=str)


def _step_json(step: Step) -> dict[str, Any]:
    data: dict[str, Any] = {
        "topic": step.at.topic, "partition": step.at.partition, "offset": step.at.offset,
        "timestamp": step.timestamp, "key": to_json(step.key),
        "came_from": None if step.came_from is None else step.came_from._asdict(),
    }
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
