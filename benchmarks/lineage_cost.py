"""What lineage headers cost: P1 and P2 with ``lineage=True`` against off, on one broker.

    python -m benchmarks.lineage_cost [--rounds 2] [--quick]

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
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition

from aiostreams.runtime.lineage import LINEAGE_HEADER, Origin, origin_of
from benchmarks._broker import kafka_broker
from benchmarks.peers import contenders as c
from benchmarks.peers.contenders import Contender
from benchmarks.peers.options import ContenderOptions
from benchmarks.peers.scenarios import Bench, Row, Sizes
from benchmarks.peers.topics import offset_reader


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


async def run_async(rounds: int, sizes: Sizes) -> dict[str, dict[str, Any]]:
    results: dict[str, dict[str, Any]] = {}
    async with kafka_broker() as bootstrap, offset_reader(bootstrap) as reader:
        say(f"broker at {bootstrap}")
        bench = Bench(bootstrap, reader, sizes, None, say)
        cases = [("P1 sleep", sizes.p1, 1, {"io": "sleep"}), ("P2", sizes.p2, 8, {})]
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--quick", action="store_true",
                        help="the peer benchmark's quick sizes (a smoke test)")
    args = parser.parse_args(argv)
    sizes = Sizes.quick() if args.quick else Sizes()
    results = asyncio.run(run_async(args.rounds, sizes))
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
