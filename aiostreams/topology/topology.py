"""The topology: sources, processors, sinks and stores as a DAG (Kafka's ``Topology``).

Nodes may name parents that are added later; :meth:`Topology.build` checks the whole graph
(unknown parents, cycles, sinks with children, nodes no source reaches, topics read twice,
stores nobody uses) and splits it into *sub-topologies*: connected components, each run as
one task per input partition.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiostreams.errors import TopologyError
from aiostreams.policies import Retry
from aiostreams.serde import Serde, serde_for
from aiostreams.topic import Topic
from aiostreams.topology.internal_topics import KV_CHANGELOG_CONFIG
from aiostreams.topology.processor import Processor, ProcessorSupplier


@dataclass
class SourceNode:
    name: str
    topics: tuple[str, ...]
    key_serde: Serde[Any]
    value_serde: Serde[Any]
    children: list[str] = field(default_factory=list)


@dataclass
class ProcessorNode:
    name: str
    supplier: ProcessorSupplier
    parents: tuple[str, ...]
    stores: list[str] = field(default_factory=list)
    children: list[str] = field(default_factory=list)
    retry: Retry | None = None
    """This node's retry policy (an async step's ``retry=``); ``None``: the app's."""


@dataclass
class SinkNode:
    name: str
    topic: str
    key_serde: Serde[Any]
    value_serde: Serde[Any]
    parents: tuple[str, ...]
    partitioner: Callable[[Any, Any, int], int] | None = None


@dataclass
class ExternalSinkNode:
    """A sink outside Kafka (see :mod:`aiostreams.engine.external_sink`)."""

    name: str
    sink: Any
    parents: tuple[str, ...]


@dataclass(frozen=True)
class StoreSpec:
    """A state store declared on the topology; ``factory`` makes one instance per task."""

    name: str
    factory: Callable[[], Any]
    logged: bool = True
    changelog_config: tuple[tuple[str, str], ...] = KV_CHANGELOG_CONFIG


Node = SourceNode | ProcessorNode | SinkNode | ExternalSinkNode


@dataclass(frozen=True)
class SubTopology:
    """One connected component of the topology; the unit a task runs."""

    id: int
    sources: tuple[SourceNode, ...]
    processors: tuple[ProcessorNode, ...]  # parents before children
    sinks: tuple[SinkNode, ...]
    stores: tuple[StoreSpec, ...]
    external_sinks: tuple[ExternalSinkNode, ...] = ()

    @property
    def source_topics(self) -> tuple[str, ...]:
        return tuple(t for s in self.sources for t in s.topics)

    @property
    def sink_topics(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s.topic for s in self.sinks))


class Topology:
    """Build with ``add_source``/``add_processor``/``add_sink``/``add_store``, then
    :meth:`build` (done by the app at start) validates and splits it."""

    def __init__(self) -> None:
        self._nodes: dict[str, Node] = {}
        self._stores: dict[str, StoreSpec] = {}
        self._topics: dict[str, Topic] = {}

    # -- building ---------------------------------------------------------------------

    def _claim_name(self, name: str) -> None:
        if not name:
            raise TopologyError("a node needs a non-empty name")
        if name in self._nodes:
            raise TopologyError(
                f"a node named {name!r} already exists in the topology: give each node a "
                "unique name"
            )

    def add_topic(self, topic: Topic) -> Topic:
        """Register a topic's serdes (used by sinks and ``ctx.send``). Re-registering the
        same name with other serdes is an error."""
        known = self._topics.get(topic.name)
        if known is not None:
            if (known.key_serde, known.value_serde) != (topic.key_serde, topic.value_serde):
                raise TopologyError(
                    f"topic {topic.name!r} is declared twice with different serdes: "
                    f"({known.key_serde!r}, {known.value_serde!r}) and "
                    f"({topic.key_serde!r}, {topic.value_serde!r})"
                )
            return known
        self._topics[topic.name] = topic
        return topic

    def topic(self, name: str) -> Topic | None:
        return self._topics.get(name)

    @property
    def topics(self) -> dict[str, Topic]:
        return dict(self._topics)

    def add_source(
        self,
        name: str,
        *topics: str | Topic,
        key_serde: Any = None,
        value_serde: Any = None,
    ) -> Topology:
        self._claim_name(name)
        if not topics:
            raise TopologyError(f"source {name!r} needs at least one topic")
        names: list[str] = []
        key_s: Serde[Any] | None = serde_for(key_serde) if key_serde is not None else None
        value_s: Serde[Any] | None = serde_for(value_serde) if value_serde is not None else None
        for t in topics:
            if isinstance(t, Topic):
                self.add_topic(t)
                names.append(t.name)
                key_s = key_s or t.key_serde
                value_s = value_s or t.value_serde
            else:
                names.append(t)
                known = self._topics.get(t)
                if known is not None:
                    key_s = key_s or known.key_serde
                    value_s = value_s or known.value_serde
        for other in self._nodes.values():
            if isinstance(other, SourceNode):
                for t_name in names:
                    if t_name in other.topics:
                        raise TopologyError(
                            f"topic {t_name!r} is read by source {other.name!r} already; "
                            f"source {name!r} cannot read it too (merge the streams instead)"
                        )
        self._nodes[name] = SourceNode(
            name, tuple(names), key_s or serde_for(None), value_s or serde_for(None)
        )
        return self

    def add_processor(
        self,
        name: str,
        supplier: ProcessorSupplier | type[Processor[Any, Any]],
        *parents: str,
        stores: Sequence[str] = (),
        retry: Retry | None = None,
    ) -> Topology:
        """Add a processor node; ``retry`` overrides the app's retry policy for it."""
        self._claim_name(name)
        if not parents:
            raise TopologyError(f"processor {name!r} needs at least one parent")
        if not callable(supplier):
            raise TopologyError(
                f"processor {name!r}: the supplier must be a callable returning a new "
                "Processor (a class or a factory function)"
            )
        self._nodes[name] = ProcessorNode(name, supplier, tuple(parents), list(stores),
                                          retry=retry)
        return self

    def set_retry(self, name: str, retry: Retry) -> None:
        """Give processor ``name`` its own retry policy (instead of the app's)."""
        node = self._nodes.get(name)
        if not isinstance(node, ProcessorNode):
            raise TopologyError(f"no processor named {name!r} to set a retry policy on: "
                                "add the processor first")
        node.retry = retry

    @property
    def node_retries(self) -> dict[str, Retry]:
        """The processors with a retry policy of their own, by name (a new dict)."""
        return {name: node.retry for name, node in self._nodes.items()
                if isinstance(node, ProcessorNode) and node.retry is not None}

    def add_sink(
        self,
        name: str,
        topic: str | Topic,
        *parents: str,
        key_serde: Any = None,
        value_serde: Any = None,
        partitioner: Callable[[Any, Any, int], int] | None = None,
    ) -> Topology:
        self._claim_name(name)
        if not parents:
            raise TopologyError(f"sink {name!r} needs at least one parent")
        if isinstance(topic, Topic):
            self.add_topic(topic)
            topic_name = topic.name
        else:
            topic_name = topic
        known = self._topics.get(topic_name)
        key_s = serde_for(key_serde) if key_serde is not None else (
            known.key_serde if known else serde_for(None))
        value_s = serde_for(value_serde) if value_serde is not None else (
            known.value_serde if known else serde_for(None))
        self._nodes[name] = SinkNode(name, topic_name, key_s, value_s, tuple(parents),
                                     partitioner)
        return self

    def add_external_sink(self, name: str, sink: Any, *parents: str) -> Topology:
        """A sink outside Kafka (e.g. the Parquet sink), in the commit protocol: its
        results are handed over at retire and made durable before offsets are committed."""
        self._claim_name(name)
        if not parents:
            raise TopologyError(f"sink {name!r} needs at least one parent")
        if not hasattr(sink, "add") or not hasattr(sink, "flush"):
            raise TopologyError(
                f"sink {name!r}: {type(sink).__name__} is not an ExternalSink (needs add() "
                "and flush())"
            )
        sink.name = name
        self._nodes[name] = ExternalSinkNode(name, sink, tuple(parents))
        return self

    @property
    def external_sinks(self) -> list[Any]:
        return [n.sink for n in self._nodes.values() if isinstance(n, ExternalSinkNode)]

    def add_store(self, spec: StoreSpec, *processors: str) -> Topology:
        if spec.name in self._stores:
            raise TopologyError(f"a store named {spec.name!r} already exists")
        self._stores[spec.name] = spec
        for p in processors:
            self.connect_store(spec.name, p)
        return self

    def connect_store(self, store: str, processor: str) -> Topology:
        node = self._nodes.get(processor)
        if not isinstance(node, ProcessorNode):
            raise TopologyError(
                f"store {store!r} cannot be connected to {processor!r}: no processor node "
                "has that name"
            )
        if store not in node.stores:
            node.stores.append(store)
        return self

    # -- validation and splitting -----------------------------------------------------

    def build(self) -> list[SubTopology]:
        """Validate the graph and return its sub-topologies (raises :class:`TopologyError`)."""
        if not any(isinstance(n, SourceNode) for n in self._nodes.values()):
            raise TopologyError("the topology has no source: add_source() first")
        children: dict[str, list[str]] = {name: [] for name in self._nodes}
        for node in self._nodes.values():
            if isinstance(node, SourceNode):
                continue
            for parent in node.parents:
                p = self._nodes.get(parent)
                if p is None:
                    raise TopologyError(
                        f"node {node.name!r} names parent {parent!r}, which does not exist"
                    )
                if isinstance(p, SinkNode | ExternalSinkNode):
                    raise TopologyError(
                        f"node {node.name!r} names sink {parent!r} as its parent; a sink "
                        "cannot have children"
                    )
                children[parent].append(node.name)
            if isinstance(node, ProcessorNode):
                for store in node.stores:
                    if store not in self._stores:
                        raise TopologyError(
                            f"processor {node.name!r} uses store {store!r}, which is not "
                            "declared: add_store() it"
                        )
        self._check_acyclic(children)
        for name, node in self._nodes.items():
            if isinstance(node, SourceNode | ProcessorNode):
                node.children = children[name]
            if isinstance(node, ProcessorNode) and not node.children:
                pass  # a terminal processor (foreach, a state writer) is fine
        reached = self._reachable_from_sources(children)
        for name in self._nodes:
            if name not in reached:
                raise TopologyError(
                    f"node {name!r} is not connected to any source: give it a parent that "
                    "a source reaches"
                )
        return self._split(children)

    def _check_acyclic(self, children: dict[str, list[str]]) -> None:
        white, grey, black = 0, 1, 2
        color = dict.fromkeys(self._nodes, white)
        for start in self._nodes:
            if color[start] != white:
                continue
            stack: list[tuple[str, int]] = [(start, 0)]
            path: list[str] = [start]
            color[start] = grey
            while stack:
                name, i = stack[-1]
                if i < len(children[name]):
                    stack[-1] = (name, i + 1)
                    child = children[name][i]
                    if color[child] == grey:
                        cycle = [*path[path.index(child):], child]
                        raise TopologyError(
                            "the topology has a cycle: " + " -> ".join(cycle)
                        )
                    if color[child] == white:
                        color[child] = grey
                        stack.append((child, 0))
                        path.append(child)
                else:
                    color[name] = black
                    stack.pop()
                    path.pop()

    def _reachable_from_sources(self, children: dict[str, list[str]]) -> set[str]:
        seen: set[str] = set()
        todo = [n for n, node in self._nodes.items() if isinstance(node, SourceNode)]
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            todo.extend(children[name])
        return seen

    def _split(self, children: dict[str, list[str]]) -> list[SubTopology]:
        # union-find over parent/child edges and shared stores
        parent_of: dict[str, str] = {n: n for n in self._nodes}

        def find(x: str) -> str:
            while parent_of[x] != x:
                parent_of[x] = parent_of[parent_of[x]]
                x = parent_of[x]
            return x

        def union(a: str, b: str) -> None:
            parent_of[find(a)] = find(b)

        for name, kids in children.items():
            for kid in kids:
                union(name, kid)
        store_users: dict[str, list[str]] = {}
        for node in self._nodes.values():
            if isinstance(node, ProcessorNode):
                for s in node.stores:
                    store_users.setdefault(s, []).append(node.name)
        for users in store_users.values():
            for other in users[1:]:
                union(users[0], other)

        order = self._topological_order(children)
        groups: dict[str, list[str]] = {}
        for name in order:
            groups.setdefault(find(name), []).append(name)
        subs: list[SubTopology] = []
        for i, names in enumerate(groups.values()):
            nodes = [self._nodes[n] for n in names]
            procs = tuple(n for n in nodes if isinstance(n, ProcessorNode))
            used = dict.fromkeys(s for p in procs for s in p.stores)
            subs.append(SubTopology(
                id=i,
                sources=tuple(n for n in nodes if isinstance(n, SourceNode)),
                processors=procs,
                sinks=tuple(n for n in nodes if isinstance(n, SinkNode)),
                stores=tuple(self._stores[s] for s in used),
                external_sinks=tuple(n for n in nodes if isinstance(n, ExternalSinkNode)),
            ))
        return subs

    def _topological_order(self, children: dict[str, list[str]]) -> list[str]:
        indegree = dict.fromkeys(self._nodes, 0)
        for kids in children.values():
            for kid in kids:
                indegree[kid] += 1
        ready = [n for n in self._nodes if indegree[n] == 0]
        order: list[str] = []
        while ready:
            name = ready.pop(0)
            order.append(name)
            for kid in children[name]:
                indegree[kid] -= 1
                if indegree[kid] == 0:
                    ready.append(kid)
        return order

    # -- description ------------------------------------------------------------------

    def describe(self) -> str:
        """The topology as text, in the shape of Kafka Streams' ``describe()``."""
        subs = self.build()
        lines = ["Topologies:"]
        for sub in subs:
            lines.append(f"   Sub-topology: {sub.id}")
            parents_of: dict[str, list[str]] = {}
            for node in self._nodes.values():
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

    def describe_mermaid(self) -> str:
        """The topology as a Mermaid flowchart."""
        subs = self.build()
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
        for node in self._nodes.values():
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


__all__ = [
    "ExternalSinkNode",
    "Node",
    "ProcessorNode",
    "SinkNode",
    "SourceNode",
    "StoreSpec",
    "SubTopology",
    "Topology",
]
