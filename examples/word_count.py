"""Word count: the stream-processing "hello world", with a changelog-backed SQLite table.

    python examples/word_count.py [--broker kafka://127.0.0.1:9092]

The broker comes from ``--broker``, else from the settings (``AIOSTREAMS_BROKER``, else the
embedded ``memory://``). Splits lines into words, re-keys by word (a repartition topic),
counts per word in a persistent store, and prints the final counts as the app published
them to ``word-counts``.
"""

from __future__ import annotations

import argparse
import tempfile

import aiostreams as ais

LINES = [
    "the quick brown fox jumps over the lazy dog",
    "the dog barks",
    "a fox is quick and a dog is lazy",
]


async def main_async(broker: str | None) -> dict[str, int]:
    app = ais.App("word-count", broker=broker, state_dir=tempfile.mkdtemp(),
                  commit_interval_ms=100)
    lines = app.topic("lines", key=str, value=str, partitions=2)
    counts = app.topic("word-counts", key=str, value=int, partitions=2)
    (app.stream(lines)
     .flat_map_values(str.split)
     .group_by(lambda _key, word: word, key_serde=str, value_serde=str)
     .count(materialized="word-counts", persistent=True)
     .to_stream().to(counts))
    async with app.producer() as producer:
        for i, line in enumerate(LINES):
            await producer.send(lines, f"line-{i}", line)
    async with app:
        await app.wait_until_caught_up(timeout=60)
    final: dict[str, int] = {}
    async with app.consumer(counts) as records:
        for record in await records.read_to_end():  # the latest count per word wins
            final[record.key] = record.value
    return final


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--broker", help="default: AIOSTREAMS_BROKER, else memory://")
    args = parser.parse_args()
    final = ais.run_event_loop(main_async(args.broker))
    for word, n in sorted(final.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"{word:>8} {n}")


if __name__ == "__main__":
    main()
