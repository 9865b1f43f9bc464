"""Restore progress in the metrics: the changelog records a worker replayed into its stores
(``aiostreams_restored_records_total``) and the tasks still restoring
(``aiostreams_tasks_restoring``), scraped from a second run of an app whose in-memory store
must be restored from its changelog."""

from __future__ import annotations

import aiohttp
from prometheus_client.parser import text_string_to_metric_families
from status_demo import demo_app, orders

from aiostreams.ops.metrics import MetricsServer
from aiostreams.transport.memory import MemoryBroker


async def scrape_restore(broker: MemoryBroker) -> dict[str, float]:
    app = demo_app(broker)
    server = MetricsServer(app, port=0)
    await server.start()
    try:
        await app.start()
        await app.wait_until_caught_up(timeout=30)  # also: until no task is restoring
        async with aiohttp.ClientSession() as session, session.get(server.url) as response:
            text = await response.text()
    finally:
        await app.stop()
        await server.stop()
    return {s.name: s.value for f in text_string_to_metric_families(text)
            for s in f.samples if s.name in ("aiostreams_restored_records_total",
                                             "aiostreams_tasks_restoring")}


async def test_a_restart_reports_the_changelog_records_it_restored() -> None:
    broker = MemoryBroker()
    broker.create_topic("orders", 2)
    broker.append(list(orders(0, 100)))
    first = await scrape_restore(broker)
    assert first == {"aiostreams_restored_records_total": 0.0,
                     "aiostreams_tasks_restoring": 0.0}
    changelog = [t for t in broker.topic_names() if t.endswith("-changelog")]
    assert len(changelog) == 1
    written = len(broker.records(changelog[0]))

    second = await scrape_restore(broker)
    assert second == {"aiostreams_restored_records_total": float(written),
                      "aiostreams_tasks_restoring": 0.0}
    assert written > 0
