"""Noticing a stuck partition: a task whose reorder-buffer head has not retired for long.

A record at the head of a task's reorder buffer holds back its partition's commit (and,
with a full buffer, its input): an async call that never returns stops the partition for
good while everything else looks busy. :class:`StallWatch` samples each task's head
(``StreamTask.oldest_unretired``) at every check; a head still there ``after`` seconds after
it was first seen is *stalled*: logged once as a warning naming the task and the record, and
listed by :attr:`StallWatch.stalls` (``/health`` reports the app degraded while any is).

Sampling, not instrumenting the engine: the worker checks once per commit interval, so a
stall is noticed between ``after`` and ``after`` + one interval after the record became the
head. Pure bookkeeping, no I/O; time comes from the caller (the worker's clock), so tests
drive it with a manual clock.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from aiostreams.types import RawRecord

log = logging.getLogger("aiostreams.stall")

__all__ = ["Stall", "StallWatch"]


class WatchedTask(Protocol):
    """What the watch reads of a task (``StreamTask`` has it)."""

    @property
    def task_id(self) -> str: ...

    @property
    def oldest_unretired(self) -> RawRecord | None: ...


@dataclass(frozen=True)
class Stall:
    """A task whose head record has not retired for ``seconds``."""

    task_id: str
    topic: str
    partition: int
    offset: int
    seconds: float

    @property
    def where(self) -> str:
        return f"{self.topic}[{self.partition}]@{self.offset}"


class StallWatch:
    """Tracks, per task, the head record and when it was first seen at the head.

    Invariants: a task's entry names the record at its head at the last check (tasks gone,
    or with nothing in flight, have none); a head is warned about at most once; ``stalls``
    lists exactly the heads first seen at least ``after`` seconds before the last check.
    """

    def __init__(self, after: float | None) -> None:
        """``after``: seconds a head may stay before it is a stall; None turns the watch
        off (``check`` does nothing)."""
        if after is not None and after <= 0:
            raise ValueError(f"stuck_record_warning must be > 0 seconds, got {after}")
        self.after = after
        self._heads: dict[str, tuple[tuple[str, int, int], float, bool]] = {}
        self.stalls: list[Stall] = []

    def check(self, tasks: Iterable[WatchedTask], now: float) -> list[Stall]:
        """Sample every task's head at time ``now`` (monotonic seconds); returns (and keeps
        in :attr:`stalls`) the stalled ones, warning about each new one."""
        if self.after is None:
            return []
        heads: dict[str, tuple[tuple[str, int, int], float, bool]] = {}
        stalls = []
        for task in tasks:
            raw = task.oldest_unretired
            if raw is None:
                continue
            head = (raw.topic, raw.partition, raw.offset)
            seen_head, since, warned = self._heads.get(task.task_id, (head, now, False))
            if seen_head != head:
                since, warned = now, False
            assert since <= now, "the watch's clock went backwards"
            if now - since >= self.after:
                stall = Stall(task.task_id, *head, now - since)
                stalls.append(stall)
                if not warned:
                    log.warning(
                        "task %s: record %s has not retired for %.0f s (stuck_record_warning="
                        "%g s); its partition's commit waits for it. An async call that never "
                        "returns? Bound it with processing_timeout or Retry.timeout.",
                        stall.task_id, stall.where, stall.seconds, self.after)
                    warned = True
            heads[task.task_id] = (head, since, warned)
        self._heads = heads
        self.stalls = stalls
        return stalls

    def head_age(self, task_id: str, now: float) -> float | None:
        """Seconds (at ``now``, monotonic) since the record at ``task_id``'s head at the
        last check was first seen there; None when the task had nothing in flight then, or
        the watch is off. Sampled: up to one check interval behind the truth."""
        entry = self._heads.get(task_id)
        return None if entry is None else max(0.0, now - entry[1])
