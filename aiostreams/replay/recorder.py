"""The recorder: notes each service answer beside the record that got it, and writes the
answers of retired records to the recording's segment files.

Two halves, one object:

* a **tap** (:class:`~aiostreams.services.call_tap.CallTap`): an answer a step gets for a
  record is keyed by the record's place (:func:`~aiostreams.runtime.origin.place_of`: its
  own position, or for a record read back from a repartition topic the origin and path its
  header names - the app marks those records while it records), and buffered in the
  record's slot as an :class:`ExternalRecord` for the sink
  :data:`~aiostreams.runtime.external_record.RECORDED_ANSWERS`, its index taken when the
  call starts (so two concurrent calls of one record number in call order). Like any
  output it is released only when the record retires; a failed attempt's answers are
  discarded with its other outputs (a call retried then succeeding records the final
  answer), but those of the last attempt of a record dead-lettered or skipped are kept;
* an **external sink** (:class:`~aiostreams.runtime.sink_contract.ExternalSink`): the
  worker hands it the retired answers; it buffers their lines and appends them to the
  current segment when the worker flushes it, which every commit does once the buffer is
  big or old enough (:attr:`Recorder.backlogged`). It never holds an offset back longer:
  a source partition is committed no further than its oldest answer not yet written
  (:meth:`Recorder.pending_offset`), so a crash loses no retired record's answers.

**Bounded.** A segment is closed past ``max_bytes / SEGMENTS`` bytes; once the directory's
segments pass ``max_bytes``, the oldest are deleted: the recording keeps the latest
answers, about ``max_bytes`` of them. Writes go to the OS (no fsync): a host crash may
lose the last flushed lines; the reader drops a line cut short.

A call made outside a record (a punctuation's) is not recorded: it has no source record.
"""

from __future__ import annotations

import asyncio
import pickle
import time
from collections.abc import Awaitable, Callable, Hashable
from pathlib import Path
from typing import Any

from aiostreams.replay.recording import SEGMENT_GLOB, RecordedAnswer, segment_name
from aiostreams.runtime.external_record import RECORDED_ANSWERS, ExternalRecord
from aiostreams.runtime.origin import place_in
from aiostreams.runtime.slot import CURRENT_SLOT
from aiostreams.types import TopicPartition

__all__ = ["FLUSH_AGE", "FLUSH_BYTES", "SEGMENTS", "Recorder"]

SEGMENTS = 8
"""Segments the byte cap is spread over (what is dropped at a time: 1/8 of the cap)."""
FLUSH_BYTES = 256 * 1024
"""Buffered bytes from which the recorder asks the next commit to write them..."""
FLUSH_AGE = 1.0
"""...or seconds its oldest buffered answer has waited."""


class _Pending:
    """An answer not in yet: a call under way (holds its index)."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index


class Recorder:
    """Records service answers to the segment files in ``directory`` (see the module)."""

    def __init__(self, directory: str | Path, max_bytes: int) -> None:
        if max_bytes < SEGMENTS * 1024:
            raise ValueError(f"record_services_max_bytes must be at least {SEGMENTS * 1024} "
                             f"bytes; got {max_bytes}")
        self.name = RECORDED_ANSWERS
        self.directory = Path(directory)
        self.max_bytes = max_bytes
        self.segment_bytes = max_bytes // SEGMENTS
        self._lines: list[str] = []
        self._buffered = 0
        self._oldest: float | None = None  # monotonic time of the oldest buffered line
        self._pending: dict[TopicPartition, int] = {}  # lowest buffered offset per source
        self._writing: dict[TopicPartition, int] = {}  # ... of the lines being written
        self._segment = 0
        self._segment_size = 0
        self.recorded = 0  # answers written (a figure for tests and the status)
        self._sources: dict[tuple[str, int], TopicPartition] = {}

    # -- the tap ---------------------------------------------------------------------------

    async def answer(self, service: str, request: Hashable | None,
                     get: Callable[[], Awaitable[Any]]) -> Any:
        """``await get()``, noting its answer beside the running record (a call outside a
        record is not noted). Cancellation: the call is cancelled; nothing is noted."""
        slot = CURRENT_SLOT.get(None)
        raw = slot.raw if slot is not None else None
        if slot is None or raw is None:
            return await get()
        index = 0
        for o in slot.outputs:  # usually none: most records' first call
            if o.__class__ is ExternalRecord and o.sink == RECORDED_ANSWERS and \
                    o.key == service:
                index += 1
        source = self._sources.get((raw.topic, raw.partition))
        if source is None:
            source = self._sources[(raw.topic, raw.partition)] = TopicPartition(
                raw.topic, raw.partition)
        entry = ExternalRecord(RECORDED_ANSWERS, source, raw.offset, service,
                               _Pending(index), raw.timestamp)
        slot.outputs.append(entry)
        fingerprint = None if request is None else repr(request)
        # its own position, unless read back from a repartition topic (place_of, inlined:
        # most records have no headers, and this runs per call)
        place = place_in(raw.headers) if raw.headers else None
        topic, partition, offset, path = (place if place is not None else
                                          (raw.topic, raw.partition, raw.offset, ""))
        started = time.monotonic()
        try:
            value = await get()
        except Exception as error:
            entry.value = RecordedAnswer(service, topic, partition, offset, index,
                                         fingerprint, None,
                                         f"{type(error).__name__}: {error}",
                                         time.monotonic() - started, path)
            raise
        try:
            pickled: bytes | None = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
            failure = None
        except Exception as error:  # an answer pickle cannot carry: said, not recorded
            pickled, failure = None, f"Unpicklable: {type(error).__name__}: {error}"
        entry.value = RecordedAnswer(service, topic, partition, offset, index,
                                     fingerprint, pickled, failure,
                                     time.monotonic() - started, path)
        return value

    # -- the sink --------------------------------------------------------------------------

    async def start(self) -> None:
        """Make the directory; new lines go to a new segment after the existing ones."""
        self.directory.mkdir(parents=True, exist_ok=True)
        numbers = [int(p.stem.split("-")[1]) for p in self.directory.glob(SEGMENT_GLOB)]
        self._segment = max(numbers, default=0) + 1
        self._segment_size = 0

    def add(self, record: ExternalRecord) -> None:
        """Take a retired answer (a call cut short by a cancellation has none: skipped)."""
        answer = record.value
        if not isinstance(answer, RecordedAnswer):
            return
        line = answer.to_line() + "\n"
        self._lines.append(line)
        self._buffered += len(line)
        if self._oldest is None:
            self._oldest = time.monotonic()
        if record.source not in self._pending:
            self._pending[record.source] = record.offset

    async def flush(self) -> None:
        """Append the buffered lines to the segments (on a thread: file writes block), then
        drop the oldest segments past the byte cap. Cancellation: the write finishes on
        its thread; its lines count as written."""
        if not self._lines:
            return
        lines, self._lines = self._lines, []
        self._writing, self._pending = self._pending, {}
        self._buffered = 0
        self._oldest = None
        try:
            await asyncio.shield(asyncio.to_thread(self._write, lines))
        finally:
            self.recorded += len(lines)
            self._writing = {}

    def _write(self, lines: list[str]) -> None:
        """Append ``lines``, starting a new segment past the segment size (thread)."""
        start = 0
        while start < len(lines):
            end = start
            size = 0
            while end < len(lines) and (end == start or self._segment_size + size
                                        + len(lines[end]) <= self.segment_bytes):
                size += len(lines[end])
                end += 1
            with open(self.directory / segment_name(self._segment), "a",
                      encoding="utf-8") as out:
                out.write("".join(lines[start:end]))
            self._segment_size += size
            if self._segment_size >= self.segment_bytes:
                self._segment += 1
                self._segment_size = 0
            start = end
        self._drop_oldest()

    def _drop_oldest(self) -> None:
        """Delete the oldest segments while the directory holds more than ``max_bytes``
        (never the one being written)."""
        segments = sorted(self.directory.glob(SEGMENT_GLOB))
        sizes = [p.stat().st_size for p in segments]
        total = sum(sizes)
        for path, size in zip(segments, sizes, strict=True):
            if total <= self.max_bytes or path.name == segment_name(self._segment):
                break
            path.unlink()
            total -= size

    def durable_offset(self, source: TopicPartition) -> int | None:
        return None  # a record processed again records again: the last line wins

    def pending_offset(self, source: TopicPartition) -> int | None:
        """The oldest offset of ``source`` whose answers are buffered or being written."""
        writing = self._writing.get(source)
        pending = self._pending.get(source)
        if writing is None:
            return pending
        return writing if pending is None else min(writing, pending)

    @property
    def backlogged(self) -> bool:
        oldest = self._oldest
        return self._buffered >= FLUSH_BYTES or (
            oldest is not None and time.monotonic() - oldest >= FLUSH_AGE)

    async def stop(self) -> None:
        await self.flush()
