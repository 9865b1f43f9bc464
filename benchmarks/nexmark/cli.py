"""The command line of ``python -m benchmarks.nexmark`` (see the package docstring)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from benchmarks._broker import kafka_broker
from benchmarks.nexmark import bench, drive, profiles
from benchmarks.nexmark.generator import Config, check_lifetimes
from benchmarks.nexmark.queries import QUERIES

KS_DEFAULT_CACHE = 10 * 1024 * 1024
"""Kafka Streams' default statestore.cache.max.bytes: our side's record cache by default."""


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    import benchmarks.nexmark as package

    parser = argparse.ArgumentParser(prog="python -m benchmarks.nexmark",
                                     description=package.__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=None,
                        help="events generated (default 200,000; --check: 3,000)")
    parser.add_argument("--rate", type=int, default=None,
                        help="events per second of event time (default 10,000; --check: "
                             "500, so its 3,000 events span several windows)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--partitions", type=int, default=4,
                        help="partitions of every topic (default 4)")
    parser.add_argument("--queries", default=",".join(QUERIES),
                        help=f"comma-separated, of {','.join(QUERIES)} (default all)")
    parser.add_argument("--check", action="store_true",
                        help="no broker: each query in both frameworks' TopologyTestDriver "
                             "over a small input, outputs compared; exit 1 on a difference")
    parser.add_argument("--no-kafka-streams", action="store_true",
                        help="time aiostreams only (no JVM, no comparison)")
    parser.add_argument("--profile", type=Path, default=None,
                        help="write a cProfile of aiostreams' timed span per query here")
    parser.add_argument("--kafka-streams-cache-bytes", type=int, default=None,
                        help="Kafka Streams' statestore.cache.max.bytes (default: its own, "
                             "10 MB; 0 emits every update, as aiostreams does)")
    parser.add_argument("--aiostreams-cache-bytes", type=int, default=KS_DEFAULT_CACHE,
                        help="aiostreams' cache_max_bytes (default: Kafka Streams' default "
                             f"budget, {KS_DEFAULT_CACHE:,} bytes; 0 emits every update)")
    parser.add_argument("--timeout", type=float, default=900.0,
                        help="seconds one side may take for one query")
    args = parser.parse_args(argv)
    args.queries = [q.strip() for q in args.queries.split(",") if q.strip()]
    unknown = [q for q in args.queries if q not in QUERIES]
    if unknown:
        parser.error(f"unknown queries {unknown}; choose from {', '.join(QUERIES)}")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    config = Config(args.events or (3_000 if args.check else 200_000),
                    args.rate or (500 if args.check else 10_000), args.seed)
    check_lifetimes(config)
    if args.check:
        results = drive.check(config, args.queries)
        for compared in results:
            print(compared.describe())
        sys.exit(0 if all(c.equal for c in results) else 1)
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)

    def report(row: bench.Row) -> None:
        print(bench.table_line(row), flush=True)

    async def go() -> list[bench.Row]:
        async with kafka_broker() as bootstrap:
            return await bench.measure(bootstrap, config, args.partitions, args.queries,
                                       kafka_streams=not args.no_kafka_streams,
                                       timeout=args.timeout, profile=args.profile,
                                       report=report,
                                       cache_bytes=args.kafka_streams_cache_bytes,
                                       our_cache_bytes=args.aiostreams_cache_bytes)

    cache = args.kafka_streams_cache_bytes
    print(f"Nexmark: {config.events:,} events at {config.rate:,}/s of event time, seed "
          f"{config.seed}, {args.partitions} partitions; Kafka Streams' record cache "
          f"{'10 MB (default)' if cache is None else f'{cache:,} bytes'}; aiostreams' "
          f"cache_max_bytes {args.aiostreams_cache_bytes:,}"
          f"{' (off)' if not args.aiostreams_cache_bytes else ''}")
    print(bench.HEADER, flush=True)
    rows = asyncio.run(go())
    if args.profile is not None:
        for row in rows:
            print(f"\n### {row.query}\n")
            print(profiles.top(args.profile / f"nexmark-{row.query}.prof"))
    print(json.dumps({"benchmark": "nexmark", "events": config.events, "rate": config.rate,
                      "partitions": args.partitions,
                      "rows": [row.as_dict() for row in rows]}))
