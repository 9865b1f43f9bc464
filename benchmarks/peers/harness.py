"""One run of the peer benchmark: broker up, peers venv ready, scenarios, results out."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Sequence

from benchmarks._broker import kafka_broker
from benchmarks.peers import report
from benchmarks.peers.scale_out import scale_out
from benchmarks.peers.scenarios import Bench, Sizes
from benchmarks.peers.standalone import engine, restore
from benchmarks.peers.startup import startup
from benchmarks.peers.targets import targets
from benchmarks.peers.topics import offset_reader
from benchmarks.peers.venv import ensure_peers_venv

SCENARIOS = ("p1", "p2", "p5", "p6", "eos", "startup", "scaleout", "engine", "restore")
ALL = SCENARIOS
"""What ``all`` runs: everything."""
# The engine first: a process of its own on the memory broker, run before the scenarios
# that load the broker (which works on for a while after them: its CPU-bound (b) lost a
# third against the timer-bound (b'') when it ran last); then P2 (its rate is in the
# table's first rows)
RUN_ORDER = ("engine", "p2", "p1", "eos", "p5", "p6", "startup", "scaleout", "restore")
STANDALONE = {"engine": engine, "restore": restore}


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


async def run_async(chosen: Sequence[str], sizes: Sizes, peers: bool) -> Bench:
    peers_python = ensure_peers_venv(say) if peers else None
    async with kafka_broker() as bootstrap, offset_reader(bootstrap) as reader:
        say(f"broker at {bootstrap}")
        bench = Bench(bootstrap, reader, sizes, peers_python, say)
        for name in RUN_ORDER:
            if name == "startup" and name in chosen:
                await startup(bench, sizes.starts)
            elif name == "scaleout" and name in chosen:
                await scale_out(bench)
            elif name in STANDALONE and name in chosen:
                await STANDALONE[name](bench)
            elif name in chosen:
                await getattr(bench, name)()
        return bench


def run(chosen: Sequence[str], sizes: Sizes, *, peers: bool, write: bool,
        command: str) -> int:
    """Run ``chosen`` scenarios; print the table and JSON lines; unless ``write`` is
    False, rewrite RESULTS.md's section and the chart. Exit code 1 if any contender that
    claims an output property broke it, or did not finish."""
    load_start = os.getloadavg()[0]
    bench = asyncio.run(run_async(chosen, sizes, peers))
    loads = (load_start, os.getloadavg()[0])
    found = targets(bench.rows)
    print(report.table(bench.rows, found, loads))
    for row in bench.rows:
        print(json.dumps({"benchmark": "peers", **row.to_json()}))
    for target in found:
        print(json.dumps({"benchmark": "peers-target", **target.to_json()}))
    if write:
        report.write(bench.rows, found, command, sizes, loads)
    return 0 if all(row.ok for row in bench.rows) else 1
