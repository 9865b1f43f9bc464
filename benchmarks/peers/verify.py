"""Checks of a contender's output: count, per-key order, and commits ahead of the output.

Input record ``i`` has id ``i`` and, within its key, sequence number ``seq``
(:mod:`benchmarks.peers.workload`); every output carries both. For the first ``n`` inputs:

* **count**: every id ``< n`` has an output; how many are missing, how many duplicated;
* **per-key order**: walking each output partition in offset order, an output whose ``seq``
  is lower than one already seen for its key is a *key-order violation* (so ``0 2 1 3``
  has one, ``1 0 3 2`` two). A key split over several output partitions is counted apart;
* **commits ahead of the output** (single input partition, where a record's input offset is
  its id): the harness sampled, over the run, the group's committed offset ``C`` and, right
  after, the output's end offsets ``E``. An output at output offset ``>= E`` was produced
  after that sample; if its id is ``< C``, its input record had been committed before its
  processing finished — lost on a crash at that moment. Conservative (a record produced
  between the two reads is not counted), never a false positive.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import orjson

from benchmarks.peers.topics import OutputRecord


@dataclass(frozen=True)
class CommitSample:
    """The group's committed offsets of the input (by partition) and, read right after,
    the output's end offsets (by partition)."""

    at: float
    committed: dict[int, int]
    output_ends: dict[int, int]


@dataclass(frozen=True)
class Verdict:
    expected: int
    received: int
    missing: int
    duplicates: int
    key_order_violations: int
    split_keys: int
    commits_ahead: int | None
    """Records committed before their output existed (None: not measured)."""

    @property
    def complete(self) -> bool:
        return self.missing == 0

    @property
    def in_key_order(self) -> bool:
        return self.key_order_violations == 0 and self.split_keys == 0


def key_order_violations(outputs: Iterable[tuple[object, int]]) -> int:
    """How many of ``outputs`` — ``(key, seq)`` in output order — come after a higher
    ``seq`` of the same key."""
    highest: dict[object, int] = {}
    violations = 0
    for key, seq in outputs:
        before = highest.get(key, -1)
        if seq < before:
            violations += 1
        else:
            highest[key] = seq
    return violations


def commits_ahead(outputs: Iterable[tuple[int, int, int]],
                  samples: Sequence[CommitSample]) -> int:
    """How many ``(id, output partition, output offset)`` of a single-input-partition run
    were produced after a sample whose committed offset had already passed their id."""
    if not samples:
        return 0
    ordered = sorted(samples, key=lambda s: s.at)
    # committed offsets and output ends both only grow; a prefix maximum guards the former
    committed: list[int] = []
    best = -1
    for s in ordered:
        best = max(best, s.committed.get(0, -1))
        committed.append(best)
    ends_by_partition: dict[int, list[int]] = {}
    ahead = 0
    for record_id, partition, offset in outputs:
        ends = ends_by_partition.get(partition)
        if ends is None:
            ends = ends_by_partition[partition] = _running_max(
                [s.output_ends.get(partition, 0) for s in ordered])
        # the last sample that had not yet seen this output: ends[i] <= offset
        last = bisect.bisect_right(ends, offset) - 1
        if last >= 0 and committed[last] > record_id:
            ahead += 1
    return ahead


def verify(outputs: Sequence[OutputRecord], n: int,
           samples: Sequence[CommitSample] | None) -> Verdict:
    """The :class:`Verdict` on ``outputs`` (in (partition, offset) order) for inputs
    ``0 .. n-1``; ``samples`` is None when commits were not tracked."""
    decoded = [(r, orjson.loads(r.value)) for r in outputs]
    ids = [v["id"] for _, v in decoded if v["id"] < n]
    distinct = len(set(ids))
    partitions_of: dict[object, set[int]] = {}
    for r, _ in decoded:
        partitions_of.setdefault(r.key, set()).add(r.partition)
    return Verdict(
        expected=n, received=len(outputs), missing=n - distinct,
        duplicates=len(ids) - distinct,
        key_order_violations=key_order_violations((r.key, v["seq"]) for r, v in decoded),
        split_keys=sum(1 for ps in partitions_of.values() if len(ps) > 1),
        commits_ahead=None if samples is None else commits_ahead(
            ((v["id"], r.partition, r.offset) for r, v in decoded), samples))


def _running_max(values: list[int]) -> list[int]:
    out: list[int] = []
    best = 0
    for v in values:
        best = max(best, v)
        out.append(best)
    return out
