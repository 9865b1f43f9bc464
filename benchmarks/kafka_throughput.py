"""Throughput on a real Kafka broker: aiostreams vs a raw aiokafka loop, same transform.

    python -m benchmarks.kafka_throughput [--records 1000000] [--partitions 8]

Starts the project's broker (or uses AIOSTREAMS_KAFKA=host:port), preloads small JSON
records, then runs each contender on its own copy of the input, in this order, in one run:

(a) raw aiokafka: consume a batch, parse, add a field, serialize, ``await send()`` each
    record (it only enqueues into the accumulator), flush and commit once per batch — the
    practical limit of one process
(a2) raw aiokafka with its batch API (``create_batch``/``send_batch`` per partition)
(b) aiostreams: the same transform as a sync processor (``ordering="key"``, at-least-once)

Target: (b) >= 0.8 x the better of (a) and (a2). Prints a table and a JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

import orjson

from aiostreams import App, Processor, Record
from aiostreams.app import run_event_loop, tune_gc
from aiostreams.transport.base import TopicSpec
from aiostreams.transport.kafka import KafkaTransport
from aiostreams.types import OutgoingRecord, TopicPartition
from benchmarks._broker import kafka_broker


def transform(value: dict[str, Any]) -> dict[str, Any]:
    value["enriched"] = True
    return value


class Enrich(Processor[str, dict[str, Any]]):
    def process(self, record: Record[str, dict[str, Any]]) -> None:
        self.context.forward(record.with_value(transform(record.value)))


async def create(transport: KafkaTransport, *specs: TopicSpec) -> None:
    admin = transport.admin()
    await admin.start()
    try:
        await admin.create_topics(list(specs))
    finally:
        await admin.stop()


async def preload(transport: KafkaTransport, topic: str, n: int) -> None:
    producer = transport.producer()
    await producer.start()
    try:
        for start in range(0, n, 10_000):
            await producer.send_batch([
                OutgoingRecord(topic, f"user-{i % 10_000}".encode(),
                               orjson.dumps({"id": i, "user": i % 10_000, "amount": i * 0.5}))
                for i in range(start, min(n, start + 10_000))])
        await producer.flush()
    finally:
        await producer.stop()


async def wait_for_output(transport: KafkaTransport, topic: str, partitions: int,
                          n: int) -> None:
    consumer = transport.consumer(None)
    await consumer.start()
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    try:
        # end detection, off the hot path: a coarse poll of the end offsets
        while sum((await consumer.end_offsets(tps)).values()) < n:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
    finally:
        await consumer.stop()


async def run_raw(bootstrap: str, src: str, dst: str, n: int) -> float:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition as AkTp

    consumer = AIOKafkaConsumer(src, bootstrap_servers=bootstrap, group_id=f"raw-{src}",
                                enable_auto_commit=False, auto_offset_reset="earliest",
                                max_poll_records=2000)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all",
                                enable_idempotence=True, linger_ms=5,
                                max_batch_size=256 * 1024)
    await consumer.start()
    await producer.start()
    started = time.perf_counter()
    done = 0
    try:
        while done < n:
            batch = await consumer.getmany(timeout_ms=100)
            offsets: dict[AkTp, int] = {}
            for tp, records in batch.items():
                for r in records:
                    value = orjson.dumps(transform(orjson.loads(r.value)))
                    await producer.send(dst, value, key=r.key)  # enqueues; flush awaits delivery
                offsets[tp] = records[-1].offset + 1
                done += len(records)
            if offsets:
                await producer.flush()
                await consumer.commit(offsets)
        return n / (time.perf_counter() - started)
    finally:
        await consumer.stop()
        await producer.stop()


async def run_raw_batched(bootstrap: str, src: str, dst: str, n: int, partitions: int) -> float:
    """Like :func:`run_raw`, but produces through aiokafka's batch API per partition."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition as AkTp

    from aiostreams.transport.partitioner import default_partition

    consumer = AIOKafkaConsumer(src, bootstrap_servers=bootstrap, group_id=f"rawb-{src}",
                                enable_auto_commit=False, auto_offset_reset="earliest",
                                max_poll_records=2000)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all",
                                enable_idempotence=True, max_batch_size=256 * 1024)
    await consumer.start()
    await producer.start()
    no_counter = iter(())
    started = time.perf_counter()
    done = 0
    try:
        while done < n:
            batch = await consumer.getmany(timeout_ms=100)
            offsets: dict[AkTp, int] = {}
            builders: dict[int, Any] = {}
            futures = []
            for tp, records in batch.items():
                for r in records:
                    value = orjson.dumps(transform(orjson.loads(r.value)))
                    p = default_partition(r.key, partitions, counter=no_counter)
                    builder = builders.get(p)
                    if builder is None:
                        builder = builders[p] = producer.create_batch()
                    if builder.append(key=r.key, value=value, timestamp=None) is None:
                        futures.append(await producer.send_batch(builder, dst, partition=p))
                        builder = builders[p] = producer.create_batch()
                        builder.append(key=r.key, value=value, timestamp=None)
                offsets[tp] = records[-1].offset + 1
                done += len(records)
            for p, builder in builders.items():
                futures.append(await producer.send_batch(builder, dst, partition=p))
            if futures:
                await asyncio.gather(*futures)
            if offsets:
                await consumer.commit(offsets)
        return n / (time.perf_counter() - started)
    finally:
        await consumer.stop()
        await producer.stop()


async def run_aiostreams(bootstrap: str, src: str, dst: str, n: int, partitions: int) -> float:
    transport = KafkaTransport(bootstrap)
    app = App(f"ais-{src}", broker=f"kafka://{bootstrap}", commit_interval_ms=1000,
              max_poll_records=2000)
    app.topic(src, key=str, value=dict)
    app.topic(dst, key=str, value=dict)
    app.topology.add_source("src", src).add_processor("enrich", Enrich, "src").add_sink(
        "sink", dst, "enrich")
    started = time.perf_counter()
    await app.start()
    await wait_for_output(transport, dst, partitions, n)
    elapsed = time.perf_counter() - started
    await app.stop()
    return n / elapsed


async def main_async(n: int, partitions: int) -> dict[str, Any]:
    tune_gc()
    async with kafka_broker() as bootstrap:
        transport = KafkaTransport(bootstrap)
        stamp = int(time.time())
        runs: dict[str, float] = {}
        for name in ("raw", "raw_batched", "aiostreams"):
            src, dst = f"bench-{name}-in-{stamp}", f"bench-{name}-out-{stamp}"
            await create(transport, TopicSpec(src, partitions), TopicSpec(dst, partitions))
            await preload(transport, src, n)
            if name == "raw":
                runs[name] = await run_raw(bootstrap, src, dst, n)
            elif name == "raw_batched":
                runs[name] = await run_raw_batched(bootstrap, src, dst, n, partitions)
            else:
                runs[name] = await run_aiostreams(bootstrap, src, dst, n, partitions)
        return {"records": n, "partitions": partitions, "raw_aiokafka": runs["raw"],
                "raw_aiokafka_batched": runs["raw_batched"], "aiostreams": runs["aiostreams"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    args = parser.parse_args()
    r = run_event_loop(main_async(args.records, args.partitions))
    best_raw = max(r["raw_aiokafka"], r["raw_aiokafka_batched"])
    ratio = r["aiostreams"] / best_raw
    print(f"{'case':40} {'records/s':>12}")
    print(f"{'(a)  raw aiokafka loop, send() per record':40} {r['raw_aiokafka']:12,.0f}")
    print(f"{'(a2) raw aiokafka loop, batch API':40} {r['raw_aiokafka_batched']:12,.0f}")
    print(f"{'(b)  aiostreams':40} {r['aiostreams']:12,.0f}")
    print(f"target (b) >= 0.8 x best raw: {ratio:.2f} x  "
          f"{'MET' if ratio >= 0.8 else 'NOT MET'}")
    print(json.dumps({"benchmark": "kafka_throughput", **r, "ratio_to_best_raw": ratio}))


if __name__ == "__main__":
    main()
