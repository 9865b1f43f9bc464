"""Issue 24, item 4, on the real broker: an at-least-once commit of tasks with SQLite stores
does not wait behind the consumer's fetch once per task for changelog end offsets.

The property is checked by structure, not by the clock: every ListOffsets request the worker
sends goes on aiokafka's coordination connection, never on the fetch connection where the
broker answers it only after the fetch in flight (up to 0.5 s). The commit durations this
buys are measured in ``tests/support/commit_stall_bench.py``, not asserted here."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from aiokafka.client import AIOKafkaClient, ConnectionGroup
from aiokafka.protocol.offset import OffsetRequest
from appkit import create_topic, produce

from aiostreams import App
from aiostreams.transport.kafka import KafkaTransport
from aiostreams.types import TopicPartition

pytestmark = pytest.mark.kafka

PARTITIONS, RECORDS = 8, 8000


async def test_commits_with_eight_sqlite_tasks_do_not_wait_on_fetches(
        kafka_bootstrap: str, topic_name, tmp_path: Path,  # type: ignore[no-untyped-def]
        monkeypatch: pytest.MonkeyPatch) -> None:
    groups_of_list_offsets: list[ConnectionGroup] = []
    real_send = AIOKafkaClient.send

    async def observed_send(self, node_id, request, *,  # type: ignore[no-untyped-def]
                            group=ConnectionGroup.DEFAULT):
        if isinstance(request, OffsetRequest) and all(  # end offsets, not a reset to earliest
                ts == -1 for _, parts in request._topics for _, ts in parts):
            groups_of_list_offsets.append(group)
        return await real_send(self, node_id, request, group=group)

    monkeypatch.setattr(AIOKafkaClient, "send", observed_send)
    transport = KafkaTransport(kafka_bootstrap)
    src, dst = topic_name("in"), topic_name("out")
    await create_topic(transport, src, PARTITIONS)
    await produce(transport, src, [(f"k{i % 500}".encode(), b"1") for i in range(RECORDS)])
    app = App(topic_name("app"), broker=f"kafka://{kafka_bootstrap}", state_dir=tmp_path,
              commit_interval_ms=200)
    words = app.topic(src, key=str, value=str)
    counts = app.topic(dst, key=str, value=int, partitions=PARTITIONS)
    (app.stream(words).group_by_key().count(materialized="counts", persistent=True)
     .to_stream().to(counts))
    commits = 0
    done = asyncio.Event()
    tps = [TopicPartition(src, p) for p in range(PARTITIONS)]

    def on_commit(record) -> None:  # type: ignore[no-untyped-def]
        nonlocal commits
        commits += 1
        worker = app.status().worker
        if worker is not None and sum(worker.committed.get(tp, 0)
                                      for tp in tps) >= RECORDS:
            done.set()

    app.on_commit(on_commit)
    async with app:
        await asyncio.wait_for(done.wait(), 60)
        assert len(app.status().tasks) == PARTITIONS
    checkpoints = await asyncio.to_thread(lambda: list(tmp_path.glob("*/.checkpoint")))
    assert len(checkpoints) == PARTITIONS  # each task's SQLite store was checkpointed
    # each of the 8 end-offset requests used to queue behind a 0.5 s fetch: ~4 s a commit
    assert commits >= 1 and len(groups_of_list_offsets) >= PARTITIONS
    assert set(groups_of_list_offsets) == {ConnectionGroup.COORDINATION}, (
        f"{groups_of_list_offsets.count(ConnectionGroup.DEFAULT)} of "
        f"{len(groups_of_list_offsets)} end-offset requests waited behind a fetch")
