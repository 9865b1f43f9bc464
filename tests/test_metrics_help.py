"""Every Prometheus series says what it counts: no help text is a bare field name."""

from __future__ import annotations

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from aiostreams import App
from aiostreams.ops.metrics import MetricsServer


async def test_every_metric_help_text_says_what_it_counts() -> None:
    app = App("helps", broker="memory://metrics-help")
    source = app.topic("in", key=str, value=str, partitions=1)
    app.stream(source).to(app.topic("out", key=str, value=str))
    server = MetricsServer(app, port=0)
    await server.start()
    try:
        await app.start()
        async with aiohttp.ClientSession() as session, session.get(server.url) as response:
            text = await response.text()
    finally:
        await app.stop()
        await server.stop()
    families = list(text_string_to_metric_families(text))
    assert any(f.name == "aiostreams_task_deferred" for f in families)
    for family in families:
        if not family.name.startswith("aiostreams_"):
            continue
        help_text = family.documentation
        assert "TaskMetrics" not in help_text, (family.name, help_text)
        assert len(help_text.split()) >= 3, (family.name, help_text)
