"""A replay's inputs: source records read from a broker by offsets or by time, or from a
recorded input file.

**Ranges.** ``topic:partition:start-end`` names the records of one partition from offset
``start`` to ``end``, both included (``topic:partition:start-`` to the end as it is when
read). A time range keeps the records of every partition of the given topics with
``since <= timestamp < until``, read from the beginning (a replay is a batch job: reading
the partition is simpler and exact, where an offsets-for-times lookup is only a start).

**Input files.** ``inputs.jsonl`` in a recording (or replay output) directory: one record
per line (``topic``, ``partition``, ``offset``, ``timestamp``, ``key`` and ``value`` in
base64 or null, ``headers`` as ``[name, base64 | null]`` pairs). A replay writes the inputs
it read there, so a second replay can take the same records from the files.

Invariant: what :func:`read_ranges` returns is in offset order per partition, with no
offset twice.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from aiostreams.transport import transport_for_url
from aiostreams.transport.base import Transport
from aiostreams.types import RawRecord, TopicPartition

__all__ = ["INPUTS_FILE", "InputRange", "load_inputs", "read_ranges", "read_times",
           "save_inputs"]

INPUTS_FILE = "inputs.jsonl"
POLL = 0.5
"""Seconds one fetch waits before the end condition is looked at again."""

_RANGE = re.compile(r"^(?P<topic>.+):(?P<partition>\d+):(?P<start>\d+)-(?P<end>\d*)$")


@dataclass(frozen=True)
class InputRange:
    """Offsets ``start`` to ``end`` (included; None: to the end) of one partition."""

    topic: str
    partition: int
    start: int
    end: int | None

    @classmethod
    def parse(cls, text: str) -> InputRange:
        match = _RANGE.match(text)
        if match is None:
            raise ValueError(f"expected TOPIC:PARTITION:START-END (offsets, both included; "
                             f"END may be left out: to the end), got {text!r}")
        end = int(match["end"]) if match["end"] else None
        start = int(match["start"])
        if end is not None and end < start:
            raise ValueError(f"{text!r}: the range ends before it starts")
        return cls(match["topic"], int(match["partition"]), start, end)


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def save_inputs(directory: str | Path, records: Iterable[RawRecord]) -> int:
    """Write ``records`` to ``directory/inputs.jsonl`` (replacing it); returns how many."""
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    count = 0
    with open(path / INPUTS_FILE, "w", encoding="utf-8") as out:
        for r in records:
            out.write(json.dumps({
                "topic": r.topic, "partition": r.partition, "offset": r.offset,
                "timestamp": r.timestamp, "key": _b64(r.key), "value": _b64(r.value),
                "headers": [[name, _b64(value)] for name, value in r.headers]},
                separators=(",", ":")) + "\n")
            count += 1
    return count


def load_inputs(directory: str | Path) -> list[RawRecord]:
    """The records of ``directory/inputs.jsonl``; FileNotFoundError saying what to give
    when there is none."""
    path = Path(directory) / INPUTS_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f"no recorded inputs in {directory} (no {INPUTS_FILE}): give source offsets "
            "(--from TOPIC:PARTITION:START-END) or a time range (--since/--until), or save "
            "the inputs there (aiostreams.replay.inputs.save_inputs)")
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line:
            d = json.loads(line)
            records.append(RawRecord(
                d["topic"], int(d["partition"]), int(d["offset"]), float(d["timestamp"]),
                _unb64(d["key"]), _unb64(d["value"]),
                tuple((str(name), _unb64(value)) for name, value in d["headers"])))
    return records


async def read_ranges(broker: Transport | str,
                      ranges: Sequence[InputRange]) -> list[RawRecord]:
    """The records of ``ranges`` on ``broker`` (a transport, or a broker URL such as
    ``memory://name`` or ``kafka://host:port`` with default client options); a range past
    the partition's end stops at the end as it was when reading began. Cancellation:
    stops reading."""
    transport = transport_for_url(broker) if isinstance(broker, str) else broker
    consumer = transport.consumer(None, client_id="aiostreams-replay")
    await consumer.start()
    try:
        out: list[RawRecord] = []
        for rng in ranges:
            tp = TopicPartition(rng.topic, rng.partition)
            consumer.assign([tp])
            ends = await consumer.end_offsets([tp])
            begin = (await consumer.beginning_offsets([tp]))[tp]
            stop = ends[tp] if rng.end is None else min(ends[tp], rng.end + 1)
            start = max(rng.start, begin)
            if start >= stop:
                continue
            consumer.seek(tp, start)
            while True:
                batch = await consumer.getmany(POLL)
                for record in batch.get(tp, ()):
                    if start <= record.offset < stop:
                        out.append(record)
                if await consumer.position(tp) >= stop:
                    break
        return _unique(out)
    finally:
        await consumer.stop()


async def read_times(broker: Transport | str, topics: dict[str, int], since: float | None,
                     until: float | None) -> list[RawRecord]:
    """The records of every partition of ``topics`` (name -> partition count) with
    ``since <= timestamp < until`` (None: unbounded)."""
    ranges = [InputRange(topic, p, 0, None) for topic, count in topics.items()
              for p in range(count)]
    return [r for r in await read_ranges(broker, ranges)
            if (since is None or r.timestamp >= since)
            and (until is None or r.timestamp < until)]


def _unique(records: list[RawRecord]) -> list[RawRecord]:
    """In offset order per partition, each offset once (overlapping ranges)."""
    seen: dict[tuple[str, int, int], RawRecord] = {}
    for r in records:
        seen[(r.topic, r.partition, r.offset)] = r
    return [seen[k] for k in sorted(seen)]
