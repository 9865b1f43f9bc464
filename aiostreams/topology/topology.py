"""The topology: sources, processors, sinks and stores as a DAG (Kafka's ``Topology``).

Nodes may name parents that are added later; :meth:`Topology.build` checks the whole graph
(unknown parents, cycles, sinks with children, nodes no source reaches, topics read twice,
stores nobody uses) and splits it into *sub-topologies*: connected components, each run as
one task per input partition.

The nodes and sub-topologies are defined in :mod:`aiostreams.topology.nodes`, the checks
and the split in :mod:`aiostreams.topology.subtopologies`, the descriptions in
:mod:`aiostreams.topology.describe`; this module is their public path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from aiostreams.errors import TopologyError
from aiostreams.policies import Retry
from aiostreams.serde import Serde, serde_for
from aiostreams.state.store_spec import StoreSpec
from aiostreams.topic import Topic
from aiostreams.topology.describe import describe_text, mermaid_flowchart
from aiostreams.topology.nodes import (
    ExternalSinkNode,
    Node,
    ProcessorNode,
    SinkNode,
    SourceNode,
    SubTopology,
)
from aiostreams.topology.processor import Processor, ProcessorSupplier
from aiostreams.topology.subtopologies import build_subtopologies


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
        return build_subtopologies(self._nodes, self._stores)

    # -- description ------------------------------------------------------------------

    def describe(self) -> str:
        """The topology as text, in the shape of Kafka Streams' ``describe()``."""
        return describe_text(self._nodes, self.build())

    def describe_mermaid(self) -> str:
        """The topology as a Mermaid flowchart."""
        return mermaid_flowchart(self._nodes, self.build())


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
