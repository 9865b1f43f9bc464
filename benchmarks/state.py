"""State-store throughput: a count aggregation on SQLite vs in memory (issue: state), and
emit-on-window-close with many open windows (issue: winperf).

    python -m benchmarks.state [--records 200000] [--keys 10000]
    python -m benchmarks.state --emit-open 10000 [--emit-records 2000]

On the memory broker (so the store is what differs), the DSL word count
``stream.group_by_key().count()`` with the store (a) in memory and (b) on SQLite
(``persistent=True``: WAL, one transaction per commit, write-back buffer and read cache),
both changelog-backed, one run each on identical input. Prints updates/s and a JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from typing import Any

from aiostreams import App
from aiostreams.app import run_event_loop, tune_gc
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import OutgoingRecord, TopicPartition
from aiostreams.windows import TumblingWindows


async def run(n: int, keys: int, persistent: bool) -> float:
    broker = MemoryBroker()
    broker.create_topic("words", 1)
    broker.append((OutgoingRecord("words", f"w{i % keys}".encode(), b"1", 0.0), 0)
                  for i in range(n))
    with tempfile.TemporaryDirectory() as state_dir:
        app = App("state-bench", transport=MemoryTransport(broker), state_dir=state_dir,
                  max_in_flight=1000, commit_interval_ms=1000)
        words = app.topic("words", key=str, value=str)
        counts = app.topic("counts", key=str, value=int, partitions=1)
        (app.stream(words).group_by_key()
         .count(materialized="counts", persistent=persistent).to_stream().to(counts))
        started = time.perf_counter()
        await app.start()
        tp = TopicPartition("counts", 0)
        # end detection, off the hot path: a coarse poll of the output's end offset
        while broker.end_offset(tp) < n:  # noqa: ASYNC110
            await asyncio.sleep(0.005)
        elapsed = time.perf_counter() - started
        await app.stop()
    return n / elapsed


async def run_emit(open_windows: int, measured: int, persistent: bool) -> float:
    """Emit-on-window-close over ``open_windows`` open windows: 1-ms tumbling windows with
    a grace of ``open_windows`` ms, one record per ms (1,000 keys), so that once the store
    is full every record closes (and emits) one window while ``open_windows`` stay open.
    Returns records/s of that steady state: ``measured`` emissions, timed where the
    processor forwards them (a ``foreach``), not at the output topic (batched)."""
    n = open_windows + 2 + measured
    broker = MemoryBroker()
    broker.create_topic("clicks", 1)
    broker.append((OutgoingRecord("clicks", f"k{i % 1000}".encode(), b"1", i / 1000), 0)
                  for i in range(n))
    stamps: list[float] = []
    done = asyncio.Event()

    def emitted(_key: Any, _count: Any) -> None:
        stamps.append(time.perf_counter())
        if len(stamps) == measured + 1:
            done.set()

    with tempfile.TemporaryDirectory() as state_dir:
        app = App("emit-bench", transport=MemoryTransport(broker), state_dir=state_dir,
                  max_in_flight=1000, commit_interval_ms=1000)
        clicks = app.topic("clicks", key=str, value=str)
        (app.stream(clicks).group_by_key()
         .windowed_by(TumblingWindows(0.001, grace=open_windows / 1000))
         .emit_on_window_close()
         .count(materialized="closed", persistent=persistent,
                retention=(open_windows + 10) / 1000)
         .to_stream().foreach(emitted))
        await app.start()
        await done.wait()
        await app.stop()
    return measured / (stamps[measured] - stamps[0])


async def main_emit(open_windows: int, measured: int) -> dict[str, Any]:
    tune_gc()
    memory = await run_emit(open_windows, measured, persistent=False)
    sqlite = await run_emit(open_windows, measured, persistent=True)
    return {"open_windows": open_windows, "records": measured, "memory": memory,
            "sqlite": sqlite}


async def main_async(n: int, keys: int) -> dict[str, Any]:
    tune_gc()
    memory = await run(n, keys, persistent=False)
    sqlite = await run(n, keys, persistent=True)
    return {"records": n, "keys": keys, "memory": memory, "sqlite": sqlite}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--emit-open", type=int, default=0,
                        help="run the emit-on-window-close case with this many open windows")
    parser.add_argument("--emit-records", type=int, default=2_000)
    args = parser.parse_args()
    if args.emit_open:
        e = run_event_loop(main_emit(args.emit_open, args.emit_records))
        print(f"emit-on-window-close, {e['open_windows']:,} open windows (records/s)")
        print(f"{'(a) in memory':28} {e['memory']:10,.0f}")
        print(f"{'(b) SQLite (persistent)':28} {e['sqlite']:10,.0f}")
        print(json.dumps({"benchmark": "state-emit", **e}))
        return
    r = run_event_loop(main_async(args.records, args.keys))
    print(f"{'store':28} {'updates/s':>10}")
    print(f"{'(a) in memory':28} {r['memory']:10,.0f}")
    print(f"{'(b) SQLite (persistent)':28} {r['sqlite']:10,.0f}")
    print(f"SQLite / memory: {r['sqlite'] / r['memory']:.2f} x")
    print(json.dumps({"benchmark": "state", **r}))


if __name__ == "__main__":
    main()
