"""A run's outputs, as files: what ``aiostreams replay`` writes and ``aiostreams diff`` reads.

A run directory holds ``outputs/<topic>.jsonl`` per output topic, one record per line in
the topic's partition-then-offset order (so in production order per key), and
``run.json`` (what was replayed, the counts, the calls missing from the recording). A
record's line::

    {"topic": "alerts", "partition": 0, "offset": 3, "timestamp": 1700000000.5,
     "key": "<base64>", "value": "<base64>", "headers": [["name", "<base64>"]],
     "source": ["payments", 1, 41], "key_text": "c-17", "value_text": {"score": 0.93}}

``key``/``value``/``headers`` are the bytes produced (what a diff compares); ``key_text``
and ``value_text`` the same decoded with the topic's serdes, for people; ``source`` the
input record (in the recorded run's offsets) whose processing produced it, or null when
the record carried no origin (see :mod:`aiostreams.replay.player`).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiostreams.types import Headers

__all__ = ["OUTPUTS_DIR", "RUN_FILE", "OutputRecord", "read_outputs", "write_outputs"]

OUTPUTS_DIR = "outputs"
RUN_FILE = "run.json"


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


@dataclass(frozen=True)
class OutputRecord:
    """One record a run produced to an output topic (see the module docstring)."""

    topic: str
    partition: int
    offset: int
    timestamp: float
    key: bytes | None
    value: bytes | None
    headers: Headers
    source: tuple[str, int, int] | None
    key_text: Any = None
    value_text: Any = None

    def to_json(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "offset": self.offset,
                "timestamp": self.timestamp, "key": _b64(self.key),
                "value": _b64(self.value),
                "headers": [[name, _b64(value)] for name, value in self.headers],
                "source": None if self.source is None else list(self.source),
                "key_text": self.key_text, "value_text": self.value_text}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> OutputRecord:
        source = d.get("source")
        return cls(str(d["topic"]), int(d["partition"]), int(d["offset"]),
                   float(d["timestamp"]), _unb64(d["key"]), _unb64(d["value"]),
                   tuple((str(n), _unb64(v)) for n, v in d["headers"]),
                   None if source is None else (str(source[0]), int(source[1]),
                                                int(source[2])),
                   d.get("key_text"), d.get("value_text"))


def write_outputs(directory: str | Path, records: Iterable[OutputRecord],
                  topics: Iterable[str], run: dict[str, Any]) -> None:
    """Write ``records`` to ``directory/outputs/<topic>.jsonl`` (every topic of
    ``topics`` gets a file, empty if it got nothing) and ``run`` to ``run.json``."""
    out = Path(directory) / OUTPUTS_DIR
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.jsonl"):
        old.unlink()
    lines: dict[str, list[str]] = {topic: [] for topic in topics}
    for r in records:
        lines.setdefault(r.topic, []).append(json.dumps(r.to_json(), default=str,
                                                        ensure_ascii=False))
    for topic, text in lines.items():
        (out / f"{topic}.jsonl").write_text("".join(t + "\n" for t in text), encoding="utf-8")
    (Path(directory) / RUN_FILE).write_text(json.dumps(run, indent=2, default=str) + "\n",
                                            encoding="utf-8")


def read_outputs(directory: str | Path) -> dict[str, list[OutputRecord]]:
    """Per output topic, its records in file order. FileNotFoundError when ``directory``
    holds no run."""
    out = Path(directory) / OUTPUTS_DIR
    if not out.is_dir():
        raise FileNotFoundError(f"{directory} holds no run's outputs (no {OUTPUTS_DIR}/): "
                                "give a directory aiostreams replay --out wrote")
    runs: dict[str, list[OutputRecord]] = {}
    for path in sorted(out.glob("*.jsonl")):
        runs[path.stem] = [OutputRecord.from_json(json.loads(line))
                           for line in path.read_text(encoding="utf-8").splitlines() if line]
    return runs
