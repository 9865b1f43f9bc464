"""The main example: enrich orders by calling a REST service, in order, at speed.

    python examples/enrich_rest.py                       # embedded default: no server
    python examples/enrich_rest.py --broker kafka://127.0.0.1:9092
    AIOSTREAMS_BROKER=kafka://127.0.0.1:9092 python examples/enrich_rest.py   # the same

Written against the public API only (``import aiostreams``): the app produces its input
with ``app.producer()``, holds its HTTP session as an app resource (opened at start,
closed at stop), and reads its results with ``app.consumer()``.

What it does, end to end:

1. starts a local customer service (aiohttp on 127.0.0.1, a free port) that answers
   ``GET /customers/<id>`` after a random latency, fails transiently at a configurable
   rate (503), and does not know some customers (404);
2. produces orders to ``orders`` — mostly valid, a few with a non-positive amount (filtered
   out), a few malformed (not JSON, or the wrong types: they fail validation), a few for
   unknown customers;
3. runs the app: filter → ``map_values_async(fetch_profile, service=customers,
   coalesce_by=..., combine=enrich, memoize=...)``: a lookup by customer, coalesced and
   memoized, whose calls go through a declared service (``app.service``: an adaptive
   concurrency limit within ``--in-flight``, a circuit breaker, a timeout from dispatch,
   a retry budget), retries
   with backoff on 503, dead-letters what can never succeed (malformed
   records, unknown customers), writes enriched orders to ``orders-enriched``, aggregates
   totals per customer (a SQLite-backed table with a changelog) and writes enriched orders
   to a Parquet dataset through the Spark bridge (exactly once, partitioned by tier);
4. waits until every order is processed and committed (a progress bar on a terminal),
   stops, reads the dataset back with Spark SQL, and prints a summary with the service's
   figures (calls by outcome, calls saved by coalescing and memo, its limit now, latency).

Its files (the state store, the Parquet dataset, Spark's JVM log) live in a temporary
directory named at the start and removed at the end (``--keep`` keeps it).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from pydantic import BaseModel
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

import aiostreams as ais


class Order(BaseModel):
    id: str
    customer_id: str
    amount: float


class EnrichedOrder(Order):
    tier: str
    region: str


class TransientError(Exception):
    """The customer service failed this time (its 503s here are random, not load: raise
    ``ais.Overloaded`` instead for the 429/503s that mean "too many calls", and the
    service's adaptive limit lowers on them); worth retrying."""


class UnknownCustomer(Exception):
    """The customer service does not know the customer; retrying cannot help."""


async def start_customer_service(latency: float, failure_rate: float,
                                 seed: int) -> tuple[web.AppRunner, str]:
    rng = random.Random(seed)
    tiers = ["bronze", "silver", "gold"]
    regions = ["eu", "us", "apac"]

    async def customer(request: web.Request) -> web.Response:
        cid = request.match_info["id"]
        await asyncio.sleep(rng.uniform(0, 2 * latency))
        if cid.startswith("ghost-"):
            return web.json_response({"error": f"no customer {cid}"}, status=404)
        if rng.random() < failure_rate:
            return web.json_response({"error": "try again"}, status=503)
        n = int(cid.split("-")[1])
        return web.json_response({"tier": tiers[n % 3], "region": regions[n % 3]})

    service = web.Application()
    service.router.add_get("/customers/{id}", customer)
    runner = web.AppRunner(service, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, f"http://127.0.0.1:{port}"


def make_orders(n: int, customers: int, seed: int) -> list[tuple[str, Order | bytes]]:
    """Orders keyed by id; a few are bytes that are not a valid ``Order``."""
    rng = random.Random(seed)
    out: list[tuple[str, Order | bytes]] = []
    for i in range(n):
        key = f"order-{i}"
        roll = rng.random()
        if roll < 0.01:
            out.append((key, b"{not json"))  # malformed: dead-lettered
        elif roll < 0.02:
            out.append((key, b'{"id": "x", "customer_id": 7, "amount": "lots"}'))  # wrong types
        elif roll < 0.03:  # unknown customer
            out.append((key, Order(id=key, customer_id=f"ghost-{i}", amount=10.0)))
        else:
            amount = round(rng.uniform(-5, 100), 2)  # some <= 0: filtered out
            out.append((key, Order(id=key, customer_id=f"cust-{rng.randrange(customers)}",
                                   amount=amount)))
    return out


def build_app(broker: str | None, service_url: str, state_dir: Path, in_flight: int,
              parquet_dir: Path | None, engine: str = "spark",
              on_order: Callable[[], None] = lambda: None) -> tuple[ais.App, Counter[str]]:
    """The app; ``broker=None`` takes it from the settings (``AIOSTREAMS_BROKER``, else
    the embedded ``memory://``). ``on_order`` is called as each order starts."""
    app = ais.App("enrich-example", broker=broker, dead_letter_topic="orders-dlq",
                  max_in_flight=in_flight, state_dir=state_dir, commit_interval_ms=200,
                  default_partitions=4)
    orders = app.topic("orders", key=str, value=Order, partitions=4)
    enriched = app.topic("orders-enriched", key=str, value=EnrichedOrder, partitions=4)
    totals = app.topic("customer-totals", key=str, value=float, partitions=4)
    http = app.resource("http", aiohttp.ClientSession)  # one session, closed at stop
    calls: Counter[str] = Counter()
    # the customer service, declared: an adaptive concurrency limit (on latency and
    # overload answers) instead of firing all `in_flight` records at it, a breaker that
    # holds records during an outage instead of dead-lettering them, a 2 s timeout counted
    # from each call's dispatch (not from when the record was queued), retries <= 20% of
    # calls
    customers = app.service(
        "customers",
        concurrency=ais.Adaptive(initial=min(200, in_flight), min=4, max=max(4, in_flight)),
        breaker=ais.CircuitBreaker(failure_ratio=0.5, window=10.0, cool_down=1.0,
                                   min_calls=50),
        timeout=2.0, retry_budget=0.2)

    async def fetch_profile(customer_id: str) -> dict[str, Any]:
        calls["http"] += 1
        async with http.value.get(f"{service_url}/customers/{customer_id}") as response:
            if response.status == 404:
                raise UnknownCustomer(f"customer {customer_id} does not exist")
            if response.status != 200:
                raise TransientError(f"customer service answered {response.status}")
            profile: dict[str, Any] = await response.json()
            return profile

    def enrich(order: Order, profile: dict[str, Any]) -> EnrichedOrder:
        return EnrichedOrder(**order.model_dump(), **profile)

    # a lookup by customer: orders of one customer in flight together share one call
    # (coalesce_by), an answer is kept for a minute of stream time in a changelogged
    # store (memoize: a restart or a replay does not call again), and each order gets its
    # own enriched value (combine)
    valid = (app.stream(orders)
             .peek(lambda _key, _order: on_order())
             .filter(lambda _key, order: order.amount > 0)
             .map_values_async(fetch_profile, service=customers,
                               coalesce_by=lambda order: order.customer_id,
                               combine=enrich, memoize=ais.Memo(ttl=60.0),
                               retry=ais.Retry(attempts=6, backoff=0.02, max_backoff=0.5,
                                               retry_on=(TransientError,))))
    valid.to(enriched)
    (valid.group_by(lambda _key, order: order.customer_id, key_serde=str,
                    value_serde=EnrichedOrder)
     .aggregate(0.0, lambda _cid, order, total: round(total + order.amount, 2),
                materialized="customer-totals", persistent=True, value_serde=float)
     .to_stream().to(totals))
    if parquet_dir is not None:
        valid.to_parquet(parquet_dir, EnrichedOrder, partition_by=["tier"], engine=engine)
    app.topic("orders-dlq", key=bytes, value=bytes)  # dead letters: read back as bytes
    return app, calls


def service_summary(app: ais.App) -> list[str]:
    """The customer service's figures, as the app's metrics export them."""
    service = app.services["customers"].current
    if service is None:
        return ["  customer service         not called"]
    stats = service.stats
    outcomes = {o.value: n for o, n in stats.outcomes.items() if n}
    return [
        f"  service calls            {stats.calls:>8}  {outcomes}",
        f"  calls saved              {stats.saved_by_coalescing + stats.saved_by_memo:>8}  "
        f"(coalescing {stats.saved_by_coalescing}, memo {stats.saved_by_memo})",
        f"  service limit now        {service.limit:>8}  (adaptive; breaker "
        f"{service.breaker_state.value}, retries refused {stats.retries_refused})",
        f"  service latency p50/p99  {stats.latency_quantile(0.5) * 1000:>6.0f} / "
        f"{stats.latency_quantile(0.99) * 1000:.0f} ms (histogram bucket bounds)",
    ]


async def produce(app: ais.App, items: list[tuple[str, Order | bytes]]) -> None:
    # a raw view of "orders", to send the malformed records a buggy producer would
    raw = ais.Topic.of("orders", key=str, value=bytes, partitions=4)
    async with app.producer() as producer:
        for key, item in items:
            await producer.send(raw if isinstance(item, bytes) else "orders", key, item)


async def read_all(app: ais.App, topic: str) -> list[ais.Record[Any, Any]]:
    async with app.consumer(topic) as records:
        return await records.read_to_end()


class ProgressBars:
    """Two bars (drawn on a terminal only): input records the app has started on, and those
    whose offsets it committed; a commit waits for the Parquet dataset's next file."""

    def __init__(self, topic: str, total: int, console: Console) -> None:
        self.topic = topic
        self.progress = Progress(
            TextColumn("{task.description:>9}"), BarColumn(), MofNCompleteColumn(),
            TimeElapsedColumn(), console=console, disable=not console.is_terminal,
            transient=True)
        self._started = self.progress.add_task("started", total=total)
        self._committed = self.progress.add_task("committed", total=total)
        self._offsets: dict[Any, int] = {}
        self._begun, self._total = 0, total

    def order_started(self) -> None:
        self._begun += 1  # a retried order runs again and counts again: capped, a hint
        self.progress.update(self._started, completed=min(self._begun, self._total))

    def watch(self, app: ais.App) -> None:
        def on_commit(commit: Any) -> None:
            self._offsets.update((tp, offset) for tp, offset in commit.offsets.items()
                                 if tp.topic == self.topic)
            self.progress.update(self._committed, completed=sum(self._offsets.values()))

        app.on_commit(on_commit)


async def main_async(args: argparse.Namespace, workdir: Path,
                     console: Console) -> Path | None:
    runner, url = await start_customer_service(args.latency, args.failure_rate, args.seed)
    parquet_dir = None if args.no_parquet else workdir / "orders-parquet"
    inputs = make_orders(args.orders, args.customers, args.seed)
    bars = ProgressBars("orders", len(inputs), console)
    app, calls = build_app(args.broker, url, workdir / "state", args.in_flight, parquet_dir,
                           args.parquet_engine, on_order=bars.order_started)
    bars.watch(app)
    started = time.perf_counter()
    try:
        await produce(app, inputs)
        with bars.progress:
            async with app:
                await app.wait_until_caught_up(timeout=args.timeout)
        elapsed = time.perf_counter() - started
    finally:
        await runner.cleanup()
    enriched = await read_all(app, "orders-enriched")
    dead = await read_all(app, "orders-dlq")
    totals = await read_all(app, "customer-totals")
    reasons = Counter((dict(r.headers).get("aiostreams.dlq.exception") or b"?").decode()
                      for r in dead)
    latest: dict[str, float] = {}
    for r in sorted(totals, key=lambda r: (r.partition, r.offset)):
        latest[r.key] = r.value
    print(f"\naiostreams enrichment example — {app.settings.broker}")
    print(f"  orders produced          {len(inputs):>8}")
    print(f"  enriched                 {len(enriched):>8}")
    print(f"  dead-lettered            {len(dead):>8}  {dict(reasons)}")
    print(f"  filtered (amount <= 0)   {len(inputs) - len(enriched) - len(dead):>8}")
    print(f"  HTTP calls (with retries){calls['http']:>8}")
    for line in service_summary(app):
        print(line)
    print(f"  elapsed                  {elapsed:>8.2f} s  "
          f"({len(inputs) / elapsed:,.0f} orders/s at {args.latency * 1000:.0f} ms latency)")
    top = sorted(latest.items(), key=lambda kv: -kv[1])[:5]
    print("  top customers            " + ", ".join(f"{c}: {t:,.2f}" for c, t in top))
    return parquet_dir


@contextlib.contextmanager
def jvm_output_to(path: Path) -> Iterator[None]:
    """Send what a JVM started meanwhile writes to stderr (Spark's start-up warnings) to
    ``path``: the JVM inherits file descriptor 2, which points at ``path`` while it starts."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(path, "ab") as log_file:
        os.dup2(log_file.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def start_spark(workdir: Path, console: Console) -> None:
    """Start the Spark bridge's session before the app runs, quietly, with a spinner."""
    from aiostreams.sinks import get_session

    with console.status("starting Spark (local mode); its log: spark.log in the working "
                        "directory"), jvm_output_to(workdir / "spark.log"):
        get_session()


def summarize_parquet(parquet_dir: Path) -> None:
    """Read the dataset back with Spark SQL (after the event loop is done: Spark blocks)."""
    from aiostreams.sinks import get_session, stop_session

    spark = get_session()  # the bridge's session, already configured for this machine
    try:
        by_tier = spark.read.parquet(str(parquet_dir)).groupBy("tier").count().collect()
    finally:
        stop_session()
    rows = sum(r["count"] for r in by_tier)
    print(f"  Parquet dataset (Spark)  {rows:>8} rows in {parquet_dir}")
    print("  rows per tier            " + ", ".join(
        f"{r['tier']}: {r['count']}" for r in sorted(by_tier, key=lambda r: r["tier"])))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--broker", help="default: AIOSTREAMS_BROKER, else memory://")
    parser.add_argument("--orders", type=int, default=5000)
    parser.add_argument("--customers", type=int, default=200)
    parser.add_argument("--latency", type=float, default=0.02, help="mean seconds per call")
    parser.add_argument("--failure-rate", type=float, default=0.05)
    parser.add_argument("--in-flight", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--no-parquet", action="store_true",
                        help="skip the Parquet dataset (and Spark)")
    parser.add_argument("--parquet-engine", choices=["spark", "pyarrow"], default="spark")
    parser.add_argument("--keep", action="store_true",
                        help="keep the working directory (state, dataset, Spark log)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR, format="%(levelname)s %(name)s: %(message)s")
    console = Console(stderr=True)
    workdir = Path(tempfile.mkdtemp(prefix="aiostreams-example-"))
    kept = "kept" if args.keep else "removed at the end; --keep keeps it"
    console.print(f"working directory {workdir} ({kept})", soft_wrap=True)
    try:
        if not args.no_parquet:  # the summary reads the dataset with Spark either way
            start_spark(workdir, console)
        parquet_dir = ais.run_event_loop(main_async(args, workdir, console))
        if parquet_dir is not None:
            summarize_parquet(parquet_dir)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
