"""Issue 24, item 4, on the real broker: an at-least-once commit of tasks with SQLite stores
does not wait behind the consumer's fetch once per task for changelog end offsets."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from appkit import create_topic, produce

from aiostreams import App
from aiostreams.transport.kafka import KafkaTransport
from aiostreams.types import TopicPartition

pytestmark = pytest.mark.kafka

PARTITIONS, RECORDS = 8, 8000


async def test_commits_with_eight_sqlite_tasks_do_not_wait_on_fetches(
        kafka_bootstrap: str, topic_name, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
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
    durations: list[float] = []
    done = asyncio.Event()
    tps = [TopicPartition(src, p) for p in range(PARTITIONS)]

    def on_commit(record) -> None:  # type: ignore[no-untyped-def]
        durations.append(record.duration)
        worker = app.worker
        if worker is not None and sum(worker.committed_offset(tp) or 0
                                      for tp in tps) >= RECORDS:
            done.set()

    app.on_commit(on_commit)
    async with app:
        await asyncio.wait_for(done.wait(), 60)
        assert len(app.tasks) == PARTITIONS
    checkpoints = await asyncio.to_thread(lambda: list(tmp_path.glob("*/.checkpoint")))
    assert len(checkpoints) == PARTITIONS  # each task's SQLite store was checkpointed
    # each of the 8 end-offset requests used to queue behind a 0.5 s fetch: ~4 s a commit
    assert max(durations) < 1.5, durations
    assert sum(durations) / len(durations) < 0.5, durations
