"""Engine throughput on the memory broker (issue: core engine).

    python -m benchmarks.engine [--records N] [--in-flight N]

(a)  aiostreams, a sync identity processor (the inline fast path), 1 partition, 10k keys
(b)  aiostreams, an async processor awaiting asyncio.sleep(0.005), ordering="key"
(b') the bound max_in_flight / 0.005 s

against the controls of :mod:`benchmarks.engine_controls`, which say exactly what each does:
(a') a hand-rolled loop on the same broker, (a'') the function alone, (a*) the processor
API's floor (the hand-rolled loop with each record through a ``Record``, the same
processor's ``process`` and ``forward``, and nothing else), (b'') bare asyncio (1,000
coroutines doing only the same awaits), (b''') a hand-rolled async loop in no key order,
and (b*) the processor API's floor for (b): (b''') with the same API per record.

The floors say what a target can ask. (b*)/(b'') is what an engine whose records go through
this API in CPython could reach if key order, retirement in order and commits cost nothing:
a target on (b)/(b'') above it is beyond any such engine. Likewise (a*)/(a') for (a)/(a').
(b)/(b*) and (a)/(a*) are the engine's own cost.

Targets (issue 40, which restated issue 23's on the floors): (a) >= 0.7 x (a*); (b) >= 0.75 x
(b*) (median of the interleaved rounds). Issue 23's (a) >= 0.6 x (a') and (b) >= 0.85 x (b'')
are printed as figures: they asked for no more than the API's floor itself.

(a), (a') and (a*) run interleaved, 3 times each; (b), (b''), (b''') and (b*) interleaved,
``--rounds`` times each; every run starts from a collected heap. Each async round's ratios
are printed with the load average and the cyclic GC's collections per generation during
each run, so a swing can be told apart from the machine's load. The summary takes the
median of the async rounds' ratios, and best over best for the sync cases.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from aiostreams import App, Processor
from aiostreams.app import run_event_loop, tune_gc
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import TopicPartition
from benchmarks.engine_controls import (
    AsyncSleep,
    SyncIdentity,
    cpu_since,
    cpu_us_per_record,
    preload,
    run_asyncio_floor,
    run_bare,
    run_hand_rolled,
    run_hand_rolled_async,
)


async def wait_for(broker: MemoryBroker, topic: str, n: int) -> None:
    tp = TopicPartition(topic, 0)
    # a coarse poll (every 2 ms) costs the measured run less than a consumer reading it all
    while broker.partition_count(topic) is None or broker.end_offset(tp) < n:  # noqa: ASYNC110
        await asyncio.sleep(0.002)


async def run_app(processor: Callable[[], Processor[str, str]], n: int, in_flight: int,
                  broker: MemoryBroker | None = None) -> float:
    """(a) or (b): the engine running ``processor`` over ``n`` preloaded records.
    ``broker``: where to run it (a fresh one by default), for a test to read what it did."""
    broker = MemoryBroker() if broker is None else broker
    preload(broker, "in", n)
    app = App("bench", transport=MemoryTransport(broker), max_in_flight=in_flight,
              max_buffered_per_partition=max(2000, in_flight), commit_interval_ms=1000)
    app.topic("in", key=str, value=str)
    app.topic("out", key=str, value=str, partitions=1)
    app.topology.add_source("src", "in").add_processor("p", processor, "src").add_sink(
        "sink", "out", "p")
    started, cpu_started = time.perf_counter(), time.process_time()
    await app.start()
    await wait_for(broker, "out", n)
    elapsed = time.perf_counter() - started
    cpu_since("app", cpu_started, n)
    await app.stop()
    return n / elapsed


async def measured(run: Callable[[], Any]) -> tuple[float, list[int]]:
    """``await run()`` from a collected heap; its result and the GC's collections per
    generation during it."""
    gc.collect()
    before = [s["collections"] for s in gc.get_stats()]
    rate = await run()
    after = [s["collections"] for s in gc.get_stats()]
    return rate, [a - b for a, b in zip(after, before, strict=True)]


async def main_async(n: int, in_flight: int, n_async: int, rounds: int = 3) -> dict[str, Any]:
    tune_gc()  # the same GC settings for every case (the app applies them at start anyway)
    bare = run_bare(n)
    hands: list[float] = []
    apis: list[float] = []
    syncs: list[float] = []
    for _ in range(3):  # interleaved, each from a collected heap: same conditions for all
        gc.collect()
        hands.append(await run_hand_rolled(n))
        gc.collect()
        apis.append(await run_hand_rolled(n, api=True))
        gc.collect()
        syncs.append(await run_app(SyncIdentity, n, in_flight))
    hand, api, sync = max(hands), max(apis), max(syncs)
    async_rounds: list[dict[str, Any]] = []
    for _ in range(rounds):  # interleaved: each ratio is taken under the same load
        slept, gc_b = await measured(lambda: run_app(AsyncSleep, n_async, in_flight))
        cpu_b = cpu_us_per_record["app"]
        floor, gc_floor = await measured(lambda: run_asyncio_floor(n_async, in_flight))
        by_hand, gc_b3 = await measured(lambda: run_hand_rolled_async(n_async, in_flight))
        api_async, gc_api = await measured(
            lambda: run_hand_rolled_async(n_async, in_flight, api=True))
        cpu = {"cpu_b": cpu_b, "cpu_b2": cpu_us_per_record["floor"],
               "cpu_b3": cpu_us_per_record["hand_async"],
               "cpu_b_api": cpu_us_per_record["api_async"]}
        async_rounds.append({**cpu, "cpu_ratio": cpu["cpu_b2"] / cpu_b,
                             "b": slept, "b2": floor, "b3": by_hand, "b_api": api_async,
                             "ratio": slept / floor, "ratio_b3": slept / by_hand,
                             "api_ratio": api_async / floor, "ratio_api": slept / api_async,
                             "load": os.getloadavg()[0], "gc_b": gc_b, "gc_b2": gc_floor,
                             "gc_b3": gc_b3, "gc_b_api": gc_api})
    best = max(async_rounds, key=lambda x: x["b"])

    def median(name: str) -> float:
        return float(statistics.median(x[name] for x in async_rounds))

    return {"a_sync_engine": sync, "a1_hand_rolled": hand, "a2_bare_function": bare,
            "a_api_floor": api, "a_api_ratio": api / hand, "a_ratio_api": sync / api,
            "b_async_engine": best["b"], "b2_asyncio_floor": max(x["b2"] for x in async_rounds),
            "b3_hand_rolled_async": max(x["b3"] for x in async_rounds),
            "b_api_floor": max(x["b_api"] for x in async_rounds),
            "b_ratio_median": median("ratio"), "b_ratio_b3_median": median("ratio_b3"),
            "b_api_ratio_median": median("api_ratio"), "b_ratio_api_median": median("ratio_api"),
            "cpu_ratio_median": median("cpu_ratio"), "cpu_b_median": median("cpu_b"),
            "async_rounds": async_rounds, "b1_bound": in_flight / 0.005, "records": n,
            "records_async": n_async, "max_in_flight": in_flight}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--async-records", type=int, default=100_000)
    parser.add_argument("--in-flight", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved (b)/(b'') rounds")
    args = parser.parse_args()
    r = run_event_loop(main_async(args.records, args.in_flight, args.async_records,
                                  args.rounds))
    a, a1, b, b1 = r["a_sync_engine"], r["a1_hand_rolled"], r["b_async_engine"], r["b1_bound"]
    rows = [
        ("(a)   aiostreams, sync identity", a),
        ("(a')  hand-rolled loop, same broker", a1),
        ("(a'') bare function loop", r["a2_bare_function"]),
        ("(a*)  the processor API's floor", r["a_api_floor"]),
        ("(b)   aiostreams, await sleep(5 ms)", b),
        (f"(b')  bound {args.in_flight}/0.005 s", b1),
        ("(b'') bare asyncio, only the awaits", r["b2_asyncio_floor"]),
        ("(b''') hand-rolled async loop, same broker", r["b3_hand_rolled_async"]),
        ("(b*)  the processor API's floor, async", r["b_api_floor"]),
    ]
    print(f"{'case':42} {'records/s':>14}")
    for name, rate in rows:
        print(f"{name:42} {rate:14,.0f}")
    ok_a = r["a_ratio_api"] >= 0.7
    print(f"target (a) >= 0.7 x (a*):  {r['a_ratio_api']:.2f} x  {'MET' if ok_a else 'NOT MET'}"
          f"  ((a)/(a') {a / a1:.2f} x; the API's floor (a*)/(a') {r['a_api_ratio']:.2f} x)")
    for i, x in enumerate(r["async_rounds"], 1):
        print(f"round {i}: (b) {x['b']:,.0f}/s  (b'') {x['b2']:,.0f}/s  (b''') {x['b3']:,.0f}/s"
              f"  (b*) {x['b_api']:,.0f}/s  (b)/(b'') {x['ratio']:.2f}  (b*)/(b'') "
              f"{x['api_ratio']:.2f}  (b)/(b*) {x['ratio_api']:.2f}  load {x['load']:.2f}  "
              f"GC collections (gen 0/1/2) (b) {x['gc_b']} (b'') {x['gc_b2']} "
              f"(b''') {x['gc_b3']} (b*) {x['gc_b_api']}")
    for i, x in enumerate(r["async_rounds"], 1):
        print(f"round {i}, CPU us per record: (b) {x['cpu_b']:.2f}  (b'') {x['cpu_b2']:.2f}  "
              f"(b''') {x['cpu_b3']:.2f}  (b*) {x['cpu_b_api']:.2f}  CPU ratio (b'')/(b) "
              f"{x['cpu_ratio']:.2f}")
    print(f"(b)/(b''') median: {r['b_ratio_b3_median']:.2f} x")
    print(f"the API's floor (b*)/(b''), median: {r['b_api_ratio_median']:.2f} x (0.85 x (b'') "
          f"is {'within' if r['b_api_ratio_median'] >= 0.85 else 'beyond'} it); (b)/(b*) "
          f"median {r['b_ratio_api_median']:.2f} x")
    ok_b = r["b_ratio_api_median"] >= 0.75
    print(f"target (b) >= 0.75 x (b*), median: {r['b_ratio_api_median']:.2f} x  "
          f"{'MET' if ok_b else 'NOT MET'}  ((b)/(b'') median {r['b_ratio_median']:.2f} x; "
          f"CPU per record (b) median {r['cpu_b_median']:.2f} us)")
    print(json.dumps({"benchmark": "engine", **r, "target_a_met": ok_a,
                      "target_b_met": ok_b}))


if __name__ == "__main__":
    main()
