"""The live status page the metrics server serves at ``/``, and its JSON at ``/status.json``.

One self-contained HTML page (no script, style or font from elsewhere): the topology as an
SVG graph (:mod:`~aiostreams.ops.topology_graph`), then a table of tasks and one of
services (:mod:`~aiostreams.ops.status_report`). Every number is in the HTML as served, so
the page reads without JavaScript; with it, a small inline script fetches ``status.json``
every :data:`REFRESH` seconds and replaces the text of each element whose ``data-k``
names a key of :meth:`StatusReport.fields`. When the report's layout changes (a rebalance
moved tasks, a service made its first call) the script reloads the page instead.

Nothing here is on the record path: a request reads the app on its event loop, as a
scrape does. The graph is drawn once (the topology does not change while the app runs).
"""

from __future__ import annotations

import dataclasses
import html
from collections.abc import Awaitable, Callable, Mapping

from aiohttp import web

from aiostreams.ops.inspection import OperatedApp
from aiostreams.ops.status_report import PartitionRow, StatusReport, status_report
from aiostreams.ops.topology_graph import render_svg, topology_graph
from aiostreams.types import TopicPartition

__all__ = ["REFRESH", "StatusPage", "add_status_page_routes", "render_page"]

REFRESH = 1.0
"""Seconds between two fetches of ``status.json`` by the page's script."""

EndOffsets = Callable[[], Awaitable[Mapping[TopicPartition, int]]]

_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:16px;color:#1d2330;background:#f7f8fa}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:20px 0 6px}
.summary span{margin-right:18px}.summary b{font-variant-numeric:tabular-nums}
.scroll{overflow-x:auto;max-width:100%}
.graph{overflow-x:auto;background:#fff;border:1px solid #d8dce3;border-radius:8px;padding:4px}
table{border-collapse:collapse;background:#fff;border:1px solid #d8dce3}
th,td{padding:4px 10px;border-bottom:1px solid #e6e8ec;text-align:right;white-space:nowrap}
th{background:#eef1f5;font-weight:600}td:first-child,th:first-child{text-align:left}
td{font-variant-numeric:tabular-nums}.where{text-align:left}.failure{color:#b00020}.muted{color:#6b7280}
svg.topology{max-width:100%;height:auto}
svg.topology .edge{fill:none;stroke:#8a93a3;stroke-width:1.4}
svg.topology marker path{fill:#8a93a3}
svg.topology rect{stroke-width:1.3;fill:#fff;stroke:#5b6475}
svg.topology .label{font-size:12.5px;font-weight:600;fill:#1d2330}
svg.topology .kind{font-size:11px;fill:#6b7280}
svg.topology .band rect{fill:#f7f8fa;stroke:#e2e5ea}
svg.topology .band text{font-size:11px;fill:#6b7280}
svg.topology .node-source rect{fill:#e3f0ff;stroke:#2f6fd0}
svg.topology .node-sink rect,svg.topology .node-external rect{fill:#e6f6ea;stroke:#2e8b4f}
svg.topology .node-store rect{fill:#fff4dc;stroke:#c28a12}
svg.topology .node-topic rect{fill:#f1e9ff;stroke:#7a4fc9;stroke-dasharray:4 3}
"""

_SCRIPT = """
(function(){
  var layout = document.body.dataset.layout, stamp = document.getElementById('updated');
  function tick(){
    fetch('status.json', {cache: 'no-store'}).then(function(r){ return r.json(); })
    .then(function(doc){
      if (doc.layout !== layout) { location.reload(); return; }
      document.querySelectorAll('[data-k]').forEach(function(el){
        var v = doc.fields[el.dataset.k];
        if (v !== undefined && el.textContent !== v) el.textContent = v;
      });
      stamp.textContent = 'updated ' + new Date().toLocaleTimeString();
    }).catch(function(){ stamp.textContent = 'not answering'; });
  }
  setInterval(tick, %d);
})();
"""


def _cell(fields: Mapping[str, str], key: str) -> str:
    return f'<td data-k="{html.escape(key)}">{html.escape(fields[key])}</td>'


def _tasks_table(report: StatusReport, fields: Mapping[str, str]) -> str:
    if not report.tasks:
        return '<p class="muted">No tasks on this worker now.</p>'
    rows = ["<div class='scroll'><table id='tasks'><tr><th>task</th><th>state</th>"
            "<th class='where'>partition</th>"
            "<th>committed</th><th>lag</th><th>in flight</th><th>buffered</th>"
            "<th>retire lag</th><th>oldest record</th><th>records in</th>"
            "<th>dead letters</th></tr>"]
    for t in report.tasks:
        span = max(1, len(t.partitions))
        shared = "".join(_cell(fields, f"{k}:{t.task_id}") for k in (
            "in_flight", "buffered", "retire_lag", "oldest_age", "records_in",
            "dead_lettered"))
        partitions: list[PartitionRow | None] = [*t.partitions] or [None]
        for i, p in enumerate(partitions):
            cells = ""
            if i == 0:
                cells += (f'<td rowspan="{span}">{html.escape(t.task_id)}</td>'
                          f'<td rowspan="{span}" data-k="state:{html.escape(t.task_id)}">'
                          f"{html.escape(t.state)}</td>")
            if p is None:
                cells += "<td>-</td><td>-</td><td>-</td>"
            else:
                where = f"{t.task_id}:{p.topic}:{p.partition}"
                cells += (f'<td class="where">{html.escape(p.topic)}[{p.partition}]</td>'
                          + _cell(fields, f"committed:{where}") + _cell(fields, f"lag:{where}"))
            if i == 0:
                cells += shared.replace("<td ", f'<td rowspan="{span}" ')
            rows.append(f'<tr class="task" data-task="{html.escape(t.task_id)}">{cells}</tr>')
    rows.append("</table></div>")
    return "".join(rows)


def _services_table(report: StatusReport, fields: Mapping[str, str]) -> str:
    if not report.services:
        return '<p class="muted">No service called yet.</p>'
    rows = ["<div class='scroll'><table id='services'><tr><th>service</th><th>limit</th>"
            "<th>learned rate</th>"
            "<th>breaker</th><th>held</th><th>in flight</th><th>waiting</th></tr>"]
    for s in report.services:
        rows.append(f"<tr><td>{html.escape(s.name)}</td>" + "".join(
            _cell(fields, f"{k}:{s.name}") for k in (
                "limit", "learned_rate", "breaker", "held", "service_in_flight", "waiting"))
            + "</tr>")
    rows.append("</table></div>")
    return "".join(rows)


def render_page(report: StatusReport, graph_svg: str) -> str:
    """The whole page for ``report``, with ``graph_svg`` as the topology."""
    fields = report.fields()
    failure = (f'<p class="failure" data-k="failure">{html.escape(fields["failure"])}</p>'
               if report.failure else "")
    summary = "".join(
        f'<span>{label} <b data-k="{key}">{html.escape(fields[key])}</b></span>'
        for label, key in (("state", "state"), ("commits", "commits"),
                           ("dead letters", "dead_letters")))
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width,initial-scale=1'>"
        f"<title>{html.escape(report.app)} · aiostreams</title><style>{_STYLE}</style></head>"
        f'<body data-layout="{html.escape(report.layout())}">'
        f"<h1>{html.escape(report.app)}</h1>"
        f'<p class="summary">{summary}<span class="muted" id="updated">as loaded</span></p>'
        f"{failure}<h2>Topology</h2><div class='graph'>{graph_svg}</div>"
        f"<h2>Tasks</h2>{_tasks_table(report, fields)}"
        f"<h2>Services</h2>{_services_table(report, fields)}"
        "<p class='muted'>Also here: <a href='metrics'>metrics</a> (Prometheus) · "
        "<a href='health'>health</a> · <a href='status.json'>status.json</a></p>"
        f"<script>{_SCRIPT % int(REFRESH * 1000)}</script></body></html>")


class StatusPage:
    """The two handlers of one app's page; ``end_offsets`` fetches the log end offsets
    (for the lag) and may return an empty mapping when the broker does not answer."""

    def __init__(self, app: OperatedApp, end_offsets: EndOffsets) -> None:
        self.app = app
        self.end_offsets = end_offsets
        self._svg: str | None = None

    def graph_svg(self) -> str:
        if self._svg is None:
            self._svg = render_svg(topology_graph(self.app.build()))
        return self._svg

    async def report(self) -> StatusReport:
        return status_report(self.app, await self.end_offsets())

    async def page(self, request: web.Request) -> web.Response:
        return web.Response(text=render_page(await self.report(), self.graph_svg()),
                            content_type="text/html", headers={"Cache-Control": "no-store"})

    async def json(self, request: web.Request) -> web.Response:
        report = await self.report()
        return web.json_response(
            {"layout": report.layout(), "fields": report.fields(),
             "report": dataclasses.asdict(report)}, headers={"Cache-Control": "no-store"})


def add_status_page_routes(web_app: web.Application, app: OperatedApp,
                           end_offsets: EndOffsets) -> StatusPage:
    """Serve ``app``'s page at ``/`` and its numbers at ``/status.json``."""
    page = StatusPage(app, end_offsets)
    web_app.router.add_get("/", page.page)
    web_app.router.add_get("/status.json", page.json)
    return page
