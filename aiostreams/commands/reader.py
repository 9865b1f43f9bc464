"""Reading one whole topic from the command line: every partition, with a consumer of its
own (manually assigned; in a group only to remember a position, as ``dlq replay`` does)."""

from __future__ import annotations

import enum
from collections.abc import AsyncIterator, Mapping
from types import TracebackType

from aiostreams.commands.topics import partition_count
from aiostreams.transport.base import Consumer, Transport
from aiostreams.types import RawRecord, TopicPartition

POLL = 0.5
"""Seconds one fetch waits for records (then the end condition is checked again)."""


class Start(enum.Enum):
    BEGINNING = "beginning"
    END = "end"
    COMMITTED = "committed"  # the group's committed offset, else the beginning


class TopicReader:
    """``async with TopicReader(transport, "orders") as reader:`` then
    ``async for record in reader.records(...)``.

    Invariant: ``positions`` holds, per partition, the offset after the last record
    yielded (or the start) and any transaction markers or aborted records right after it,
    so a caller can commit exactly what it has handled, and a read to the end ends."""

    def __init__(self, transport: Transport, topic: str, *, group_id: str | None = None,
                 client_id: str = "aiostreams-cli") -> None:
        self.transport = transport
        self.topic = topic
        self.group_id = group_id
        self.client_id = client_id
        self.partitions: list[TopicPartition] = []
        self.positions: dict[TopicPartition, int] = {}
        self._consumer: Consumer | None = None

    async def __aenter__(self) -> TopicReader:
        admin = self.transport.admin()
        await admin.start()
        try:
            count = await partition_count(admin, self.transport, self.topic)
        finally:
            await admin.stop()
        self.partitions = [TopicPartition(self.topic, p) for p in range(count)]
        consumer = self.transport.consumer(self.group_id, client_id=self.client_id)
        await consumer.start()
        self._consumer = consumer
        consumer.assign(self.partitions)
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            await consumer.stop()

    @property
    def consumer(self) -> Consumer:
        if self._consumer is None:
            raise RuntimeError("use the reader inside `async with`")
        return self._consumer

    async def seek(self, start: Start) -> None:
        consumer = self.consumer
        if start is Start.BEGINNING:
            offsets = await consumer.beginning_offsets(self.partitions)
        elif start is Start.END:
            offsets = await consumer.end_offsets(self.partitions)
        else:
            offsets = {tp: await consumer.position(tp) for tp in self.partitions}
        for tp, offset in offsets.items():
            consumer.seek(tp, offset)
        self.positions = dict(offsets)

    async def end_offsets(self) -> dict[TopicPartition, int]:
        return await self.consumer.end_offsets(self.partitions)

    async def records(self, *, follow: bool, limit: int | None = None
                      ) -> AsyncIterator[RawRecord]:
        """Records in offset order per partition, from the position :meth:`seek` set.
        Without ``follow`` it ends at the end offsets as they were when it began;
        with ``follow`` it waits for new records until ``limit`` or cancellation."""
        consumer = self.consumer
        ends = await self.end_offsets()
        count = 0
        while limit is None or count < limit:
            if not follow and _reached(self.positions, ends):
                return
            batch = await consumer.getmany(POLL)
            cut: set[TopicPartition] = set()
            for tp in sorted(batch):
                for record in batch[tp]:
                    if not follow and record.offset >= ends[tp]:
                        cut.add(tp)
                        break
                    self.positions[tp] = record.offset + 1
                    yield record
                    count += 1
                    if limit is not None and count >= limit:
                        return
            # Offsets are not dense (transaction markers, aborted records): where every
            # fetched record was yielded, the consumer's position may be past the last one.
            for tp in self.partitions:
                if tp not in cut:
                    self.positions[tp] = max(self.positions[tp], await consumer.position(tp))

    async def commit(self) -> None:
        """Commit :attr:`positions` for the reader's group."""
        if self.group_id is None:
            raise RuntimeError("a reader without group_id has nothing to commit to")
        await self.consumer.commit(dict(self.positions))


def _reached(positions: Mapping[TopicPartition, int], ends: Mapping[TopicPartition, int]) -> bool:
    return all(positions.get(tp, 0) >= end for tp, end in ends.items())
