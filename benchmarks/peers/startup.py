"""Start-up (issue 23, item 8): from a contender's process start to its first output record,
on a warm broker.

Each start is a fresh process with a group of its own on a small preloaded input (so there
is data to process at once) and an output topic made with
:data:`~benchmarks.peers.topics.APPEND_TIME`: the first output's timestamp is when the broker
appended it. The harness notes the wall clock just before it spawns the process, so the
figure is exact to the millisecond and does not depend on how often the harness polls.
The median of ``starts`` starts is compared (imports, group join, first fetch, first
produce and its delivery all count).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence

from benchmarks.peers import contenders as c
from benchmarks.peers.options import ContenderOptions
from benchmarks.peers.runner import Watch, run_contender
from benchmarks.peers.scenarios import Bench, Row, slug
from benchmarks.peers.topics import APPEND_TIME, create_topics, read_all

SCENARIO = "Start-up"
INPUT_RECORDS = 1_000
PARTITIONS = 1


async def startup(bench: Bench, starts: int) -> None:
    """``starts`` starts of aiostreams (and of Faust and Quix Streams when the peers venv is
    there), alternating, one row per start (``"Start-up #<i>"``), each with its figure in
    ``Row.figures["first output s"]``."""
    if starts < 1:
        raise ValueError(f"starts must be at least 1, got {starts}")
    src = await bench.input_topic(INPUT_RECORDS, PARTITIONS)
    for i in range(1, starts + 1):
        for contender in [c.aiostreams(), *bench.peers(c.faust(1), c.quix())]:
            name = f"peers-startup-{i}-{slug(contender.label)}-{bench.stamp}"
            dst = f"{name}-out"
            await create_topics(bench.bootstrap, [dst], PARTITIONS, APPEND_TIME)
            options = contender.options(ContenderOptions(
                bootstrap=bench.bootstrap, src=src, dst=dst, group=name,
                partitions=PARTITIONS))
            bench.say(f"{SCENARIO} #{i}: {contender.label} ...")
            spawned = time.time()
            result = await run_contender(contender, options, Watch(n=1, stall_timeout=60.0),
                                         bench.reader, bench.peers_python, name)
            row = Row(f"{SCENARIO} #{i}", contender, result, None)
            if result.error is None:
                outputs = await read_all(bench.bootstrap, dst, PARTITIONS)
                first = min(r.timestamp for r in outputs) / 1000
                row.figures["first output s"] = first - spawned
                bench.say(f"  first output {first - spawned:.3f} s after the process started")
            bench.rows.append(row)


def median_startup(rows: Sequence[Row], label: str) -> float | None:
    """The median first-output time of ``label``'s starts (None: none succeeded)."""
    figures = [r.figures["first output s"] for r in rows
               if r.scenario.startswith(f"{SCENARIO} #") and r.contender.label == label
               and "first output s" in r.figures]
    return statistics.median(figures) if figures else None

