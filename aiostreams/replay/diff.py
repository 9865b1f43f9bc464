"""The difference between two runs' outputs (``aiostreams diff RUN_A RUN_B``).

**Matching.** Records are matched by (output topic, key, source record): the key's bytes
and the input record, in the recorded run's offsets, whose processing produced them. That
is stable across versions and ``max_in_flight``: order across keys (and partitions) does not
matter, and a record is compared with the one *the same input* produced, not with whatever
came next. Within one (topic, key, source) group - an input producing several records under
one key - records are matched in order: the i-th of A with the i-th of B. Records without a
source are grouped by (topic, key) and matched in order, the order of each key's records
being what the serial run gives.

**Compared.** The value's bytes; headers only when asked (``headers=True``): a dead letter's
headers name an exception and a time, which differ between any two runs.

Each unmatched record of A is *removed*, of B *added*; a matched pair with different bytes
is *changed*. Invariant: per topic, ``unchanged + changed + removed`` is A's record count and
``unchanged + changed + added`` B's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiostreams.replay.outputs import OutputRecord

__all__ = ["Difference", "RunDiff", "TopicCounts", "diff_runs"]

Group = tuple[str, bytes | None, tuple[str, int, int] | None]


@dataclass(frozen=True)
class Difference:
    """One added, removed or changed record (``a``/``b``: the records of each run)."""

    kind: str  # "added" | "removed" | "changed"
    topic: str
    a: OutputRecord | None
    b: OutputRecord | None

    @property
    def source(self) -> tuple[str, int, int] | None:
        record = self.a if self.a is not None else self.b
        assert record is not None
        return record.source

    def to_json(self) -> dict[str, Any]:
        record = self.a if self.a is not None else self.b
        assert record is not None
        return {"kind": self.kind, "topic": self.topic, "key": record.key_text,
                "source": None if record.source is None else list(record.source),
                "a": None if self.a is None else self.a.to_json(),
                "b": None if self.b is None else self.b.to_json()}

    def line(self) -> str:
        record = self.a if self.a is not None else self.b
        assert record is not None
        where = ("?" if record.source is None
                 else f"{record.source[0]}[{record.source[1]}]@{record.source[2]}")
        a = "-" if self.a is None else _show(self.a.value_text)
        b = "-" if self.b is None else _show(self.b.value_text)
        return (f"{self.kind:8} {self.topic} key={_show(record.key_text)} from {where}: "
                f"{a} -> {b}")


@dataclass
class TopicCounts:
    a: int = 0
    b: int = 0
    unchanged: int = 0
    changed: int = 0
    added: int = 0
    removed: int = 0


@dataclass
class RunDiff:
    """Per topic counts, and every difference in topic, key, source order."""

    topics: dict[str, TopicCounts] = field(default_factory=dict)
    differences: list[Difference] = field(default_factory=list)

    @property
    def equal(self) -> bool:
        return not self.differences

    def to_json(self) -> dict[str, Any]:
        return {"equal": self.equal,
                "topics": {t: vars(c) for t, c in self.topics.items()},
                "differences": [d.to_json() for d in self.differences]}

    def summary(self, examples: int) -> str:
        lines = []
        for topic, c in self.topics.items():
            lines.append(f"{topic}: {c.a} -> {c.b} records; {c.changed} changed, "
                         f"{c.added} added, {c.removed} removed, {c.unchanged} unchanged")
        shown = self.differences[:examples]
        lines.extend("  " + d.line() for d in shown)
        if len(self.differences) > len(shown):
            lines.append(f"  ... and {len(self.differences) - len(shown)} more")
        lines.append("equal" if self.equal else f"{len(self.differences)} difference(s)")
        return "\n".join(lines)


def _show(value: Any) -> str:
    text = repr(value) if not isinstance(value, str) else value
    return text if len(text) <= 120 else text[:117] + "..."


def _groups(records: Sequence[OutputRecord]) -> dict[Group, list[OutputRecord]]:
    groups: dict[Group, list[OutputRecord]] = {}
    for r in records:
        groups.setdefault((r.topic, r.key, r.source), []).append(r)
    return groups


def _sort_key(group: Group) -> tuple[str, bytes, tuple[str, int, int]]:
    topic, key, source = group
    return topic, key or b"", source or ("", -1, -1)


def diff_runs(a: Mapping[str, Sequence[OutputRecord]], b: Mapping[str, Sequence[OutputRecord]],
              *, headers: bool = False) -> RunDiff:
    """Compare run ``a``'s outputs with ``b``'s (per topic, as :func:`~aiostreams.replay.
    outputs.read_outputs` gives them); see the module docstring."""
    result = RunDiff()
    for topic in sorted(set(a) | set(b)):
        counts = result.topics[topic] = TopicCounts(len(a.get(topic, ())),
                                                    len(b.get(topic, ())))
        ga, gb = _groups(a.get(topic, ())), _groups(b.get(topic, ()))
        for group in sorted(set(ga) | set(gb), key=_sort_key):
            ra, rb = ga.get(group, []), gb.get(group, [])
            for i in range(max(len(ra), len(rb))):
                x = ra[i] if i < len(ra) else None
                y = rb[i] if i < len(rb) else None
                if x is None:
                    counts.added += 1
                    result.differences.append(Difference("added", topic, None, y))
                elif y is None:
                    counts.removed += 1
                    result.differences.append(Difference("removed", topic, x, None))
                elif x.value != y.value or (headers and x.headers != y.headers):
                    counts.changed += 1
                    result.differences.append(Difference("changed", topic, x, y))
                else:
                    counts.unchanged += 1
        assert counts.unchanged + counts.changed + counts.removed == counts.a
        assert counts.unchanged + counts.changed + counts.added == counts.b
    return result
