"""The lifecycle, metrics and failure error shared by the table sinks (Delta and Parquet).

``CREATED → RUNNING → STOPPED``; ``RUNNING → FAILED → STOPPED`` when a write fails;
``CREATED → FAILED/STOPPED`` when starting fails. :func:`move_to` is the one place a sink's
state changes, and it refuses any other transition.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import NoReturn

from aiostreams.errors import AiostreamsError

__all__ = ["SinkFailedError", "SinkMetrics", "SinkState", "move_to", "raise_write_failure"]


class SinkState(enum.Enum):
    """``CREATED → RUNNING → STOPPED``; ``RUNNING → FAILED → STOPPED`` when a write fails."""

    CREATED = "created"
    RUNNING = "running"
    FAILED = "failed"
    STOPPED = "stopped"


_TRANSITIONS: dict[SinkState, frozenset[SinkState]] = {
    SinkState.CREATED: frozenset({SinkState.RUNNING, SinkState.FAILED, SinkState.STOPPED}),
    SinkState.RUNNING: frozenset({SinkState.FAILED, SinkState.STOPPED}),
    SinkState.FAILED: frozenset({SinkState.STOPPED}),
    SinkState.STOPPED: frozenset(),
}


def move_to(name: str, current: SinkState, state: SinkState) -> SinkState:
    """``state`` if ``current → state`` is a lifecycle transition; else RuntimeError naming
    the sink ``name``."""
    if state not in _TRANSITIONS[current]:
        raise RuntimeError(f"sink {name!r}: {current.value} -> {state.value} is not a "
                           "lifecycle transition")
    return state


class SinkFailedError(AiostreamsError):
    """A write of a table sink failed earlier; the sink accepts no more flushes."""


def raise_write_failure(sink: object, rows: int, error: BaseException) -> NoReturn:
    """Raise what a flush of ``rows`` row(s) by ``sink`` raises when its write raised
    ``error``: our own errors and BaseExceptions (cancellation) as they are, any other
    error as a :class:`SinkFailedError` naming the sink."""
    if isinstance(error, Exception) and not isinstance(error, AiostreamsError):
        raise SinkFailedError(f"{sink!r}: writing {rows} row(s) failed: "
                              f"{type(error).__name__}: {error}") from error
    raise error


@dataclass
class SinkMetrics:
    rows_added: int = 0  # taken by flushes (replays excluded)
    rows_replayed: int = 0  # dropped by add() or flush(): already durable
    rows_written: int = 0
    files_written: int = 0
    batches: int = 0
    flush_seconds: float = 0.0  # total time commits waited for flushes
    last_flush_seconds: float = 0.0  # the last flush that wrote a batch
    commit_conflicts: int = 0  # Delta commits retried after another writer's commit
