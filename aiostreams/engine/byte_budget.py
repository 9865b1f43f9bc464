"""A task's byte budget: how much memory its reorder buffer may hold before it stops.

The reorder buffer's capacity is a count of records, deliberately large (tens of
thousands) so that one slow record does not stall the records behind it; what bounds the
memory a task holds is this budget instead. It counts what the reorder buffer holds, as
the memory the records cost, not only their serialized bytes:

* every issued input record, until it retires (executing, waiting for its key, or finished
  and waiting behind an older record): key + value + headers, plus
  :data:`RECORD_OVERHEAD_BYTES` for the Python objects around them;
* the outputs of a finished slot (records to produce, bytes of external results), from
  the moment it finishes until it retires: key + value + headers of each, plus
  :data:`OUTPUT_OVERHEAD_BYTES` per output.

Records waiting in the partition queues are bounded by count instead
(``max_buffered_per_partition``, and the one fetch that may land on top of it), and a
record the inline path runs and retires at once is never counted: the synchronous fast
path pays nothing for the budget.

When the held bytes reach the limit the task stops issuing records into the reorder
buffer and pauses fetching for all of its partitions (back-pressure); both resume once
retirement brings the held bytes below the limit. What is admitted after the limit is
reached is therefore bounded and small: the one record whose issue reached it, and the
outputs of the records that were executing then (at most ``max_concurrency`` of them),
counted when they finish. Records fetched meanwhile wait in the partition queues, bounded
by count, and cost their raw bytes plus about half the record overhead (no slot yet).
The budget stops at the limit rather than pausing before it: what a fetch brings is not
known before it lands, and stopping the issue loop makes the overshoot one record instead
of a fetch. Not counted either: the asyncio task and frames of each executing record
(about 1.5 KB, measured as below; at most ``max_concurrency`` of them, 1.5 MB a task at the
default 1,000), which last only while it executes.

Invariant (asserted): the held bytes never go below zero.
"""

from __future__ import annotations

from collections.abc import Iterable

from aiostreams.runtime.external_record import ExternalRecord
from aiostreams.types import OutgoingRecord, RawRecord

RECORD_OVERHEAD_BYTES = 544
"""Memory an issued record holds beyond its key, value and header bytes, until it retires.

Measured with tracemalloc (CPython 3.11, 64-bit) for records waiting in the reorder buffer
behind a stuck one, ~60-byte JSON values and 10 KB ones alike (RSS agrees within 3%):
about 515 bytes a record: the slot (176), the :class:`~aiostreams.types.RawRecord` with
its offset, timestamp and the headers of its key and value ``bytes`` (~210), the slot's
outputs list (56), its sequence number and its held-bytes count (32 each: ints past 256
are objects), its entry in the buffer's deque (8). Rounded up to 544; the tasks of the
records executing (at most ``max_concurrency``) come on top and are not counted."""

OUTPUT_OVERHEAD_BYTES = 160
"""Memory a buffered output holds beyond its key, value and header bytes, until its slot
retires. Measured as above at 105-135 bytes an output (one to three outputs a record)
when the key serde passes the input's key through: the
:class:`~aiostreams.types.OutgoingRecord` (80), the header of its value's ``bytes`` (33),
its place in the slot's outputs list (8, in steps of 32); 40 more when the key is
serialized into a ``bytes`` of its own. Rounded up to 160."""


def input_cost(raw: RawRecord) -> int:
    """Memory an issued record holds: key, value and headers, plus the record overhead."""
    size = RECORD_OVERHEAD_BYTES + len(raw.key or b"") + len(raw.value or b"")
    for name, value in raw.headers:
        size += len(name) + len(value or b"")
    return size


def outputs_cost(outputs: Iterable[OutgoingRecord | ExternalRecord]) -> int:
    """Memory a slot's buffered outputs hold: keys and values that are bytes or str, and
    the output overhead each (an external result of another type counts only its overhead:
    its input was counted already)."""
    size = 0
    for out in outputs:  # once per finished slot: exact type checks, no isinstance
        size += OUTPUT_OVERHEAD_BYTES
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
        """The held bytes reached the limit: issuing stops and fetching should pause."""
        return self.held >= self.limit
