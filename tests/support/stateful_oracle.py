"""The oracle of ``tests/support/stateful_worker.py``'s app: what an uninterrupted run
outputs, and what a ``read_committed`` reader finds last for each key of its output."""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict

import orjson

from aiostreams.transport.base import IsolationLevel
from aiostreams.transport.kafka import KafkaTransport
from aiostreams.types import TopicPartition

PARTITIONS = 2


def expected(records: list[tuple[bytes, bytes]]) -> dict[str, dict[str, int]]:
    """The last update per key of an uninterrupted run: ``k..`` aggregates, ``g..`` counts."""
    out: dict[str, dict[str, int]] = defaultdict(lambda: {"n": 0, "s": 0})
    groups: Counter[str] = Counter()
    for k, v in records:
        agg = out[k.decode()]
        agg["n"] += 1
        agg["s"] += int(v)
        groups[f"g{int(v) % 7}"] += 1
    return {**out, **{g: {"n": n} for g, n in groups.items()}}


async def last_updates(transport: KafkaTransport, topic: str,
                       partitions: int = PARTITIONS) -> dict[str, dict[str, int]]:
    consumer = transport.consumer(None, isolation_level=IsolationLevel.READ_COMMITTED)
    await consumer.start()
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    latest: dict[str, dict[str, int]] = {}
    try:
        ends = await consumer.end_offsets(tps)
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        async with asyncio.timeout(60):
            while [tp for tp in tps if await consumer.position(tp) < ends[tp]]:
                for got in (await consumer.getmany(0.5)).values():
                    for record in got:
                        assert record.key is not None and record.value is not None
                        latest[record.key.decode().strip('"')] = orjson.loads(record.value)
    finally:
        await consumer.stop()
    return latest
