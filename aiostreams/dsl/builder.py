"""The stream DSL's builder: streams and tables of an app, compiled to its :class:`Topology`.

::

    words = app.stream(lines).flat_map_values(str.split)
    counts = words.group_by(lambda _, word: word).count(materialized="word-counts")
    counts.to_stream().to(word_counts)

Every operation adds processor (or sink/source) nodes to the app's topology at once; nothing
is deferred, so ``app.describe()`` shows the DSL's nodes as soon as they are declared.

Names: a node gets ``name=`` when the user gives one, else a Kafka-like generated name
``KSTREAM-FILTER-0000000003`` (the counter is per app and counts every generated name).
Store names default to ``KSTREAM-AGGREGATE-STATE-STORE-0000000004``-style names; their
changelog topics are ``<app>-<store>-changelog``. A key change before grouping or a join
(or any ``group_by``) inserts a *repartition*: a sink to the internal topic
``<app>-<node>-repartition`` and a source reading it back, so the stateful step downstream
sees every record of a key on one partition (another sub-topology).

Co-partitioning: a join, or a merge, makes its inputs one task's input; when both sides'
topics declare a partition count and the counts differ, building raises
:class:`~aiostreams.errors.CoPartitioningError` naming both topics.

The fluent classes users hold are re-exported here (:class:`Stream`, :class:`GroupedStream`,
:class:`Table`, ...); the window specs and :class:`JoinWindows` are in
:mod:`aiostreams.windows`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from aiostreams.dsl.branched import BranchedStream
from aiostreams.dsl.grouped_table import GroupedTable
from aiostreams.dsl.stream import Stream
from aiostreams.dsl.table import GroupedStream, Table, table_from_topic
from aiostreams.errors import CoPartitioningError, TopologyError
from aiostreams.serde import JsonSerde, Serde, serde_for
from aiostreams.state.store_spec import changelog_topic
from aiostreams.state.versioned import Versioned
from aiostreams.topic import Topic
from aiostreams.topology.internal_topics import REPARTITION_TOPIC_CONFIG
from aiostreams.topology.processor import Processor, ProcessorSupplier
from aiostreams.topology.topology import StoreSpec, Topology
from aiostreams.windows import DroppedRecords, LateRecords


class StreamsBuilder:
    """The DSL front of one topology: it adds the DSL's nodes to ``topology`` and names
    the app's internal topics ``<app_id>-...`` (an app makes one, for its own topology).

    The builder knows nothing of the App that runs the topology (like Kafka's
    ``InternalStreamsBuilder``): a node's own retry policy is set on the topology node.

    Invariant: every node the DSL adds is recorded in ``_parents`` (sources with no
    parents and their topics in ``_source_topics``), so co-partitioning can be checked
    at build time without reaching into the topology's internals.
    """

    def __init__(self, topology: Topology, app_id: str) -> None:
        if not app_id:
            raise TopologyError("a streams builder needs the app id that names its "
                                "internal topics; got an empty one")
        self.topology = topology
        self.app_id = app_id
        self.dropped = DroppedRecords()
        self.late = LateRecords(self.dropped)
        self._counter = 0
        self._parents: dict[str, tuple[str, ...]] = {}
        self._source_topics: dict[str, tuple[str, ...]] = {}

    # -- entry points -----------------------------------------------------------------

    def stream(self, *topics: Topic | str, name: str | None = None) -> Stream[Any, Any]:
        """A stream of the records of ``topics`` (declared :class:`Topic` objects, or names;
        an undeclared name reads raw bytes)."""
        if not topics:
            raise TopologyError("stream() needs at least one topic")
        node = self.add_source("KSTREAM-SOURCE", topics, name=name)
        first = self.topology.topic(topics[0].name if isinstance(topics[0], Topic)
                                    else topics[0])
        key_serde = first.key_serde if first is not None else serde_for(None)
        value_serde = first.value_serde if first is not None else serde_for(None)
        return Stream(self, node, key_serde=key_serde, value_serde=value_serde)

    def table(self, topic: Topic | str, *, name: str | None = None,
              materialized: str | None = None, persistent: bool = False,
              versioned: Versioned | None = None) -> Table[Any, Any]:
        """``topic`` as a table: the latest value per key (a null value deletes the key),
        materialized in a changelog-backed key-value store (a versioned one with
        ``versioned=``: see :mod:`aiostreams.dsl.versioned_wiring`)."""
        return table_from_topic(self, topic, name=name, materialized=materialized,
                                persistent=persistent, versioned=versioned)

    def describe(self) -> str:
        return self.topology.describe()

    # -- naming and nodes (used by the DSL's modules) ---------------------------------

    def new_name(self, kind: str, name: str | None = None) -> str:
        """``name`` when given, else ``<kind>-<10-digit counter>``."""
        index = self._counter
        self._counter += 1
        if name is not None:
            if not name:
                raise TopologyError(f"a {kind} node needs a non-empty name (or none at all)")
            return name
        return f"{kind}-{index:010d}"

    def add_source(self, kind: str, topics: Sequence[Topic | str], *,
                   name: str | None = None) -> str:
        node = self.new_name(kind, name)
        self.topology.add_source(node, *topics)
        self._parents[node] = ()
        self._source_topics[node] = tuple(t.name if isinstance(t, Topic) else t
                                          for t in topics)
        return node

    def add_processor(self, kind: str,
                      supplier: ProcessorSupplier | type[Processor[Any, Any]],
                      parents: Sequence[str], *, name: str | None = None,
                      stores: Sequence[str] = ()) -> str:
        node = self.new_name(kind, name)
        self.topology.add_processor(node, supplier, *parents, stores=stores)
        self._parents[node] = tuple(parents)
        return node

    def add_sink(self, kind: str, topic: Topic | str, parents: Sequence[str], *,
                 name: str | None = None, key_serde: Serde[Any] | None = None,
                 value_serde: Serde[Any] | None = None,
                 partitioner: Callable[[Any, Any, int], int] | None = None) -> str:
        node = self.new_name(kind, name)
        self.topology.add_sink(node, topic, *parents, key_serde=key_serde,
                               value_serde=value_serde, partitioner=partitioner)
        self._parents[node] = tuple(parents)
        return node

    def add_store(self, spec: StoreSpec, *processors: str) -> None:
        self.topology.add_store(spec, *processors)

    def connect_store(self, store: str, processor: str) -> None:
        self.topology.connect_store(store, processor)

    def store_name(self, kind: str, materialized: str | None) -> str:
        if materialized is not None:
            Topic.of(changelog_topic(self.app_id, materialized))  # validates the name
            return materialized
        return f"{self.new_name(kind)}"

    # -- repartitioning and co-partitioning -------------------------------------------

    def repartition(self, parent: str, *, name: str | None,
                    key_serde: Serde[Any] | None, value_serde: Serde[Any] | None,
                    partitions: int | None = None) -> tuple[str, Serde[Any], Serde[Any]]:
        """Route ``parent``'s records through ``<app>-<node>-repartition`` (partitioned by
        the serialized key) and read them back. Returns the new source node and the
        serdes used (JSON for keys or values whose serde is unknown).

        ``partitions=None`` lets the worker size the topic (like the widest input)."""
        base = self.new_name("KSTREAM-REPARTITION", name)
        key_s = key_serde if key_serde is not None else JsonSerde()
        value_s = value_serde if value_serde is not None else JsonSerde()
        topic = Topic.of(f"{self.app_id}-{base}-repartition", key_s, value_s,
                         partitions=partitions, internal=True,
                         config=REPARTITION_TOPIC_CONFIG)
        self.topology.add_topic(topic)
        self.add_sink("KSTREAM-SINK", topic, [parent], name=f"{base}-sink")
        source = self.add_source("KSTREAM-SOURCE", [topic], name=f"{base}-source")
        return source, key_s, value_s

    def topics_feeding(self, node: str) -> set[str]:
        """The source topics whose records reach ``node`` (through DSL nodes)."""
        seen: set[str] = set()
        topics: set[str] = set()
        todo = [node]
        while todo:
            current = todo.pop()
            if current in seen:
                continue
            seen.add(current)
            topics.update(self._source_topics.get(current, ()))
            todo.extend(self._parents.get(current, ()))
        return topics

    def declared_partitions(self, nodes: Iterable[str]) -> int | None:
        """The partition count declared by the topics feeding ``nodes``, when one is."""
        for node in nodes:
            for name in sorted(self.topics_feeding(node)):
                topic = self.topology.topic(name)
                if topic is not None and topic.partitions is not None:
                    return topic.partitions
        return None

    def check_copartitioned(self, left: str, right: str, what: str) -> None:
        """Raise :class:`CoPartitioningError` when a topic feeding ``left`` and one feeding
        ``right`` both declare partition counts and the counts differ."""
        for lt in sorted(self.topics_feeding(left)):
            for rt in sorted(self.topics_feeding(right)):
                lp = self._partitions_of(lt)
                rp = self._partitions_of(rt)
                if lp is not None and rp is not None and lp != rp:
                    raise CoPartitioningError(
                        f"{what}: topic {lt!r} has {lp} partitions and topic {rt!r} has "
                        f"{rp}; both are read by one task, so they must be co-partitioned. "
                        f"Declare them with the same partitions=, or re-key one side "
                        f"through a topic with the other's count (through(), or a key "
                        f"change before the join, which repartitions)"
                    )

    def _partitions_of(self, topic: str) -> int | None:
        declared = self.topology.topic(topic)
        return declared.partitions if declared is not None else None


__all__ = [
    "BranchedStream",
    "GroupedStream",
    "GroupedTable",
    "Stream",
    "StreamsBuilder",
    "Table",
]
