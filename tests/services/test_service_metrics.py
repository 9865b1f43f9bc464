"""A service's figures as Prometheus series and in the status line, on a manual clock."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric

from aiostreams.ops.metrics import AppTotals
from aiostreams.ops.progress import render
from aiostreams.services import DeclaredService, Overloaded
from aiostreams.services.prometheus import service_metrics, service_status
from aiostreams.testing import ManualClock, settle


class Collector:
    def __init__(self, services: dict[str, DeclaredService]) -> None:
        self.services = services

    def collect(self) -> Iterable[Metric]:
        return service_metrics("shop", self.services)


def scrape(services: dict[str, DeclaredService]) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Collector(services))  # type: ignore[arg-type]
    return generate_latest(registry).decode()


async def test_limit_in_flight_waiting_outcomes_latency_and_saved_calls_are_exported() -> None:
    clock = ManualClock()
    declared = DeclaredService("customers", concurrency=2, clock=clock)
    assert scrape({"customers": declared}) == ""  # not called yet: no series
    service = declared.on_loop()
    answers: list[asyncio.Future[str]] = []

    async def call() -> str:
        answers.append(asyncio.get_running_loop().create_future())
        return await answers[-1]

    calls = [asyncio.ensure_future(service.call(call)) for _ in range(3)]
    await settle()
    service.stats.saved_by_coalescing = 4
    text = scrape({"customers": declared})
    labels = 'app="shop",service="customers"'
    assert f"aiostreams_service_limit{{{labels}}} 2.0" in text
    assert f"aiostreams_service_in_flight{{{labels}}} 2.0" in text
    assert f"aiostreams_service_waiting_for_permit{{{labels}}} 1.0" in text
    assert f'aiostreams_service_breaker_state{{{labels},state="closed"}} 1.0' in text
    assert "customers: limit 2 · out 2 · waiting 1" in service_status({"customers": declared})
    clock.advance(0.003)
    answers[0].set_result("ok")
    answers[1].set_exception(Overloaded("customers", "429"))
    await settle()
    assert 'aiostreams_service_held{app="shop",service="customers"} 1.0' in scrape(
        {"customers": declared})  # the 429's record is held, to be called again
    while not all(c.done() for c in calls):  # answer the third call and the held one's
        clock.advance(0.003)
        for answer in answers:
            if not answer.done():
                answer.set_result("ok")
        await settle()
    await asyncio.gather(*calls)
    text = scrape({"customers": declared})
    svc = 'service="customers"'  # prometheus_client sorts the labels
    assert f'calls_total{{app="shop",outcome="success",{svc}}} 3.0' in text
    assert f'calls_total{{app="shop",outcome="overloaded",{svc}}} 1.0' in text
    assert f'calls_saved_total{{app="shop",by="coalescing",{svc}}} 4.0' in text
    assert f'latency_seconds_bucket{{app="shop",le="0.005",{svc}}} 4.0' in text
    assert f'latency_seconds_count{{app="shop",{svc}}} 4.0' in text
    assert f'slow_downs_total{{app="shop",{svc}}} 1.0' in text
    assert f'held_total{{app="shop",{svc}}} 1.0' in text
    assert f'latency_seconds_bucket{{app="shop",le="0.0025",{svc}}} 0.0' in text
    line = render("shop", AppTotals(), 0.0, service_status({"customers": declared}))
    assert line.endswith("‖ customers: limit 2 · out 0 · waiting 0 · held 0 · p99 5ms · "
                         "429s 1 · errors 0 · breaker closed · saved 4")
