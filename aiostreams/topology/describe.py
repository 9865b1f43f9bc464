"""A topology described for people: as text in the shape of Kafka Streams'
``Topology.describe()``, and as a Mermaid flowchart (``aiostreams describe --mermaid``).

Both describe the sub-topologies :meth:`Topology.build` returns, so describing a topology
validates it first; nodes are listed in each sub-topology's order (sources, processors
parents first, sinks, external sinks).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from aiostreams.topology.nodes import (
    ExternalSinkNode,
    Node,
    ProcessorNode,
    SinkNode,
    SourceNode,
    SubTopology,
)

__all__ = ["describe_text", "mermaid_flowchart"]


def describe_text(nodes: Mapping[str, Node], subs: list[SubTopology]) -> str:
    """The topology of ``nodes``, split into ``subs``, as text in the shape of Kafka
    Streams' ``describe()``."""
    lines = ["Topologies:"]
    for sub in subs:
        lines.append(f"   Sub-topology: {sub.id}")
        parents_of: dict[str, list[str]] = {}
        for node in nodes.values():
            if not isinstance(node, SourceNode):
                for p in node.parents:
                    parents_of.setdefault(node.name, []).append(p)
        for node in _iter_nodes(sub):
            if isinstance(node, SourceNode):
                lines.append(f"    Source: {node.name} (topics: [{', '.join(node.topics)}])")
                lines.append(f"      --> {', '.join(node.children) or 'none'}")
            elif isinstance(node, ProcessorNode):
                lines.append(f"    Processor: {node.name} (stores: [{', '.join(node.stores)}])")
                lines.append(f"      --> {', '.join(node.children) or 'none'}")
                lines.append(f"      <-- {', '.join(parents_of.get(node.name, []))}")
            elif isinstance(node, SinkNode):
                lines.append(f"    Sink: {node.name} (topic: {node.topic})")
                lines.append(f"      <-- {', '.join(parents_of.get(node.name, []))}")
            else:
                lines.append(f"    Sink: {node.name} ({type(node.sink).__name__})")
                lines.append(f"      <-- {', '.join(parents_of.get(node.name, []))}")
        lines.append("")
    return "\n".join(lines)


def mermaid_flowchart(nodes: Mapping[str, Node], subs: list[SubTopology]) -> str:
    """The topology of ``nodes``, split into ``subs``, as a Mermaid flowchart."""
    lines = ["flowchart LR"]
    for sub in subs:
        lines.append(f"  subgraph sub{sub.id}[\"Sub-topology {sub.id}\"]")
        for node in _iter_nodes(sub):
            label = node.name
            if isinstance(node, SourceNode):
                topics = ", ".join(node.topics)
                lines.append(f"    {_mid(node.name)}[/\"{label}<br/>{topics}\"/]")
            elif isinstance(node, SinkNode):
                lines.append(f"    {_mid(node.name)}[\\\"{label}<br/>{node.topic}\"\\]")
            elif isinstance(node, ExternalSinkNode):
                lines.append(f"    {_mid(node.name)}[(\"{label}\")]")
            else:
                lines.append(f"    {_mid(node.name)}[\"{label}\"]")
        lines.append("  end")
    for node in nodes.values():
        if not isinstance(node, SourceNode):
            for p in node.parents:
                lines.append(f"  {_mid(p)} --> {_mid(node.name)}")
    return "\n".join(lines)


def _iter_nodes(sub: SubTopology) -> Iterable[Node]:
    yield from sub.sources
    yield from sub.processors
    yield from sub.sinks
    yield from sub.external_sinks


def _mid(name: str) -> str:
    return "n_" + "".join(c if c.isalnum() else "_" for c in name)
