"""What lineage headers cost: P1 and P2 with ``lineage=True`` against off, on one broker.

    python -m benchmarks.lineage_cost [--rounds 2] [--quick] [--only P1|P2]
    python -m benchmarks.lineage_cost --memory [--records 200000] [--repeats 5]

The aiostreams contender of the peer benchmark (:mod:`benchmarks.peers.aiostreams_app`,
run by ``python -m aiostreams run``), unchanged but for ``AIOSTREAMS_LINEAGE=true`` in its
environment, on the scenarios' inputs:

- **P1 sleep**: 1 partition, each record awaits 5 ms (I/O-bound: the async path);
- **P2**: 8 partitions, parse -> add a field -> serialize (CPU-light: the inline path,
  where a header per output is the largest share of the work).

Each round runs both scenarios off and on, the order flipped every round (so a broker that
warms up or a neighbour's load does not favour one side); the better rate of each side is
compared, as the exactly-once overhead is (``benchmarks.peers.scenarios.Bench.eos``). Every
run's output is checked complete and in key order; the lineage runs' outputs are checked
to name their input record (one record read back per partition). Prints a table, the
header's size on the wire, and one JSON line per scenario.

``--memory`` takes the broker's share out (on a loaded machine the rates above move by
more than the header costs): P2's pipeline (source -> enrich -> sink, 8 partitions, the
engine's inline path) on the memory broker, each run in a fresh interpreter, off and on
interleaved ``--repeats`` times; the figure is the median CPU time per record (user +
system, start to caught up) and the ratio of the medians.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition

from aiostreams import App, Processor, Record
from aiostreams.app import run_event_loop
from aiostreams.runtime.lineage import LINEAGE_HEADER, Origin, origin_of
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import OutgoingRecord
from benchmarks._broker import kafka_broker
from benchmarks.peers import contenders as c
from benchmarks.peers.contenders import Contender
from benchmarks.peers.options import ContenderOptions
from benchmarks.peers.scenarios import Bench, Row, Sizes
from benchmarks.peers.topics import offset_reader
from benchmarks.peers.workload import enrich, records


@dataclass(frozen=True)
class WithLineage(Contender):
    """The aiostreams contender with ``AIOSTREAMS_LINEAGE=true`` in its environment."""

    extra_env: dict[str, str] = field(default_factory=dict)

    def environment(self, options: ContenderOptions) -> dict[str, str]:
        env = super().environment(options)
        env.update(self.extra_env)
        return env


def contender(lineage: bool) -> Contender:
    base = c.aiostreams()
    if not lineage:
        return base
    return WithLineage("aiostreams lineage", base.module, base.claims_key_order,
                       overrides=base.overrides, extra_env={"AIOSTREAMS_LINEAGE": "true"})


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


async def first_records(bootstrap: str, topic: str, partitions: int
                        ) -> list[tuple[int, Any]]:
    """(partition, headers) of the first record of each partition of ``topic``."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        found: list[tuple[int, Any]] = []
        for p in range(partitions):
            tp = TopicPartition(topic, p)
            consumer.assign([tp])
            consumer.seek(tp, 0)
            batch = await consumer.getmany(tp, timeout_ms=10_000, max_records=1)
            found.extend((p, tuple(r.headers)) for r in batch.get(tp, [])[:1])
        return found
    finally:
        await consumer.stop()


async def check_headers(bootstrap: str, row: Row, lineage: bool, src: str) -> int:
    """Check the lineage header (or its absence) on each output partition's first record;
    returns the header's bytes on the wire (name, value, and their two length varints)."""
    options = row.result.options
    size = 0
    for partition, headers in await first_records(bootstrap, options.dst,
                                                  options.partitions):
        named = origin_of(headers)
        if not lineage:
            assert named is None, f"lineage off, yet {headers}"
            continue
        assert named is not None and named.topic == src, (partition, headers)
        assert named == Origin(src, named.partition, named.offset)
        value = dict(headers)[LINEAGE_HEADER]
        size = len(LINEAGE_HEADER) + len(value) + 2
    return size


async def run_async(rounds: int, sizes: Sizes, only: str | None = None
                    ) -> dict[str, dict[str, Any]]:
    results: dict[str, dict[str, Any]] = {}
    async with kafka_broker() as bootstrap, offset_reader(bootstrap) as reader:
        say(f"broker at {bootstrap}")
        bench = Bench(bootstrap, reader, sizes, None, say)
        cases = [case for case in [("P1 sleep", sizes.p1, 1, {"io": "sleep"}),
                                   ("P2", sizes.p2, 8, {})]
                 if only is None or case[0].startswith(only)]
        for round_ in range(1, rounds + 1):
            order = (False, True) if round_ % 2 else (True, False)
            for scenario, n, partitions, extra in cases:
                src = await bench.input_topic(n, partitions)
                for lineage in order:
                    label = f"{scenario} lineage {'on' if lineage else 'off'} #{round_}"
                    row = await bench.case(label, contender(lineage), n, partitions,
                                           **extra)
                    if not row.ok:
                        raise SystemExit(f"{label}: {row.result.error or row.verdict}")
                    header = await check_headers(bootstrap, row, lineage, src)
                    side = results.setdefault(scenario, {"records": n}).setdefault(
                        "on" if lineage else "off", {"rate": 0.0})
                    if row.result.rate > side["rate"]:
                        side.update(rate=row.result.rate, cpu_cores=row.result.cpu_share,
                                    cpu_us_per_record=1e6 * row.result.cpu_share
                                    / max(row.result.rate, 1e-9))
                    side.setdefault("rates", []).append(round(row.result.rate))
                    if lineage:
                        side["header_bytes"] = header
    return results


class Enrich(Processor[bytes, dict[str, Any]]):
    """The peer benchmark's P2 processor (:mod:`benchmarks.peers.aiostreams_app`, whose
    import builds its app from the environment)."""

    def process(self, record: Record[bytes, dict[str, Any]]) -> None:
        self.context.forward(record.with_value(enrich(record.value)))


async def memory_run(n: int, lineage: bool) -> dict[str, float]:
    """P2's pipeline over ``n`` records on the memory broker; CPU seconds per record."""
    broker = MemoryBroker()
    broker.create_topic("in", 8)
    producer = MemoryTransport(broker).producer()
    await producer.start()
    await producer.send_batch([OutgoingRecord("in", k, v) for k, v in records(n, 10_000)])
    await producer.stop()
    app = App("lineage-cost", transport=MemoryTransport(broker), lineage=lineage)
    app.topic("in", key=bytes, value=dict)
    app.topic("out", key=bytes, value=dict, partitions=8)
    app.topology.add_source("src", "in").add_processor("enrich", Enrich, "src").add_sink(
        "sink", "out", "enrich")
    before = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    await app.start()
    await app.wait_until_caught_up(timeout=600)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_SELF)
    await app.stop()
    first = broker.records("out", 0)[0]
    assert (origin_of(first.headers) is not None) is lineage, first.headers
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"cpu_us_per_record": cpu / n * 1e6, "rate": n / elapsed,
            "header_bytes": sum(len(k) + len(v or b"") + 2 for k, v in first.headers)}


def memory(n: int, repeats: int) -> int:
    figures: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    for round_ in range(repeats):
        for lineage in ((False, True) if round_ % 2 == 0 else (True, False)):
            out = subprocess.run(
                [sys.executable, "-m", "benchmarks.lineage_cost", "--memory-child",
                 "on" if lineage else "off", "--records", str(n)],
                capture_output=True, text=True, check=False)
            if out.returncode != 0:
                raise SystemExit(f"a run failed (exit {out.returncode}):\n{out.stderr[-3000:]}")
            figures[lineage].append(json.loads(out.stdout.strip().splitlines()[-1]))
            say(f"lineage {'on' if lineage else 'off'}: {figures[lineage][-1]}")
    cpu = {side: statistics.median(f["cpu_us_per_record"] for f in runs)
           for side, runs in figures.items()}
    rate = {side: statistics.median(f["rate"] for f in runs) for side, runs in figures.items()}
    print(f"P2 pipeline, memory broker, {n:,} records, median of {repeats}: CPU "
          f"{cpu[False]:.2f} us/record off, {cpu[True]:.2f} on ({cpu[True] / cpu[False]:.3f} x, "
          f"+{cpu[True] - cpu[False]:.2f} us); rate {rate[False]:,.0f} -> {rate[True]:,.0f}/s "
          f"({rate[True] / rate[False]:.3f} x); header {figures[True][0]['header_bytes']:.0f} B")
    print(json.dumps({"benchmark": "lineage_cost", "scenario": "P2 memory", "records": n,
                      "repeats": repeats, "cpu_us_per_record": {"off": cpu[False],
                                                                "on": cpu[True]},
                      "rate": {"off": rate[False], "on": rate[True]},
                      "cpu_ratio": round(cpu[True] / cpu[False], 4)}))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--quick", action="store_true",
                        help="the peer benchmark's quick sizes (a smoke test)")
    parser.add_argument("--only", choices=("P1", "P2"), help="one scenario of the two")
    parser.add_argument("--memory", action="store_true",
                        help="P2's pipeline on the memory broker: CPU per record")
    parser.add_argument("--records", type=int, default=200_000, help="with --memory")
    parser.add_argument("--repeats", type=int, default=5, help="with --memory")
    parser.add_argument("--memory-child", choices=("on", "off"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory_child:
        print(json.dumps(run_event_loop(memory_run(args.records, args.memory_child == "on"))))
        return 0
    if args.memory:
        return memory(args.records, args.repeats)
    sizes = Sizes.quick() if args.quick else Sizes()
    results = asyncio.run(run_async(args.rounds, sizes, args.only))
    print(f"{'scenario':<10} {'records':>9} {'off rec/s':>10} {'on rec/s':>10} "
          f"{'on/off':>7} {'off us/rec':>11} {'on us/rec':>10} {'header B':>9}")
    for scenario, r in results.items():
        off, on = r["off"], r["on"]
        ratio = on["rate"] / off["rate"]
        print(f"{scenario:<10} {r['records']:>9,} {off['rate']:>10,.0f} {on['rate']:>10,.0f} "
              f"{ratio:>7.3f} {off['cpu_us_per_record']:>11.1f} "
              f"{on['cpu_us_per_record']:>10.1f} {on['header_bytes']:>9}")
    for scenario, r in results.items():
        print(json.dumps({"benchmark": "lineage_cost", "scenario": scenario,
                          "ratio": round(r["on"]["rate"] / r["off"]["rate"], 4), **r}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
