"""The stateful path under load: aggregates, windows and joins through SQLite stores, each
beside its floor (issue 40).

    python -m benchmarks.stateful [CASE ...] [--records N] [--keys K] [--rounds R]
                                  [--kafka] [--counts] [--instructions]

Cases (:mod:`benchmarks.stateful_cases`): ``count`` (``group_by_key().count()``),
``tumbling`` (a sum per 60-s window), ``hopping`` (50-s windows every 10 s: 5 a record),
``ss_join`` (a stream-stream join, 1-s windows) and ``st_join`` (a stream-table join); keys
``k<i mod K>``, one record a millisecond of event time. Each runs on the memory broker (with
``--kafka``, also on the real broker: ``AIOSTREAMS_KAFKA`` or one started here) with
``max_in_flight`` 1,000 and a 1-s commit interval, timed from ``app.start()`` until the last
output is on the broker. Beside it, its floor (:mod:`benchmarks.stateful_floor`): the same
logical work in a hand-rolled loop over ``sqlite3``, on the same memory broker's records.

Prints, per case: records/s and CPU µs per input record (the process's, every thread:
SQLite runs on aiosqlite's), best of ``--rounds`` interleaved rounds, for aiostreams and the
floor, and the ratio floor / aiostreams of CPU per record (1.0 would be the store's physical
limit). ``--counts`` adds a counted run per case (:mod:`benchmarks.stateful_counters`):
store reads and writes, SQLite statements, serde calls and changelog records per input
record. ``--instructions`` adds valgrind instructions per input record of aiostreams and of
the floor (as :mod:`benchmarks.instructions` counts them: runs at N and 3N records, the
difference; ``--instruction-records`` N, ``--instruction-keys`` K, smaller than the timed
runs since valgrind is ~50 x slower).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from aiostreams import App
from aiostreams.app import run_event_loop, tune_gc
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import OutgoingRecord, TopicPartition
from benchmarks.stateful_cases import CASES, Case
from benchmarks.stateful_counters import counting
from benchmarks.stateful_floor import run_floor

IN_FLIGHT = 1000
COMMIT_INTERVAL_MS = 1000


def preload(broker: MemoryBroker, case: Case, n: int, keys: int, prefix: str = "") -> int:
    """``case``'s inputs on ``broker`` (one partition a topic); how many."""
    for topic in case.topics:
        broker.create_topic(prefix + topic, 1)
    records = [(OutgoingRecord(prefix + topic, key, value, ts), 0)
               for topic, key, value, ts in case.inputs(n, keys)]
    broker.append(records)
    return len(records)


def _app(case: Case, prefix: str, state_dir: str, **where: Any) -> App:
    app = App(f"{prefix}stateful", state_dir=state_dir, max_in_flight=IN_FLIGHT,
              commit_interval_ms=COMMIT_INTERVAL_MS, **where)
    case.build(app, prefix)
    return app


async def run_memory(name: str, n: int, keys: int,
                     broker: MemoryBroker | None = None) -> tuple[float, float, int]:
    """aiostreams running case ``name`` on the memory broker: wall and CPU seconds from
    ``start()`` to its last output, and its input records. ``broker``: where (a fresh one by
    default), for a caller to read what it did."""
    case = CASES[name]
    broker = MemoryBroker() if broker is None else broker
    inputs = preload(broker, case, n, keys)
    expected = case.outputs(n, keys)
    out = TopicPartition("out", 0)
    with tempfile.TemporaryDirectory() as state_dir:
        app = _app(case, "", state_dir, transport=MemoryTransport(broker))
        started, cpu_started = time.perf_counter(), time.process_time()
        await app.start()
        # a coarse poll of the output's end offset: off the hot path
        while broker.partition_count("out") is None or broker.end_offset(out) < expected:  # noqa: ASYNC110
            await asyncio.sleep(0.005)
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
        await app.stop()
    return elapsed, cpu, inputs


async def run_kafka(name: str, n: int, keys: int, bootstrap: str) -> tuple[float, float, int]:
    """As :func:`run_memory`, on the real broker at ``bootstrap`` (fresh topics)."""
    from aiostreams.transport.kafka import KafkaTransport
    from benchmarks.peers.topics import OffsetReader, create_topics

    case = CASES[name]
    prefix = f"st{uuid.uuid4().hex[:8]}-"
    await create_topics(bootstrap, [prefix + t for t in (*case.topics, "out")], 1)
    producer = KafkaTransport(bootstrap).producer()
    await producer.start()
    inputs = 0
    try:
        chunk: list[OutgoingRecord] = []
        for topic, key, value, ts in case.inputs(n, keys):
            chunk.append(OutgoingRecord(prefix + topic, key, value, ts))
            inputs += 1
            if len(chunk) == 20_000:
                await producer.send_batch(chunk)
                chunk = []
        await producer.send_batch(chunk)
        await producer.flush()
    finally:
        await producer.stop()
    expected = case.outputs(n, keys)
    reader = OffsetReader(bootstrap)
    await reader.start()
    try:
        with tempfile.TemporaryDirectory() as state_dir:
            app = _app(case, prefix, state_dir, broker=f"kafka://{bootstrap}")
            started, cpu_started = time.perf_counter(), time.process_time()
            await app.start()
            # polling the broker until the output is complete: nothing announces it
            while (await reader.end_offsets(prefix + "out", 1))[0] < expected:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
            elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
            await app.stop()
    finally:
        await reader.stop()
    return elapsed, cpu, inputs


def floor(name: str, n: int, keys: int,
          broker: MemoryBroker | None = None) -> tuple[float, float, int]:
    """Case ``name``'s floor on the memory broker (a fresh one by default): wall and CPU
    seconds, inputs."""
    case = CASES[name]
    broker = MemoryBroker() if broker is None else broker
    preload(broker, case, n, keys)
    broker.create_topic("out", 1)
    with tempfile.TemporaryDirectory() as state_dir:
        return run_floor(name, broker, case.topics, "out", Path(state_dir))


async def counted(name: str, n: int, keys: int) -> dict[str, float]:
    """One counted run of case ``name``: each count per input record."""
    broker = MemoryBroker()
    with counting() as counts:
        _, _, inputs = await run_memory(name, n, keys, broker)
    counts["changelog_records"] = sum(
        broker.end_offset(TopicPartition(t, 0)) for t in broker.topic_names()
        if t.endswith("-changelog"))
    return {k: v / inputs for k, v in sorted(counts.items())}


def _per_record(elapsed: float, cpu: float, inputs: int) -> dict[str, float]:
    return {"rate": inputs / elapsed, "cpu_us": cpu / inputs * 1e6}


async def measure(name: str, n: int, keys: int, rounds: int,
                  bootstrap: str | None) -> dict[str, Any]:
    """``rounds`` interleaved runs of aiostreams and the floor (and the real broker's):
    each side's best rate and least CPU a record."""
    runs: dict[str, list[dict[str, float]]] = {"aiostreams": [], "floor": [], "kafka": []}
    for _ in range(rounds):
        runs["aiostreams"].append(_per_record(*await run_memory(name, n, keys)))
        runs["floor"].append(_per_record(*floor(name, n, keys)))
        if bootstrap is not None:
            runs["kafka"].append(_per_record(*await run_kafka(name, n, keys, bootstrap)))
    result: dict[str, Any] = {"case": name, "records": n, "keys": keys}
    for side, done in runs.items():
        if done:
            result[side] = {"rate": max(r["rate"] for r in done),
                            "cpu_us": min(r["cpu_us"] for r in done),
                            "cpu_us_median": statistics.median(r["cpu_us"] for r in done)}
    result["cpu_ratio"] = result["floor"]["cpu_us"] / result["aiostreams"]["cpu_us"]
    return result


def instructions(name: str, n: int, keys: int) -> dict[str, int]:
    """Valgrind instructions per input record of case ``name``, aiostreams and floor, less
    what preloading the memory broker costs (both include it)."""
    from benchmarks.instructions import count

    inputs = {m: CASES[name].input_count(m, keys) for m in (n, 3 * n)}
    total = {}
    for side in ("preload", "aiostreams", "floor"):
        extra = ("--keys", str(keys), "--side", side)
        total[side] = (count(name, 3 * n, "benchmarks.stateful", extra)
                       - count(name, n, "benchmarks.stateful", extra))
    per = inputs[3 * n] - inputs[n]
    return {side: (total[side] - total["preload"]) // per for side in ("aiostreams", "floor")}


async def main_async(args: argparse.Namespace) -> list[dict[str, Any]]:
    tune_gc()
    bootstrap_cm = None
    bootstrap: str | None = None
    if args.kafka:
        from benchmarks._broker import kafka_broker

        bootstrap_cm = kafka_broker()
        bootstrap = await bootstrap_cm.__aenter__()
    results = []
    try:
        for name in args.cases or list(CASES):
            r = await measure(name, args.records, args.keys, args.rounds, bootstrap)
            if args.counts:
                r["counts"] = await counted(name, args.count_records or args.records,
                                            args.keys)
            if args.instructions:
                r["instructions"] = instructions(name, args.instruction_records,
                                                 args.instruction_keys)
            _print(r)
            results.append(r)
    finally:
        if bootstrap_cm is not None:
            await bootstrap_cm.__aexit__(None, None, None)
    return results


def _print(r: dict[str, Any]) -> None:
    a, f = r["aiostreams"], r["floor"]
    line = (f"{r['case']:9} {r['keys']:>7,} keys  aiostreams {a['rate']:9,.0f}/s "
            f"{a['cpu_us']:7.1f} us  floor {f['rate']:9,.0f}/s {f['cpu_us']:6.1f} us  "
            f"floor/aiostreams (CPU) {r['cpu_ratio']:.2f}")
    if "kafka" in r:
        line += f"  kafka {r['kafka']['rate']:9,.0f}/s {r['kafka']['cpu_us']:7.1f} us"
    if "instructions" in r:
        i = r["instructions"]
        line += (f"  instructions {i['aiostreams']:,} / floor {i['floor']:,} "
                 f"({i['floor'] / i['aiostreams']:.2f})")
    print(line, flush=True)
    if "counts" in r:
        print("          per record: " + "  ".join(
            f"{k} {v:.2f}" for k, v in r["counts"].items()), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("cases", nargs="*", metavar="CASE",
                        help=f"of {', '.join(CASES)} (default: all)")
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kafka", action="store_true", help="also on the real broker")
    parser.add_argument("--counts", action="store_true", help="count store and serde work")
    parser.add_argument("--count-records", type=int,
                        help="records of the counted run (default: --records)")
    parser.add_argument("--instructions", action="store_true", help="valgrind counts")
    parser.add_argument("--instruction-records", type=int, default=4000)
    parser.add_argument("--instruction-keys", type=int, default=1000)
    parser.add_argument("--run", choices=list(CASES), help=argparse.SUPPRESS)
    parser.add_argument("--side", choices=["aiostreams", "floor", "preload"],
                        default="aiostreams",
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run is not None:  # the child process valgrind runs
        tune_gc()
        if args.side == "floor":
            floor(args.run, args.records, args.keys)
        elif args.side == "preload":
            preload(MemoryBroker(), CASES[args.run], args.records, args.keys)
        else:
            run_event_loop(run_memory(args.run, args.records, args.keys))
        return
    unknown = sorted(set(args.cases) - set(CASES))
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; choose from {', '.join(CASES)}")
    results = run_event_loop(main_async(args))
    for r in results:
        print(json.dumps({"benchmark": "stateful", **r}))


if __name__ == "__main__":
    main()
