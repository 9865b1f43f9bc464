"""``Stream``: a record stream of the DSL and its per-record operations.

Function shapes follow Kafka Streams: predicates, key mappers and actions take
``(key, value)`` (``filter(lambda k, v: ...)``, ``map(lambda k, v: (k2, v2))``); value
mappers take ``(value)`` (``map_values(lambda v: ...)``, ``flat_map_values``).

Synchronous operations need synchronous functions (they become ``def process``
processors, which keeps a chain on the engine's inline fast path); passing an ``async
def`` raises at build time and names the ``*_async`` variant to use.

The ``*_async`` variants await the function for each record while the engine runs many
records at once; what they take and why they take no ordering parameter is in
:mod:`aiostreams.dsl.async_step_wiring`; ``split()`` is in :mod:`aiostreams.dsl.branched`,
the exits in :mod:`aiostreams.dsl.sink_wiring`; the join methods are inherited from
:class:`~aiostreams.dsl.stream_joins.StreamJoins` (wired in :mod:`aiostreams.dsl.join_wiring`).

Operations that change the key (``map``, ``select_key``, ``flat_map``, ``map_async``,
``process``) mark it *key-changed*: grouping or joining it first inserts a repartition topic.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, overload

from aiostreams.dsl.async_step_wiring import add_async_step, add_batched_step
from aiostreams.dsl.branched import BranchedStream
from aiostreams.dsl.sink_wiring import add_spark_sink, add_topic_sink, through_topic
from aiostreams.dsl.stream_joins import StreamJoins
from aiostreams.errors import TopologyError
from aiostreams.policies import Retry
from aiostreams.processors.batch_caller import RetryPer
from aiostreams.processors.steps import (
    AsyncFilter,
    AsyncFlatMapValues,
    AsyncForeach,
    AsyncMap,
    AsyncMapValues,
    FilterProcessor,
    FlatMapProcessor,
    FlatMapValuesProcessor,
    MapProcessor,
    MapValuesProcessor,
    Passthrough,
    PeekProcessor,
    SelectKeyProcessor,
    require_sync,
)
from aiostreams.serde import Serde, serde_for
from aiostreams.services.declared import DeclaredService
from aiostreams.services.memo import Memo
from aiostreams.topic import Topic
from aiostreams.topology.processor import Processor, ProcessorSupplier
from aiostreams.topology.topology import StoreSpec

if TYPE_CHECKING:
    from aiostreams.dsl.builder import StreamsBuilder
    from aiostreams.dsl.table import GroupedStream, Table
    from aiostreams.state.versioned import Versioned

K = TypeVar("K")
V = TypeVar("V")
KR = TypeVar("KR")
VR = TypeVar("VR")


class Stream(StreamJoins[K, V]):
    """A stream of records: what one DSL node emits. Immutable; each operation adds nodes
    to the topology and returns a new ``Stream``.

    ``key_serde``/``value_serde`` are the serdes known for its keys and values (``None``
    once an operation changed them without saying how to encode the result); they are
    used for repartition topics and as defaults for ``to()``.
    """

    def __init__(self, builder: StreamsBuilder, node: str, *,
                 key_serde: Serde[Any] | None = None, value_serde: Serde[Any] | None = None,
                 key_changed: bool = False) -> None:
        self.builder = builder
        self.node = node
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.key_changed = key_changed

    def __repr__(self) -> str:
        changed = ", key changed" if self.key_changed else ""
        return f"<Stream {self.node}{changed}>"

    def _then(self, kind: str, supplier: ProcessorSupplier, *, name: str | None,
              key_changed: bool = False, keep_key_serde: bool = True,
              keep_value_serde: bool = True) -> Stream[Any, Any]:
        node = self.builder.add_processor(kind, supplier, [self.node], name=name)
        return Stream(self.builder, node,
                      key_serde=self.key_serde if keep_key_serde and not key_changed else None,
                      value_serde=self.value_serde if keep_value_serde else None,
                      key_changed=self.key_changed or key_changed)

    # -- stateless, synchronous ----------------------------------------------------------

    def filter(self, predicate: Callable[[K, V], bool], *,
               name: str | None = None) -> Stream[K, V]:
        """Keep the records for which ``predicate(key, value)`` is true."""
        require_sync(predicate, "filter")
        return self._then("KSTREAM-FILTER", lambda: FilterProcessor(predicate, True),
                          name=name)

    def filter_not(self, predicate: Callable[[K, V], bool], *,
                   name: str | None = None) -> Stream[K, V]:
        """Drop the records for which ``predicate(key, value)`` is true."""
        require_sync(predicate, "filter_not")
        return self._then("KSTREAM-FILTER", lambda: FilterProcessor(predicate, False),
                          name=name)

    def map(self, mapper: Callable[[K, V], tuple[KR, VR]], *,
            name: str | None = None) -> Stream[KR, VR]:
        """``mapper(key, value) -> (new_key, new_value)``; marks the stream key-changed."""
        require_sync(mapper, "map")
        return self._then("KSTREAM-MAP", lambda: MapProcessor(mapper), name=name,
                          key_changed=True, keep_value_serde=False)

    def select_key(self, selector: Callable[[K, V], KR], *,
                   name: str | None = None) -> Stream[KR, V]:
        """``selector(key, value) -> new_key``; marks the stream key-changed."""
        require_sync(selector, "select_key")
        return self._then("KSTREAM-KEY-SELECT", lambda: SelectKeyProcessor(selector),
                          name=name, key_changed=True)

    def map_values(self, mapper: Callable[[V], VR], *,
                   name: str | None = None) -> Stream[K, VR]:
        """``mapper(value) -> new_value``; the key is kept."""
        require_sync(mapper, "map_values")
        return self._then("KSTREAM-MAPVALUES", lambda: MapValuesProcessor(mapper), name=name,
                          keep_value_serde=False)

    def flat_map(self, mapper: Callable[[K, V], Iterable[tuple[KR, VR]]], *,
                 name: str | None = None) -> Stream[KR, VR]:
        """``mapper(key, value) -> iterable of (key, value)``; marks the stream
        key-changed."""
        require_sync(mapper, "flat_map")
        return self._then("KSTREAM-FLATMAP", lambda: FlatMapProcessor(mapper), name=name,
                          key_changed=True, keep_value_serde=False)

    def flat_map_values(self, mapper: Callable[[V], Iterable[VR]], *,
                        name: str | None = None) -> Stream[K, VR]:
        """``mapper(value) -> iterable of values``, each forwarded with the record's key."""
        require_sync(mapper, "flat_map_values")
        return self._then("KSTREAM-FLATMAPVALUES", lambda: FlatMapValuesProcessor(mapper),
                          name=name, keep_value_serde=False)

    def peek(self, action: Callable[[K, V], Any], *, name: str | None = None) -> Stream[K, V]:
        """Call ``action(key, value)`` and pass the record on unchanged."""
        require_sync(action, "peek")
        return self._then("KSTREAM-PEEK", lambda: PeekProcessor(action, True), name=name)

    def foreach(self, action: Callable[[K, V], Any], *, name: str | None = None) -> None:
        """Call ``action(key, value)`` for each record (a terminal step)."""
        require_sync(action, "foreach")
        self.builder.add_processor("KSTREAM-FOREACH", lambda: PeekProcessor(action, False),
                                   [self.node], name=name)

    # -- async steps ------------------------------------------------------------------

    @overload
    def map_values_async(self, mapper: Callable[[V], Awaitable[VR]], *,
                         retry: Retry | None = None, concurrency: int | None = None,
                         name: str | None = None, service: DeclaredService | None = None,
                         coalesce_by: Callable[[V], Hashable] | None = None,
                         memoize: Memo | None = None, combine: None = None) -> Stream[K, VR]:
        ...

    @overload
    def map_values_async(self, mapper: Callable[[Any], Awaitable[Any]], *,
                         retry: Retry | None = None, concurrency: int | None = None,
                         name: str | None = None, service: DeclaredService | None = None,
                         coalesce_by: Callable[[V], Hashable],
                         memoize: Memo | None = None,
                         combine: Callable[[V, Any], VR]) -> Stream[K, VR]:
        ...

    def map_values_async(self, mapper: Callable[..., Awaitable[Any]], *,
                         retry: Retry | None = None, concurrency: int | None = None,
                         name: str | None = None, service: DeclaredService | None = None,
                         coalesce_by: Callable[[V], Hashable] | None = None,
                         memoize: Memo | None = None,
                         combine: Callable[[V, Any], Any] | None = None) -> Stream[K, Any]:
        """``await mapper(value) -> new_value`` (see
        :mod:`aiostreams.dsl.async_step_wiring` for ``retry`` and ``concurrency``).
        With ``combine=`` (and ``coalesce_by=``) ``mapper`` is a lookup by key, coalesced
        and memoized by it, and each record's new value is
        ``combine(value, await mapper(key))``."""
        return add_async_step(
            self, "KSTREAM-MAPVALUES-ASYNC", lambda lim, t: AsyncMapValues(mapper, lim, t),
            mapper, "map_values_async", retry=retry, concurrency=concurrency, name=name,
            service=service, coalesce_by=coalesce_by, memoize=memoize, combine=combine,
            keep_value_serde=False)

    def map_values_batched_async(self, fn: Callable[[list[V]], Awaitable[Sequence[VR]]], *,
                                 service: DeclaredService, max_batch: int = 100,
                                 max_wait: float = 0.01, retry_per: RetryPer = "value",
                                 retry: Retry | None = None,
                                 name: str | None = None) -> Stream[K, VR]:
        """``await fn([v1, v2, ...]) -> [r1, r2, ...]``: one call through ``service`` for up
        to ``max_batch`` values (or what came within ``max_wait`` seconds), one result per
        value; each record gets its own and they retire in order. ``retry_per``: on a failed
        call, ``"value"`` retries each record on its own, ``"batch"`` calls the batch again
        (up to ``retry.attempts``); see :mod:`aiostreams.processors.batch_caller`."""
        return add_batched_step(self, fn, service=service, max_batch=max_batch,
                                max_wait=max_wait, retry_per=retry_per, retry=retry,
                                name=name)

    def map_async(self, mapper: Callable[[K, V], Awaitable[tuple[KR, VR]]], *,
                  retry: Retry | None = None, concurrency: int | None = None,
                  name: str | None = None, service: DeclaredService | None = None,
                  coalesce_by: Callable[[K, V], Hashable] | None = None) -> Stream[KR, VR]:
        """``await mapper(key, value) -> (new_key, new_value)``; marks the stream
        key-changed."""
        return add_async_step(
            self, "KSTREAM-MAP-ASYNC", lambda lim, t: AsyncMap(mapper, lim, t), mapper,
            "map_async", retry=retry, concurrency=concurrency, name=name,
            service=service, coalesce_by=coalesce_by, key_changed=True,
            keep_value_serde=False)

    def filter_async(self, predicate: Callable[[K, V], Awaitable[bool]], *,
                     retry: Retry | None = None, concurrency: int | None = None,
                     name: str | None = None, service: DeclaredService | None = None,
                     coalesce_by: Callable[[K, V], Hashable] | None = None) -> Stream[K, V]:
        """Keep the records for which ``await predicate(key, value)`` is true."""
        return add_async_step(
            self, "KSTREAM-FILTER-ASYNC", lambda lim, t: AsyncFilter(predicate, lim, t),
            predicate, "filter_async", retry=retry, concurrency=concurrency, name=name,
            service=service, coalesce_by=coalesce_by)

    def flat_map_values_async(self, mapper: Callable[[V], Awaitable[Iterable[VR]]], *,
                              retry: Retry | None = None, concurrency: int | None = None,
                              name: str | None = None, service: DeclaredService | None = None,
                              coalesce_by: Callable[[V], Hashable] | None = None
                              ) -> Stream[K, VR]:
        """``await mapper(value) -> iterable of values``."""
        return add_async_step(
            self, "KSTREAM-FLATMAPVALUES-ASYNC",
            lambda lim, t: AsyncFlatMapValues(mapper, lim, t),
            mapper, "flat_map_values_async", retry=retry, concurrency=concurrency,
            name=name, service=service, coalesce_by=coalesce_by, keep_value_serde=False)

    def foreach_async(self, action: Callable[[K, V], Awaitable[Any]], *,
                      retry: Retry | None = None, concurrency: int | None = None,
                      name: str | None = None, service: DeclaredService | None = None,
                      coalesce_by: Callable[[K, V], Hashable] | None = None) -> None:
        """``await action(key, value)`` for each record (a terminal step)."""
        add_async_step(
            self, "KSTREAM-FOREACH-ASYNC", lambda lim, t: AsyncForeach(action, lim, t),
            action, "foreach_async", retry=retry, concurrency=concurrency, name=name,
            service=service, coalesce_by=coalesce_by)

    # -- routing ------------------------------------------------------------------------

    def split(self, *, name: str | None = None) -> BranchedStream[K, V]:
        """Start splitting into named branches: ``split().branch(p, name="a")...
        .default_branch()`` returns ``{name: Stream}``. A record goes to the first branch
        whose predicate holds (declaration order)."""
        return BranchedStream(self, name)

    def branch(self, *predicates: Callable[[K, V], bool],
               name: str | None = None) -> list[Stream[K, V]]:
        """One stream per predicate; a record goes to the first whose predicate holds and
        is dropped when none does."""
        if not predicates:
            raise TopologyError("branch() needs at least one predicate")
        split = self.split(name=name)
        for i, predicate in enumerate(predicates):
            split.branch(predicate, name=str(i))
        return list(split.no_default_branch().values())

    def merge(self, other: Stream[K, V], *, name: str | None = None) -> Stream[K, V]:
        """The records of both streams, in the order the task processes them. Both inputs
        become one task's input, so their topics must be co-partitioned."""
        if other.builder is not self.builder:
            raise TopologyError("merge(): both streams must belong to the same app")
        self.builder.check_copartitioned(self.node, other.node, "merge")
        node = self.builder.add_processor("KSTREAM-MERGE", Passthrough,
                                          [self.node, other.node], name=name)
        same_key = self.key_serde == other.key_serde
        same_value = self.value_serde == other.value_serde
        return Stream(self.builder, node,
                      key_serde=self.key_serde if same_key else None,
                      value_serde=self.value_serde if same_value else None,
                      key_changed=self.key_changed or other.key_changed)

    def to(self, topic: Topic | str, *, key_serde: Any = None, value_serde: Any = None,
           partitioner: Callable[[Any, Any, int], int] | None = None,
           name: str | None = None) -> None:
        """Write every record to ``topic``. Serdes: the ones given, else the topic's
        declared ones, else the stream's known ones, else bytes."""
        add_topic_sink(self, topic, key_serde=key_serde, value_serde=value_serde,
                       partitioner=partitioner, name=name)

    def to_parquet(self, path: Any, model: Any, *, name: str | None = None,
                   **options: Any) -> Any:
        """Write this stream's values (instances of the pydantic ``model``) to a Parquet
        dataset at ``path`` through the Spark bridge, exactly once: files are durable
        before offsets are committed, and replays are dropped. ``options`` go to
        :class:`aiostreams.sinks.ParquetSink` (``partition_by``, ``compression``,
        ``engine``, ``include``, ``spark``, ...). Values that do not fit the schema fail
        in a validation step before the sink, so they follow the dead-letter path.
        Returns the sink (its ``metrics`` say what it wrote)."""
        return add_spark_sink(self, "parquet", path, model, name, options)

    def to_delta(self, path: Any, model: Any, *, name: str | None = None,
                 **options: Any) -> Any:
        """Write this stream's values (instances of the pydantic ``model``) to a Delta table
        at ``path``, exactly once for every Delta reader: one Delta commit per batch,
        carrying the source offsets as Delta app transactions, before offsets are
        committed. ``options`` go to :class:`aiostreams.sinks.DeltaSink` (``partition_by``,
        ``include``, ``batch_rows``, ``maintenance=TableMaintenance(...)`` for scheduled
        compaction and vacuum, ...). Values that do not fit the schema fail in a
        validation step before the sink (the dead-letter path). Returns the sink."""
        return add_spark_sink(self, "delta", path, model, name, options)

    def to_iceberg(self, table: str, model: Any, *, name: str | None = None,
                   **options: Any) -> Any:
        """Write this stream's values (instances of the pydantic ``model``) to the Apache
        Iceberg table ``table`` (``"namespace.table"``), exactly once for every Iceberg
        reader: one snapshot per batch, its summary carrying the source offsets, before
        offsets are committed. ``options`` go to
        :class:`aiostreams.sinks.iceberg_sink.IcebergSink`: ``catalog`` (any pyiceberg
        catalog) or ``warehouse`` (a directory: pyiceberg's SQL catalog on SQLite there),
        ``partition_by`` (``"region"``, ``"day(placed_at)"``), ``include``, ``batch_rows``,
        ``maintenance`` (:class:`aiostreams.sinks.TableMaintenance`), ... Values that do
        not fit the schema fail in a validation step before the sink (the dead-letter
        path). Returns the sink."""
        return add_spark_sink(self, "iceberg", table, model, name, options)

    def through(self, topic: Topic, *, name: str | None = None) -> Stream[K, V]:
        """``to(topic)`` and read it back: the records come back partitioned by their
        (serialized) key, in a new sub-topology. ``topic`` must be declared (with
        ``partitions=`` for aiostreams to create it, or it must exist)."""
        return through_topic(self, topic, name)

    def process(self, supplier: ProcessorSupplier | type[Processor[Any, Any]], *,
                stores: Sequence[StoreSpec | str] = (),
                name: str | None = None) -> Stream[Any, Any]:
        """Add a processor of the processor API; ``stores`` are specs to add (or names of
        stores already declared) to connect to it. What it forwards is the new stream,
        marked key-changed (it may re-key)."""
        node = self.builder.add_processor("KSTREAM-PROCESSOR", supplier, [self.node],
                                          name=name)
        for store in stores:
            if isinstance(store, StoreSpec):
                self.builder.add_store(store, node)
            else:
                self.builder.connect_store(store, node)
        return Stream(self.builder, node, key_changed=True)

    # -- grouping and joins -------------------------------------------------------------

    def repartitioned(self, *, name: str | None = None, key_serde: Any = None,
                      value_serde: Any = None,
                      partitions: int | None = None) -> Stream[K, V]:
        """This stream through an internal repartition topic (partitioned by key)."""
        key_s = serde_for(key_serde) if key_serde is not None else self.key_serde
        value_s = serde_for(value_serde) if value_serde is not None else self.value_serde
        node, key_s, value_s = self.builder.repartition(
            self.node, name=name, key_serde=key_s, value_serde=value_s, partitions=partitions)
        return Stream(self.builder, node, key_serde=key_s, value_serde=value_s)

    def group_by_key(self, *, key_serde: Any = None, value_serde: Any = None,
                     name: str | None = None) -> GroupedStream[K, V]:
        """Group by the current key (repartitioning first when the key changed)."""
        from aiostreams.dsl.table import GroupedStream

        stream: Stream[K, V] = self
        if self.key_changed:
            stream = self.repartitioned(name=name, key_serde=key_serde,
                                        value_serde=value_serde)
        return GroupedStream(stream, key_serde=key_serde, value_serde=value_serde, name=name)

    def group_by(self, selector: Callable[[K, V], KR], *, key_serde: Any = None,
                 value_serde: Any = None, name: str | None = None) -> GroupedStream[KR, V]:
        """Group by ``selector(key, value)``; always repartitions."""
        rekeyed = self.select_key(selector)
        return rekeyed.group_by_key(key_serde=key_serde, value_serde=value_serde, name=name)

    def to_table(self, *, name: str | None = None, materialized: str | None = None,
                 persistent: bool = False, key_serde: Any = None,
                 value_serde: Any = None, versioned: Versioned | None = None) -> Table[K, V]:
        """This stream as a table's changelog: each record is the key's new value (``None``
        deletes it); records with a null key are dropped. Repartitions first when the key
        changed. The table is kept in a changelog-backed store (``materialized`` names it)."""
        from aiostreams.dsl.table import table_from_stream

        return table_from_stream(self, name=name, materialized=materialized,
                                 persistent=persistent, key_serde=key_serde,
                                 value_serde=value_serde, versioned=versioned)

    def describe(self) -> str:
        """The app's topology as text (see :meth:`Topology.describe`)."""
        return self.builder.describe()
