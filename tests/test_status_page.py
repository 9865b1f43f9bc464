"""The status page without a browser: the topology graph and its drawing, and the page as
served (with JavaScript off, the numbers are in the HTML) beside its JSON. The browser
test (tests/test_status_page_browser.py) checks the page a user sees."""

from __future__ import annotations

import dataclasses
import re
import xml.etree.ElementTree as ET
from typing import Any

import aiohttp
from hypothesis import given
from hypothesis import strategies as st
from status_demo import SCORING_LIMIT, demo_app, orders

from aiostreams import Processor, Record
from aiostreams.ops.metrics import MetricsServer
from aiostreams.ops.status_page import render_page
from aiostreams.ops.status_report import PartitionRow, StatusReport, TaskRow
from aiostreams.ops.topology_graph import bands, render_svg, topology_graph
from aiostreams.state.store_spec import StoreSpec
from aiostreams.topology.topology import Topology
from aiostreams.transport.memory import MemoryBroker

SVG = "{http://www.w3.org/2000/svg}"


class Forward(Processor[Any, Any]):
    def process(self, record: Record[Any, Any]) -> None:
        self.context.forward(record)


@st.composite
def topologies(draw: st.DrawFn) -> Topology:
    """A random valid topology: sources, processors with parents drawn among earlier
    nodes, stores on some processors, sinks, and topics that chain sub-topologies."""
    topology = Topology()
    sources = draw(st.integers(1, 3))
    upstream = [f"s{i}" for i in range(sources)]
    for i, name in enumerate(upstream):
        topology.add_source(name, f"topic-{i}")
    processors: list[str] = []
    stores: set[str] = set()
    for i in range(draw(st.integers(0, 8))):
        parents = draw(st.lists(st.sampled_from(upstream), min_size=1, max_size=2,
                                unique=True))
        name = f"p{i}"
        topology.add_processor(name, Forward, *parents)
        if draw(st.booleans()):  # a store of its own, or one shared with another
            store = f"store-{draw(st.integers(0, 2))}"
            if store in stores:
                topology.connect_store(store, name)
            else:
                topology.add_store(StoreSpec(store, dict), name)
                stores.add(store)
        upstream.append(name)
        processors.append(name)
    for i in range(draw(st.integers(1, 3))):
        topic = draw(st.sampled_from([f"out-{i}", f"topic-{i}"]))  # topic-*: read back
        topology.add_sink(f"k{i}", topic, draw(st.sampled_from(upstream)))
    return topology


@given(topologies())
def test_every_node_store_and_internal_topic_is_drawn_once_and_edges_point_right(
        topology: Topology) -> None:
    subs = topology.build()
    graph = topology_graph(subs)
    names = {n.name for s in subs for n in (*s.sources, *s.processors, *s.sinks)}
    stores = {f"store:{spec.name}" for s in subs for spec in s.stores}
    read_back = {f"topic:{t}" for s in subs for t in s.source_topics} & {
        f"topic:{k.topic}" for s in subs for k in s.sinks}
    assert {n.id for n in graph.nodes} == names | stores | read_back

    placed = {node: (b, c) for b, (_, columns) in enumerate(bands(graph))
              for c, ids in enumerate(columns) for node in ids}
    assert sorted(placed) == sorted(n.id for n in graph.nodes)  # each placed exactly once
    kinds = {n.id: n.kind for n in graph.nodes}
    for a, b in graph.edges:
        if placed[a][0] == placed[b][0] and kinds[b] != "source":  # a topic read back
            assert placed[a][1] < placed[b][1], f"{a} -> {b} points left"

    svg = ET.fromstring(render_svg(graph))  # well-formed XML
    drawn = [g.get("data-id") for g in svg.iter(f"{SVG}g") if g.get("class", "").startswith(
        "node ")]
    assert sorted(drawn) == sorted(n.id for n in graph.nodes)
    assert len(list(svg.iter(f"{SVG}path"))) == len(graph.edges) + 1  # + the arrow head


def test_the_demo_graph_links_sink_to_repartition_topic_to_source_and_processor_to_store(
) -> None:
    graph = topology_graph(demo_app(MemoryBroker()).build())
    kinds = {n.id: n.kind for n in graph.nodes}
    topic = next(n for n, kind in kinds.items() if kind == "topic")
    store = next(n for n, kind in kinds.items() if kind == "store")
    assert [kinds[a] for a, b in graph.edges if b == topic] == ["sink"]
    assert [kinds[b] for a, b in graph.edges if a == topic] == ["source"]
    assert [kinds[a] for a, b in graph.edges if b == store] == ["processor"]


def test_every_number_of_the_page_has_a_key_the_json_refreshes() -> None:
    report = StatusReport("a", "running", 3, None, (TaskRow(
        "0_0", "running", (), 2, 8, 1, 0.5, None, 10, 1),), ())
    keys = set(re.findall(r'data-k="([^"]+)"', render_page(report, "<svg/>")))
    assert keys == set(report.fields()) - {"failure"}  # failure: shown when there is one

    failed = dataclasses.replace(report, failure="TaskFailedError: <boom>")
    assert failed.layout() != report.layout()  # so an open page reloads to show it
    assert ('data-k="failure">TaskFailedError: &lt;boom&gt;<'
            in render_page(failed, "<svg/>"))


async def test_the_page_as_served_shows_the_numbers_without_javascript() -> None:
    broker = MemoryBroker()
    broker.create_topic("orders", 2)
    broker.append(list(orders(0, 200)))
    app = demo_app(broker)
    server = MetricsServer(app, port=0)
    await server.start()
    try:
        await app.start()
        await app.wait_until_caught_up(timeout=30)
        base = server.url.removesuffix("metrics")
        async with aiohttp.ClientSession() as session:
            async with session.get(base) as response:
                assert response.status == 200
                assert response.content_type == "text/html"
                page = await response.text()
            async with session.get(base + "status.json") as response:
                doc = await response.json()
    finally:
        await app.stop()
        await server.stop()
    assert "<script src" not in page and "http" not in page.split("<svg", 1)[0].replace(
        "http-equiv", "")  # nothing fetched from elsewhere
    assert re.search(r'data-k="committed:0_0:orders:0">100<', page)
    assert re.search(r'data-k="lag:0_0:orders:0">0<', page)
    assert re.search(rf'data-k="limit:scoring">{SCORING_LIMIT}<', page)
    assert re.search(r'data-k="dead_letters">[1-9]', page)  # bad:13 and bad:110
    assert doc["fields"]["committed:0_1:orders:1"] == "100"
    (task,) = [t for t in doc["report"]["tasks"] if t["task_id"] == "0_1"]
    assert task["partitions"] == [{"topic": "orders", "partition": 1, "committed": 100,
                                   "position": 100, "end": 100, "lag": 0}]
    assert doc["layout"] in page


async def test_before_the_app_starts_the_page_draws_the_topology_and_no_task() -> None:
    app = demo_app(MemoryBroker())
    server = MetricsServer(app, port=0)
    await server.start()
    try:
        async with aiohttp.ClientSession() as session, session.get(
                server.url.removesuffix("metrics")) as response:
            assert response.status == 200
            page = await response.text()
    finally:
        await server.stop()
    assert "No tasks on this worker now." in page and "No service called yet." in page
    assert page.count('<g class="node ') == len(topology_graph(app.build()).nodes)
    assert 'data-k="state">created<' in page


def test_lag_is_end_minus_position_and_unknown_without_either() -> None:
    assert PartitionRow("t", 0, 5, 7, 10).lag == 3
    assert PartitionRow("t", 0, 5, 12, 10).lag == 0  # an end read before the last retire
    assert PartitionRow("t", 0, None, None, 10).lag is None
    assert PartitionRow("t", 0, 5, 7, None).lag is None
