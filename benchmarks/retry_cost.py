"""Where a retried record's cost goes: CPU per record on the memory broker (issue: failures).

    python -m benchmarks.retry_cost [--records 200000] [--repeats 3] [--flaky-every 100]

``python -m benchmarks.retry`` measures the target on the real broker; this script takes
the difference apart on the memory broker, where the machine's other processes (the
broker) do not share the measurement. The same pipeline as there (4 partitions, 10k keys,
an async processor awaiting 2 ms, window 20,000, ``max_concurrency`` 1,000, one record in
``--flaky-every`` chosen by a hash of its value), in four cases:

(a) clean: no record fails;
(b) flaky: the chosen records fail their first 3 attempts (``Retry(attempts=5,
    backoff=0.05, jitter=0.5)``), as in ``benchmarks.retry``;
(h) held only: the chosen records, instead of failing, wait inside the processor for as
    long as (b)'s three backoffs take on average (0.05 + 0.1 + 0.2 s), with no exception and no
    retry: the cost of records retiring late behind a slow head, alone;
(b0) flaky, no backoff: (b) with ``backoff=0``, so nothing waits long behind the
    retried records: the cost of the failed attempts themselves, alone.

Each case runs ``--repeats`` times, each in a fresh process, interleaved; the figure is
the median CPU time (user + system of the process, from start to the last commit) per
record. Prints a table and one JSON line.
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
import zlib
from typing import Any

from aiostreams import App, Processor, Record, Retry
from aiostreams.app import run_event_loop
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import OutgoingRecord

PARTITIONS = 4
KEYS = 10_000
HOLD = 0.05 + 0.1 + 0.2  # (b)'s three backoffs on average (the jitter averages out)
CASES = {"a": "clean", "b": "flaky", "h": "held only", "b0": "flaky, no backoff"}


class Chosen(Processor[str, str]):
    def __init__(self, case: str, every: int) -> None:
        self.case = case
        self.every = every
        self.attempts: dict[str, int] = {}

    async def process(self, record: Record[str, str]) -> None:
        await asyncio.sleep(0.002)
        # every case computes the choice, so they differ only in what a chosen record does
        if zlib.crc32(record.value.encode()) % self.every == 0 and self.case != "a":
            if self.case == "h":
                await asyncio.sleep(HOLD)
            else:
                n = self.attempts[record.value] = self.attempts.get(record.value, 0) + 1
                if n <= 3:
                    raise ConnectionError(f"flaky dependency (attempt {n})")
        self.context.forward(record)


async def run_case(case: str, n: int, every: int) -> dict[str, float]:
    broker = MemoryBroker()
    broker.create_topic("in", PARTITIONS)
    producer = MemoryTransport(broker).producer()
    await producer.start()
    await producer.send_batch([OutgoingRecord("in", f"k{i % KEYS}".encode(),
                                              f"k{i % KEYS}:{i // KEYS}".encode())
                               for i in range(n)])
    await producer.stop()
    app = App("retry-cost", transport=MemoryTransport(broker), max_in_flight=20_000,
              max_concurrency=1000, max_buffered_per_partition=20_000,
              commit_interval_ms=200,
              retry=Retry(attempts=5, backoff=0.0 if case == "b0" else 0.05, jitter=0.5))
    app.topic("in", key=str, value=str)
    app.topic("out", key=str, value=str, partitions=PARTITIONS)
    app.topology.add_source("src", "in").add_processor(
        "chosen", lambda: Chosen(case, every), "src").add_sink("sink", "out", "chosen")
    before = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    await app.start()
    await app.wait_until_caught_up(timeout=600)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_SELF)
    retries = sum(t.counters["retries"] for t in app.status().tasks)
    await app.stop()
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"cpu_us_per_record": cpu / n * 1e6, "rate": n / elapsed, "core": cpu / elapsed,
            "retries": retries}


def child(case: str, n: int, every: int) -> dict[str, float]:
    """Run ``case`` in a fresh interpreter (own heap and GC) and return its figures."""
    out = subprocess.run([sys.executable, "-m", "benchmarks.retry_cost", "--child", case,
                          "--records", str(n), "--flaky-every", str(every)],
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"case {case!r} failed (exit {out.returncode}):\n{out.stderr[-3000:]}")
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--flaky-every", type=int, default=100,
                        help="one record in this many is chosen (default 100: 1%%)")
    parser.add_argument("--child", choices=sorted(CASES), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_event_loop(run_case(args.child, args.records, args.flaky_every))))
        return
    runs: dict[str, list[dict[str, float]]] = {case: [] for case in CASES}
    for _ in range(args.repeats):
        for case in CASES:
            runs[case].append(child(case, args.records, args.flaky_every))
    cpu = {case: statistics.median(r["cpu_us_per_record"] for r in rs)
           for case, rs in runs.items()}
    print(f"{args.records:,} records, 1 in {args.flaky_every} chosen, "
          f"median of {args.repeats} runs each")
    print(f"{'case':28} {'CPU us/record':>14} {'vs (a)':>8} {'records/s':>11} {'retries':>8}")
    for case, label in CASES.items():
        rate = statistics.median(r["rate"] for r in runs[case])
        print(f"({case}) {label:23} {cpu[case]:14.2f} {cpu[case] / cpu['a']:8.2f} "
              f"{rate:11,.0f} {runs[case][0]['retries']:8,.0f}")
    failed_attempts = max(1.0, runs["b0"][0]["retries"])
    extra_per_attempt = (cpu["b0"] - cpu["a"]) * args.records / failed_attempts
    print(f"failed attempts alone (b0 - a): {extra_per_attempt:.1f} us of CPU per failed "
          f"attempt (its handling and the attempt after it); held records alone (h - a): "
          f"{cpu['h'] - cpu['a']:+.2f} us per record")
    summary: dict[str, Any] = {"benchmark": "retry_cost", "records": args.records,
                               "flaky_every": args.flaky_every, "repeats": args.repeats,
                               "cpu_us_per_record": cpu, "runs": runs}
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
