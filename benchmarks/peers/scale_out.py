"""Scale-out pauses (issue 23, item 7): how long output stops while a worker joins a running
app's group and while one leaves it.

A live input, not a preloaded one: the harness produces P2's records at a steady
``Sizes.live_rate`` into a fresh 8-partition topic for the whole scenario, so output should
follow input within milliseconds and any stop shows as a gap. One ``aiostreams run``
process (A) runs alone for ``Sizes.settle`` seconds; a second one (B, same app, same group)
is started (the *join*, at B's spawn); once the group's coordinator reports it ``Stable``
with two members, and ``Sizes.window`` seconds more, B gets SIGTERM (the *leave*: a graceful
stop, which leaves the group); once the group is ``Stable`` with one member, and ``window``
more, the producer and A stop. Each wait for the group is bounded by :data:`SETTLE_TIMEOUT`.

The output topic is made with :data:`~benchmarks.peers.topics.APPEND_TIME`, so each output's
timestamp is its arrival at the broker. The *pause* after an event is the longest gap
between consecutive outputs of one partition that ended between that event and the next
(see :func:`longest_gap`): the longest any partition's records waited, which is at least the
gap of all partitions merged (reported too). The longest gap while A ran alone, from a
second after its first output to the join, is the baseline. The output is then checked
like any other: one output per input, per-key order kept across both rebalances.

CPU seconds per record with two workers against one is P6's figure (same pipeline).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import signal
import subprocess
import time
from collections.abc import Sequence

from aiostreams.transport.kafka import KafkaTransport
from aiostreams.types import OutgoingRecord
from benchmarks.peers import contenders as c
from benchmarks.peers.options import ContenderOptions
from benchmarks.peers.rss import tree_cpu_seconds
from benchmarks.peers.runner import LOGS, RunResult, stop
from benchmarks.peers.scenarios import Bench, Row, slug
from benchmarks.peers.topics import APPEND_TIME, OutputRecord, create_topics, read_all
from benchmarks.peers.verify import verify
from benchmarks.peers.workload import records

SCENARIO = "Scale-out"
PARTITIONS = 8
TICK = 0.01
"""The producer sends ``rate * TICK`` records every ``TICK`` seconds."""
SETTLE_TIMEOUT = 60.0
"""Seconds a rebalance may take before the scenario gives up on it (an error row)."""


def longest_gap(times: Sequence[float], start: float, end: float) -> float:
    """The longest gap between consecutive ``times`` (sorted, seconds) that *ends* in
    ``(start, end]``, counted whole: a pause belongs to the last event before output
    resumed. If no time follows the last one at all, output stopped: that gap runs to
    ``end``. With no times, the whole window is a gap."""
    if end <= start:
        raise ValueError(f"the window must not be empty: start {start} >= end {end}")
    if any(a > b for a, b in itertools.pairwise(times)):
        raise ValueError("times must be sorted")
    if not times:
        return end - start
    longest = max((b - a for a, b in itertools.pairwise(times) if start < b <= end),
                  default=0.0)
    if times[-1] < end:
        longest = max(longest, end - times[-1])
    return longest


def pause(outputs: Sequence[OutputRecord], start: float, end: float) -> tuple[float, float]:
    """(the longest pause of any one partition, the longest gap of all partitions merged)
    in [start, end): see :func:`longest_gap`; times are the outputs' append timestamps."""
    by_partition: dict[int, list[float]] = {}
    for r in outputs:
        by_partition.setdefault(r.partition, []).append(r.timestamp / 1000)
    merged = sorted(t for ts in by_partition.values() for t in ts)
    worst = max((longest_gap(sorted(ts), start, end) for ts in by_partition.values()),
                default=end - start)
    return worst, longest_gap(merged, start, end)


async def produce_live(bootstrap: str, topic: str, rate: int, stop_at: asyncio.Event) -> int:
    """Produce :func:`~benchmarks.peers.workload.records` to ``topic`` at ``rate`` per
    second until ``stop_at`` is set; returns how many were produced."""
    producer = KafkaTransport(bootstrap).producer()
    await producer.start()
    produced = 0
    source = records(10**9, 10_000)
    started = time.monotonic()
    try:
        while not stop_at.is_set():
            due = int((time.monotonic() - started) * rate)
            chunk = [OutgoingRecord(topic, k, v) for k, v in
                     (next(source) for _ in range(due - produced))]
            if chunk:
                await producer.send_batch(chunk)
                produced += len(chunk)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop_at.wait(), TICK)
        await producer.flush()
    finally:
        await producer.stop()
    return produced


async def scale_out(bench: Bench) -> None:
    """Run the scenario with aiostreams at ``bench.sizes``' ``live_rate``, ``settle`` and
    ``window`` (one row, its pauses in ``Row.figures``)."""
    plan = bench.sizes
    contender = c.aiostreams()
    name = f"peers-scaleout-{slug(contender.label)}-{bench.stamp}"
    src, dst = f"{name}-in", f"{name}-out"
    await create_topics(bench.bootstrap, [src], PARTITIONS)
    await create_topics(bench.bootstrap, [dst], PARTITIONS, APPEND_TIME)
    options = contender.options(ContenderOptions(
        bootstrap=bench.bootstrap, src=src, dst=dst, group=name, partitions=PARTITIONS))
    bench.say(f"{SCENARIO}: {contender.label}, {plan.live_rate:,} records/s live; a second "
              f"process joins {plan.settle:g} s after the first output and leaves "
              f"{plan.window:g} s after the group is stable")
    done = asyncio.Event()
    producing = asyncio.create_task(produce_live(bench.bootstrap, src, plan.live_rate, done))
    LOGS.mkdir(parents=True, exist_ok=True)
    began = time.time()
    a = await _spawn(contender, options, f"{name}-a")
    b: asyncio.subprocess.Process | None = None
    error: str | None = None
    at: dict[str, float] = {}  # wall-clock times of the events; how long rebalances took
    try:
        at["flowing"] = await _first_output(bench, dst)
        await asyncio.sleep(plan.settle)
        at["joined"] = time.time()
        b = await _spawn(contender, options, f"{name}-b")
        at["join rebalance s"] = await _group_settles(bench, name, 2)
        await asyncio.sleep(plan.window)
        at["left"] = time.time()
        b.send_signal(signal.SIGTERM)
        at["leave rebalance s"] = await _group_settles(bench, name, 1)
        await asyncio.sleep(plan.window)
        for proc, which in ((a, "A"), (b, "B")):
            if proc.returncode not in (None, 0):
                error = f"process {which} exited with code {proc.returncode}; see {LOGS}"
    except TimeoutError as e:
        error = str(e)
    finally:
        at["ended"] = time.time()
        cpu = tree_cpu_seconds(a.pid)
        done.set()
        produced = await producing
        await stop(a, 30.0)
        if b is not None:
            await stop(b, 30.0)
    result = RunResult(contender.label, options, 0, at["ended"] - began, 0, 0.0, cpu=cpu,
                       error=error, log=LOGS / f"{name}-a.log")
    row = Row(SCENARIO, contender, result, None)
    if error is None:
        outputs = await read_all(bench.bootstrap, dst, PARTITIONS)
        result.records = result.timed = len(outputs)
        row.verdict = verify(outputs, produced, None)
        f = row.figures
        f["first output s"] = at["flowing"] - began
        f["baseline gap s"] = pause(outputs, at["flowing"] + 1.0, at["joined"])[0]
        f["join pause s"], f["join pause (all partitions) s"] = pause(
            outputs, at["joined"], at["left"])
        f["leave pause s"], f["leave pause (all partitions) s"] = pause(
            outputs, at["left"], at["ended"])
        f["join rebalance s"] = at["join rebalance s"]
        f["leave rebalance s"] = at["leave rebalance s"]
        row.notes.append(
            f"{produced:,} records at {plan.live_rate:,}/s; the group was stable with 2 "
            f"members {f['join rebalance s']:.1f} s after the second process started, with "
            f"1 {f['leave rebalance s']:.1f} s after its SIGTERM; longest gap of one "
            f"partition: {f['baseline gap s']:.2f} s alone, {f['join pause s']:.2f} s while "
            f"the second worker joined, {f['leave pause s']:.2f} s while it left (all "
            f"partitions at once: {f['join pause (all partitions) s']:.2f} s, "
            f"{f['leave pause (all partitions) s']:.2f} s; from the outputs' broker append "
            "times)")
        bench.say("  " + row.notes[-1])
    bench.rows.append(row)


async def _first_output(bench: Bench, topic: str) -> float:
    """The wall-clock time the harness first saw output in ``topic``."""
    began = time.monotonic()
    while (time.monotonic() - began) < SETTLE_TIMEOUT:
        if sum((await bench.reader.end_offsets(topic, PARTITIONS)).values()) > 0:
            return time.time()
        await asyncio.sleep(0.05)
    raise TimeoutError(f"{SCENARIO}: no output in {topic!r} within {SETTLE_TIMEOUT:g} s; "
                       f"see the logs in {LOGS}")


async def _group_settles(bench: Bench, group: str, members: int) -> float:
    """Seconds until the group's coordinator reports it ``Stable`` with ``members``
    members (polled like the output, every 50 ms)."""
    began = time.monotonic()
    while (time.monotonic() - began) < SETTLE_TIMEOUT:
        if await bench.reader.group_state(group) == ("Stable", members):
            return time.monotonic() - began
        await asyncio.sleep(0.05)
    raise TimeoutError(f"{SCENARIO}: group {group!r} was not Stable with {members} "
                       f"member(s) within {SETTLE_TIMEOUT:g} s; see the logs in {LOGS}")


async def _spawn(contender: c.Contender, options: ContenderOptions,
                 log_name: str) -> asyncio.subprocess.Process:
    with (LOGS / f"{log_name}.log").open("wb") as sink:
        return await asyncio.create_subprocess_exec(
            *contender.command(None), cwd=c.REPO, env=contender.environment(options),
            stdout=sink, stderr=subprocess.STDOUT)
