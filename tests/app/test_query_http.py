"""Interactive queries over HTTP: ``GET /stores/{name}/{key}`` on the metrics server, and
the redirect to the worker that owns a key when several workers share the group."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

import aiohttp
import pytest

from aiostreams import App, TumblingWindows
from aiostreams.ops.metrics import MetricsServer
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.transport.partitioner import murmur2

KEYS = [f"k{i}" for i in range(12)]


def make_app(transport: MemoryTransport) -> App:
    app = App("http-counts", transport=transport, commit_interval_ms=20)
    words = app.topic("words", key=str, value=str, partitions=3)
    app.stream(words).group_by_key().count(materialized="counts")
    numbers = app.topic("numbers", key=int, value=str, partitions=2)
    app.stream(numbers).group_by_key().count(materialized="by-number")
    tagged = app.topic("tagged", key="json", value=str, partitions=2)
    app.stream(tagged).group_by_key().count(materialized="by-json")
    clicks = app.topic("clicks", key=str, value=str, partitions=2)
    (app.stream(clicks).group_by_key().windowed_by(TumblingWindows(size=60.0))
     .count(materialized="per-minute", retention=600.0))
    return app


async def fill(app: App) -> dict[str, int]:
    expected = {k: 0 for k in KEYS}
    for i in range(48):
        key = KEYS[(i * 5) % len(KEYS)]
        expected[key] += 1
        await app.send("words", key, f"w{i}")
    await app.send("numbers", 42, "x")
    await app.send("tagged", "alice smith", "x")
    await app.send("tagged", 7, "x")
    for t in (0.0, 70.0, 80.0):
        await app.send("clicks", "alice", "c", timestamp=1_700_000_040.0 + t)
    await app.wait_until_caught_up(timeout=30)
    return expected


async def get(url: str, **kwargs: Any) -> tuple[int, dict[str, Any], aiohttp.ClientResponse]:
    async with aiohttp.ClientSession() as session, session.get(url, **kwargs) as response:
        return response.status, await response.json(), response


@pytest.fixture
async def one_worker() -> AsyncIterator[tuple[str, dict[str, int]]]:
    app = make_app(MemoryTransport(MemoryBroker()))
    async with app, MetricsServer(app) as server:
        expected = await fill(app)
        assert server.metrics_url == server.url == f"{server.base_url}/metrics"
        yield server.base_url, expected


async def test_a_key_is_answered_as_json_by_the_stores_serde(
        one_worker: tuple[str, dict[str, int]]) -> None:
    base, expected = one_worker
    for key in ("k0", "k7"):
        status, body, _ = await get(f"{base}/stores/counts/{key}")
        assert status == 200
        assert body["value"] == expected[key] and body["key"] == key
        assert body["partition"] == (murmur2(key.encode()) & 0x7FFFFFFF) % 3
    status, body, _ = await get(f"{base}/stores/by-number/42")  # int keys parse as ints
    assert (status, body["value"], body["key"]) == (200, 1, 42)
    status, body, _ = await get(f"{base}/stores/by-json/%22alice%20smith%22")  # JSON keys
    assert (status, body["value"], body["key"]) == (200, 1, "alice smith")
    status, body, _ = await get(f"{base}/stores/by-json/7")  # JSON: a number, not "7"
    assert (status, body["key"]) == (200, 7)


async def test_missing_keys_stores_and_bad_keys_say_what_is_wrong(
        one_worker: tuple[str, dict[str, int]]) -> None:
    base, _ = one_worker
    status, body, _ = await get(f"{base}/stores/counts/nobody")
    assert status == 404 and "no value for key 'nobody'" in body["error"]
    status, body, _ = await get(f"{base}/stores/count/k1")
    assert status == 404 and "no store 'count'" in body["error"]
    assert "'counts'" in body["error"]
    status, body, _ = await get(f"{base}/stores/by-number/forty-two")
    assert status == 400 and "int keys" in body["error"] and "'forty-two'" in body["error"]
    status, body, _ = await get(f"{base}/stores/by-json/alice")
    assert status == 400 and "a string key of a JSON store is quoted" in body["error"]
    status, body, _ = await get(f"{base}/stores/per-minute/alice?from=soon")
    assert status == 400 and "?from= must be a time in seconds" in body["error"]


async def test_a_window_store_answers_the_keys_windows_within_bounds(
        one_worker: tuple[str, dict[str, int]]) -> None:
    base, _ = one_worker
    status, body, _ = await get(f"{base}/stores/per-minute/alice")
    assert status == 200
    assert body["windows"] == [{"start": 1_700_000_040.0, "value": 1},
                               {"start": 1_700_000_100.0, "value": 2}]
    status, body, _ = await get(f"{base}/stores/per-minute/alice?from=1700000100&to=1700000200")
    assert [w["value"] for w in body["windows"]] == [2]


async def test_a_window_store_key_without_windows_is_not_found(
        one_worker: tuple[str, dict[str, int]]) -> None:
    base, _ = one_worker
    status, body, _ = await get(f"{base}/stores/per-minute/bob")
    assert status == 404 and body["error"] == "store 'per-minute' has no window for key 'bob'"
    status, body, _ = await get(f"{base}/stores/per-minute/alice?from=1700000200")
    assert status == 404 and "no window for key 'alice' starting within [1700000200.0, inf]" in \
        body["error"]


def free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


async def test_a_worker_redirects_a_key_it_does_not_own_to_the_owner() -> None:
    transport = MemoryTransport(MemoryBroker())
    ports = free_ports(2)
    peers = [f"http://127.0.0.1:{p}" for p in ports]
    async with AsyncExitStack() as stack:
        apps = [make_app(transport) for _ in ports]
        for app, port in zip(apps, ports, strict=True):
            await stack.enter_async_context(app)
            await stack.enter_async_context(MetricsServer(app, port=port, peers=peers))
        expected = await fill(apps[0])
        redirected = 0
        for base in peers:
            for key in KEYS:
                status, body, response = await get(f"{base}/stores/counts/{key}")
                assert (status, body["value"]) == (200, expected[key])
                if response.history:
                    assert [r.status for r in response.history] == [307]
                    location = response.history[0].headers["Location"]
                    assert location == f"{body['worker']}/stores/counts/{key}?hop=1"
                    redirected += 1
        assert 0 < redirected < 2 * len(KEYS)  # each worker answers some keys itself
        # a request that was already redirected once is not redirected again
        refused = 0
        for base in peers:
            for key in KEYS:
                status, body, response = await get(f"{base}/stores/counts/{key}?hop=1",
                                                   allow_redirects=False)
                if status != 200:
                    assert status == 503 and response.headers["Retry-After"] == "1"
                    assert "no longer is" in body["error"]
                    refused += 1
        assert refused == redirected
