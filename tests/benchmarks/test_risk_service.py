"""The issue-35 risk model answers as its docstring says: 429 + Retry-After above the
allowed rate (changed at run time), 502 while down, 5xx and hangs at their shares, 10-80 ms.
A real HTTP server on 127.0.0.1 (a free port the kernel picked), called by aiohttp."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import aiohttp
import pytest

from benchmarks.risk_service import Behaviour, RiskService, SpawnedRiskService

FAST = (0.0, 0.0)


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def statuses(http: aiohttp.ClientSession, url: str, n: int
                   ) -> list[tuple[int, str | None]]:
    async def one(i: int) -> tuple[int, str | None]:
        async with http.get(f"{url}/score/p{i}") as response:
            await response.read()
            return response.status, response.headers.get("Retry-After")
    return list(await asyncio.gather(*(one(i) for i in range(n))))


async def test_requests_above_the_rate_get_429_with_a_retry_after_in_whole_seconds(
        http: aiohttp.ClientSession) -> None:
    service = RiskService(Behaviour(latency=FAST, error_share=0.0, rate=1.0, burst=3))
    url = await service.start()
    try:
        answers = await statuses(http, url, 10)  # well within a second: 3 tokens, no more
    finally:
        await service.stop()
    assert sorted(s for s, _ in answers) == [200] * 3 + [429] * 7
    assert {after for s, after in answers if s == 429} == {"1"}
    stats = await service.stats()
    assert (stats.admitted, stats.refused) == (3, 7)
    assert sum(t[1] for t in stats.timeline) == 7


async def test_the_allowed_rate_changes_at_run_time(http: aiohttp.ClientSession) -> None:
    # no burst given: the bucket is a fifth of a second's worth deep, at least 1
    service = RiskService(Behaviour(latency=FAST, error_share=0.0, rate=1.0))
    url = await service.start()
    try:
        at_1 = await statuses(http, url, 30)
        await service.configure(rate=100.0)
        at_100 = await statuses(http, url, 30)
        await service.configure(rate=50.0)
        at_50 = await statuses(http, url, 30)
    finally:
        await service.stop()
    # each burst is well within a second: the bucket's depth (plus what refilled meanwhile)
    assert [s for s, _ in at_1].count(200) == 1
    assert 20 <= [s for s, _ in at_100].count(200) <= 25
    assert 10 <= [s for s, _ in at_50].count(200) <= 15
    assert '"rate": 50.0' in (await service.stats()).events[-1][1]


async def test_an_outage_answers_502_without_retry_after_until_it_ends(
        http: aiohttp.ClientSession) -> None:
    service = RiskService(Behaviour(latency=FAST, error_share=0.0))
    url = await service.start()
    try:
        await service.configure(down_for=3600.0)
        during = await statuses(http, url, 4)
        await service.configure(down_for=0.0)  # ends it now
        after = await statuses(http, url, 4)
    finally:
        await service.stop()
    assert during == [(502, None)] * 4
    assert [s for s, _ in after] == [200] * 4
    assert (await service.stats()).down == 4


async def test_requests_over_capacity_get_503_and_hung_ones_hold_no_place(
        http: aiohttp.ClientSession) -> None:
    service = RiskService(Behaviour(latency=(0.05, 0.05), error_share=0.0, capacity=2,
                                    hang_seconds=3600.0))
    url = await service.start()

    async def given_up(i: int) -> None:
        with pytest.raises(TimeoutError):  # the server still holds it, hung
            await http.get(f"{url}/score/h{i}", timeout=aiohttp.ClientTimeout(total=0.2))
    try:
        answers = await statuses(http, url, 5)
        await service.configure(hang_share=1.0)
        await asyncio.gather(*(given_up(i) for i in range(3)))
        await service.configure(hang_share=0.0)
        after_hangs = await statuses(http, url, 2)
    finally:
        await service.stop()
    assert sorted(answers) == [(200, None)] * 2 + [(503, None)] * 3
    assert after_hangs == [(200, None)] * 2
    stats = await service.stats()
    assert (stats.busy, stats.hung, stats.most_in_flight) == (3, 3, 2)


async def test_errors_and_hangs_come_at_their_shares(http: aiohttp.ClientSession) -> None:
    service = RiskService(Behaviour(latency=FAST, error_share=0.3, hang_share=0.1,
                                    hang_seconds=3600.0))
    url = await service.start()
    timeout = aiohttp.ClientTimeout(total=0.5)

    async def one(i: int) -> int:
        try:
            async with http.get(f"{url}/score/p{i}", timeout=timeout) as response:
                return response.status
        except TimeoutError:
            return 0
    try:
        answers = await asyncio.gather(*(one(i) for i in range(400)))
    finally:
        await service.stop()
    stats = await service.stats()
    assert answers.count(0) == stats.hung and 20 <= stats.hung <= 60
    assert answers.count(500) == stats.errors and 85 <= stats.errors <= 155
    assert answers.count(200) == stats.served == 400 - stats.hung - stats.errors


async def test_latency_is_within_its_bounds(http: aiohttp.ClientSession) -> None:
    service = RiskService(Behaviour(latency=(0.01, 0.08), error_share=0.0))
    url = await service.start()
    took = []
    try:
        for i in range(20):
            started = time.perf_counter()
            async with http.get(f"{url}/score/p{i}") as response:
                assert response.status == 200
                assert (await response.json())["payment"] == f"p{i}"
            took.append(time.perf_counter() - started)
    finally:
        await service.stop()
    assert min(took) >= 0.01
    assert sum(took) / len(took) <= 0.08  # the mean of U(10, 80 ms) is 45 ms


async def test_a_spawned_service_is_configured_and_counted_over_http(
        http: aiohttp.ClientSession) -> None:
    service = SpawnedRiskService(Behaviour(latency=FAST, error_share=0.0, rate=1.0,
                                           burst=2))
    url = await service.start()
    try:
        assert [s for s, _ in await statuses(http, url, 4)].count(200) == 2
        await service.configure(down_for=3600.0)
        assert await statuses(http, url, 1) == [(502, None)]
        with pytest.raises(ValueError, match="error_share"):
            await service.configure(error_share=2.0)
        stats = await service.stats()
    finally:
        await service.stop()
    assert (stats.admitted, stats.refused, stats.down) == (2, 2, 1)
    assert stats.events[-1][1] == '{"down_for": 3600.0}'
