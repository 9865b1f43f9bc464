"""Issue 24, item 4: how much of a backlog an at-least-once app with SQLite stores commits.

    AIOSTREAMS_KAFKA=127.0.0.1:9092 python tests/support/commit_stall_bench.py [--seconds 30]

An 8-partition input with a backlog (40,000 records by default), a per-key count on a
persistent (SQLite) store, so 8 tasks each with a changelog partition to checkpoint. Prints
the records committed after ``--seconds`` and the mean commit duration, as a JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from appkit import create_topic, produce

from aiostreams import App
from aiostreams.transport.kafka import KafkaTransport
from aiostreams.types import TopicPartition

PARTITIONS = 8


async def main(records: int, seconds: float, persistent: bool) -> dict[str, float]:
    bootstrap = os.environ["AIOSTREAMS_KAFKA"]
    transport = KafkaTransport(bootstrap)
    run = uuid.uuid4().hex[:8]
    src, dst = f"stall-in-{run}", f"stall-out-{run}"
    await create_topic(transport, src, PARTITIONS)
    await produce(transport, src, [(f"k{i % 1000}".encode(), b"1") for i in range(records)])
    with tempfile.TemporaryDirectory() as state_dir:
        app = App(f"stall-{run}", broker=f"kafka://{bootstrap}", state_dir=state_dir)
        words = app.topic(src, key=str, value=str)
        counts = app.topic(dst, key=str, value=int, partitions=PARTITIONS)
        (app.stream(words).group_by_key()
         .count(materialized="counts", persistent=persistent).to_stream().to(counts))
        durations: list[float] = []
        app.on_commit(lambda c: durations.append(c.duration))
        all_committed_after = None
        async with app:
            started = time.monotonic()
            while (elapsed := time.monotonic() - started) < seconds:
                await asyncio.sleep(0.1)  # a benchmark's sampling, not a test's wait
                worker = app.status().worker
                assert worker is not None
                committed = sum(worker.committed.get(TopicPartition(src, p), 0)
                                for p in range(PARTITIONS))
                if committed >= records and all_committed_after is None:
                    all_committed_after = round(elapsed, 1)
    return {"records": records, "persistent": persistent, "seconds": round(elapsed, 1),
            "committed": committed, "all_committed_after_s": all_committed_after,
            "commits": len(durations),
            "mean_commit_s": round(sum(durations) / max(1, len(durations)), 3)}


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=40_000)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--memory", action="store_true", help="in-memory stores instead")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.records, args.seconds, not args.memory))))
