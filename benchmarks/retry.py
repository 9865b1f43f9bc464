"""A flaky dependency slows one record, never the stream (issue: failure handling).

    python -m benchmarks.retry [--records 1000000] [--keys 10000] [--in-flight 20000]
                               [--latency 0.002] [--concurrency 1000]
                               [--rounds 3] [--one-after-the-other]

On the real broker (``AIOSTREAMS_KAFKA`` or one started here), an async processor awaits
``--latency`` seconds per record (an I/O call; default 2 ms). Each round runs twice on
identical input:

(a) no failures;
(b) 1% of records (chosen by a hash of their id) fail their first 3 attempts and succeed
    on the 4th, with ``Retry(attempts=5, backoff=0.05, jitter=0.5)``.

A retried record keeps its slot (it holds the commit point) while later records execute, so
the window must cover ``rate x retry delay`` records (up to about 19k records/s per task x
0.5 s of backoff here) for the stream not to stall: ``--in-flight`` sets it (default
20,000). ``--concurrency`` bounds how many of them execute at once (``max_concurrency``,
default 1,000): the rest of the window holds finished records waiting to retire, and a
retried record runs before newer records waiting for an executor.

Two rates per run: *steady* (records retired between the 10% and 90% marks, sampled every
10 ms): the throughput of the stream while its failing records are retried, which is what
the target is about ("the rest of the stream's throughput"); and *end to end* (all records,
from start until the group has committed everything). End to end also counts, in (b), the
wait for the retries of the last few flaky records after the rest of the input is done:
their three backoffs (0.35 s on average, up to 0.53 s) are a fixed cost of the retry
policy, about 5% of a 7 s run and 2% of a 20 s one. The default of 1M records keeps each
run 10-20 s long on this machine's fast days: 200k records took 3 s on 2026-11-24, and
such short runs read 0.94 steady (median of 5 rounds, rounds 0.74-0.98) where 1M-record
runs on the same machine read 0.79.

``--rounds`` (default 3) runs (a) and (b) that many times, each on fresh topics, and the
median of the rounds' ratios is the figure; every round's ratio is printed beside it.

Side by side (the default): in each round (a) and (b) run at the same time, each in a
process of its own (own heap, own GC) with its own topics and group on the one broker.
This machine's speed swings by 20-40% over minutes (the same configuration's CPU time
per record read 21 us in one minute and 30 us in the next), so two runs one after the other often
meet different machines, and their ratio swung from 0.58 to 1.32 between rounds. Run side
by side, both meet the same machine, and they share its two cores: the one that needs more
CPU per record gets through fewer records. *Steady* is then taken over the same interval
for both: from when both have passed 10% until the first reaches 90% (after that one
finishes, the other would have the cores to itself). *End to end* stays each run's own
(so (b)'s tail runs partly alone). ``--one-after-the-other`` runs (a) then (b) instead,
each with the machine to itself. Each round's line gives each run's CPU time per record
and its share of a core.

Two regimes. The default is CPU-bound: 4 tasks x 1,000 calls in flight / 2 ms would allow
2M records/s, so the engine's CPU per record sets the rate, and (b)'s extra work (failed
attempts, finished records held behind a retried one) shows up as lost throughput.
``--latency 0.05 --concurrency 50 --records 200000`` is I/O-bound, like a pipeline calling
a REST service: 4 x 50 / 50 ms = 4,000 records/s, with CPU to spare, so the dependency sets
the rate, and what (b) costs is the concurrency its failed attempts take (3% more calls).

Prints both (target: (b) >= 0.9 x (a)), and checks, during every (b), that every commit
passed a failing record only after it had succeeded, and afterwards that each key's outputs
are in input order.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import zlib
from collections.abc import Awaitable, Callable
from typing import Any

from aiostreams import App, Processor, Record, Retry
from aiostreams.app import run_event_loop, tune_gc
from aiostreams.engine.worker import CommitRecord
from aiostreams.transport.base import TopicSpec
from aiostreams.transport.kafka import KafkaTransport
from aiostreams.types import OutgoingRecord, TopicPartition
from benchmarks._broker import kafka_broker


def flaky(value: str) -> bool:
    return zlib.crc32(value.encode()) % 100 == 0


class Flaky(Processor[str, str]):
    def __init__(self, fail: bool, succeeded: dict[tuple[int, int], float],
                 latency: float) -> None:
        self.fail = fail
        self.attempts: dict[str, int] = {}
        self.succeeded = succeeded
        self.latency = latency

    async def process(self, record: Record[str, str]) -> None:
        await asyncio.sleep(self.latency)
        # the check runs in (a) too: the two runs differ only in whether the dependency fails
        if flaky(record.value) and self.fail:
            n = self.attempts.get(record.value, 0) + 1
            self.attempts[record.value] = n
            if n <= 3:
                raise ConnectionError(f"flaky dependency (attempt {n})")
            self.succeeded[(record.partition, record.offset)] = time.monotonic()
        self.context.forward(record)


LOW, HIGH = 0.1, 0.9  # the steady part of a run: between these fractions of its records

Samples = list[tuple[float, int]]
"""``(time.monotonic(), records retired)`` pairs, in time order. The monotonic clock is the
system's, so samples of two processes compare."""


async def sample_progress(app: App, n: int, samples: Samples) -> None:
    """Append a sample every 10 ms until ``HIGH`` of ``n`` records have retired (run it as
    a task beside the app)."""
    while True:
        done = sum(t.counters["records_out"] for t in app.status().tasks)
        samples.append((time.monotonic(), done))
        if done >= HIGH * n:
            return
        await asyncio.sleep(0.01)  # a sampling period, not a wait for an event


def _crossing(samples: Samples, count: float) -> float:
    return next(t for t, done in samples if done >= count)


def _retired_at(samples: Samples, at: float) -> float:
    """Records retired at time ``at``, interpolated between the samples around it."""
    before = max((s for s in samples if s[0] <= at), default=samples[0])
    after = min((s for s in samples if s[0] >= at), default=samples[-1])
    if after[0] == before[0]:
        return before[1]
    return before[1] + (after[1] - before[1]) * (at - before[0]) / (after[0] - before[0])


def steady_rates(runs: list[Samples], n: int) -> list[float]:
    """Each run's records/s over one interval common to all: from when every run has
    passed ``LOW`` of ``n`` until the first reaches ``HIGH``. Given one run, its own
    ``LOW``-``HIGH`` interval; runs that did not overlap that way get theirs each."""
    start = max(_crossing(s, LOW * n) for s in runs)
    end = min(_crossing(s, HIGH * n) for s in runs)
    if end <= start:
        return [steady_rates([s], n)[0] for s in runs]
    return [(_retired_at(s, end) - _retired_at(s, start)) / (end - start) for s in runs]


async def run(bootstrap: str, n: int, partitions: int, fail: bool,
              in_flight: int = 1000, keys: int = 10_000,
              concurrency: int | None = None, latency: float = 0.002,
              gate: Callable[[], Awaitable[None]] | None = None) -> dict[str, Any]:
    """One run, (b) if ``fail`` else (a); ``gate``, if given, is awaited once everything is
    prepared, just before the app starts (to start two runs at once)."""
    transport = KafkaTransport(bootstrap)
    stamp = f"{int(time.time() * 1000)}-{int(fail)}"
    src, dst = f"retry-in-{stamp}", f"retry-out-{stamp}"
    admin = transport.admin()
    await admin.start()
    await admin.create_topics([TopicSpec(src, partitions), TopicSpec(dst, partitions)])
    await admin.stop()
    producer = transport.producer()
    await producer.start()
    values = [f"k{i % keys}:{i // keys}" for i in range(n)]
    await producer.send_batch([OutgoingRecord(src, v.split(":")[0].encode(), v.encode())
                               for v in values])
    await producer.flush()
    await producer.stop()

    succeeded: dict[tuple[int, int], float] = {}
    failing_positions: set[tuple[int, int]] = set()
    violations: list[str] = []
    app = App(f"retry-{stamp}", broker=f"kafka://{bootstrap}", max_in_flight=in_flight,
              max_concurrency=concurrency, max_buffered_per_partition=in_flight,
              commit_interval_ms=200, retry=Retry(attempts=5, backoff=0.05, jitter=0.5))
    app.topic(src, key=str, value=str)
    app.topic(dst, key=str, value=str)
    app.topology.add_source("src", src).add_processor(
        "flaky", lambda: Flaky(fail, succeeded, latency), "src").add_sink("sink", dst, "flaky")

    def on_commit(entry: CommitRecord) -> None:
        for tp, offset in entry.offsets.items():
            for p, o in failing_positions:
                if p == tp.partition and o < offset and (p, o) not in succeeded:
                    violations.append(f"{tp} committed at {offset} before {o} succeeded")

    app.on_commit(on_commit)  # observe every commit as it happens
    # where the failing records are, read before the run (not beside it, on the same CPU)
    consumer = transport.consumer(None)
    await consumer.start()
    tps = [TopicPartition(src, p) for p in range(partitions)]
    consumer.assign(tps)
    for tp in tps:
        consumer.seek(tp, 0)
    while len(failing_positions) < sum(1 for v in values if flaky(v)) and fail:
        batch = await consumer.getmany(0.5)
        for records in batch.values():
            failing_positions.update((r.partition, r.offset) for r in records
                                     if r.value and flaky(r.value.decode()))
    await consumer.stop()
    if gate is not None:
        await gate()
    samples: Samples = []
    started, cpu_started = time.perf_counter(), time.process_time()
    await app.start()
    sampling = asyncio.get_running_loop().create_task(sample_progress(app, n, samples))
    await app.wait_until_caught_up(timeout=600)
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    await sampling
    await app.stop()

    out = transport.consumer(None)
    await out.start()
    out_tps = [TopicPartition(dst, p) for p in range(partitions)]
    out.assign(out_tps)
    for tp in out_tps:
        out.seek(tp, 0)
    got: list[Any] = []
    while len(got) < n:
        batch = await out.getmany(1.0)
        for records in batch.values():
            got.extend(records)
    await out.stop()
    last: dict[bytes | None, int] = {}
    order_ok = True
    for r in sorted(got, key=lambda r: (r.partition, r.offset)):
        seq = int(r.value.split(b":")[1])  # each key's sequence number
        order_ok &= seq > last.get(r.key, -1)
        last[r.key] = seq
    return {"rate": n / elapsed, "samples": samples,
            "cpu_us_per_record": cpu / n * 1e6, "cpu_share": cpu / elapsed,
            "flaky_records": sum(1 for v in values if flaky(v)),
            "order_ok": order_ok, "commit_violations": len(violations), "outputs": len(got)}


async def side_by_side(argv: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(a) and (b) at once, each in a child process (``--child``), released together once
    both are prepared."""
    children = [await asyncio.create_subprocess_exec(
        sys.executable, "-m", "benchmarks.retry", "--child", which, *argv,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
        for which in ("clean", "failing")]
    try:
        for child in children:
            assert child.stdout is not None
            if (await child.stdout.readline()).strip() != b"ready":
                raise SystemExit("a benchmark child process failed while preparing its run; "
                                 "its error is above")
        for child in children:
            assert child.stdin is not None
            child.stdin.write(b"go\n")
            await child.stdin.drain()
        results = []
        for child in children:
            out, _ = await child.communicate()
            if child.returncode != 0:
                raise SystemExit(f"a benchmark child process exited with {child.returncode}; "
                                 "its error is above")
            results.append(json.loads(out.decode().strip().splitlines()[-1]))
    finally:  # one child failed: the other must not be left waiting, or run on alone
        for child in children:
            if child.returncode is None:
                child.kill()
                await child.wait()
    return results[0], results[1]


async def child_run(args: argparse.Namespace) -> None:
    """The child of :func:`side_by_side`: prepare, say ``ready``, wait for a line on stdin,
    run, print the result as one JSON line."""
    tune_gc()
    loop = asyncio.get_running_loop()

    async def gate() -> None:
        print("ready", flush=True)
        if (await loop.run_in_executor(None, sys.stdin.readline)).strip() != "go":
            raise SystemExit("the parent benchmark went away before the start; not running")

    result = await run(args.bootstrap, args.records, args.partitions,
                       fail=args.child == "failing", in_flight=args.in_flight, keys=args.keys,
                       concurrency=args.concurrency, latency=args.latency, gate=gate)
    print(json.dumps(result), flush=True)


async def main_async(n: int, partitions: int, in_flight: int, keys: int,
                     concurrency: int, latency: float, rounds: int, together: bool
                     ) -> dict[str, Any]:
    tune_gc()
    cleans: list[dict[str, Any]] = []
    failings: list[dict[str, Any]] = []
    async with kafka_broker() as bootstrap:
        for _ in range(rounds):
            if together:
                clean, failing = await side_by_side(
                    ["--bootstrap", bootstrap, "--records", str(n), "--partitions",
                     str(partitions), "--in-flight", str(in_flight), "--keys", str(keys),
                     "--concurrency", str(concurrency), "--latency", str(latency)])
                clean["steady_rate"], failing["steady_rate"] = steady_rates(
                    [clean["samples"], failing["samples"]], n)
            else:  # back to back, so a slow spell of the machine is likely to hit both
                clean = await run(bootstrap, n, partitions, fail=False, in_flight=in_flight,
                                  keys=keys, concurrency=concurrency, latency=latency)
                failing = await run(bootstrap, n, partitions, fail=True, in_flight=in_flight,
                                    keys=keys, concurrency=concurrency, latency=latency)
                for each in (clean, failing):
                    each["steady_rate"] = steady_rates([each["samples"]], n)[0]
            for each, into in ((clean, cleans), (failing, failings)):
                del each["samples"]  # used; too long to print
                into.append(each)
    pairs = list(zip(cleans, failings, strict=True))
    for i, (c, f) in enumerate(pairs, 1):  # CPU beside the rates tells machine from engine
        print(f"round {i}: (a) {c['rate']:,.0f}/s, {c['cpu_us_per_record']:.1f} us CPU per "
              f"record, {c['cpu_share']:.2f} of a core; (b) {f['rate']:,.0f}/s, "
              f"{f['cpu_us_per_record']:.1f} us, {f['cpu_share']:.2f}", flush=True)
    return {"records": n, "keys": keys, "max_in_flight": in_flight,
            "max_concurrency": concurrency, "latency": latency, "rounds": rounds,
            "mode": "side by side" if together else "one after the other",
            "clean": summarize(cleans), "failing": summarize(failings),
            "round_ratios": [f["rate"] / c["rate"] for c, f in pairs],
            "round_steady_ratios": [f["steady_rate"] / c["steady_rate"] for c, f in pairs]}


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians of the rates; the checks must hold in every run (orders and violations over
    all of them, outputs from the run with the fewest)."""
    return {"rate": statistics.median(r["rate"] for r in runs),
            "steady_rate": statistics.median(r["steady_rate"] for r in runs),
            "rates": [r["rate"] for r in runs],
            "flaky_records": runs[0]["flaky_records"],
            "order_ok": all(r["order_ok"] for r in runs),
            "commit_violations": sum(r["commit_violations"] for r in runs),
            "outputs": min(r["outputs"] for r in runs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--in-flight", type=int, default=20_000,
                        help="max_in_flight: the window that absorbs retry delays")
    parser.add_argument("--keys", type=int, default=10_000,
                        help="distinct keys: a retried record holds back its key's later "
                        "records (ordering='key'), so few keys mean much of the stream waits")
    parser.add_argument("--concurrency", type=int, default=1000,
                        help="max_concurrency: records executing at once per task")
    parser.add_argument("--latency", type=float, default=0.002,
                        help="seconds the processor awaits per call (the dependency)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds of (a) then (b); the median of the rounds' ratios is "
                        "reported")
    parser.add_argument("--one-after-the-other", action="store_true",
                        help="run (a) then (b) in this process, instead of side by side in "
                        "two")
    parser.add_argument("--child", choices=["clean", "failing"], help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if args.child is not None:
        run_event_loop(child_run(args))
        return
    if args.latency < 0:
        parser.error("--latency must be >= 0 seconds")
    r = run_event_loop(main_async(args.records, args.partitions, args.in_flight, args.keys,
                                  args.concurrency, args.latency, args.rounds,
                                  together=not args.one_after_the_other))
    clean, failing = r["clean"], r["failing"]
    ratio = statistics.median(r["round_ratios"])
    steady_ratio = statistics.median(r["round_steady_ratios"])
    r["steady_ratio"] = steady_ratio
    print(f"{r['mode']}: {args.rounds} round(s) of {args.records:,} records, "
          f"{args.latency * 1000:g} ms per call, {args.concurrency} calls at once per task")
    print(f"{'case (records/s, median of ' + str(args.rounds) + ')':44} {'end to end':>10} "
          f"{'steady':>10}")
    print(f"{'(a) no failures':44} {clean['rate']:10,.0f} {clean['steady_rate']:10,.0f}")
    print(f"{'(b) 1% fail 3 attempts, retried with backoff':44} {failing['rate']:10,.0f} "
          f"{failing['steady_rate']:10,.0f}")
    print(f"flaky records: {failing['flaky_records']}, outputs: {failing['outputs']}, "
          f"key order kept: {failing['order_ok']}, "
          f"commits past an unfinished retry: {failing['commit_violations']}")
    print("steady ratio per round:     " + ", ".join(f"{x:.2f}" for x in
                                                  r["round_steady_ratios"]))
    print("end-to-end ratio per round: " + ", ".join(f"{x:.2f}" for x in r["round_ratios"]))
    print(f"target (b) >= 0.9 x (a), steady (median of rounds): {steady_ratio:.2f} x  "
          f"{'MET' if steady_ratio >= 0.9 else 'NOT MET'}")
    print(f"end to end (median of rounds, with the last retries' backoff): {ratio:.2f} x")
    print(json.dumps({"benchmark": "retry", **r, "ratio": ratio}))


if __name__ == "__main__":
    main()
