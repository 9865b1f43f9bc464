"""The I/O edge against a service with a real capacity (issue 20), side by side in one run.

    python -m benchmarks.io_edge            # the full run (about 2 minutes)
    python -m benchmarks.io_edge --quick    # small and short (what the test runs)

Every scenario runs aiostreams apps on the embedded memory broker against
:class:`benchmarks.capacity_service.CapacityService` on 127.0.0.1 (aiohttp, a real HTTP
server, the same event loop):

- **adaptive**: capacity C concurrent calls (429 beyond), 20 ms a call, the service in a
  process of its own: first its capacity curve (a bare client at C/4, C/2, C and 2C
  calls at once), then apps with ``Adaptive`` concurrency (the gradient limit, then AIMD),
  their throughput against the service's measured one at C (at C/2 after C halves
  mid-run), their share of 429s; a fixed concurrency of 1,000 beside them (the 429 storm);
- **hot keys**: Zipf(1.1) keys over 10k customers, 5 ms a lookup: coalescing + memo against
  the same app without; calls made against distinct keys x ceil(span / TTL);
- **batching**: ``/batch`` at 5 ms + 0.05 ms an item against per-record ``/lookup``;
- **outage**: the service down (503) for a while mid-run with a breaker: records
  dead-lettered, and the throughput after recovery;
- **contract** (issue 35, :mod:`benchmarks.io_edge_contract`): a rate-bound service (429 +
  ``Retry-After``), 1% hangs, and an outage under one record a second, against
  :class:`benchmarks.risk_service.RiskService` (``--only contract``, about 2 minutes; or
  one of them: ``--only rate_bound``, ``hangs``, ``quiet_outage``).

Figures print as lines of ``name  value``; the ratios the issue asks for are marked with
their target.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import random
import time
import uuid
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp

import aiostreams as ais
from aiostreams.services.limit import Algorithm
from aiostreams.transport.memory import MemoryBroker
from aiostreams.types import OutgoingRecord
from benchmarks import io_edge_contract
from benchmarks.capacity_service import CapacityService, Counts, SpawnedService


@dataclass(frozen=True)
class Sizes:
    capacity: int = 40
    adaptive_seconds: float = 30.0
    hot_records: int = 20_000
    batch_records: int = 20_000
    outage_seconds: float = 30.0
    outage_records: int = 200_000
    contract: io_edge_contract.Sizes = io_edge_contract.FULL


QUICK = Sizes(capacity=10, adaptive_seconds=4.0, hot_records=1_000, batch_records=1_000,
              outage_seconds=1.0, outage_records=20_000, contract=io_edge_contract.QUICK)

CONTRACT = ("contract", "rate_bound", "hangs", "quiet_outage")
"""The scenarios of :mod:`benchmarks.io_edge_contract` ``--only`` takes."""


def new_app(**settings: Any) -> ais.App:
    settings.setdefault("commit_interval_ms", 100.0)
    # a scenario ends at its time: records still held (a backlog the service refuses)
    # are not waited for (the default 30 s drain made each adaptive run 30 s longer)
    settings.setdefault("drain_timeout", 1.0)
    return ais.App(f"io-edge-{uuid.uuid4().hex[:8]}", broker=f"memory://{uuid.uuid4().hex}",
                   **settings)


def produce(app: ais.App, topic: str, values: list[str], partitions: int = 4, *,
            keyed_by_value: bool = False) -> None:
    """``values`` to ``topic``, keyed ``r<i>`` round robin, or (``keyed_by_value``) keyed by
    the value itself, each value always in the same partition."""
    broker = MemoryBroker.named(app.settings.broker.removeprefix("memory://"))
    broker.create_topic(topic, partitions)
    now = time.time()
    broker.append([
        (OutgoingRecord(topic, (v if keyed_by_value else f"r{i}").encode(), v.encode(), now),
         zlib.crc32(v.encode()) % partitions if keyed_by_value else i % partitions)
        for i, v in enumerate(values)])


def lookup_fn(http: ais.Resource[aiohttp.ClientSession], url: str
              ) -> Callable[[str], Awaitable[str]]:
    async def lookup(key: str) -> str:
        async with http.value.get(f"{url}/lookup/{key}") as response:
            if response.status in (429, 503):
                raise ais.Overloaded("capacity", str(response.status))
            response.raise_for_status()
            return str((await response.json())["value"])
    return lookup


async def drain(app: ais.App, timeout: float) -> float:
    """Run ``app`` until it has processed its input; the seconds it took."""
    started = time.perf_counter()
    async with app:
        await app.wait_until_caught_up(timeout=timeout)
    return time.perf_counter() - started


def say(name: str, value: str) -> None:
    print(f"{name:<48} {value}", flush=True)


# -- adaptive -------------------------------------------------------------------------


class Capacity(Protocol):
    url: str
    capacity: int

    async def configure(self, *, capacity: int | None = None, down: bool | None = None
                        ) -> None: ...

    async def counts(self) -> Counts: ...


async def capacity_curve(service: Capacity, concurrencies: list[int], seconds: float
                         ) -> dict[int, tuple[float, float]]:
    """The service's own throughput (calls answered 200 a second) and 429 share at each
    fixed concurrency, called by a bare aiohttp client (no aiostreams): the denominator
    of "C's throughput" is what the service gives a client that calls it C at a time."""
    curve: dict[int, tuple[float, float]] = {}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        for concurrency in concurrencies:
            counts = [0, 0]  # answered 200, answered 429

            async def caller(i: int, ends: float, counts: list[int] = counts) -> None:
                while time.perf_counter() < ends:
                    async with http.get(f"{service.url}/lookup/{i}") as response:
                        await response.read()
                        counts[0] += response.status == 200
                        counts[1] += response.status == 429
            ends = time.perf_counter() + seconds
            await asyncio.gather(*(caller(i, ends) for i in range(concurrency)))
            ok, refused = counts
            curve[concurrency] = (ok / seconds, refused / max(1, ok + refused))
    return curve


async def run_for(service: Capacity, concurrency: int | ais.Adaptive,
                  seconds: float, halve_at: float | None) -> list[tuple[int, int]]:
    """(served, rejected) per half second while an app calls ``service`` for ``seconds``."""
    app = new_app(max_in_flight=2000, retry_attempts=1000, retry_backoff=0.005,
                  retry_max_backoff=0.05)
    src = app.topic("in", key=str, value=str, partitions=4)
    http = app.resource("http", lambda: aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0)))
    svc = app.service("capacity", concurrency=concurrency)
    app.stream(src).map_values_async(lookup_fn(http, service.url), service=svc).foreach(
        lambda k, v: None)
    produce(app, "in", [str(i % 1000) for i in range(int(seconds * 4000))])
    samples: list[tuple[int, int]] = []
    capacity = service.capacity
    async with app:
        last = await service.counts()
        for tick in range(int(seconds * 2)):
            if halve_at is not None and tick == int(halve_at * 2):
                await service.configure(capacity=max(1, capacity // 2))
            await asyncio.sleep(0.5)
            now = await service.counts()
            samples.append((now.served - last.served, now.rejected - last.rejected))
            last = now
    await service.configure(capacity=capacity)
    return samples


def converged_after(samples: list[tuple[int, int]], target: float, start: int = 0
                    ) -> float | None:
    """Seconds from sample ``start`` until throughput stays >= 0.9 x ``target``/s (over
    each following half second but the noisiest one in four), or None."""
    for i in range(start, len(samples)):
        rest = [s for s, _ in samples[i:]]
        good = sum(1 for s in rest if s * 2 >= 0.9 * target)
        if good >= 0.75 * len(rest):
            return (i - start) * 0.5
    return None


def report_adaptive(label: str, samples: list[tuple[int, int]],
                    full: tuple[float, float]) -> None:
    """Figures of one adaptive run: its two halves (C, then C/2) against ``full``/s and
    half of it (the service's measured throughput at C and at C/2 calls at once)."""
    half = len(samples) // 2
    first, second = samples[:half], samples[half:]
    for name, part, target in (("C", first, full[0]), ("C/2", second, full[1])):
        served = sum(s for s, _ in part)
        rejected = sum(r for _, r in part)
        after = converged_after(part, target)
        say(f"{label} [{name}] converged to >= 0.9 x C's rate in",
            f"{after} s (target <= 10 s)" if after is not None else "never")
        say(f"{label} [{name}] throughput / C's", f"{served / (len(part) / 2) / target:.2f}"
            " (target >= 0.9)")
        say(f"{label} [{name}] 429 share", f"{rejected / max(1, served + rejected):.2%}"
            " (target < 1%)")
        say(f"{label} [{name}] calls/s, each second",
            " ".join(f"{a + b:,}" for (a, _), (b, _) in zip(part[::2], part[1::2],
                                                             strict=False)))


async def adaptive(sizes: Sizes, algorithms: tuple[Algorithm, ...] = ("gradient", "aimd")
                   ) -> None:
    """The service runs in a process of its own (:class:`SpawnedService`), as a real one
    does: in this process's loop, the engine's work delayed its answers (30 ms measured
    for a 20 ms call) and the benchmark measured the loop, not the limit."""
    latency = 0.02
    c = sizes.capacity
    service = SpawnedService(capacity=c, latency=latency)
    await service.start()
    try:
        seconds = sizes.adaptive_seconds
        curve = await capacity_curve(service, sorted({max(1, c // 4), c // 2, c, 2 * c}),
                                     seconds=min(2.0, seconds / 4))
        for concurrency, (rate, refused) in curve.items():
            say(f"service alone, {concurrency} calls at once: calls/s, 429s",
                f"{rate:,.0f}, {refused:.1%} (ideal {min(concurrency, c) / latency:,.0f})")
        full = (curve[c][0], curve[c // 2][0])
        for algorithm in algorithms:
            limit = ais.Adaptive(initial=4, min=2, max=2000, algorithm=algorithm)
            samples = await run_for(service, limit, seconds, halve_at=seconds / 2)
            report_adaptive(f"adaptive {algorithm}", samples, full)
        fixed = await run_for(service, 1000, min(seconds / 2, 10.0), halve_at=None)
        served, rejected = sum(s for s, _ in fixed), sum(r for _, r in fixed)
        say("fixed 1,000 throughput / C's", f"{served / (len(fixed) / 2) / full[0]:.2f}")
        say("fixed 1,000 429 share", f"{rejected / max(1, served + rejected):.2%}")
    finally:
        await service.stop()


# -- hot keys -------------------------------------------------------------------------


def zipf_keys(n: int, universe: int, s: float, seed: int) -> list[str]:
    weights = [1.0 / (k ** s) for k in range(1, universe + 1)]
    rng = random.Random(seed)
    return [f"c{k}" for k in rng.choices(range(universe), weights=weights, k=n)]


async def hot_keys(sizes: Sizes) -> None:
    service = CapacityService(capacity=20, latency=0.005)
    await service.start()
    keys = zipf_keys(sizes.hot_records, 10_000, 1.1, seed=1)
    ttl = 60.0
    try:
        times = {}
        for mode in ("plain", "coalesce+memo"):
            app = new_app(max_in_flight=1000, retry_attempts=1000, retry_backoff=0.005)
            src = app.topic("in", key=str, value=str, partitions=4)
            http = app.resource("http", aiohttp.ClientSession)
            svc = app.service("customers", concurrency=20)
            lookup = lookup_fn(http, service.url)
            stream = app.stream(src)
            if mode == "plain":
                step = stream.map_values_async(lookup, service=svc)
            else:
                step = stream.map_values_async(lookup, service=svc, coalesce_by=lambda k: k,
                                               memoize=ais.Memo(ttl=ttl))
            step.foreach(lambda k, v: None)
            # keyed by customer, as an enrichment stream would be: the memo is a store of
            # each task, so a customer's records must all reach one task for the bound
            produce(app, "in", keys, keyed_by_value=True)
            before = service.served
            times[mode] = await drain(app, timeout=600)
            calls = service.served - before
            say(f"hot keys [{mode}] records/s", f"{len(keys) / times[mode]:,.0f}")
            say(f"hot keys [{mode}] calls made", f"{calls:,}")
        distinct = len(set(keys))
        bound = distinct * math.ceil(max(times["coalesce+memo"], 1e-9) / ttl)
        say("hot keys calls bound (distinct x ceil(run/TTL))", f"{bound:,}")
        say("hot keys speed-up, coalesce+memo / plain",
            f"{times['plain'] / times['coalesce+memo']:.1f}x (target >= 5x)")
    finally:
        await service.stop()


# -- batching -------------------------------------------------------------------------


def batch_fn(http: ais.Resource[aiohttp.ClientSession], url: str
             ) -> Callable[[list[str]], Awaitable[list[str]]]:
    async def lookup_many(batch: list[str]) -> list[str]:
        async with http.value.post(f"{url}/batch", json=batch) as response:
            if response.status in (429, 503):
                raise ais.Overloaded("capacity", str(response.status))
            return [str(r["value"]) for r in await response.json()]
    return lookup_many


async def batching(sizes: Sizes) -> None:
    service = CapacityService(capacity=20, latency=0.005, batch_latency=0.005,
                              per_item=0.00005)
    await service.start()
    keys = [str(i) for i in range(sizes.batch_records)]
    try:
        times = {}
        for mode in ("per record", "batched"):
            app = new_app(max_in_flight=2000, retry_attempts=1000, retry_backoff=0.005)
            src = app.topic("in", key=str, value=str, partitions=4)
            http = app.resource("http", aiohttp.ClientSession)
            svc = app.service("lookups", concurrency=20)
            stream = app.stream(src)
            if mode == "per record":
                step = stream.map_values_async(lookup_fn(http, service.url), service=svc)
            else:
                step = stream.map_values_batched_async(batch_fn(http, service.url),
                                                       service=svc,
                                                       max_batch=100, max_wait=0.005)
            step.foreach(lambda k, v: None)
            produce(app, "in", keys)
            times[mode] = await drain(app, timeout=600)
            say(f"batching [{mode}] records/s", f"{len(keys) / times[mode]:,.0f}")
        say("batching speed-up, batched / per record",
            f"{times['per record'] / times['batched']:.1f}x (target >= 5x)")
    finally:
        await service.stop()


# -- outage ---------------------------------------------------------------------------


async def outage(sizes: Sizes) -> None:
    service = CapacityService(capacity=50, latency=0.005)
    await service.start()
    try:
        app = new_app(max_in_flight=500, dead_letter_topic="dlq", retry_attempts=3,
                      retry_backoff=0.01)
        src = app.topic("in", key=str, value=str, partitions=4)
        dlq = app.topic("dlq", key=bytes, value=bytes)
        http = app.resource("http", aiohttp.ClientSession)
        svc = app.service("customers", concurrency=50, breaker=ais.CircuitBreaker(
            failure_ratio=0.5, window=2.0, cool_down=0.5, min_calls=10))
        app.stream(src).map_values_async(lookup_fn(http, service.url), service=svc).foreach(
            lambda k, v: None)
        produce(app, "in", [str(i % 1000) for i in range(sizes.outage_records)])
        rates: list[int] = []
        async with app:
            async def sample(seconds: float) -> None:
                for _ in range(int(seconds * 2)):
                    served = service.served
                    await asyncio.sleep(0.5)
                    rates.append((service.served - served) * 2)
            await sample(2.0)
            before = sum(rates[-2:]) / 2
            service.down = True
            await sample(sizes.outage_seconds)
            service.down = False
            recovered_from = len(rates)
            await sample(6.0)
        after = rates[recovered_from:]
        back = next((i * 0.5 for i, r in enumerate(after) if r >= 0.9 * before), None)
        broker = MemoryBroker.named(app.settings.broker.removeprefix("memory://"))
        dead = len(broker.records(dlq.name)) if broker.partition_count(dlq.name) else 0
        say("outage dead-lettered", f"{dead} (target 0)")
        say("outage 503s answered / held by the breaker",
            f"{service.unavailable} / {svc.current.stats.held_by_breaker if svc.current else 0}")
        say("outage full rate again after recovery in",
            f"{back} s (target <= 5 s; before {before:,.0f}/s)" if back is not None
            else f"not within 6 s (before {before:,.0f}/s, after {after})")
    finally:
        await service.stop()


async def main_async(sizes: Sizes, only: str | None = None,
                     algorithms: tuple[Algorithm, ...] = ("gradient", "aimd"),
                     contract: bool = True) -> None:
    """Run the scenarios (``only``: one, or ``contract``'s); ``contract=False`` leaves
    out :mod:`benchmarks.io_edge_contract`'s (the tests run them on their own)."""
    if only in (None, "adaptive"):
        await adaptive(sizes, algorithms)
    for scenario in (hot_keys, batching, outage):
        if only is None or scenario.__name__ == only:
            await scenario(sizes)
    if (only is None and contract) or only in CONTRACT:
        await io_edge_contract.run_all(sizes.contract, only)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small inputs, a short outage")
    parser.add_argument("--only", choices=["adaptive", "hot_keys", "batching", "outage",
                                           *CONTRACT],
                        help="run one scenario")
    parser.add_argument("--algorithm", choices=["gradient", "aimd"], action="append",
                        help="the adaptive limits to run (default: both)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)  # the fixed app's 429 storm logs its retries
    ais.run_event_loop(main_async(QUICK if args.quick else Sizes(), args.only,
                                  tuple(args.algorithm or ("gradient", "aimd"))))


if __name__ == "__main__":
    main()
