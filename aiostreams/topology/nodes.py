"""The topology's vocabulary: its nodes (source, processor, sink, external sink), the
stores declared on it, and a sub-topology (one connected component, the unit a task runs).

Invariants: a node's name is unique in its topology; ``children`` of sources and
processors are filled in by :meth:`Topology.build` (parents are what a node names); a
:class:`SubTopology` lists its processors parents before children.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiostreams.policies import Retry
from aiostreams.serde import Serde
from aiostreams.state.store_spec import StoreSpec
from aiostreams.topology.processor import ProcessorSupplier


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
