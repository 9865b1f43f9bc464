"""What ``tests/support/stateful_worker.py`` must have written, and what it did write.

Inputs are ``(b"kNN", b"<decimal>")`` pairs. :func:`expected` is an uninterrupted run's last
update per key (``kNN`` -> count and sum, ``gN`` -> the re-keyed count);
:func:`last_updates` is what a ``read_committed`` reader finds as each key's last update in
the output topic. A run whose state is exact has ``last_updates(...) == expected(inputs)``.
"""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict

import orjson

from aiostreams.transport.base import IsolationLevel
from aiostreams.transport.kafka import KafkaTransport
from aiostreams.types import TopicPartition


def keyed_inputs(count: int, keys: int, start: int = 0) -> list[tuple[bytes, bytes]]:
    """``count`` inputs over ``keys`` keys, values ``start``, ``start + 1``, ..."""
    return [(f"k{i % keys:02d}".encode(), str(i).encode()) for i in range(start, start + count)]


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
                       partitions: int) -> dict[str, dict[str, int]]:
    """Each key's last update in ``topic``, read committed, up to its end offsets now."""
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


async def until_exact(transport: KafkaTransport, topic: str, partitions: int,
                      want: dict[str, dict[str, int]], *, timeout: float) -> None:
    """Return once ``topic``'s last updates equal ``want``; AssertionError with the
    difference after ``timeout`` seconds. The re-keyed counts are done only once their
    repartition topic is consumed too, and nothing announces that to an outside reader:
    this polls."""
    got: dict[str, dict[str, int]] = {}
    try:
        async with asyncio.timeout(timeout):
            while True:
                got = await last_updates(transport, topic, partitions)
                if got == want:
                    return
                await asyncio.sleep(0.5)
    except TimeoutError:
        wrong = {k: (got.get(k), v) for k, v in want.items() if got.get(k) != v}
        extra = sorted(set(got) - set(want))
        raise AssertionError(f"state not exact after {timeout:g} s: (got, want) per key "
                             f"{wrong}; keys not expected: {extra}") from None
