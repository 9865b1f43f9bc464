"""The recording of service answers: its format, and its reader.

One :class:`RecordedAnswer` is what one service call of one record got: the record's
**place** (:mod:`aiostreams.runtime.origin`): its **origin** (``topic``, ``partition``,
``offset``: the source record that entered the app, whose processing led to the call) and
``path`` (empty for the source record itself; for a record the app read back from a
repartition topic, which of the records that source led to, e.g. ``"0"`` or ``"1.0"``),
``index`` (the call's number among that record's calls to that service: 0, 1, ...),
``request`` (a stable fingerprint of the call's arguments when the step knows them: its
``coalesce_by`` key, else None), ``value`` (the answer, pickled) or ``error`` (``"Type:
message"`` when the call failed for good) and ``latency`` (seconds the answer took).

**Files.** A recording is a directory of segments ``answers-<n>.jsonl`` (``n`` counting up
from 1, zero-padded), one JSON object per line with the fields above; ``value`` is the
pickle in base64; ``path`` is left out when empty - as the previous version wrote every
line, keying a record read back from a repartition topic by its own position there, which
a replay finds only as that version did (:mod:`aiostreams.replay.player`). Segments are
appended to in order and a new one starts past a size; the writer
(:mod:`aiostreams.replay.recorder`) drops the oldest segments once the directory passes its
byte cap, so a recording holds the *latest* answers. Lines of one key
(``service|topic|partition|offset|index``, then ``|path`` when there is one) may repeat - a
record processed again after a crash records again -: the last one read wins, as in a
compacted topic.

**Why pickle.** A service answer is any Python object a step's function returns (a dict, a
pydantic model, a tuple, a dataclass); services declare no serde, and JSON would give a
replay a ``dict`` where the first run had a model. Pickle gives the replay back the very
object. The price: a recording is code, and must be trusted like the app's own code (read
only recordings you made). An answer that cannot be pickled is recorded with ``value``
None and ``error`` ``"Unpicklable: ..."``; a replay reports it as missing.

Invariant: :meth:`Recording.answer` returns the last line written for its key, and
:meth:`Recording.answers_for` a place's answers ordered by (service, index).
"""

from __future__ import annotations

import base64
import json
import pickle
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii as _quote
from pathlib import Path
from typing import Any

__all__ = ["SEGMENT_GLOB", "RecordedAnswer", "Recording", "answer_key", "segment_name"]

SEGMENT_GLOB = "answers-*.jsonl"


def segment_name(number: int) -> str:
    """The file name of segment ``number`` (sorts in number order)."""
    return f"answers-{number:08d}.jsonl"


def answer_key(service: str, topic: str, partition: int, offset: int, index: int,
               path: str = "") -> str:
    """The key of an answer, as the compacted topic would carry it."""
    own = f"{service}|{topic}|{partition}|{offset}|{index}"
    return f"{own}|{path}" if path else own


@dataclass(slots=True)
class RecordedAnswer:
    """What one service call of one source record got (see the module docstring). A value:
    not changed once made (not frozen only because a frozen dataclass is several times
    slower to make, and the recorder makes one per call)."""

    service: str
    topic: str
    partition: int
    offset: int
    index: int
    request: str | None
    value: bytes | None
    error: str | None
    latency: float
    path: str = ""

    @property
    def key(self) -> str:
        return answer_key(self.service, self.topic, self.partition, self.offset, self.index,
                          self.path)

    def answer(self) -> Any:
        """The recorded answer as the call returned it (unpickled). Raises ``ValueError``
        for a failed call (see :attr:`error`)."""
        if self.error is not None or self.value is None:
            raise ValueError(f"the call {self.key} has no value: it failed with {self.error}")
        return pickle.loads(self.value)

    def to_line(self) -> str:
        """One JSON line (no newline); written by hand, as ``json.dumps`` of the fields would
        (the recorder writes one per call; a test checks both agree)."""
        value = "null" if self.value is None else \
            '"' + base64.b64encode(self.value).decode() + '"'
        request = "null" if self.request is None else _quote(self.request)
        error = "null" if self.error is None else _quote(self.error)
        path = f',"path":{_quote(self.path)}' if self.path else ""
        return (f'{{"service":{_quote(self.service)},"topic":{_quote(self.topic)},'
                f'"partition":{self.partition:d},"offset":{self.offset:d},'
                f'"index":{self.index:d},"request":{request},"value":{value},'
                f'"error":{error},"latency":{float(self.latency)!r}{path}}}')

    @classmethod
    def from_line(cls, line: str) -> RecordedAnswer:
        d = json.loads(line)
        value = d["value"]
        return cls(str(d["service"]), str(d["topic"]), int(d["partition"]),
                   int(d["offset"]), int(d["index"]), d["request"],
                   None if value is None else base64.b64decode(value), d["error"],
                   float(d["latency"]), str(d.get("path") or ""))


class Recording:
    """The answers of a recording directory, read at :meth:`open` (all of them in memory:
    a recording is bounded by its writer's byte cap)."""

    def __init__(self, answers: dict[str, RecordedAnswer]) -> None:
        self._answers = answers
        self._by_record: dict[tuple[str, int, int, str], list[RecordedAnswer]] = {}
        for a in answers.values():
            self._by_record.setdefault((a.topic, a.partition, a.offset, a.path),
                                       []).append(a)
        for found in self._by_record.values():
            found.sort(key=lambda a: (a.service, a.index))

    @classmethod
    def open(cls, where: str | Path) -> Recording:
        """Read the recording in directory ``where``. A segment cut short by a crash (a
        last line without its newline) loses that line only. Raises ``FileNotFoundError``
        when ``where`` is not a directory."""
        directory = Path(where)
        if not directory.is_dir():
            raise FileNotFoundError(
                f"no recording at {directory}: give the directory the app recorded to "
                "(its record_services_dir setting)")
        answers: dict[str, RecordedAnswer] = {}
        for segment in sorted(directory.glob(SEGMENT_GLOB)):
            text = segment.read_text(encoding="utf-8")
            lines = text.split("\n")
            for line in lines[:-1]:  # the last piece is "" or a line cut short
                if line:
                    answer = RecordedAnswer.from_line(line)
                    answers[answer.key] = answer
        return cls(answers)

    def __len__(self) -> int:
        return len(self._answers)

    def answers(self) -> list[RecordedAnswer]:
        """Every answer (the last per key), in no particular order."""
        return list(self._answers.values())

    def answers_for(self, topic: str, partition: int, offset: int,
                    path: str = "") -> list[RecordedAnswer]:
        """The answers the calls of the record at place (topic, partition, offset, path)
        got, ordered by service then index; [] when none was recorded."""
        return list(self._by_record.get((topic, partition, offset, path), ()))

    def paths_from(self, topic: str, partition: int, offset: int) -> list[str]:
        """The paths answers were recorded at for the source record (topic, partition,
        offset), sorted ("" for the source record itself)."""
        return sorted(p for (t, n, o, p) in self._by_record
                      if (t, n, o) == (topic, partition, offset))

    def answer(self, service: str, topic: str, partition: int, offset: int,
               index: int, path: str = "") -> RecordedAnswer | None:
        """The answer call ``index`` of the record at that place got from ``service``, or
        None."""
        return self._answers.get(answer_key(service, topic, partition, offset, index, path))
