"""Restore speed (issue 23, item 6): one changelog restored by aiostreams into its SQLite
store and by Kafka Streams into RocksDB, in the same run.

    python -m benchmarks.restore [--updates 1000000] [--keys 100000] [--rounds 1]
                                 [--no-kafka-streams]

Writes a changelog of ``--updates`` records over ``--keys`` keys (each key updated in turn,
8-byte keys, 16-byte values) to one partition of a real broker (``AIOSTREAMS_KAFKA`` or
one started here), named ``<app>-bench-changelog`` as both frameworks name a store's
changelog. Then, ``--rounds`` times each, alternating:

* **aiostreams**: the worker's :class:`~aiostreams.engine.restore.Restorer` replays the
  partition from its start into a fresh :class:`~aiostreams.state.sqlite.
  SQLiteKeyValueStore`, timed up to the last flush (committed to the file);
* **Kafka Streams** 4.4.0 (``benchmarks/kstreams/RestoreBench.java``, compiled here with
  the jars the oracle tests fetch, ``rocksdbjni`` included): an app whose persistent
  RocksDB store has that changelog, local state deleted before it starts, timed by a
  ``StateRestoreListener`` from ``onRestoreStart`` to ``onRestoreEnd`` (the JVM's start and
  the group join are outside the timing, as the worker's are outside ours).

Prints updates/s of each, the ratio aiostreams / Kafka Streams (target >= 0.5), the same
ratio per CPU second (each side's whole process, every thread: the figure a loaded machine
distorts least) and a JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from aiostreams.engine.restore import Restorer
from aiostreams.state.base import StoreContext
from aiostreams.state.sqlite import SQLiteKeyValueStore
from aiostreams.state.store_spec import changelog_topic
from aiostreams.transport.kafka import KafkaTransport
from aiostreams.types import TopicPartition
from benchmarks._broker import kafka_broker
from benchmarks.kstreams_build import KSTREAMS_DIR, compiled_classpath
from benchmarks.peers.topics import create_topics, produce_pairs


async def write_changelog(bootstrap: str, topic: str, updates: int, keys: int) -> None:
    """``updates`` writes cycling over ``keys`` keys (8-byte keys, 16-byte values)."""
    updates_ = (((i % keys).to_bytes(8, "big"), i.to_bytes(16, "big"))
                for i in range(updates))
    await produce_pairs(bootstrap, topic, updates_)


async def time_restore(bootstrap: str, topic: str, state_dir: Path) -> tuple[float, int]:
    """Seconds to replay ``topic``'s partition 0 into a fresh SQLite store, and its rows."""
    seconds, _, rows = await measure_restore(bootstrap, topic, state_dir)
    return seconds, rows


async def measure_restore(bootstrap: str, topic: str, state_dir: Path
                          ) -> tuple[float, float, int]:
    """Seconds and CPU seconds (the process's, every thread: SQLite writes on its own) to
    replay ``topic``'s partition 0 into a fresh SQLite store, and its rows."""
    transport = KafkaTransport(bootstrap)
    store = SQLiteKeyValueStore("bench")
    await store.open(StoreContext("0_0", state_dir, 0))
    consumer = transport.consumer(None, client_id="restore-bench")
    await consumer.start()
    try:
        restorer = Restorer(transport, exactly_once=False, state_dir=None)
        started, cpu_started = time.perf_counter(), time.process_time()
        await restorer._replay(consumer, store, TopicPartition(topic, 0), 0, "0_0", "bench")
        elapsed = time.perf_counter() - started
        cpu = time.process_time() - cpu_started
        rows = await store.approximate_num_entries()
    finally:
        await consumer.stop()
        await store.close()
    return elapsed, cpu, rows


JAVA_SOURCE = KSTREAMS_DIR / "RestoreBench.java"
STORE = "bench"


def kafka_streams_classpath() -> str:
    """The classpath of ``RestoreBench``, compiled when needed."""
    return compiled_classpath(JAVA_SOURCE, "restore benchmark")


async def time_kafka_streams(bootstrap: str, app: str, input_topic: str, state_dir: Path,
                             *, timeout: float = 600.0) -> tuple[float, float, int]:
    """Seconds and CPU seconds (the JVM's, every thread) Kafka Streams takes to restore
    ``<app>-bench-changelog`` into RocksDB, and the records it restored (see
    ``RestoreBench.java``)."""
    classpath = await asyncio.to_thread(kafka_streams_classpath)
    process = await asyncio.create_subprocess_exec(
        "java", "-Xms512m", "-Xmx1g", "-cp", classpath, "RestoreBench", bootstrap, app,
        STORE, input_topic, str(state_dir), str(int(timeout)),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await process.communicate()
    if process.returncode != 0:
        tail = "\n".join(err.decode(errors="replace").strip().splitlines()[-20:])
        raise RuntimeError(f"RestoreBench exited with {process.returncode}:\n{tail}")
    result = json.loads(out.decode().strip().splitlines()[-1])
    return float(result["seconds"]), float(result["cpu_seconds"]), int(result["records"])


async def main_async(updates: int, keys: int, rounds: int = 1,
                     kafka_streams: bool = True) -> dict[str, Any]:
    async with kafka_broker() as bootstrap:
        return await measure(bootstrap, updates, keys, rounds, kafka_streams)


async def measure(bootstrap: str, updates: int, keys: int, rounds: int = 1,
                  kafka_streams: bool = True) -> dict[str, Any]:
    """The benchmark on the broker at ``bootstrap`` (its topics named for this run)."""
    ours: list[float] = []
    theirs: list[float] = []
    ours_cpu: list[float] = []
    theirs_cpu: list[float] = []
    app = f"restore-bench-{time.strftime('%H%M%S')}-{os.getpid()}"
    topic = changelog_topic(app, STORE)
    input_topic = f"{app}-input"
    await create_topics(bootstrap, [topic, input_topic], 1)
    await write_changelog(bootstrap, topic, updates, keys)
    for _ in range(rounds):
        with tempfile.TemporaryDirectory() as tmp:
            seconds, cpu, rows = await measure_restore(bootstrap, topic, Path(tmp))
            assert rows == min(keys, updates), f"{rows} rows after the restore"
            ours.append(seconds)
            ours_cpu.append(cpu)
        if kafka_streams:
            with tempfile.TemporaryDirectory() as tmp:
                seconds, cpu, restored = await time_kafka_streams(
                    bootstrap, app, input_topic, Path(tmp))
                assert restored == updates, f"Kafka Streams restored {restored} records"
                theirs.append(seconds)
                theirs_cpu.append(cpu)
    result: dict[str, Any] = {
        "benchmark": "restore", "updates": updates, "keys": keys, "rows": rows,
        "rounds": rounds, "seconds": [round(s, 3) for s in ours],
        "cpu_seconds": [round(s, 3) for s in ours_cpu],
        "updates_per_s": round(updates / statistics.median(ours)),
        "load": round(os.getloadavg()[0], 2)}
    if theirs:
        result["kafka_streams_seconds"] = [round(s, 3) for s in theirs]
        result["kafka_streams_cpu_seconds"] = [round(s, 3) for s in theirs_cpu]
        result["kafka_streams_updates_per_s"] = round(updates / statistics.median(theirs))
        result["ratio"] = round(result["updates_per_s"]
                                / result["kafka_streams_updates_per_s"], 2)
        # CPU per update, theirs / ours: what the ratio would be with a core each (the
        # figure a loaded machine distorts least)
        result["cpu_ratio"] = round(statistics.median(theirs_cpu)
                                    / statistics.median(ours_cpu), 2)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--updates", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=1,
                        help="restores of each side, alternating; medians are compared")
    parser.add_argument("--no-kafka-streams", action="store_true",
                        help="time aiostreams' restore only (no JVM)")
    args = parser.parse_args()
    result = asyncio.run(main_async(args.updates, args.keys, args.rounds,
                                    not args.no_kafka_streams))
    print(f"aiostreams, SQLite: {result['updates']:,} updates of {result['keys']:,} keys in "
          f"{statistics.median(result['seconds']):.2f} s = {result['updates_per_s']:,}/s "
          f"({result['rows']:,} rows; {statistics.median(result['cpu_seconds']):.2f} CPU s; "
          f"load {result['load']})")
    if "ratio" in result:
        print(f"Kafka Streams, RocksDB: "
              f"{statistics.median(result['kafka_streams_seconds']):.2f} s = "
              f"{result['kafka_streams_updates_per_s']:,}/s "
              f"({statistics.median(result['kafka_streams_cpu_seconds']):.2f} CPU s)")
        print(f"ratio aiostreams / Kafka Streams: {result['ratio']:.2f} (target >= 0.5); "
              f"per CPU second: {result['cpu_ratio']:.2f}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
