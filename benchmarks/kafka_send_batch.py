"""Producer throughput of the ``kafka://`` transport: ``send_batch`` + ``flush``, records/s.

    python benchmarks/kafka_send_batch.py [--records 100000] [--partitions 4] [--chunk 1000]

Sends ``--records`` records (``--size``-byte values, 1000 distinct keys) in ``send_batch``
calls of ``--chunk`` records, then one ``flush``; prints records/s. Uses the broker named by
``AIOSTREAMS_KAFKA=host:port``, else starts a local one (``aiostreams.localkafka``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import time
import uuid
from collections.abc import Iterator

from aiostreams.localkafka import LocalKafka
from aiostreams.transport.base import TopicSpec
from aiostreams.transport.kafka import KafkaTransport
from aiostreams.types import OutgoingRecord


async def run(bootstrap: str, args: argparse.Namespace) -> float:
    transport = KafkaTransport(bootstrap, max_batch_size=args.batch_bytes)
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    admin = transport.admin()
    await admin.start()
    await admin.create_topics([TopicSpec(topic, args.partitions)])
    producer = transport.producer()
    await producer.start()
    try:
        await producer.send_batch([OutgoingRecord(topic, b"warm-up", b"x")])
        await producer.flush()
        value = b"x" * args.size
        records = [
            OutgoingRecord(topic, b"key-%d" % (i % 1000), value) for i in range(args.records)
        ]
        began = time.perf_counter()
        for start in range(0, len(records), args.chunk):
            await producer.send_batch(records[start : start + args.chunk])
        await producer.flush()
        return float(args.records) / (time.perf_counter() - began)
    finally:
        await producer.stop()
        await admin.delete_topics([topic])
        await admin.stop()


@contextlib.contextmanager
def broker() -> Iterator[str]:
    configured = os.environ.get("AIOSTREAMS_KAFKA")
    if configured:
        yield configured
        return
    with LocalKafka() as kafka:
        yield kafka.bootstrap


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--chunk", type=int, default=1000, help="records per send_batch")
    parser.add_argument("--size", type=int, default=100, help="value bytes")
    parser.add_argument("--batch-bytes", type=int, default=256 * 1024,
                        help="the max_batch_size transport option")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with broker() as bootstrap:
        rates = [asyncio.run(run(bootstrap, args)) for _ in range(args.repeat)]
    print(
        f"send_batch: {args.records} records of {args.size} B, {args.partitions} partitions, "
        f"{args.chunk} per call, max_batch_size={args.batch_bytes}: "
        f"best {max(rates):,.0f} records/s, median {sorted(rates)[len(rates) // 2]:,.0f}"
    )


if __name__ == "__main__":
    main()
