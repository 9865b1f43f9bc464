"""``python -m benchmarks``: the benchmarks of issues 8 and 23 — aiostreams against Faust,
Quix Streams, Kafka Streams (restore) and a raw aiokafka loop, and against the limits
measured in the same run, on one broker, in one run.

    python -m benchmarks all                 every scenario below
    python -m benchmarks eos                 exactly-once against at-least-once (P1, P2)
    python -m benchmarks startup             process start to first output (median of 5)
    python -m benchmarks scaleout            output pauses while a worker joins and leaves
    python -m benchmarks engine              the engine against its limits (benchmarks.engine,
                                             a process of its own)
    python -m benchmarks restore             restore speed against Kafka Streams
                                             (benchmarks.restore; needs a JDK)
    python -m benchmarks p1 p2               some of them
    python -m benchmarks all --quick         smoke-test sizes (about 3 minutes)
    python -m benchmarks p2 --records 200000 --no-peers

Starts the project's broker (or uses ``AIOSTREAMS_KAFKA=host:port``), creates the peers
venv the first time (``.cache/peers-venv``; needs PyPI), then prints a table and JSON lines,
rewrites its own section of ``benchmarks/RESULTS.md`` and draws ``docs/img/peers.png``.
The engine and restore benchmarks also run alone (``python -m benchmarks.engine``,
``benchmarks.restore``); the other single-purpose benchmarks are modules of their own:
``benchmarks.kafka_throughput``, ``benchmarks.retry``, ``benchmarks.state``,
``benchmarks.parquet``, ``benchmarks.eos_restart`` (restart after ``kill -9`` under
exactly-once: the store's tail against a full replay), ``benchmarks.stateful`` (aggregates,
windows and joins through SQLite stores beside hand-rolled ``sqlite3`` floors).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from benchmarks.peers.harness import ALL, SCENARIOS, run
from benchmarks.peers.scenarios import Sizes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scenarios", nargs="+", choices=["all", *SCENARIOS],
                        help="which scenarios to run")
    parser.add_argument("--quick", action="store_true", help="smoke-test sizes")
    parser.add_argument("--records", type=int, metavar="N",
                        help="records of P2 and P6 (default 1,000,000)")
    parser.add_argument("--p1-records", type=int, metavar="N",
                        help="records of P1 (default 200,000; the HTTP variant a quarter)")
    parser.add_argument("--p5-records", type=int, metavar="N",
                        help="records of P5 (default 10,000,000)")
    parser.add_argument("--no-peers", action="store_true",
                        help="aiostreams and raw aiokafka only (no peers venv, no PyPI)")
    parser.add_argument("--no-write", action="store_true",
                        help="print only: leave RESULTS.md and the chart alone")
    args = parser.parse_args(argv)
    sizes = Sizes.quick() if args.quick else Sizes()
    if args.records:
        sizes = replace(sizes, p2=args.records)
    if args.p1_records:
        sizes = replace(sizes, p1=args.p1_records, p1_http=max(1, args.p1_records // 4))
    if args.p5_records:
        sizes = replace(sizes, p5=args.p5_records)
    chosen = list(ALL) if "all" in args.scenarios else [
        s for s in SCENARIOS if s in args.scenarios]
    command = "python -m benchmarks " + " ".join(argv if argv is not None else sys.argv[1:])
    return run(chosen, sizes, peers=not args.no_peers, write=not args.no_write,
               command=command)


if __name__ == "__main__":
    sys.exit(main())
