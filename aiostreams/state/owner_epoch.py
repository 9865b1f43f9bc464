"""Owner epochs: which owner of a task wrote a changelog record, so a stale one is ignored.

A task changes hands only between group generations: whoever owns it now took it in a later
generation than every owner before it. Each changelog record carries, in the header
:data:`OWNER_HEADER`, the generation in which its writer took the task (8 bytes, big-endian,
signed; -1 for a writer with no group). A writer that lost the task without knowing it yet -
a process frozen past its session timeout, whose producer still held records when it froze
- can append records *after* its successor's. Such a record has a lower epoch than one
before it in the same partition: it is a **stale write**, and a replay skips it
(:class:`EpochFence`), just as a Raft follower ignores a deposed leader's older term.

Records with no owner header (written before it existed, or by another tool) are applied
and neither raise nor lower the fence. Equal epochs are one owner's (or a restarted static
member's, which Kafka keeps in its generation): never fenced.

Invariant (:class:`EpochFence`): ``high`` never decreases; a record is skipped exactly when
its epoch is below ``high``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Protocol, TypeVar

from aiostreams.types import Headers

__all__ = ["OWNER_HEADER", "EpochFence", "owner_headers", "record_epoch"]

OWNER_HEADER: Final = "aiostreams.owner"
NO_EPOCH: Final = -1


def owner_headers(epoch: int) -> Headers:
    """The header a changelog record written by an owner of ``epoch`` carries."""
    return ((OWNER_HEADER, epoch.to_bytes(8, "big", signed=True)),)


def record_epoch(headers: Headers) -> int | None:
    """The owner epoch in a record's ``headers``, or None when it has none (or a malformed
    one, which a replay treats the same: applied, fence unchanged)."""
    for name, value in headers:
        if name == OWNER_HEADER and value is not None and len(value) == 8:
            return int.from_bytes(value, "big", signed=True)
    return None


class _HasHeaders(Protocol):
    @property
    def headers(self) -> Headers: ...


R = TypeVar("R", bound=_HasHeaders)


class EpochFence:
    """Skips the stale writes of a changelog partition during a replay (module doc).
    ``high`` starts at what the checkpoint recorded for the records before the replay's
    start (:data:`NO_EPOCH` from the changelog's beginning)."""

    def __init__(self, high: int = NO_EPOCH) -> None:
        self.high = high
        self.skipped = 0
        self._last: Headers | None = None  # the headers of the last record admitted

    def admits(self, headers: Headers) -> bool:
        """Whether a record with ``headers`` is applied (False: a stale write, counted)."""
        if headers == self._last or not headers:
            return True  # the same epoch as the last record admitted (or none at all)
        epoch = record_epoch(headers)
        if epoch is None:
            return True
        if epoch < self.high:
            self.skipped += 1
            return False
        self.high = epoch
        self._last = headers
        return True

    def admitted(self, records: Sequence[R]) -> Sequence[R]:
        """The records of ``records`` that are applied, in order (``records`` itself when
        all are)."""
        admits = self.admits
        for i, record in enumerate(records):
            if not admits(record.headers):
                return [*records[:i], *(r for r in records[i + 1:] if admits(r.headers))]
        return records
