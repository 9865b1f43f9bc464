"""Contender: a hand-written aiokafka consume → process → produce loop, the practical limit
of one Python process (no framework, no ordering machinery, no failure path).

Per fetched batch: process its records (for P1 all of them concurrently, up to
``concurrency`` per fetch, each awaiting its I/O), produce the outputs in input order to
the input's partition (input and output are co-partitioned), await delivery, commit one
past the batch. A batch is committed only after all its outputs are delivered, and outputs
keep input order: per-key order holds, at the price of head-of-line blocking per batch.

``variant``: ``"send"`` (``await producer.send()`` per record), ``"batch"`` (aiokafka's
batch API, ``create_batch``/``send_batch`` per partition) or ``"autocommit"`` (like "send",
but with aiokafka's auto-commit every 100 ms instead of a commit after delivery: the common
mistake that commits records still being processed; it shows that the harness's
commits-ahead check catches it). Runs until SIGTERM.
"""

from __future__ import annotations

import asyncio
import signal
from typing import Any

from benchmarks.peers.options import ContenderOptions
from benchmarks.peers.record_io import RecordIO
from benchmarks.peers.workload import enrich_bytes


async def process_batch(records: list[Any], io: RecordIO) -> list[bytes]:
    """The outputs of ``records``, in their order (their I/O awaited concurrently)."""
    if io.options.io == "none":
        return [enrich_bytes(r.value) for r in records]

    async def one(value: bytes) -> bytes:
        await io.wait()
        return enrich_bytes(value)

    return list(await asyncio.gather(*(one(r.value) for r in records)))


async def run(options: ContenderOptions, stop: asyncio.Event) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    consumer = AIOKafkaConsumer(
        options.src, bootstrap_servers=options.bootstrap, group_id=options.group,
        enable_auto_commit=options.variant == "autocommit", auto_commit_interval_ms=100,
        auto_offset_reset="earliest",
        max_poll_records=options.concurrency if options.io != "none" else 2000)
    producer = AIOKafkaProducer(bootstrap_servers=options.bootstrap, acks="all",
                                enable_idempotence=True, linger_ms=5,
                                max_batch_size=256 * 1024)
    io = RecordIO(options)
    await consumer.start()
    await producer.start()
    await io.start()
    try:
        while not stop.is_set():
            fetched = await consumer.getmany(timeout_ms=100)
            offsets = {}
            futures = []
            for tp, records in fetched.items():
                outputs = await process_batch(records, io)
                if options.variant == "batch":
                    futures += await send_batched(producer, options.dst, tp.partition,
                                                  records, outputs)
                else:
                    for r, value in zip(records, outputs, strict=True):
                        futures.append(await producer.send(options.dst, value, key=r.key,
                                                           partition=tp.partition))
                offsets[tp] = records[-1].offset + 1
            if futures:
                await asyncio.gather(*futures)
            if offsets and options.variant != "autocommit":
                await consumer.commit(offsets)
    finally:
        await io.close()
        await consumer.stop()
        await producer.stop()


async def send_batched(producer: Any, topic: str, partition: int, records: list[Any],
                       outputs: list[bytes]) -> list[Any]:
    futures = []
    builder = producer.create_batch()
    for r, value in zip(records, outputs, strict=True):
        if builder.append(key=r.key, value=value, timestamp=None) is None:
            futures.append(await producer.send_batch(builder, topic, partition=partition))
            builder = producer.create_batch()
            builder.append(key=r.key, value=value, timestamp=None)
    futures.append(await producer.send_batch(builder, topic, partition=partition))
    return futures


async def main_async() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await run(ContenderOptions.from_env(), stop)


if __name__ == "__main__":
    try:
        import uvloop
        uvloop.run(main_async())
    except ImportError:
        asyncio.run(main_async())
