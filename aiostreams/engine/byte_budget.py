"""A task's byte budget: how many bytes of raw records it may hold before it stops fetching.

The reorder buffer's capacity is a count of records, deliberately large (tens of
thousands) so that one slow record does not stall the records behind it; what bounds the
memory a task holds is this budget instead. It counts, in raw (serialized) sizes, what the
reorder buffer holds:

* every issued input record, until it retires (executing, waiting for its key, or finished
  and waiting behind an older record);
* the outputs of a finished slot (records to produce, bytes of external results), from
  the moment it finishes until it retires.

Records waiting in the partition queues are bounded by count instead
(``max_buffered_per_partition``), and a record the inline path runs and retires at once is
never counted: the synchronous fast path pays nothing for the budget.

When the held bytes reach the limit the task pauses fetching for all of its partitions
(back-pressure); it resumes once retirement brings them below. A stuck record therefore
holds at most the budget plus what was already fetched when it was reached (one fetch, at
most ``max_buffered_per_partition`` records a partition) and those records' outputs.

Invariant (asserted): the held bytes never go below zero.
"""

from __future__ import annotations

from collections.abc import Iterable

from aiostreams.engine.external_sink import ExternalRecord
from aiostreams.types import OutgoingRecord, RawRecord


def raw_size(raw: RawRecord) -> int:
    """Bytes of a fetched record: key, value and headers."""
    size = len(raw.key or b"") + len(raw.value or b"")
    for name, value in raw.headers:
        size += len(name) + len(value or b"")
    return size


def outputs_size(outputs: Iterable[OutgoingRecord | ExternalRecord]) -> int:
    """Bytes of a slot's buffered outputs: keys and values that are bytes or str (an
    external result of another type counts zero: its input was counted already)."""
    size = 0
    for out in outputs:  # once per finished slot: exact type checks, no isinstance
        key, value = out.key, out.value
        if key.__class__ is bytes or key.__class__ is str:
            size += len(key)
        if value.__class__ is bytes or value.__class__ is str:
            size += len(value)
        if out.__class__ is OutgoingRecord and out.headers:
            for name, header in out.headers:
                size += len(name) + len(header or b"")
    return size


class ByteBudget:
    """Bytes held by one task against its limit (see the module docstring)."""

    __slots__ = ("held", "limit")

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"max_task_buffer_bytes must be >= 1, got {limit}")
        self.limit = limit
        self.held = 0

    def take(self, size: int) -> None:
        self.held += size

    def give(self, size: int) -> None:
        self.held -= size
        assert self.held >= 0, f"byte budget released {-self.held} bytes it never held"

    @property
    def exhausted(self) -> bool:
        """The held bytes reached the limit: fetching should pause."""
        return self.held >= self.limit
