"""Word count: the stream-processing "hello world", with a changelog-backed SQLite table.

    python examples/word_count.py [--broker kafka://127.0.0.1:9092]

Splits lines into words, re-keys by word (a repartition topic), counts per word in a
persistent store, and prints the final counts.
"""

from __future__ import annotations

import argparse
import tempfile

import aiostreams as ais
from aiostreams.app import run_event_loop
from aiostreams.topology.dsl_stores import plain_value
from aiostreams.transport.base import TopicSpec
from aiostreams.types import OutgoingRecord

LINES = [
    "the quick brown fox jumps over the lazy dog",
    "the dog barks",
    "a fox is quick and a dog is lazy",
]


async def main_async(broker: str) -> dict[str, int]:
    app = ais.App("word-count", broker=broker, state_dir=tempfile.mkdtemp(),
                  commit_interval_ms=100)
    lines = app.topic("lines", key=str, value=str, partitions=2)
    counts = app.topic("word-counts", key=str, value=int, partitions=2)
    (app.stream(lines)
     .flat_map_values(str.split)
     .group_by(lambda _key, word: word, key_serde=str, value_serde=str)
     .count(materialized="word-counts", persistent=True)
     .to_stream().to(counts))
    admin = app.transport.admin()
    await admin.start()
    await admin.create_topics([TopicSpec("lines", 2)])
    await admin.stop()
    producer = app.transport.producer()
    await producer.start()
    await producer.send_batch([OutgoingRecord("lines", f"line-{i}".encode(), line.encode())
                               for i, line in enumerate(LINES)])
    await producer.flush()
    await producer.stop()
    final: dict[str, int] = {}
    async with app:
        await app.wait_until_caught_up(timeout=60)
        for task in app.tasks.values():
            store = task.stores.get("word-counts")
            if store is not None:
                async for word, stored in store.range(None, None):
                    final[word] = plain_value(stored)  # counts are stored with a timestamp
    return final


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--broker", default="memory://word-count")
    args = parser.parse_args()
    final = run_event_loop(main_async(args.broker))
    for word, n in sorted(final.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"{word:>8} {n}")


if __name__ == "__main__":
    main()
