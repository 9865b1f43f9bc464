"""Has a consumer group processed everything that is in its input topics?

Compares the group's committed offsets with the end offsets of every source topic
(repartition topics included: what the inputs cause there must be processed too). Offsets
are not dense on Kafka (transaction markers take offsets), so a partition whose committed
offset is short of its end counts as caught up when reading from there reaches the end
without returning a record. The answer never depends on how fast the broker replies.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from aiostreams.topology.topology import SubTopology
from aiostreams.transport.base import Admin, Consumer, IsolationLevel, Transport
from aiostreams.types import TopicPartition

if TYPE_CHECKING:
    from aiostreams.engine.worker import Worker


class CaughtUpProbe:
    def __init__(self, transport: Transport, group: str, subs: Sequence[SubTopology], *,
                 read_committed: bool) -> None:
        self._transport = transport
        self._group = group
        self._topics = sorted({t for sub in subs for t in sub.source_topics})
        self._read_committed = read_committed
        self._admin: Admin | None = None
        self._offsets: Consumer | None = None
        self._reader: Consumer | None = None

    async def start(self) -> None:
        self._admin = self._transport.admin()
        await self._admin.start()
        self._offsets = self._transport.consumer(self._group, client_id=f"{self._group}-probe")
        await self._offsets.start()
        self._reader = self._transport.consumer(
            None, client_id=f"{self._group}-probe-reader",
            isolation_level=IsolationLevel.of(self._read_committed))
        await self._reader.start()

    async def stop(self) -> None:
        for client in (self._reader, self._offsets, self._admin):
            if client is not None:
                await client.stop()

    async def _partitions(self) -> list[TopicPartition]:
        assert self._admin is not None
        tps: list[TopicPartition] = []
        for topic in self._topics:
            count = await self._admin.partitions_for(topic) or 0
            tps.extend(TopicPartition(topic, p) for p in range(count))
        return tps

    async def caught_up(self) -> bool:
        assert self._offsets is not None and self._reader is not None
        tps = await self._partitions()
        ends = await self._reader.end_offsets(tps)
        behind: dict[TopicPartition, int] = {}
        for tp in tps:
            committed = await self._offsets.committed(tp) or 0
            if committed < ends[tp]:
                behind[tp] = committed
        if not behind:
            return True
        return await self._only_markers_follow(behind, ends)

    async def _only_markers_follow(self, behind: dict[TopicPartition, int],
                                   ends: dict[TopicPartition, int]) -> bool:
        """Read from each committed offset until a record comes back (not caught up) or
        the reader's position has passed ``ends`` with none (only transaction markers or
        aborted records followed). An empty fetch proves nothing by itself: on a busy
        machine the broker's answer can take longer than one ``getmany`` waits."""
        reader = self._reader
        assert reader is not None
        reader.assign(list(behind))
        # records deleted below the log's start are the worker's to report (an offset
        # reset), not this probe's: it reads from the first record still there
        starts = await reader.beginning_offsets(list(behind))
        for tp, offset in behind.items():
            reader.seek(tp, max(offset, starts[tp]))
        pending = set(behind)
        while pending:
            batch = await reader.getmany(0.2)
            if any(batch.get(tp) for tp in behind):
                return False
            pending = {tp for tp in pending if await reader.position(tp) < ends[tp]}
        return True



async def until_caught_up(worker: Worker, probe: CaughtUpProbe) -> bool:
    """Wait, commit after commit, until ``worker``'s stores are ready and ``probe`` says the
    group caught up (True), or until a stop is asked for - a failure, a signal,
    ``request_stop`` - after which no commit may come (False). Every wait asks the worker
    to flush every sink at its next commit, not just the backlogged ones. Starts and
    stops ``probe``."""
    await probe.start()
    try:
        while not worker.stores_ready or not await probe.caught_up():
            if worker.stopping:
                return False
            worker.request_sink_flush()
            await worker.next_commit()
        return True
    finally:
        await probe.stop()
