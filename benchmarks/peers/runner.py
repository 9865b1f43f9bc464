"""Runs one contender process on one input and watches it from outside.

The harness never looks inside a contender: it starts the process, polls the output
topic's end offsets (every 50 ms, a coarse poll off the contender's hot path), samples the
process tree's RSS and, when asked, the group's committed offsets, and stops the process
(SIGTERM, then SIGKILL after ``stop_timeout``) once the output holds ``n`` records, a fixed
duration has passed, or nothing moved for ``stall_timeout``.

Throughput is harness-measured, from the first poll that saw output to the poll that saw
``n`` records: start-up (imports, group join) is excluded, and so are output timestamps,
which frameworks copy from their input.

With ``Watch(count="committed")`` the harness counts instead what the group has committed
of its input (one output per input record, inputs from offset 0): under exactly-once that is
the output a ``read_committed`` reader sees. The output topic's end offsets cannot say it:
they include open transactions and one commit marker per transaction and partition. Commits
come every ``commit_interval_ms``, so the rate is then taken between the first commit seen and
the last one before the final commit (whole intervals of work; the final one may be partly
idle).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.peers.contenders import REPO, Contender
from benchmarks.peers.options import ContenderOptions
from benchmarks.peers.rss import cpu_seconds, tree_cpu_seconds, tree_rss_bytes
from benchmarks.peers.topics import OffsetReader
from benchmarks.peers.verify import CommitSample

POLL = 0.05
COMMIT_SAMPLE_EVERY = 0.2
RSS_SAMPLE_EVERY = 0.25
LOGS = REPO / ".cache" / "bench-logs"


@dataclass
class Watch:
    """What to watch for and when to stop: ``n`` output records, or ``run_for`` seconds."""

    n: int | None
    run_for: float | None = None
    track_commits: bool = False
    stall_timeout: float = 90.0
    stop_timeout: float = 20.0
    count: str = "output"
    """``"output"``: records in the output topic (end offsets); ``"committed"``: input
    records the group committed."""

    def __post_init__(self) -> None:
        if self.count not in ("output", "committed"):
            raise ValueError(f"Watch.count must be 'output' or 'committed', got {self.count!r}")


@dataclass
class RunResult:
    label: str
    options: ContenderOptions
    records: int
    """Output records when the run stopped."""
    seconds: float
    """From the first output seen to the stop condition."""
    timed: int
    """Output records produced within ``seconds`` (those after the first poll that saw any)."""
    startup: float
    """From process start to the first output seen."""
    rss: list[tuple[float, int]] = field(default_factory=list)
    """(seconds since start, bytes) of the process tree."""
    outputs_at: list[tuple[float, int]] = field(default_factory=list)
    """(seconds since start, output records) at each RSS sample."""
    commits: list[CommitSample] = field(default_factory=list)
    cpu: float = 0.0
    """CPU seconds the process tree used while timed (from the first output on)."""
    broker_cpu: float | None = None
    """CPU seconds the broker's process used over the same span (None: not measured - the
    broker is not a local process this user can see)."""
    error: str | None = None
    log: Path | None = None
    startup_included: bool = False
    """The run was too short to time without its start-up (tiny sizes only)."""

    @property
    def cpu_share(self) -> float:
        """CPU seconds per second while timed (2.0: both cores of this machine busy)."""
        return self.cpu / self.seconds if self.seconds > 0 else 0.0

    @property
    def rate(self) -> float:
        return self.timed / self.seconds if self.seconds > 0 else 0.0


async def run_contender(contender: Contender, options: ContenderOptions, watch: Watch,
                        reader: OffsetReader, peers_python: Path | None,
                        log_name: str, broker_pid: int | None = None) -> RunResult:
    """Run ``contender`` until ``watch`` says stop; never raises for a contender's failure
    (the result's ``error`` says what happened and where its log is). With ``broker_pid``,
    the broker's CPU is sampled at the same instants as the contender's (``broker_cpu``)."""

    def cpu_now() -> tuple[float, float]:
        return (tree_cpu_seconds(proc.pid),
                0.0 if broker_pid is None else cpu_seconds(broker_pid))

    LOGS.mkdir(parents=True, exist_ok=True)
    log = LOGS / f"{log_name}.log"
    with log.open("wb") as sink:
        started = time.monotonic()
        proc = await asyncio.create_subprocess_exec(
            *contender.command(peers_python), cwd=REPO, env=contender.environment(options),
            stdout=sink, stderr=subprocess.STDOUT)
        result = RunResult(contender.label, options, 0, 0.0, 0, 0.0, log=log)
        first: tuple[float, int] | None = None
        last_progress = started
        last_commit_sample = last_rss_sample = 0.0
        total = 0
        changes: list[tuple[float, int, tuple[float, float]]] = []  # (when, count, CPU s)
        cpu_at_first = (0.0, 0.0)  # (the contender's, the broker's)
        try:
            while True:
                now = time.monotonic()
                if proc.returncode is not None:
                    result.error = f"exited with code {proc.returncode}; see {log}"
                    break
                counted = await _count(reader, options, watch)
                now = time.monotonic()
                if counted > total:
                    total = counted
                    last_progress = now
                    if watch.count == "committed":
                        changes.append((now, total, cpu_now()))
                if first is None and total > 0:
                    first = (now, total)
                    result.startup = now - started
                    cpu_at_first = cpu_now()
                if now - last_rss_sample >= RSS_SAMPLE_EVERY:
                    last_rss_sample = now
                    result.rss.append((now - started, tree_rss_bytes(proc.pid)))
                    result.outputs_at.append((now - started, total))
                if watch.track_commits and now - last_commit_sample >= COMMIT_SAMPLE_EVERY:
                    last_commit_sample = now
                    committed = await reader.committed(options.group, options.src)
                    if committed is not None:
                        after = await reader.end_offsets(options.dst, options.partitions)
                        result.commits.append(CommitSample(time.monotonic(), committed, after))
                if watch.n is not None and total >= watch.n:
                    break
                if watch.run_for is not None and now - started >= watch.run_for:
                    break
                if now - last_progress > watch.stall_timeout:
                    result.error = (f"no output progress for {watch.stall_timeout:.0f} s at "
                                    f"{total} records; see {log}")
                    break
                await asyncio.sleep(POLL)
        finally:
            end = time.monotonic()
            if first is not None:
                own, broker = cpu_now()
                result.cpu = own - cpu_at_first[0]
                if broker_pid is not None:
                    result.broker_cpu = broker - cpu_at_first[1]
            result.records = total
            if len(changes) >= 2:
                _time_between_commits(result, changes)
            elif first is not None:
                first_at, first_count = first
                if first_count < total:
                    # the records seen at the first poll were produced before it: time from
                    # there, and count the records produced since
                    result.timed = total - first_count
                    result.seconds = end - first_at
                else:  # all output came within one poll: time it from the process start
                    result.timed = total
                    result.seconds = end - started
                    result.startup_included = True
            await stop(proc, watch.stop_timeout)
    return result


async def _count(reader: OffsetReader, options: ContenderOptions, watch: Watch) -> int:
    if watch.count == "committed":
        committed = await reader.committed(options.group, options.src)
        return sum(committed.values()) if committed else 0
    return sum((await reader.end_offsets(options.dst, options.partitions)).values())


def _time_between_commits(result: RunResult,
                          changes: list[tuple[float, int, tuple[float, float]]]) -> None:
    """Time ``result`` from the first commit seen to the last one before the final commit
    (to the final one when there are only two): records, seconds and CPU in between (the
    broker's too, when it was measured)."""
    (t0, n0, cpu0) = changes[0]
    (t1, n1, cpu1) = changes[-2] if len(changes) >= 3 else changes[-1]
    result.timed, result.seconds, result.cpu = n1 - n0, t1 - t0, cpu1[0] - cpu0[0]
    if result.broker_cpu is not None:
        result.broker_cpu = cpu1[1] - cpu0[1]


async def stop(proc: asyncio.subprocess.Process, timeout: float) -> None:
    """SIGTERM (a graceful stop) and, if still running after ``timeout``, SIGKILL."""
    if proc.returncode is None:
        proc.send_signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(proc.wait(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()


@contextlib.asynccontextmanager
async def io_server(seconds: float) -> AsyncIterator[str]:
    """P1's local HTTP dependency (:mod:`benchmarks.peers.io_server`) in its own process;
    yields its URL, stops it on exit."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "benchmarks.peers.io_server", "--port", "0",
        "--seconds", repr(seconds), cwd=REPO, stdout=subprocess.PIPE)
    try:
        line = ""
        if proc.stdout is not None:  # always, with stdout=PIPE
            line = (await proc.stdout.readline()).decode().strip()
        if not line.startswith("listening "):
            raise RuntimeError(f"the I/O server did not start (said {line!r}, exit code "
                               f"{proc.returncode}); run 'python -m "
                               f"benchmarks.peers.io_server' to see why")
        yield line.removeprefix("listening ")
    finally:
        await stop(proc, 10.0)
