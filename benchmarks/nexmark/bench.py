"""One Nexmark run on a broker: the inputs written once, then per query aiostreams and
Kafka Streams in turn, each in its own process reading the same topics and writing an
output topic of its own, timed by itself (see :mod:`benchmarks.nexmark.contender` and
``Nexmark.java``), and the two outputs read back and compared in the query's form
(:data:`~benchmarks.nexmark.topics.FORMS`).

The figures per query and side: input records per second (inputs over the seconds from the
first input read to the last output written) and CPU microseconds per input record (the
whole process, every thread); the ratio per core is Kafka Streams' CPU per record over
aiostreams' (what the throughput ratio would be with a core each: the figure a shared,
loaded machine distorts least).
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.nexmark import jvm, queries
from benchmarks.nexmark.contender import Run
from benchmarks.nexmark.generator import Config
from benchmarks.nexmark.jvm import Timed
from benchmarks.nexmark.topics import KEEP, Inputs, Pair, canonical, write_inputs
from benchmarks.peers.topics import create_topics, read_all

REPO = Path(__file__).parents[2]
LOGS = REPO / ".cache" / "bench-logs"
"""Where aiostreams' side's log (its stderr) of each run goes, ``<app>.log``."""


UNCACHED_REFERENCE = frozenset({"q4"})
"""Queries whose final answer in Kafka Streams changes with its record cache: q4's
table-table join reads the other side's cached value, so a bid processed before its
auction is averaged twice (its uncached answer is the true average). Against a cached
Kafka Streams run, these are compared with its uncached run as well."""


@dataclass(frozen=True)
class Row:
    query: str
    aiostreams: Timed
    kafka_streams: Timed | None
    equal: bool | None
    compared: int
    expected: int
    """Input records the query reads; a side that read more re-read some after a
    rebalance (at-least-once), and its figures count what it read."""
    equal_uncached: bool | None = None
    """For a query of :data:`UNCACHED_REFERENCE` run against Kafka Streams' record cache:
    whether aiostreams' outputs equal Kafka Streams' run again with its cache off (None:
    not run)."""

    @staticmethod
    def rate(t: Timed) -> float:
        return t.inputs / t.seconds if t.seconds > 0 else 0.0

    @staticmethod
    def cpu_us(t: Timed) -> float:
        return t.cpu_seconds / t.inputs * 1e6 if t.inputs else 0.0

    @property
    def ratio(self) -> float | None:
        """Kafka Streams' CPU per record over aiostreams' (>= 1: aiostreams cheaper)."""
        if self.kafka_streams is None or not self.cpu_us(self.aiostreams):
            return None
        return self.cpu_us(self.kafka_streams) / self.cpu_us(self.aiostreams)

    @property
    def target(self) -> float:
        return 0.5 if self.query in ("q0", "q1", "q2") else 0.25

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "query": self.query, "inputs": self.expected,
            "aiostreams_inputs_read": self.aiostreams.inputs,
            "aiostreams_per_s": round(self.rate(self.aiostreams)),
            "aiostreams_cpu_us": round(self.cpu_us(self.aiostreams), 1),
            "aiostreams_outputs": self.aiostreams.outputs, "equal": self.equal,
            "compared": self.compared, "equal_to_uncached_kafka_streams": self.equal_uncached}
        if self.kafka_streams is not None:
            d.update({"kafka_streams_per_s": round(self.rate(self.kafka_streams)),
                      "kafka_streams_cpu_us": round(self.cpu_us(self.kafka_streams), 1),
                      "kafka_streams_outputs": self.kafka_streams.outputs,
                      "kafka_streams_inputs_read": self.kafka_streams.inputs,
                      "ratio_per_core": round(self.ratio or 0.0, 3)})
        return d


async def run_aiostreams(run: Run) -> Timed:
    """``run`` in a fresh Python process (``python -m benchmarks.nexmark.contender``)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "benchmarks.nexmark.contender", run.to_json(), cwd=REPO,
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await process.communicate()
    LOGS.mkdir(parents=True, exist_ok=True)
    (LOGS / f"{run.app}.log").write_bytes(err)
    if process.returncode != 0:
        tail = "\n".join(err.decode(errors="replace").strip().splitlines()[-30:])
        raise RuntimeError(f"aiostreams' {run.query} exited with {process.returncode}:\n{tail}")
    return Timed.from_json(out.decode().strip().splitlines()[-1])


async def read_output(bootstrap: str, query: str, topic: str, partitions: int) -> list[Pair]:
    return canonical(query, [(r.key, r.value)
                             for r in await read_all(bootstrap, topic, partitions)])


async def run_query(bootstrap: str, inputs: Inputs, query: str, state: Path, *,
                    kafka_streams: bool, timeout: float, profile: Path | None,
                    cache_bytes: int | None = None, our_cache_bytes: int = 0) -> Row:
    """``query`` on both sides (aiostreams first), outputs compared."""
    p = inputs.partitions
    ours_topic, theirs_topic = f"{inputs.prefix}-{query}-aiostreams", \
        f"{inputs.prefix}-{query}-kstreams"
    await create_topics(bootstrap, [ours_topic, theirs_topic], p, KEEP)
    run = Run(bootstrap, f"{inputs.prefix}-{query}-ais", query, inputs.prefix, p,
              dict(inputs.counts), ours_topic, str(state / f"{query}-ais"), timeout,
              None if profile is None else str(profile / f"nexmark-{query}.prof"),
              our_cache_bytes)
    ours = await run_aiostreams(run)
    if ours.inputs < run.expected:
        raise RuntimeError(f"aiostreams read {ours.inputs} inputs of {query}, not "
                           f"{run.expected}")
    if not kafka_streams:
        return Row(query, ours, None, None, 0, run.expected)
    theirs = await jvm.run_query(bootstrap, f"{inputs.prefix}-{query}-ks", query,
                                 inputs.prefix, theirs_topic, run.expected,
                                 state / f"{query}-ks", timeout, cache_bytes)
    a = await read_output(bootstrap, query, ours_topic, p)
    b = await read_output(bootstrap, query, theirs_topic, p)
    uncached = None
    if query in UNCACHED_REFERENCE and cache_bytes != 0:
        reference_topic = f"{theirs_topic}-nocache"
        await create_topics(bootstrap, [reference_topic], p, KEEP)
        await jvm.run_query(bootstrap, f"{inputs.prefix}-{query}-ks-nocache", query,
                            inputs.prefix, reference_topic, run.expected,
                            state / f"{query}-ks-nocache", timeout, 0)
        uncached = a == await read_output(bootstrap, query, reference_topic, p)
    return Row(query, ours, theirs, a == b, len(b), run.expected, uncached)


async def measure(bootstrap: str, config: Config, partitions: int, which: list[str], *,
                  kafka_streams: bool = True, timeout: float = 900.0,
                  profile: Path | None = None, report: Any = None,
                  cache_bytes: int | None = None, our_cache_bytes: int = 0) -> list[Row]:
    """Write ``config``'s inputs under a fresh prefix, then run each query of ``which``.
    ``report(row)`` is called as each query finishes; ``cache_bytes``: Kafka Streams'
    record cache (None: its default, 10 MB); ``our_cache_bytes``: aiostreams'
    ``cache_max_bytes`` (0: off)."""
    prefix = f"nexmark-{time.strftime('%H%M%S')}-{os.getpid()}"
    inputs = await write_inputs(bootstrap, prefix, config, partitions)
    rows = []
    with tempfile.TemporaryDirectory(prefix="nexmark-") as tmp:
        for query in which:
            row = await run_query(bootstrap, inputs, query, Path(tmp),
                                  kafka_streams=kafka_streams, timeout=timeout,
                                  profile=profile, cache_bytes=cache_bytes,
                                  our_cache_bytes=our_cache_bytes)
            rows.append(row)
            if report is not None:
                report(row)
    return rows


HEADER = ("| query | inputs | aiostreams rec/s | aiostreams CPU µs/rec | Kafka Streams rec/s "
          "| Kafka Streams CPU µs/rec | ratio per core (target) | outputs equal |\n"
          "| --- | ---: | ---: | ---: | ---: | ---: | ---: | :---: |")


def table_line(row: Row) -> str:
    ks = row.kafka_streams
    mark = {True: "✔", False: "✗", None: "-"}[row.equal]
    if row.equal_uncached is not None:
        mark += (f" ({'✔' if row.equal_uncached else '✗'} against Kafka Streams with its "
                 "cache off)")
    inputs = f"{row.expected:,}" + "".join(
        f" (+{t.inputs - row.expected:,} re-read by {who})"
        for who, t in (("aiostreams", row.aiostreams), ("Kafka Streams", ks))
        if t is not None and t.inputs > row.expected)
    if ks is None:
        return (f"| {row.query} | {inputs} | {row.rate(row.aiostreams):,.0f} "
                f"| {row.cpu_us(row.aiostreams):.1f} | - | - | - | {mark} |")
    met = "" if row.ratio is None or row.ratio >= row.target else " **missed**"
    return (f"| {row.query} | {inputs} | {row.rate(row.aiostreams):,.0f} | "
            f"{row.cpu_us(row.aiostreams):.1f} | {row.rate(ks):,.0f} | {row.cpu_us(ks):.1f} | "
            f"{row.ratio:.2f} (≥ {row.target}){met} | {mark} |")


__all__ = ["HEADER", "UNCACHED_REFERENCE", "Row", "measure", "queries", "table_line"]
