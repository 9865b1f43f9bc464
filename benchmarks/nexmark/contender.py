"""aiostreams' side of a Nexmark run on a broker, in a process of its own (as Kafka
Streams' is), timed the way ``Nexmark.java`` times it:

    python -m benchmarks.nexmark.contender '<Run as JSON>'

prints one JSON line ``{"inputs", "outputs", "seconds", "cpu_seconds"}``: from the first
input record read to the last output record written (or the last input read, if later),
and the process's CPU time (every thread; SQLite's included) over the same span, sampled
every 20 ms. The run ends once every input was read and the group has committed every
record of its source and internal topics (``App.wait_until_caught_up``), so every output is
flushed; then the app stops. The start-up (imports, the group join) is outside the timing.
Profiling (``profile`` set): a cProfile of the same span (wall clock, the event loop's
thread) is written there.
"""

from __future__ import annotations

import asyncio
import cProfile
import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from aiostreams import App
from aiostreams.lifecycle.event_loop import run_event_loop
from benchmarks.nexmark import queries
from benchmarks.nexmark.topics import Inputs

SAMPLE_EVERY = 0.02


@dataclass(frozen=True)
class Run:
    bootstrap: str
    app: str
    query: str
    prefix: str
    partitions: int
    counts: dict[str, int]
    output: str
    state_dir: str
    timeout: float
    profile: str | None = None
    cache_max_bytes: int = 0
    """aiostreams' record cache per cached store and task (the CLI's default: Kafka
    Streams' default budget, 10 MB)."""

    @property
    def expected(self) -> int:
        return sum(self.counts[kind] for kind in queries.READS[self.query])

    def to_json(self) -> str:
        return json.dumps(asdict(self))


class Timing:
    """The hooks' side: counts inputs and outputs, and when the first input and the last
    record (input or output) went by."""

    def __init__(self, expected: int, profiler: cProfile.Profile | None) -> None:
        self.expected = expected
        self.inputs = 0
        self.outputs = 0
        self.first_at = 0.0
        self.first_cpu = 0.0
        self.last_at = 0.0
        self.all_read = asyncio.Event()
        self.profiler = profiler

    def seen(self, _key: Any, _value: Any) -> None:
        if self.inputs == 0:
            self.first_at, self.first_cpu = time.perf_counter(), time.process_time()
            if self.profiler is not None:
                self.profiler.enable()
        self.inputs += 1
        self.last_at = time.perf_counter()
        if self.inputs == self.expected:
            self.all_read.set()

    def produced(self, _key: Any, _value: Any) -> None:
        self.outputs += 1
        self.last_at = time.perf_counter()


async def measure(run: Run) -> dict[str, Any]:
    # the wall clock (cProfile's default): a CPU-time timer (time.thread_time) is a system
    # call per event and slowed q5 sixteen-fold; on a loaded machine the wall clock charges
    # waiting for a core to whatever ran next (thread hand-offs, sends)
    profiler = cProfile.Profile() if run.profile else None
    timing = Timing(run.expected, profiler)
    app = App(run.app, broker=f"kafka://{run.bootstrap}", state_dir=run.state_dir,
              default_partitions=run.partitions, cache_max_bytes=run.cache_max_bytes)
    queries.build(app, run.query, Inputs(run.prefix, run.partitions, run.counts), run.output,
                  queries.Hooks(timing.seen, timing.produced))
    samples: list[tuple[float, float]] = []

    async def sample() -> None:
        while True:
            samples.append((time.perf_counter(), time.process_time()))
            await asyncio.sleep(SAMPLE_EVERY)

    sampler = asyncio.get_running_loop().create_task(sample())
    await app.start()
    try:
        async with asyncio.timeout(run.timeout):
            await timing.all_read.wait()
            await app.wait_until_caught_up()
        if profiler is not None:
            profiler.disable()
        samples.append((time.perf_counter(), time.process_time()))
    finally:
        sampler.cancel()
        await app.stop()
    if profiler is not None and run.profile:
        profiler.dump_stats(run.profile)
    end_cpu = next(cpu for at, cpu in samples if at >= timing.last_at)
    return {"inputs": timing.inputs, "outputs": timing.outputs,
            "seconds": round(timing.last_at - timing.first_at, 4),
            "cpu_seconds": round(end_cpu - timing.first_cpu, 4)}


def main() -> None:
    run = Run(**json.loads(sys.argv[1]))
    Path(run.state_dir).mkdir(parents=True, exist_ok=True)
    print(json.dumps(run_event_loop(measure(run))))


if __name__ == "__main__":
    main()
