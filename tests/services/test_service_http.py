"""A declared service in front of a real HTTP service with a real capacity (aiohttp on
127.0.0.1, started here): the permit gate keeps a fixed concurrency inside the capacity, and
an outage is waited out by the breaker instead of failing the calls made during it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import pytest

from aiostreams.services import BreakerState, CircuitBreaker, Service, ServiceContract
from aiostreams.services.outcome import Outcome
from benchmarks.capacity_service import CapacityService


@pytest.fixture
async def backend() -> AsyncIterator[CapacityService]:
    service = CapacityService(capacity=8, latency=0.002)
    await service.start()
    yield service
    await service.stop()


async def lookup(session: aiohttp.ClientSession, url: str, key: str) -> str:
    async with session.get(f"{url}/lookup/{key}") as response:
        response.raise_for_status()
        body = await response.json()
        return str(body["value"])


async def test_a_fixed_concurrency_within_capacity_never_meets_a_429(
        backend: CapacityService) -> None:
    service = Service("lookup", concurrency=8)
    async with aiohttp.ClientSession() as session:
        values = await asyncio.gather(*(
            service.call(lambda k=str(i): lookup(session, backend.url, k)) for i in range(400)))
    assert values == [f"v-{i}" for i in range(400)]
    assert backend.rejected == 0 and backend.served == 400
    assert backend.most_in_flight <= 8
    assert service.stats.outcomes[Outcome.SUCCESS] == 400


async def test_without_the_gate_the_same_load_is_refused(backend: CapacityService) -> None:
    """The control for the test above: the service does refuse beyond its capacity."""
    async with aiohttp.ClientSession() as session:
        results = await asyncio.gather(
            *(lookup(session, backend.url, str(i)) for i in range(400)), return_exceptions=True)
    assert backend.rejected > 0
    assert sum(isinstance(r, aiohttp.ClientResponseError) and r.status == 429
               for r in results) == backend.rejected


async def test_calls_made_during_an_outage_wait_for_the_breaker_and_then_succeed(
        backend: CapacityService) -> None:
    # this service's 503 means "down", not "slow down": its contract says so
    down_means_transient = ServiceContract(slow_down_statuses=frozenset({429}),
                                           transient_statuses=frozenset({500, 502, 503}))
    service = Service("lookup", concurrency=4, contract=down_means_transient,
                      breaker=CircuitBreaker(failure_ratio=0.5, min_calls=4, cool_down=0.05))
    backend.down = True
    async with aiohttp.ClientSession() as session:
        failed = await asyncio.gather(*(
            service.call(lambda k=str(i): lookup(session, backend.url, k)) for i in range(3)),
            return_exceptions=True)
        assert all(isinstance(f, aiohttp.ClientResponseError) and f.status == 503
                   for f in failed)
        opener = asyncio.ensure_future(service.call(lambda: lookup(session, backend.url, "x")))
        await service.waits.next_change()  # the 4th call's answer opens the breaker
        assert service.breaker_state is BreakerState.OPEN
        assert not opener.done()  # held, not failed
        held = [asyncio.ensure_future(
            service.call(lambda k=str(i): lookup(session, backend.url, k))) for i in range(50)]
        seen_down = backend.unavailable
        backend.down = False  # the outage ends; held calls go once a probe succeeds
        values = await asyncio.gather(*held)
        assert await opener == "v-x"
    assert values == [f"v-{i}" for i in range(50)]
    # while open, nothing was sent: at most the probes (one per cool-down) met the outage
    assert backend.unavailable <= seen_down + 1
