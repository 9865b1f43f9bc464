"""The topology drawn as a graph: its nodes, stores and internal topics laid out in layers,
as an SVG the status page embeds (made here, in Python: no script, no asset from elsewhere).

:func:`topology_graph` turns the sub-topologies :meth:`App.build` returns into a
:class:`TopologyGraph`: one node per topology node (``source``, ``processor``, ``sink``,
``external`` sink), one per state store (``store``, linked from each processor that uses
it) and one per topic that a sink of the app writes and a source of the app reads
(``topic``: repartition topics, and user topics that join two sub-topologies), linked
sink -> topic -> source. :func:`bands` gives each sub-topology a band, and places each
node of a band in the column after its farthest parent there (longest path from a root),
so sources come first and every edge within a band points right; :func:`render_svg` draws
the bands stacked, one ``<g class="node" data-id=... data-kind=...>`` per
node (the browser test counts them against the topology).

Invariants: node ids are unique (a store or topic id carries a prefix no topology node
name can clash with, as asserted); every edge joins two nodes of the graph; every edge
within a band goes from a column to one right of it (asserted), but the edge from a topic
to a source reading it (a sub-topology may read back a topic it writes).
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from aiostreams.topology.nodes import (
    ExternalSinkNode,
    Node,
    ProcessorNode,
    SinkNode,
    SourceNode,
    SubTopology,
)

__all__ = ["GraphNode", "TopologyGraph", "bands", "render_svg", "topology_graph"]

STORE_PREFIX = "store:"
TOPIC_PREFIX = "topic:"

NODE_WIDTH = 200
NODE_HEIGHT = 46
COLUMN_GAP = 44
ROW_GAP = 16
MARGIN = 12
BAND_TITLE = 22
BAND_PAD = 10
BAND_GAP = 14
LABEL_CHARS = 24
"""Characters of a label drawn in a node; the whole name is in its tooltip (``<title>``)."""


@dataclass(frozen=True)
class GraphNode:
    """One box of the drawing: ``id`` (a topology node's name, ``store:<name>`` or
    ``topic:<name>``), ``kind`` (source, processor, sink, external, store, topic), the
    ``label`` drawn and the ``detail`` shown on hover."""

    id: str
    kind: str
    label: str
    detail: str
    sub: int | None = None
    """The sub-topology the node belongs to (None for stores and topics)."""


@dataclass(frozen=True)
class TopologyGraph:
    nodes: tuple[GraphNode, ...]
    edges: tuple[tuple[str, str], ...]

    def __post_init__(self) -> None:
        ids = [n.id for n in self.nodes]
        if len(ids) != len(set(ids)):
            raise ValueError(f"graph node ids must be unique, got {sorted(ids)}")
        unknown = {end for edge in self.edges for end in edge} - set(ids)
        if unknown:
            raise ValueError(f"edges name nodes the graph does not have: {sorted(unknown)}")


def _short(name: str) -> str:
    """A DSL-generated name without its noise: ``KSTREAM-MAPVALUES-0000000001`` ->
    ``MAPVALUES #1``; other names unchanged."""
    match = re.fullmatch(r"(?:KSTREAM|KTABLE)-(.+?)-0*(\d+)(-\w+)?", name)
    if match is None:
        return name
    kind, number, tail = match.groups()
    return f"{kind}{tail or ''} #{number}"


def _node(node: Node, sub: int) -> GraphNode:
    if isinstance(node, SourceNode):
        topics = ", ".join(node.topics)
        return GraphNode(node.name, "source", ", ".join(map(_short_topic, node.topics)),
                         f"source {node.name}\ntopics: {topics}", sub)
    if isinstance(node, ProcessorNode):
        stores = f"\nstores: {', '.join(node.stores)}" if node.stores else ""
        return GraphNode(node.name, "processor", _short(node.name),
                         f"processor {node.name}{stores}", sub)
    if isinstance(node, SinkNode):
        return GraphNode(node.name, "sink", _short_topic(node.topic),
                         f"sink {node.name}\ntopic: {node.topic}", sub)
    assert isinstance(node, ExternalSinkNode)
    kind = type(node.sink).__name__
    return GraphNode(node.name, "external", f"{_short(node.name)} ({kind})",
                     f"external sink {node.name} ({kind})", sub)


def _members(sub: SubTopology) -> Iterable[Node]:
    yield from sub.sources
    yield from sub.processors
    yield from sub.sinks
    yield from sub.external_sinks


def topology_graph(subs: Sequence[SubTopology]) -> TopologyGraph:
    """The graph of ``subs`` (see the module docstring)."""
    nodes: list[GraphNode] = []
    edges: list[tuple[str, str]] = []
    names = {node.name for sub in subs for node in _members(sub)}
    assert not any(n.startswith((STORE_PREFIX, TOPIC_PREFIX)) for n in names), (
        "a topology node name clashes with the graph's store/topic ids")
    for sub in subs:
        for node in _members(sub):
            nodes.append(_node(node, sub.id))
            if not isinstance(node, SourceNode):
                edges.extend((parent, node.name) for parent in node.parents)
    stores: dict[str, str] = {}
    for sub in subs:
        for spec in sub.stores:
            stores.setdefault(spec.name, type(spec).__name__)
        for processor in sub.processors:
            edges.extend((processor.name, STORE_PREFIX + s) for s in processor.stores)
    for store in sorted(stores):
        nodes.append(GraphNode(STORE_PREFIX + store, "store", store, f"state store {store}"))
    written = {sink.topic: sink.name for sub in subs for sink in sub.sinks}
    read = [(topic, source.name) for sub in subs for source in sub.sources
            for topic in source.topics if topic in written]
    for topic in sorted({topic for topic, _ in read}):
        kind = "repartition topic" if topic.endswith("-repartition") else "topic"
        nodes.append(GraphNode(TOPIC_PREFIX + topic, "topic", _short_topic(topic),
                               f"{kind} {topic}"))
        edges.append((written[topic], TOPIC_PREFIX + topic))
    edges.extend((TOPIC_PREFIX + topic, source) for topic, source in read)
    known = {n.id for n in nodes}
    # an edge to a store no sub-topology declares (never after build()) is left out
    return TopologyGraph(tuple(nodes), tuple(dict.fromkeys(
        e for e in edges if e[0] in known and e[1] in known)))


def _short_topic(topic: str) -> str:
    match = re.search(r"(?:KSTREAM|KTABLE)-(.+?)-0*(\d+)-repartition$", topic)
    return f"{match.group(1).lower()} #{match.group(2)}" if match else topic


def bands(graph: TopologyGraph) -> list[tuple[int, list[list[str]]]]:
    """Node ids by band (one per sub-topology, in id order: ``(sub-topology id, columns)``),
    then by column, then by row.

    A topology node's band is its sub-topology; a store's, that of the first processor
    using it; a topic's, that of the sink writing it (so it closes the band that feeds
    the next one). Within a band a node sits one column right of its farthest parent in
    the band (sources first), and a column lists its nodes in the order of their parents'
    rows, then the graph's order, which keeps most edges from crossing. Nodes on a cycle
    (none in a built topology) go in the band's last column."""
    parents: dict[str, list[str]] = {n.id: [] for n in graph.nodes}
    for a, b in graph.edges:
        parents[b].append(a)
    band: dict[str, int] = {n.id: n.sub for n in graph.nodes if n.sub is not None}
    for n in graph.nodes:  # stores and topics follow their first parent
        if n.sub is None:
            band[n.id] = min((band[p] for p in parents[n.id] if p in band), default=0)
    sources = {n.id for n in graph.nodes if n.kind == "source"}
    # a source starts its band: the edge from the topic it reads is left out of the
    # layering (a sub-topology that reads back what it writes loops through a topic)
    inside = {n: [p for p in ps if band[p] == band[n] and n not in sources]
              for n, ps in parents.items()}
    column = _columns([n.id for n in graph.nodes], inside)
    order = {n.id: i for i, n in enumerate(graph.nodes)}
    out: list[tuple[int, list[list[str]]]] = []
    for band_id in sorted(set(band.values())):
        members = [n.id for n in graph.nodes if band[n.id] == band_id]
        columns: list[list[str]] = [[] for _ in range(max(column[m] for m in members) + 1)]
        row: dict[str, float] = {}
        for c, ids in enumerate(columns):
            ids.extend(m for m in members if column[m] == c)
            ids.sort(key=lambda n: (_mean(row[p] for p in inside[n] if p in row), order[n]))
            row.update((n, float(r)) for r, n in enumerate(ids))
        out.append((band_id, columns))
    return out


def _columns(ids: list[str], parents: dict[str, list[str]]) -> dict[str, int]:
    """Longest path from a root over ``parents`` (Kahn's order); a node on a cycle gets
    one column past every other. Invariant: a parent's column is left of its child's."""
    children: dict[str, list[str]] = {n: [] for n in ids}
    for child, ps in parents.items():
        for p in ps:
            children[p].append(child)
    waiting = {n: len(parents[n]) for n in ids}
    ready = [n for n in ids if waiting[n] == 0]
    column: dict[str, int] = {}
    while ready:
        current = ready.pop(0)
        column[current] = max((column[p] + 1 for p in parents[current]), default=0)
        for child in children[current]:
            waiting[child] -= 1
            if waiting[child] == 0:
                ready.append(child)
    placed = dict(column)
    for n in ids:
        column.setdefault(n, max(placed.values(), default=-1) + 1)
    assert all(column[p] < column[c] for c, ps in parents.items() for p in ps
               if c in placed and p in placed), "an edge points left within a band"
    return column


def _mean(values: Iterable[float]) -> float:
    items = list(values)
    return sum(items) / len(items) if items else -1.0


def render_svg(graph: TopologyGraph) -> str:
    """The graph as an inline ``<svg>`` (styled by the page's CSS classes): one band per
    sub-topology, stacked, each drawn left to right."""
    laid = bands(graph)
    widest = max((len(columns) for _, columns in laid), default=0)
    width = MARGIN * 2 + widest * NODE_WIDTH + max(0, widest - 1) * COLUMN_GAP
    at: dict[str, tuple[int, int]] = {}
    backgrounds: list[str] = []
    top = MARGIN
    for sub_id, columns in laid:
        tallest = max(len(c) for c in columns)
        height = BAND_TITLE + tallest * NODE_HEIGHT + (tallest - 1) * ROW_GAP + BAND_PAD
        backgrounds.append(
            f'<g class="band"><rect x="{MARGIN // 2}" y="{top}" width="{width - MARGIN}" '
            f'height="{height}" rx="9"/><text x="{MARGIN}" y="{top + 14}">'
            f"sub-topology {sub_id}</text></g>")
        for c, ids in enumerate(columns):
            offset = (tallest - len(ids)) * (NODE_HEIGHT + ROW_GAP) // 2  # centred
            for r, node_id in enumerate(ids):
                at[node_id] = (MARGIN + c * (NODE_WIDTH + COLUMN_GAP),
                               top + BAND_TITLE + offset + r * (NODE_HEIGHT + ROW_GAP))
        top += height + BAND_GAP
    height = top - BAND_GAP + MARGIN
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="topology" role="img" '
             f'aria-label="topology graph" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}">',
             '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" '
             'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
             '<path d="M 0 0 L 10 5 L 0 10 z"/></marker></defs>', *backgrounds]
    for a, b in graph.edges:
        (ax, ay), (bx, by) = at[a], at[b]
        x1, y1 = ax + NODE_WIDTH, ay + NODE_HEIGHT // 2
        x2, y2 = bx, by + NODE_HEIGHT // 2
        bend = max(40, (x2 - x1) // 2)  # a backward edge (to the next band) bends wide
        parts.append(f'<path class="edge" d="M {x1} {y1} C {x1 + bend} {y1}, {x2 - bend} {y2}, '
                     f'{x2} {y2}" marker-end="url(#arrow)"/>')
    for node in graph.nodes:
        x, y = at[node.id]
        label = node.label if len(node.label) <= LABEL_CHARS else (
            node.label[:LABEL_CHARS - 1] + "\u2026")
        sub = "" if node.sub is None else f" · sub-topology {node.sub}"
        parts.append(
            f'<g class="node node-{node.kind}" data-id="{html.escape(node.id)}" '
            f'data-kind="{node.kind}" transform="translate({x},{y})">'
            f"<title>{html.escape(node.detail)}</title>"
            f'<rect width="{NODE_WIDTH}" height="{NODE_HEIGHT}" rx="7"/>'
            f'<text x="10" y="19" class="label">{html.escape(label)}</text>'
            f'<text x="10" y="36" class="kind">{node.kind}{sub}</text></g>')
    parts.append("</svg>")
    return "".join(parts)
