"""Contender: a Faust (faust-streaming) agent, ``concurrency`` actors on one stream.

Each event: await the record's I/O, then ``await dst.send(...)`` of the enriched value.
Faust acks an event when its actor takes the next one and commits acked offsets every
``broker_commit_every`` (default 2.8 s); with ``concurrency > 1`` events of one key may run
(and be produced) out of order, which the harness counts. Run in the peers venv:

    <peers venv>/bin/python -m benchmarks.peers.faust_agent      (options in $BENCH_OPTIONS)
"""

from __future__ import annotations

import sys
from typing import Any

from benchmarks.peers.contenders import REPO
from benchmarks.peers.options import ContenderOptions
from benchmarks.peers.record_io import RecordIO
from benchmarks.peers.workload import enrich_bytes


def build(options: ContenderOptions) -> Any:
    import faust

    datadir = REPO / ".cache" / "faust-data" / options.group
    datadir.parent.mkdir(parents=True, exist_ok=True)
    app = faust.App(options.group, broker=f"kafka://{options.bootstrap}", store="memory://",
                    web_enabled=False, consumer_auto_offset_reset="earliest",
                    topic_partitions=options.partitions, topic_allow_declare=False,
                    key_serializer="raw", value_serializer="raw",
                    datadir=str(datadir),
                    # the raw loop's producer settings, so the comparison is of the frameworks
                    producer_linger_ms=5, producer_max_batch_size=256 * 1024,
                    # as many records per fetch as the others get (Faust's default: aiokafka's
                    # 500; 2000 measured 2x faster here)
                    broker_max_poll_records=2000)
    src = app.topic(options.src, key_type=bytes, value_type=bytes,
                    partitions=options.partitions)
    dst = app.topic(options.dst, key_type=bytes, value_type=bytes,
                    partitions=options.partitions)
    io = RecordIO(options)

    async def process(stream: Any) -> None:
        async for event in stream.events():
            await io.wait()
            await dst.send(key=event.key, value=enrich_bytes(event.value))

    app.agent(src, concurrency=options.concurrency)(process)
    return app


def main() -> None:
    app = build(ContenderOptions.from_env())
    sys.argv = [sys.argv[0], "worker", "--loglevel", "warn", "--without-web"]
    app.main()


if __name__ == "__main__":
    main()
