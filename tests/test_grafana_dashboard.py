"""The Grafana dashboard (deploy/grafana/aiostreams.json) asks only for metrics a running
app exports: every panel's PromQL, and the template variables' queries, are parsed for
metric names, and each name is checked against a scrape of a live app (on the memory broker,
with a service it calls and a store, so the service and restore families are there)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families
from status_demo import demo_app, orders

from aiostreams.ops.metrics import MetricsServer
from aiostreams.transport.memory import MemoryBroker

DASHBOARD = Path(__file__).parents[1] / "deploy" / "grafana" / "aiostreams.json"

_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and",
             "or", "unless", "offset", "inf", "nan"}


def metric_names(promql: str) -> set[str]:
    """The metric names a PromQL expression selects: what is left once strings, label
    matchers ``{...}``, ranges ``[...]``, label lists of ``by``/``without``/``on``/...,
    function and aggregation names (a name followed by ``(``) and keywords are taken out.
    Raises ``ValueError`` when its brackets do not balance."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'', '""', promql)
    depth = 0
    for char in text:
        depth += {"(": 1, "{": 1, "[": 1, ")": -1, "}": -1, "]": -1}.get(char, 0)
        if depth < 0:
            raise ValueError(f"unbalanced brackets in {promql!r}")
    if depth:
        raise ValueError(f"unbalanced brackets in {promql!r}")
    text = re.sub(r"\{[^{}]*\}", " ", text)
    text = re.sub(r"\[[^\[\]]*\]", " ", text)
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)", " ",
                  text)
    names = set()
    for match in re.finditer(r"(?<![\w.$])[a-zA-Z_:][\w:]*", text):
        name = match.group()
        if name in _KEYWORDS or text[match.end():].lstrip().startswith("("):
            continue
        names.add(name)
    return names


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])  # a collapsed row holds its panels


def queries(dashboard: dict[str, Any]) -> dict[str, str]:
    """Every PromQL of the dashboard, by where it is (panel title / ref id, or variable)."""
    found = {}
    for panel in panels(dashboard):
        if panel["type"] == "row":
            continue
        assert panel.get("targets"), f"panel {panel['title']!r} has no query"
        for target in panel["targets"]:
            found[f"{panel['title']} / {target['refId']}"] = target["expr"]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]
            query = query["query"] if isinstance(query, dict) else query
            # Grafana's label_values(<series selector>, <label>): the selector is PromQL
            selector = re.fullmatch(r"label_values\((.+),\s*\w+\)", query)
            found[f"variable {variable['name']}"] = selector.group(1) if selector else query
    return found


def exported_names(exposition: str) -> set[str]:
    """The series names a scrape can show: each family's, with the suffixes of its type."""
    suffixes = {"counter": ("_total", "_created"), "gauge": ("",),
                "histogram": ("_bucket", "_sum", "_count", "_created"),
                "summary": ("", "_sum", "_count", "_created")}
    names = set()
    for family in text_string_to_metric_families(exposition):
        names.update(family.name + s for s in suffixes.get(family.type, ("",)))
        names.update(sample.name for sample in family.samples)
    return names


def test_the_promql_reader_finds_the_metrics_and_nothing_else() -> None:
    assert metric_names(
        'histogram_quantile(0.99, sum by (service, le) (rate(a_bucket{app="$app", '
        'x=~"by|rate"}[$__rate_interval]))) / on(app) group_left b_total offset 5m'
    ) == {"a_bucket", "b_total"}
    assert metric_names('max by (state) (aiostreams_app_state{app="$app"}) == 1') == {
        "aiostreams_app_state"}
    with pytest.raises(ValueError, match="unbalanced"):
        metric_names("sum(rate(x[5m])")


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def test_the_dashboard_has_a_panel_for_each_concern(dashboard: dict[str, Any]) -> None:
    wanted = {"aiostreams_task_records_in_total", "aiostreams_consumer_lag_records",
              "aiostreams_task_in_flight", "aiostreams_task_retire_lag_seconds",
              "aiostreams_service_limit", "aiostreams_service_learned_rate",
              "aiostreams_service_breaker_state", "aiostreams_service_held",
              "aiostreams_task_dead_letters_total", "aiostreams_task_dropped_records_total",
              "aiostreams_tasks_restoring",
              "aiostreams_restored_records_total"}
    named = set().union(*map(metric_names, queries(dashboard).values()))
    assert wanted <= named, f"no panel for {sorted(wanted - named)}"


async def test_every_metric_the_dashboard_queries_is_exported_by_a_running_app(
        dashboard: dict[str, Any]) -> None:
    broker = MemoryBroker()
    broker.create_topic("orders", 2)
    broker.append(list(orders(0, 120)))
    app = demo_app(broker)
    server = MetricsServer(app, port=0)
    await server.start()
    try:
        await app.start()
        await app.wait_until_caught_up(timeout=30)
        async with aiohttp.ClientSession() as session, session.get(server.url) as response:
            assert response.status == 200
            exported = exported_names(await response.text())
    finally:
        await app.stop()
        await server.stop()
    assert "aiostreams_service_limit" in exported  # the service was called: its families
    missing = {where: sorted(metric_names(expr) - exported)
               for where, expr in queries(dashboard).items()
               if metric_names(expr) - exported}
    assert missing == {}
    assert all(metric_names(expr) for expr in queries(dashboard).values())
