"""A new user's walkthrough: the app in ``newuser_app`` (public API only) gets its input
with ``app.send``, calls a real HTTP service through an app resource, its table is queried
over HTTP on the metrics server while it runs, and its results are read back with
``app.consumer``."""

from __future__ import annotations

import ast
import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import newuser_app
import pytest
from aiohttp import web

import aiostreams
from aiostreams.ops.metrics import MetricsServer


@pytest.fixture
async def customer_service() -> AsyncIterator[str]:
    async def customer(request: web.Request) -> web.Response:
        await asyncio.sleep(0)  # yields once, as a handler doing I/O would
        n = int(request.match_info["id"].removeprefix("c"))
        return web.json_response({"tier": "gold" if n % 2 else "silver"})

    service = web.Application()
    service.router.add_get("/customers/{id}", customer)
    runner = web.AppRunner(service, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


def test_the_newuser_app_imports_nothing_internal() -> None:
    tree = ast.parse(Path(newuser_app.__file__).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            assert not node.module.startswith("aiostreams"), node.module
        if isinstance(node, ast.Import):
            assert all(a.name == "aiostreams" or not a.name.startswith("aiostreams")
                       for a in node.names)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id == "ais":
            assert node.attr in aiostreams.__all__, node.attr


async def test_a_new_users_app_enriches_its_orders_and_totals_them_per_tier(
        customer_service: str) -> None:
    app = newuser_app.build(f"memory://newuser-{uuid.uuid4().hex[:8]}", customer_service)
    orders = [newuser_app.Order(id=f"o{i}", customer_id=f"c{i % 5}", amount=float(i))
              for i in range(40)]
    for order in orders[:20]:  # before the app runs
        await app.send("orders", order.id, order)
    gold = sum(o.amount for o in orders if int(o.customer_id[1:]) % 2)
    async with app, MetricsServer(app) as server:
        for order in orders[20:]:  # while it runs
            await app.send("orders", order.id, order)
        await app.wait_until_caught_up(timeout=30)
        base = server.url.removesuffix("/metrics")
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{base}/stores/tier-totals/gold") as response:
                assert response.status == 200
                assert (await response.json())["value"] == gold
            async with session.get(f"{base}/stores/tier-totals/platinum") as response:
                assert response.status == 404
        assert await app.store("tier-totals").get("silver") == sum(range(40)) - gold
    async with app.consumer("orders-enriched") as records:
        enriched = {r.key: r.value for r in await records.read_to_end()}
    async with app.consumer("tier-totals") as records:
        totals = {r.key: r.value for r in await records.read_to_end()}  # latest per tier

    assert set(enriched) == {o.id for o in orders}
    assert enriched["o3"] == newuser_app.EnrichedOrder(
        id="o3", customer_id="c3", amount=3.0, tier="gold")
    assert totals == {"gold": gold, "silver": sum(range(40)) - gold}
