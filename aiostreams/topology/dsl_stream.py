"""``Stream``: a record stream of the DSL and its per-record operations.

Function shapes follow Kafka Streams: predicates, key mappers and actions take
``(key, value)`` (``filter(lambda k, v: ...)``, ``map(lambda k, v: (k2, v2))``); value
mappers take ``(value)`` (``map_values(lambda v: ...)``, ``flat_map_values``).

Synchronous operations need synchronous functions (they become ``def process``
processors, which keeps a chain on the engine's inline fast path); passing an ``async
def`` raises at build time and names the ``*_async`` variant to use.

The ``*_async`` variants await the function for each record while the engine runs many
records at once. They take ``retry`` (this step's own :class:`~aiostreams.Retry` policy;
a retry re-executes the record's chain from its source in this sub-topology, so earlier
steps of the chain run again) and ``concurrency`` (a cap on how many of this step's calls
run at once, across the app's tasks). They take no ordering parameter on purpose:
ordering (``key``/``partition``/``unordered``) is decided per record when it is issued,
for the record's whole chain, by the app's ``ordering`` setting. A step cannot start a
record earlier than its chain does, and per-key state (aggregations, joins) is only
correct because same-key records never overlap anywhere in the chain; a per-step setting
could only pretend to loosen or tighten that.

They also take ``service`` (a service declared with ``app.service(name, ...)``: the call
waits for its permit without counting as executing, and its timeout starts at dispatch) and,
with a service, ``coalesce_by`` (a function of the step's arguments giving a lookup key:
records with the same key share one call that is out); ``map_values_async`` also takes
``memoize`` (a :class:`~aiostreams.services.memo.Memo`: a TTL cache by lookup key in a
changelogged store); see
:mod:`aiostreams.topology.dsl_service` and ``docs/guides/services.md``.

Operations that change the key (``map``, ``select_key``, ``flat_map``, ``map_async``,
``process``) mark the stream *key-changed*: grouping or joining it then inserts a
repartition topic first.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from aiostreams.errors import TopologyError
from aiostreams.policies import Retry
from aiostreams.serde import Serde, serde_for
from aiostreams.services.declared import DeclaredService
from aiostreams.services.memo import Memo
from aiostreams.state import kv_store
from aiostreams.topic import Topic
from aiostreams.topology.dsl_batch import BatchCaller, RetryPer
from aiostreams.topology.dsl_processors import (
    AsyncFilter,
    AsyncFlatMapValues,
    AsyncForeach,
    AsyncMap,
    AsyncMapValues,
    BranchProcessor,
    FilterProcessor,
    FlatMapProcessor,
    FlatMapValuesProcessor,
    MapProcessor,
    MapValuesProcessor,
    Passthrough,
    PeekProcessor,
    SelectKeyProcessor,
    StepCaller,
    StepLimiter,
    require_callable,
    require_sync,
)
from aiostreams.topology.dsl_service import ServiceCaller, memo_store_name
from aiostreams.topology.processor import Processor, ProcessorSupplier
from aiostreams.topology.topology import StoreSpec

if TYPE_CHECKING:
    from aiostreams.state.versioned import Versioned
    from aiostreams.topology.dsl import StreamsBuilder
    from aiostreams.topology.dsl_table import GroupedStream, Table
    from aiostreams.topology.global_table import GlobalTable
    from aiostreams.windows import JoinWindows

K = TypeVar("K")
V = TypeVar("V")
KR = TypeVar("KR")
VR = TypeVar("VR")
VO = TypeVar("VO")


class Stream(Generic[K, V]):
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

    def _then_async(self, kind: str, make: Callable[[StepCaller, float | None],
                                                       Processor[Any, Any]],
                    fn: Callable[..., Any], op: str, *, retry: Retry | None,
                    concurrency: int | None, name: str | None, key_changed: bool = False,
                    keep_value_serde: bool = True, service: DeclaredService | None = None,
                    coalesce_by: Callable[..., Hashable] | None = None,
                    memoize: Memo | None = None,
                    combine: Callable[..., Any] | None = None) -> Stream[Any, Any]:
        require_callable(fn, op)
        limiter = StepLimiter(concurrency)
        if (coalesce_by is not None or memoize is not None) and service is None:
            raise TopologyError(f"{op}(coalesce_by=/memoize=) needs service=: coalesced and "
                                "memoized calls go through a declared service "
                                "(app.service(name, ...))")
        if memoize is not None and coalesce_by is None:
            raise TopologyError(f"{op}(memoize=...) needs coalesce_by=: the memo is kept by "
                                "lookup key")
        if combine is not None and coalesce_by is None:
            raise TopologyError(f"{op}(combine=...) needs coalesce_by=: the step's function "
                                "then looks up by that key")
        caller: StepCaller = (limiter if service is None
                              else ServiceCaller(limiter, service, coalesce_by, memoize,
                                                 combine))
        timeout = retry.timeout if retry is not None else None
        stream = self._then(kind, lambda: make(caller, timeout), name=name,
                            key_changed=key_changed, keep_value_serde=keep_value_serde)
        if retry is not None:
            self.builder.topology.set_retry(stream.node, retry)
        if memoize is not None:
            self.builder.add_store(kv_store(memo_store_name(stream.node),
                                            key_serde=memoize.key_serde), stream.node)
        return stream

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
        """``await mapper(value) -> new_value`` (see the module docstring for ``retry``
        and ``concurrency``). With ``combine=`` (and ``coalesce_by=``) ``mapper`` is a
        lookup by key, coalesced and memoized by it, and each record's new value is
        ``combine(value, await mapper(key))``."""
        return self._then_async(
            "KSTREAM-MAPVALUES-ASYNC", lambda lim, t: AsyncMapValues(mapper, lim, t), mapper,
            "map_values_async", retry=retry, concurrency=concurrency, name=name,
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
        (up to ``retry.attempts``); see :mod:`aiostreams.topology.dsl_batch`."""
        require_callable(fn, "map_values_batched_async")
        caller = BatchCaller(service, max_batch=max_batch, max_wait=max_wait,
                             retry_per=retry_per,
                             attempts=retry.attempts if retry is not None else 1,
                             timeout=retry.timeout if retry is not None else None,
                             op="map_values_batched_async")
        stream = self._then("KSTREAM-MAPVALUES-BATCHED-ASYNC",
                            lambda: AsyncMapValues(fn, caller, None), name=name,
                            keep_value_serde=False)
        if retry is not None and retry_per == "value":
            self.builder.topology.set_retry(stream.node, retry)
        return stream

    def map_async(self, mapper: Callable[[K, V], Awaitable[tuple[KR, VR]]], *,
                  retry: Retry | None = None, concurrency: int | None = None,
                  name: str | None = None, service: DeclaredService | None = None,
                  coalesce_by: Callable[[K, V], Hashable] | None = None) -> Stream[KR, VR]:
        """``await mapper(key, value) -> (new_key, new_value)``; marks the stream
        key-changed."""
        return self._then_async(
            "KSTREAM-MAP-ASYNC", lambda lim, t: AsyncMap(mapper, lim, t), mapper, "map_async",
            retry=retry, concurrency=concurrency, name=name,
            service=service, coalesce_by=coalesce_by, key_changed=True,
            keep_value_serde=False)

    def filter_async(self, predicate: Callable[[K, V], Awaitable[bool]], *,
                     retry: Retry | None = None, concurrency: int | None = None,
                     name: str | None = None, service: DeclaredService | None = None,
                     coalesce_by: Callable[[K, V], Hashable] | None = None) -> Stream[K, V]:
        """Keep the records for which ``await predicate(key, value)`` is true."""
        return self._then_async(
            "KSTREAM-FILTER-ASYNC", lambda lim, t: AsyncFilter(predicate, lim, t), predicate,
            "filter_async", retry=retry, concurrency=concurrency, name=name,
            service=service, coalesce_by=coalesce_by)

    def flat_map_values_async(self, mapper: Callable[[V], Awaitable[Iterable[VR]]], *,
                              retry: Retry | None = None, concurrency: int | None = None,
                              name: str | None = None, service: DeclaredService | None = None,
                              coalesce_by: Callable[[V], Hashable] | None = None
                              ) -> Stream[K, VR]:
        """``await mapper(value) -> iterable of values``."""
        return self._then_async(
            "KSTREAM-FLATMAPVALUES-ASYNC", lambda lim, t: AsyncFlatMapValues(mapper, lim, t),
            mapper, "flat_map_values_async", retry=retry, concurrency=concurrency, name=name,
            service=service, coalesce_by=coalesce_by,
            keep_value_serde=False)

    def foreach_async(self, action: Callable[[K, V], Awaitable[Any]], *,
                      retry: Retry | None = None, concurrency: int | None = None,
                      name: str | None = None, service: DeclaredService | None = None,
                      coalesce_by: Callable[[K, V], Hashable] | None = None) -> None:
        """``await action(key, value)`` for each record (a terminal step)."""
        self._then_async(
            "KSTREAM-FOREACH-ASYNC", lambda lim, t: AsyncForeach(action, lim, t), action,
            "foreach_async", retry=retry, concurrency=concurrency, name=name,
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
        topic_name = topic.name if isinstance(topic, Topic) else topic
        declared = isinstance(topic, Topic) or self.builder.topology.topic(topic_name)
        key_s = serde_for(key_serde) if key_serde is not None else (
            None if declared else self.key_serde)
        value_s = serde_for(value_serde) if value_serde is not None else (
            None if declared else self.value_serde)
        self.builder.add_sink("KSTREAM-SINK", topic, [self.node], name=name,
                              key_serde=key_s, value_serde=value_s, partitioner=partitioner)

    def to_parquet(self, path: Any, model: Any, *, name: str | None = None,
                   **options: Any) -> Any:
        """Write this stream's values (instances of the pydantic ``model``) to a Parquet
        dataset at ``path`` through the Spark bridge, exactly once: files are durable
        before offsets are committed, and replays are dropped. ``options`` go to
        :class:`aiostreams.spark.ParquetSink` (``partition_by``, ``compression``,
        ``engine``, ``include``, ``spark``, ...). Values that do not fit the schema fail
        in a validation step before the sink, so they follow the dead-letter path.
        Returns the sink (its ``metrics`` say what it wrote)."""
        return self._spark_sink("parquet", path, model, name, options)

    def to_delta(self, path: Any, model: Any, *, name: str | None = None,
                 **options: Any) -> Any:
        """Write this stream's values (instances of the pydantic ``model``) to a Delta table
        at ``path``, exactly once for every Delta reader: one Delta commit per batch,
        carrying the source offsets as Delta app transactions, before offsets are
        committed. ``options`` go to :class:`aiostreams.spark.DeltaSink` (``partition_by``,
        ``include``, ``batch_rows``, ...). Values that do not fit the schema fail in a
        validation step before the sink (the dead-letter path). Returns the sink."""
        return self._spark_sink("delta", path, model, name, options)

    def _spark_sink(self, kind: str, path: Any, model: Any, name: str | None,
                    options: dict[str, Any]) -> Any:
        """A ``ParquetSink`` (``kind`` "parquet") or ``DeltaSink`` ("delta") fed by this
        stream through its validation step."""
        try:
            from aiostreams import spark
        except ImportError as e:  # pragma: no cover - the spark extra is missing
            raise TopologyError(
                f"to_{kind} needs the Spark bridge: pip install 'aiostreams[spark]' ({e})"
            ) from e
        if kind == "delta":
            sink: Any = spark.DeltaSink(path, model, **options)
            spark.add_delta_sink(self.builder.topology,
                                 self.builder.new_name("KSTREAM-DELTA", name), self.node, sink)
        else:
            sink = spark.ParquetSink(path, model, **options)
            spark.add_parquet_sink(self.builder.topology,
                                   self.builder.new_name("KSTREAM-PARQUET", name), self.node,
                                   sink)
        return sink

    def through(self, topic: Topic, *, name: str | None = None) -> Stream[K, V]:
        """``to(topic)`` and read it back: the records come back partitioned by their
        (serialized) key, in a new sub-topology. ``topic`` must be declared (with
        ``partitions=`` for aiostreams to create it, or it must exist)."""
        if not isinstance(topic, Topic):
            raise TopologyError(
                f"through({topic!r}) needs a declared Topic (app.topic(name, key=..., "
                "value=..., partitions=N)) so its serdes and partitions are known"
            )
        self.to(topic, name=None if name is None else f"{name}-sink")
        node = self.builder.add_source("KSTREAM-SOURCE", [topic],
                                       name=None if name is None else f"{name}-source")
        return Stream(self.builder, node, key_serde=topic.key_serde,
                      value_serde=topic.value_serde)

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
        from aiostreams.topology.dsl_table import GroupedStream

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
        from aiostreams.topology.dsl_table import table_from_stream

        return table_from_stream(self, name=name, materialized=materialized,
                                 persistent=persistent, key_serde=key_serde,
                                 value_serde=value_serde, versioned=versioned)

    @overload
    def join(self, other: Table[K, VO], joiner: Callable[[V, VO], VR], windows: None = None,
             *, name: str | None = None,
             grace: float | None = None) -> Stream[K, VR]: ...

    @overload
    def join(self, other: Stream[K, VO], joiner: Callable[[V, VO], VR],
             windows: JoinWindows, *, name: str | None = None) -> Stream[K, VR]: ...

    def join(self, other: Stream[K, VO] | Table[K, VO], joiner: Callable[[V, VO], VR],
             windows: JoinWindows | None = None, *,
             name: str | None = None, grace: float | None = None) -> Stream[K, VR]:
        """Inner join. With a :class:`Table`: each record joins the table's current value
        of its key (records without one are dropped; table updates emit nothing). With a
        :class:`Stream`: records of both sides whose timestamps are within ``windows`` of
        each other join. ``joiner(this_value, other_value)``. With a versioned table, each
        record joins the value valid at its timestamp; ``grace`` (seconds, versioned tables
        only) holds records back to join them in timestamp order (KIP-923)."""
        from aiostreams.topology.dsl_joins import join_streams

        return join_streams(self, other, joiner, windows, "inner", name=name, grace=grace)

    def join_global(self, table: GlobalTable, key_selector: Callable[[K, V], Any],
                    joiner: Callable[[V, Any], VR], *, name: str | None = None,
                    ) -> Stream[K, VR]:
        """Inner join with a global table: each record joins the table's value of
        ``key_selector(key, value)`` (records without one are dropped); no repartition.
        See :mod:`aiostreams.topology.global_table`."""
        return self._join_global(table, key_selector, joiner, False, name)

    def left_join_global(self, table: GlobalTable, key_selector: Callable[[K, V], Any],
                         joiner: Callable[[V, Any], VR], *, name: str | None = None,
                         ) -> Stream[K, VR]:
        """Like :meth:`join_global`, but a record without a match is emitted too, as
        ``joiner(value, None)``."""
        return self._join_global(table, key_selector, joiner, True, name)

    def _join_global(self, table: GlobalTable, key_selector: Callable[[Any, Any], Any],
                     joiner: Callable[[Any, Any], Any], left: bool,
                     name: str | None) -> Stream[Any, Any]:
        from aiostreams.topology.global_table import GlobalJoinProcessor, GlobalTable

        what = "left_join_global" if left else "join_global"
        if not isinstance(table, GlobalTable):
            raise TopologyError(
                f"{what} on stream {self.node!r} needs a GlobalTable (app.global_table(...)), "
                f"got {type(table).__name__}; join a Table with join()/left_join()")
        require_sync(key_selector, what)
        require_sync(joiner, what)
        node = ""

        def make() -> GlobalJoinProcessor:
            return GlobalJoinProcessor(table, key_selector, joiner, left, lambda: node)

        node = self.builder.add_processor("KSTREAM-LEFTJOIN" if left else "KSTREAM-JOIN",
                                          make, [self.node], name=name)
        return Stream(self.builder, node, key_serde=self.key_serde,
                      key_changed=self.key_changed)

    @overload
    def left_join(self, other: Table[K, VO], joiner: Callable[[V, VO | None], VR],
                  windows: None = None, *, name: str | None = None,
                  grace: float | None = None) -> Stream[K, VR]: ...

    @overload
    def left_join(self, other: Stream[K, VO], joiner: Callable[[V, VO | None], VR],
                  windows: JoinWindows, *, name: str | None = None) -> Stream[K, VR]: ...

    def left_join(self, other: Stream[K, VO] | Table[K, VO],
                  joiner: Callable[[V, VO | None], VR], windows: JoinWindows | None = None,
                  *, name: str | None = None, grace: float | None = None) -> Stream[K, VR]:
        """Like :meth:`join`, but a record of this stream with no match is emitted too,
        as ``joiner(value, None)``."""
        from aiostreams.topology.dsl_joins import join_streams

        return join_streams(self, other, joiner, windows, "left", name=name, grace=grace)

    def outer_join(self, other: Stream[K, VO], joiner: Callable[[V | None, VO | None], VR],
                   windows: JoinWindows, *, name: str | None = None) -> Stream[K, VR]:
        """Stream-stream outer join: unmatched records of either side are emitted too
        (``joiner(value, None)`` / ``joiner(None, value)``)."""
        from aiostreams.topology.dsl_joins import join_streams

        return join_streams(self, other, joiner, windows, "outer", name=name)

    def describe(self) -> str:
        """The app's topology as text (see :meth:`Topology.describe`)."""
        return self.builder.describe()


class BranchedStream(Generic[K, V]):
    """The branches of a :meth:`Stream.split` being declared. Branch ``name`` is
    ``<split name><branch name>`` (a counter when none is given), as Kafka's
    ``Branched.as``."""

    def __init__(self, stream: Stream[K, V], name: str | None) -> None:
        self._stream = stream
        self._prefix = name if name is not None else stream.builder.new_name(
            "KSTREAM-BRANCH") + "-"
        self._branches: list[tuple[Callable[[Any, Any], Any], str]] = []
        self._done = False

    def _branch_name(self, name: str | None) -> str:
        return self._prefix + (name if name is not None else str(len(self._branches) + 1))

    def branch(self, predicate: Callable[[K, V], bool], *,
               name: str | None = None) -> BranchedStream[K, V]:
        """Add a branch taking the records for which ``predicate(key, value)`` holds (and
        no earlier branch's did)."""
        require_sync(predicate, "branch")
        if self._done:
            raise TopologyError("this split is finished; start another with split()")
        full = self._branch_name(name)
        if any(n == full for _, n in self._branches):
            raise TopologyError(f"split has two branches named {full!r}")
        self._branches.append((predicate, full))
        return self

    def default_branch(self, *, name: str | None = None) -> dict[str, Stream[K, V]]:
        """Finish with a branch for the records no predicate took."""
        return self._finish(self._prefix + (name if name is not None else "0"))

    def no_default_branch(self) -> dict[str, Stream[K, V]]:
        """Finish; records no predicate took are dropped."""
        return self._finish(None)

    def _finish(self, default: str | None) -> dict[str, Stream[K, V]]:
        if self._done:
            raise TopologyError("this split is finished already")
        if not self._branches and default is None:
            raise TopologyError("split() needs at least one branch")
        self._done = True
        builder = self._stream.builder
        branches = list(self._branches)
        outlets = [n for _, n in branches] + ([default] if default is not None else [])
        splitter = builder.add_processor(
            "KSTREAM-BRANCH", lambda: BranchProcessor(branches, default), [self._stream.node])
        result: dict[str, Stream[K, V]] = {}
        for outlet in outlets:
            node = builder.add_processor("KSTREAM-BRANCHCHILD", Passthrough, [splitter],
                                         name=outlet)
            result[outlet] = Stream(builder, node, key_serde=self._stream.key_serde,
                                    value_serde=self._stream.value_serde,
                                    key_changed=self._stream.key_changed)
        return result
