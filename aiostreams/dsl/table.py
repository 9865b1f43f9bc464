"""Tables: ``Table``, and tables read from a topic or a stream.

A table's updates flow as records ``(key, new value)``; a ``None`` value is a delete
(a tombstone). Its current values can be *read* by joins through a :class:`ValueGetter`:
a materialized table reads its store, ``filter``/``map_values`` of a table compute their
value from their parent's on the fly (like Kafka's value getters), so a derived table
needs no store of its own unless one is asked for with ``materialized=``.

Tables come from a topic (``app.table``), a stream (``Stream.to_table``), or an
aggregation of a :class:`~aiostreams.dsl.grouped_stream.GroupedStream`
(``count``/``reduce``/``aggregate``; re-exported here), whose updates are forwarded
downstream one per input record that changed the aggregate (Kafka's default):
``table.to_stream()`` carries them. ``suppress`` is in
:mod:`aiostreams.dsl.suppress_wiring`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from aiostreams.dsl.grouped_stream import GroupedStream
from aiostreams.dsl.stream import Stream
from aiostreams.dsl.suppress_wiring import suppress_table
from aiostreams.errors import TopologyError
from aiostreams.processors.steps import require_sync
from aiostreams.processors.store_values import TimestampedSerde, kv_store_spec
from aiostreams.processors.table_changes import (
    OldValues,
)
from aiostreams.processors.table_sources import TableSourceProcessor
from aiostreams.processors.tables import (
    FilterGetter,
    MapValuesGetter,
    StoreGetter,
    TableFilterProcessor,
    TableMapValuesProcessor,
    ValueGetter,
)
from aiostreams.serde import JsonSerde, Serde, serde_for
from aiostreams.state.versioned import Versioned
from aiostreams.topic import Topic
from aiostreams.topology.processor import Processor
from aiostreams.types import Record
from aiostreams.windows import Suppressed

if TYPE_CHECKING:
    from aiostreams.dsl.builder import StreamsBuilder
    from aiostreams.dsl.grouped_table import GroupedTable

K = TypeVar("K")
V = TypeVar("V")
VR = TypeVar("VR")
VO = TypeVar("VO")
KR = TypeVar("KR")
KO = TypeVar("KO")

AnyRecord = Record[Any, Any]


# -- the user-facing classes ------------------------------------------------------------


class Table(Generic[K, V]):
    """A changelog of per-key values: ``node`` emits ``(key, new value)`` updates
    (``None`` deletes) and ``getter`` reads the current value of a key."""

    def __init__(self, builder: StreamsBuilder, node: str, getter: ValueGetter, *,
                 key_serde: Serde[Any] | None, value_serde: Serde[Any] | None,
                 store: str | None = None, old_values: OldValues | None = None,
                 materialized_upstream: bool = True,
                 window_grace_ms: int | None = None) -> None:
        self.builder = builder
        self.node = node
        self.getter = getter
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.store = store
        self.old_values = old_values if old_values is not None else OldValues()
        """Whether this table's updates carry old values (a left/outer join turns it on)."""
        self.materialized_upstream = materialized_upstream
        """Whether Kafka Streams would hold this table (or a table it derives from) in a
        store, so that a ``filter`` gets old values without forcing one (Kafka's
        ``enableSendingOldValues(false)``); false only for an unnamed ``to_table()``."""
        self.versioned_source: str | None = None
        """The node of the versioned table this table is (or derives from), else None."""
        self.window_grace_ms = window_grace_ms
        """For a windowed aggregation (and tables derived from it): how long after its end
        a window closes (ms; sessions: gap + grace); ``None`` for other tables."""

    def __repr__(self) -> str:
        return f"<Table {self.node} store={self.store}>"

    @property
    def store_name(self) -> str | None:
        """The store holding this table's values (``None`` for an unmaterialized view)."""
        return self.store

    def to_stream(self) -> Stream[K, V | None]:
        """The table's updates as a stream (a delete is a record with value ``None``)."""
        return Stream(self.builder, self.node, key_serde=self.key_serde,
                      value_serde=self.value_serde)

    def _derived(self, kind: str,
                 make: Callable[[str | None, OldValues], Processor[Any, Any]],
                 getter: ValueGetter, *, name: str | None, materialized: str | None,
                 persistent: bool, value_serde: Serde[Any] | None) -> Table[Any, Any]:
        store = None
        if materialized is not None:
            store = self.builder.store_name("KTABLE-STATE-STORE", materialized)
        old_values = OldValues(self.old_values)
        if (kind == "KTABLE-FILTER" and self.materialized_upstream
                and self.versioned_source is None):
            # Kafka's KTableFilter turns old values on upstream when its parent chain is
            # materialized, so that it can drop deletes of keys that were never there
            # (not after a versioned table: its "versioned semantics" forward them all).
            old_values.enable()
        node = self.builder.add_processor(kind, lambda: make(store, old_values), [self.node],
                                          name=name)
        if store is not None:
            key_serde = self.key_serde or JsonSerde()
            self.builder.add_store(kv_store_spec(
                store, persistent=persistent, key_serde=key_serde,
                value_serde=TimestampedSerde(value_serde or JsonSerde())), node)
            getter = StoreGetter(store)
        derived: Table[Any, Any] = Table(self.builder, node, getter, key_serde=self.key_serde,
                        value_serde=value_serde, store=store, old_values=old_values,
                        materialized_upstream=store is not None or self.materialized_upstream,
                        window_grace_ms=self.window_grace_ms)
        derived.versioned_source = self.versioned_source
        return derived

    def filter(self, predicate: Callable[[K, V], bool], *, name: str | None = None,
               materialized: str | None = None, persistent: bool = False) -> Table[K, V]:
        """Keep the keys whose value passes ``predicate(key, value)``; an update that
        fails becomes a delete downstream."""
        require_sync(predicate, "filter")
        return self._derived(
            "KTABLE-FILTER",
            lambda store, old: TableFilterProcessor(predicate, True, store, old),
            FilterGetter(self.getter, predicate, True), name=name, materialized=materialized,
            persistent=persistent, value_serde=self.value_serde)

    def filter_not(self, predicate: Callable[[K, V], bool], *, name: str | None = None,
                   materialized: str | None = None, persistent: bool = False) -> Table[K, V]:
        require_sync(predicate, "filter_not")
        return self._derived(
            "KTABLE-FILTER",
            lambda store, old: TableFilterProcessor(predicate, False, store, old),
            FilterGetter(self.getter, predicate, False), name=name,
            materialized=materialized, persistent=persistent, value_serde=self.value_serde)

    def map_values(self, mapper: Callable[[V], VR], *, name: str | None = None,
                   materialized: str | None = None, persistent: bool = False,
                   value_serde: Any = None) -> Table[K, VR]:
        """``mapper(value)`` of every value (deletes stay deletes)."""
        require_sync(mapper, "map_values")
        return self._derived(
            "KTABLE-MAPVALUES",
            lambda store, old: TableMapValuesProcessor(mapper, store, old),
            MapValuesGetter(self.getter, mapper), name=name, materialized=materialized,
            persistent=persistent,
            value_serde=serde_for(value_serde) if value_serde is not None else None)

    def join(self, other: Table[K, VO], joiner: Callable[[V, VO], VR], *,
             name: str | None = None) -> Table[K, VR]:
        """Table-table inner join: a key has ``joiner(v, o)`` while both tables have it;
        an update of either side emits the new result (or a delete)."""
        from aiostreams.dsl.join_wiring import join_tables

        return join_tables(self, other, joiner, "inner", name=name)

    def left_join(self, other: Table[K, VO], joiner: Callable[[V, VO | None], VR], *,
                  name: str | None = None) -> Table[K, VR]:
        from aiostreams.dsl.join_wiring import join_tables

        return join_tables(self, other, joiner, "left", name=name)

    def outer_join(self, other: Table[K, VO], joiner: Callable[[V | None, VO | None], VR],
                   *, name: str | None = None) -> Table[K, VR]:
        from aiostreams.dsl.join_wiring import join_tables

        return join_tables(self, other, joiner, "outer", name=name)

    def join_on_foreign_key(self, other: Table[KO, VO], foreign_key: Callable[[V], KO],
                            joiner: Callable[[V, VO], VR], *, name: str | None = None,
                            materialized: str | None = None, persistent: bool = False,
                            value_serde: Any = None) -> Table[K, VR]:
        """Foreign-key inner join (KIP-213): each row joins the row of ``other`` whose key is
        ``foreign_key(value)``; keyed like this table. Goes through a subscription and a
        response topic. See :mod:`aiostreams.processors.fk_join`."""
        from aiostreams.dsl.fk_join_wiring import join_on_foreign_key

        return join_on_foreign_key(
            self, other, foreign_key, joiner, left=False, name=name,
            materialized=materialized, persistent=persistent,
            value_serde=serde_for(value_serde) if value_serde is not None else None)

    def left_join_on_foreign_key(self, other: Table[KO, VO], foreign_key: Callable[[V], KO],
                                 joiner: Callable[[V, VO | None], VR], *,
                                 name: str | None = None, materialized: str | None = None,
                                 persistent: bool = False,
                                 value_serde: Any = None) -> Table[K, VR]:
        """Foreign-key left join: as :meth:`join_on_foreign_key`, but a row without a
        matching ``other`` row (or with a ``None`` foreign key) joins ``None``."""
        from aiostreams.dsl.fk_join_wiring import join_on_foreign_key

        return join_on_foreign_key(
            self, other, foreign_key, joiner, left=True, name=name,
            materialized=materialized, persistent=persistent,
            value_serde=serde_for(value_serde) if value_serde is not None else None)

    def group_by(self, selector: Callable[[K, V], tuple[KR, VR]], *, key_serde: Any = None,
                 value_serde: Any = None, name: str | None = None) -> GroupedTable[KR, VR]:
        """Re-group the rows by ``selector(key, value) -> (group, value)`` to aggregate
        them with an adder and a subtractor (a row that changes group leaves its old one);
        goes through a repartition topic. See :mod:`aiostreams.processors.table_regroup`."""
        from aiostreams.dsl.grouped_table import GroupedTable
        from aiostreams.dsl.versioned_wiring import refuse_versioned

        refuse_versioned(self, "group_by()")
        return GroupedTable(self, selector, key_serde=key_serde, value_serde=value_serde,
                            name=name)

    def suppress(self, suppressed: Suppressed, *, name: str | None = None) -> Table[K, V]:
        """Hold updates back: ``until_window_closes()`` (final results of a windowed
        aggregation) or ``until_time_limit(seconds, max_records=, when_full=)``. See
        :mod:`aiostreams.processors.suppress`."""

        return suppress_table(self, suppressed, name=name)

    def describe(self) -> str:
        return self.builder.describe()


def require_getter_stores(builder: StreamsBuilder, getter: ValueGetter, node: str,
                          what: str) -> None:
    """Connect ``getter``'s stores to ``node`` (which puts ``node`` in their
    sub-topology); a getter without stores cannot be read."""
    if not getter.stores:
        raise TopologyError(f"{what}: the table has no store to read; materialize it")
    for store in getter.stores:
        builder.connect_store(store, node)


def table_from_topic(builder: StreamsBuilder, topic: Topic | str, *, name: str | None,
                     materialized: str | None, persistent: bool,
                     versioned: Versioned | None = None) -> Table[Any, Any]:
    """``topic`` read into a materialized table (see :meth:`StreamsBuilder.table`)."""
    topic_name = topic.name if isinstance(topic, Topic) else topic
    source = builder.add_source("KTABLE-SOURCE", [topic],
                                name=None if name is None else f"{name}-source")
    declared = builder.topology.topic(topic_name)
    key_serde = declared.key_serde if declared is not None else serde_for(None)
    value_serde = declared.value_serde if declared is not None else serde_for(None)
    store = builder.store_name(f"{topic_name}-STATE-STORE", materialized)
    return _source_table(builder, "KTABLE-SOURCE", source, store, key_serde, value_serde,
                         name=name, persistent=persistent, versioned=versioned)


def table_from_stream(stream: Stream[Any, Any], *, name: str | None, materialized: str | None,
                      persistent: bool, key_serde: Any, value_serde: Any,
                      versioned: Versioned | None = None) -> Table[Any, Any]:
    """``stream`` read as a table's changelog (see :meth:`Stream.to_table`): Kafka's
    ``toTable``, which repartitions a key-changed stream first."""
    key_s = serde_for(key_serde) if key_serde is not None else stream.key_serde
    value_s = serde_for(value_serde) if value_serde is not None else stream.value_serde
    if stream.key_changed:
        stream = stream.repartitioned(name=name, key_serde=key_s, value_serde=value_s)
        key_s, value_s = stream.key_serde, stream.value_serde
    store = stream.builder.store_name("KSTREAM-TOTABLE-STATE-STORE", materialized)
    table = _source_table(stream.builder, "KSTREAM-TOTABLE", stream.node, store,
                          key_s or JsonSerde(), value_s or JsonSerde(), name=name,
                          persistent=persistent, versioned=versioned)
    # The store is always kept (joins read it), but like Kafka's unnamed toTable() it
    # computes old values only when something downstream asks for them.
    table.materialized_upstream = materialized is not None
    return table


def _source_table(builder: StreamsBuilder, kind: str, parent: str, store: str,
                  key_serde: Serde[Any], value_serde: Serde[Any], *, name: str | None,
                  persistent: bool, versioned: Versioned | None) -> Table[Any, Any]:
    if versioned is not None:
        from aiostreams.dsl.versioned_wiring import versioned_source_table

        return versioned_source_table(builder, kind, parent, store, key_serde, value_serde,
                                      name=name, persistent=persistent, versioned=versioned)
    old_values = OldValues()
    node = builder.add_processor(kind, lambda: TableSourceProcessor(store, old_values,
                                                                      builder.dropped),
                                 [parent], name=name)
    builder.add_store(kv_store_spec(store, persistent=persistent, key_serde=key_serde,
                                    value_serde=TimestampedSerde(value_serde)), node)
    return Table(builder, node, StoreGetter(store), key_serde=key_serde,
                 value_serde=value_serde, store=store, old_values=old_values)


__all__ = [
    "GroupedStream",
    "Table",
    "require_getter_stores",
    "suppress_table",
    "table_from_stream",
    "table_from_topic",
]
