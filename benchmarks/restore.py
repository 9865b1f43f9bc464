"""Restore speed (issue 23, item 6): a changelog replayed into the SQLite store.

    python -m benchmarks.restore [--updates 1000000] [--keys 100000]

Writes a changelog of ``--updates`` records over ``--keys`` keys (each key updated in turn,
8-byte keys, 16-byte values) to one partition of a real broker (``AIOSTREAMS_KAFKA`` or
one started here), then times aiostreams' restore path on it: the worker's
:class:`~aiostreams.engine.restore.Restorer` replaying the partition from its start into a
fresh :class:`~aiostreams.state.sqlite.SQLiteKeyValueStore`, up to the last flush. Prints
updates/s and a JSON line. Kafka Streams restoring the same changelog into RocksDB (the
issue's comparison) is not part of this script yet.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from aiostreams.engine.restore import Restorer
from aiostreams.state.base import StoreContext
from aiostreams.state.sqlite import SQLiteKeyValueStore
from aiostreams.transport.kafka import KafkaTransport
from aiostreams.types import TopicPartition
from benchmarks._broker import kafka_broker
from benchmarks.peers.topics import create_topics, produce_pairs


async def write_changelog(bootstrap: str, topic: str, updates: int, keys: int) -> None:
    """``updates`` writes cycling over ``keys`` keys (8-byte keys, 16-byte values)."""
    updates_ = (((i % keys).to_bytes(8, "big"), i.to_bytes(16, "big"))
                for i in range(updates))
    await produce_pairs(bootstrap, topic, updates_)


async def time_restore(bootstrap: str, topic: str, state_dir: Path) -> tuple[float, int]:
    """Seconds to replay ``topic``'s partition 0 into a fresh SQLite store, and its rows."""
    transport = KafkaTransport(bootstrap)
    store = SQLiteKeyValueStore("bench")
    await store.open(StoreContext("0_0", state_dir, 0))
    consumer = transport.consumer(None, client_id="restore-bench")
    await consumer.start()
    try:
        restorer = Restorer(transport, exactly_once=False, state_dir=None)
        started = time.perf_counter()
        await restorer._replay(consumer, store, TopicPartition(topic, 0), 0, "0_0", "bench")
        elapsed = time.perf_counter() - started
        rows = await store.approximate_num_entries()
    finally:
        await consumer.stop()
        await store.close()
    return elapsed, rows


async def main_async(updates: int, keys: int) -> dict[str, Any]:
    async with kafka_broker() as bootstrap:
        topic = f"restore-bench-{time.strftime('%H%M%S')}"
        await create_topics(bootstrap, [topic], 1)
        await write_changelog(bootstrap, topic, updates, keys)
        with tempfile.TemporaryDirectory() as tmp:
            seconds, rows = await time_restore(bootstrap, topic, Path(tmp))
    return {"benchmark": "restore", "updates": updates, "keys": keys, "rows": rows,
            "seconds": round(seconds, 3), "updates_per_s": round(updates / seconds),
            "load": round(os.getloadavg()[0], 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--updates", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=100_000)
    args = parser.parse_args()
    result = asyncio.run(main_async(args.updates, args.keys))
    print(f"SQLite restore: {result['updates']:,} updates of {result['keys']:,} keys in "
          f"{result['seconds']:.2f} s = {result['updates_per_s']:,}/s "
          f"({result['rows']:,} rows; load {result['load']})")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
