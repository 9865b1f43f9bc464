"""A small app that keeps the status page busy: the browser test and the docs' screenshot
(docs/status_screenshot.py) run it on the memory broker.

``orders`` (2 partitions) -> an async scoring step through the service ``scoring``
(a few milliseconds a call; ``bad`` values fail for good and go to the dead-letter topic)
-> re-keyed by customer (a repartition topic) -> counted per customer (a store) ->
``order-counts``. :func:`feed` appends a batch of orders every ``every`` seconds until
stopped, so offsets keep moving while a page is open.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import time
from collections.abc import Iterator
from typing import Any

import aiostreams as ais
from aiostreams.ops.metrics import MetricsServer
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import OutgoingRecord

ORDERS = "orders"
COUNTS = "order-counts"
PARTITIONS = 2
SCORING_LIMIT = 8
"""The scoring service's concurrency: about 300 calls/s, a little more than :func:`feed`
sends, so records queue a little and the numbers on the page are not all zero."""


class BadOrder(Exception):
    """An order the scoring step can never score: dead-lettered."""


def demo_app(broker: MemoryBroker, name: str = "fraud-scoring") -> ais.App:
    app = ais.App(name, transport=MemoryTransport(broker), dead_letter_topic=f"{name}-dlq",
                  retry_attempts=1, retry_backoff=0.0, commit_interval_ms=100.0,
                  poll_timeout=0.01, max_in_flight=64)
    orders = app.topic(ORDERS, key=str, value=str, partitions=PARTITIONS)
    counts = app.topic(COUNTS, key=str, value=int, partitions=PARTITIONS)
    scoring = app.service("scoring", concurrency=SCORING_LIMIT)
    latency = random.Random(7)

    async def score(value: str) -> str:
        await asyncio.sleep(latency.uniform(0.005, 0.05))  # the remote model's latency
        if value.startswith("bad"):
            raise BadOrder(f"cannot score {value!r}")
        return value

    (app.stream(orders)
     .map_values_async(score, service=scoring)
     .group_by(lambda _key, value: value.split(":")[0], key_serde=str, value_serde=str)
     .count(materialized="orders-per-customer")
     .to_stream().to(counts))
    return app


def orders(start: int, count: int) -> Iterator[tuple[OutgoingRecord, int]]:
    now = time.time()  # event time: now, so the retire lag reads as a delay
    for i in range(start, start + count):
        value = f"bad:{i}" if i % 97 == 13 else f"customer-{i % 7}:{i}"
        yield OutgoingRecord(ORDERS, f"order-{i}".encode(), value.encode(), now), (
            i % PARTITIONS)


async def feed(broker: MemoryBroker, stop: asyncio.Event, *, batch: int = 10,
               every: float = 0.05) -> int:
    """Append ``batch`` orders every ``every`` seconds (a pace, not a wait) until ``stop``
    is set; returns how many were appended."""
    broker.create_topic(ORDERS, PARTITIONS)
    sent = itertools.count(0, batch)
    while not stop.is_set():
        broker.append(list(orders(next(sent), batch)))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), every)
    return next(sent)


class RunningDemo:
    """The demo app, its metrics server (the status page) and its feeder, running."""

    def __init__(self, app: ais.App, server: MetricsServer, stop: asyncio.Event,
                 feeder: asyncio.Task[int]) -> None:
        self.app = app
        self.server = server
        self.stop_feeding = stop
        self.feeder = feeder

    @property
    def page_url(self) -> str:
        return self.server.url.removesuffix("metrics")

    async def stop(self) -> None:
        self.stop_feeding.set()
        await self.feeder
        await self.app.stop()
        await self.server.stop()


async def start_demo(**app_options: Any) -> RunningDemo:
    """Start the demo app with its status page on a free port of 127.0.0.1."""
    broker = MemoryBroker()
    app = demo_app(broker, **app_options)
    server = MetricsServer(app, port=0)
    await server.start()
    stop = asyncio.Event()
    feeder = asyncio.create_task(feed(broker, stop))
    await app.start()
    return RunningDemo(app, server, stop, feeder)
