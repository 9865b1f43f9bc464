"""Joins: stream-stream (windowed), stream-table and table-table.

**Placement.** A join reads both sides' state in one task, so both inputs must be
co-partitioned: same key bytes (the key serdes must agree; checked at build time when
both are known), same partition count (checked at build time when both topics declare
one: :class:`~aiostreams.errors.CoPartitioningError`). A side whose key changed is first
repartitioned (to as many partitions as the other side declares, when it does). The join
processors of both sides are connected to the stores of both sides, which puts them in
one sub-topology.

**Stream-stream.** Kafka Streams 3.9's semantics, in
:mod:`~aiostreams.processors.stream_stream_join`: each side's records are buffered in a
window store; a left record at ``t`` joins the right records in ``[t - before, t + after]``
(a right one the left records in ``[t - after, t + before]``), each match stamped ``max``
of the two; ``left_join``/``outer_join`` hold a record without a match in an outer store
and emit ``joiner(value, None)`` (``joiner(None, value)``) when the join's stream time
closes its window (a later match cancels it). The join step waits for the records issued
before it, so its stream time and stores are the serial run's.

**Stream-table.** Each stream record looks up the table's current value of its key;
table updates emit nothing. Inner join drops records without a table value (and with a
null key or value); left join emits ``joiner(value, None)`` for them, null keys included
(KIP-962).

**Table-table.** An update of either side looks up the other side's current value and
timestamp and emits the new join result, following Kafka Streams' forwarding rules (see
:class:`TableTableJoinProcessor`), stamped with the later of the two sides' timestamps.

**Stream-global table.** Each stream record joins the global table's value of
``key_selector(key, value)`` (:func:`join_global`); no repartition, as a global table holds
every partition.

Correctness under concurrency: stream-stream join steps run in issue order (above);
stream-table and table-table joins rely on the engine's key ordering (records of both
sides with the same key bytes never execute at once, and reads see earlier records'
buffered writes).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aiostreams.dsl.stream import Stream
from aiostreams.dsl.table import Table, require_getter_stores
from aiostreams.dsl.versioned_wiring import join_versioned, refuse_versioned
from aiostreams.errors import ConfigError, TopologyError
from aiostreams.processors.joins import (
    JoinedTableGetter,
    JoinKind,
    StreamTableJoinProcessor,
    SyncStreamTableJoinProcessor,
    TableTableJoinProcessor,
)
from aiostreams.processors.steps import Passthrough, require_sync
from aiostreams.processors.store_values import ListSerde, kv_store_spec, window_store_spec
from aiostreams.processors.stream_stream_join import (
    JoinSpec,
    JoinTimes,
    StreamStreamJoinProcessor,
    WaitingKeySerde,
    WaitingValueSerde,
)
from aiostreams.processors.table_changes import OldValues
from aiostreams.processors.versioned_join import VersionedGetter
from aiostreams.serde import JsonSerde, Serde
from aiostreams.windows import JoinWindows

if TYPE_CHECKING:
    from aiostreams.dsl.builder import StreamsBuilder
    from aiostreams.dsl.global_table import GlobalTable



# -- building ---------------------------------------------------------------------------


def _check_key_serdes(left: Serde[Any] | None, right: Serde[Any] | None, what: str) -> None:
    if left is not None and right is not None and left != right:
        raise TopologyError(
            f"{what}: the sides' keys are encoded differently ({left!r} and {right!r}), so "
            "equal keys would land on different partitions and never meet; use one key "
            "serde on both sides (or re-key one side with select_key, which repartitions)"
        )


def join_streams(this: Stream[Any, Any], other: Stream[Any, Any] | Table[Any, Any],
                 joiner: Callable[[Any, Any], Any], windows: JoinWindows | None,
                 kind: JoinKind, *, name: str | None,
                 grace: float | None = None, persistent: bool = False) -> Stream[Any, Any]:
    require_sync(joiner, "join")
    if grace is not None and not isinstance(other, Table):
        raise TopologyError(f"join of stream {this.node!r}: grace= is for stream-table "
                            "joins against a versioned table; a stream-stream join takes "
                            "JoinWindows(..., grace=...)")
    if isinstance(other, Table):
        if kind == "outer":
            raise TopologyError("a stream-table join is 'join' or 'left_join'; an outer "
                                "join needs two streams or two tables")
        if windows is not None:
            raise TopologyError("a stream-table join takes no JoinWindows: it joins each "
                                "record with the table's current value")
        if persistent:
            raise TopologyError(f"join of stream {this.node!r} with a table: persistent= is "
                                "for stream-stream joins' window stores; a stream-table "
                                "join reads the table's store and keeps none of its own")
        return _stream_table(this, other, joiner, kind == "left", name=name, grace=grace)
    if not isinstance(other, Stream):
        raise TopologyError(f"join() needs a Stream or a Table, got {type(other).__name__}")
    if not isinstance(windows, JoinWindows):
        raise ConfigError("a stream-stream join needs windows=JoinWindows(before, after, "
                          "grace=...): how far apart in time two records may be to join")
    return _stream_stream(this, other, joiner, windows, kind, name=name,
                          persistent=persistent)


def _co_located(builder: StreamsBuilder, stream: Stream[Any, Any], other_node: str,
                key_serde: Serde[Any] | None) -> Stream[Any, Any]:
    if not stream.key_changed:
        return stream
    return stream.repartitioned(key_serde=key_serde or stream.key_serde,
                                partitions=builder.declared_partitions([other_node]))


def _stream_table(this: Stream[Any, Any], table: Table[Any, Any],
                  joiner: Callable[[Any, Any], Any], left: bool, *,
                  name: str | None, grace: float | None) -> Stream[Any, Any]:
    builder = this.builder
    stream = _co_located(builder, this, table.node, table.key_serde)
    what = f"join of stream {stream.node!r} with table {table.node!r}"
    _check_key_serdes(stream.key_serde, table.key_serde, what)
    builder.check_copartitioned(stream.node, table.node, what)
    getter = table.getter
    if isinstance(getter, VersionedGetter) or grace is not None:
        if not isinstance(getter, VersionedGetter):
            refuse_versioned(table, "a stream-table join")
        node = join_versioned(builder, stream, table, joiner, left, grace, name=name)
        require_getter_stores(builder, getter, node, what)
        return Stream(builder, node, key_serde=stream.key_serde)
    refuse_versioned(table, "a stream-table join")
    joining = SyncStreamTableJoinProcessor if getter.reads_now else StreamTableJoinProcessor
    node = builder.add_processor(
        "KSTREAM-LEFTJOIN" if left else "KSTREAM-JOIN",
        lambda: joining(getter, joiner, left, builder.dropped), [stream.node], name=name)
    require_getter_stores(builder, getter, node, what)
    return Stream(builder, node, key_serde=stream.key_serde)


def _stream_stream(this: Stream[Any, Any], other: Stream[Any, Any],
                   joiner: Callable[[Any, Any], Any], windows: JoinWindows, kind: JoinKind,
                   *, name: str | None, persistent: bool) -> Stream[Any, Any]:
    builder = this.builder
    left = _co_located(builder, this, other.node, other.key_serde)
    right = _co_located(builder, other, left.node, left.key_serde)
    what = f"join of streams {left.node!r} and {right.node!r}"
    _check_key_serdes(left.key_serde, right.key_serde, what)
    builder.check_copartitioned(left.node, right.node, what)
    key_serde = left.key_serde or right.key_serde or JsonSerde()
    left_values = left.value_serde or JsonSerde()
    right_values = right.value_serde or JsonSerde()
    this_store = builder.store_name("KSTREAM-JOINTHIS-STORE", None)
    other_store = builder.store_name("KSTREAM-JOINOTHER-STORE", None)
    outer_store = (builder.store_name("KSTREAM-OUTERSHARED-STORE", None)
                   if kind != "inner" else None)
    w = windows
    spec = JoinSpec(this_store, other_store, outer_store, w.before_ms, w.after_ms,
                    w.grace_ms, joiner, JoinTimes())
    this_node = builder.add_processor(
        "KSTREAM-JOINTHIS",
        lambda: StreamStreamJoinProcessor(spec, is_left=True, outer=kind != "inner"),
        [left.node], name=None if name is None else f"{name}-this")
    other_node = builder.add_processor(
        "KSTREAM-JOINOTHER",
        lambda: StreamStreamJoinProcessor(spec, is_left=False, outer=kind == "outer"),
        [right.node], name=None if name is None else f"{name}-other")
    # The stores keep a millisecond more than Kafka's retention: what is visible is cut
    # exactly by the join's own store times (see stream_stream_join).
    retention = (spec.retention_ms + 1) / 1000
    for store, serde in ((this_store, left_values), (other_store, right_values)):
        builder.add_store(window_store_spec(
            store, retention=retention, persistent=persistent, key_serde=key_serde,
            value_serde=ListSerde(serde)), this_node, other_node)
    if outer_store is not None:
        builder.add_store(kv_store_spec(
            outer_store, persistent=persistent, key_serde=WaitingKeySerde(key_serde),
            value_serde=WaitingValueSerde(left_values, right_values)), this_node, other_node)
    merged = builder.add_processor("KSTREAM-MERGE", Passthrough, [this_node, other_node],
                                   name=name)
    return Stream(builder, merged, key_serde=key_serde)


def join_tables(this: Table[Any, Any], other: Table[Any, Any],
                joiner: Callable[[Any, Any], Any], kind: JoinKind, *,
                name: str | None) -> Table[Any, Any]:
    require_sync(joiner, "join")
    if not isinstance(other, Table):
        raise TopologyError(f"a table joins a Table, got {type(other).__name__}; to join a "
                            "stream with a table, call stream.join(table, ...)")
    builder = this.builder
    what = f"join of tables {this.node!r} and {other.node!r}"
    refuse_versioned(this, "a table-table join")
    refuse_versioned(other, "a table-table join")
    if kind in ("left", "outer"):
        this.old_values.enable()
    if kind == "outer":
        other.old_values.enable()
    _check_key_serdes(this.key_serde, other.key_serde, what)
    builder.check_copartitioned(this.node, other.node, what)
    left_getter, right_getter = this.getter, other.getter
    # the joined table's old values (a re-grouping aggregate downstream subtracts with
    # them) are computed from both sides' old values
    old_values = OldValues(this.old_values, other.old_values)
    this_node = builder.add_processor(
        "KTABLE-JOINTHIS",
        lambda: TableTableJoinProcessor(right_getter, joiner, kind, True, old_values),
        [this.node], name=None if name is None else f"{name}-this")
    other_node = builder.add_processor(
        "KTABLE-JOINOTHER",
        lambda: TableTableJoinProcessor(left_getter, joiner, kind, False, old_values),
        [other.node], name=None if name is None else f"{name}-other")
    for node in (this_node, other_node):
        require_getter_stores(builder, left_getter, node, what)
        require_getter_stores(builder, right_getter, node, what)
    merged = builder.add_processor("KTABLE-MERGE", Passthrough, [this_node, other_node],
                                   name=name)
    return Table(builder, merged, JoinedTableGetter(left_getter, right_getter, joiner, kind),
                 key_serde=this.key_serde, value_serde=None, old_values=old_values)


def join_global(this: Stream[Any, Any], table: GlobalTable,
                key_selector: Callable[[Any, Any], Any], joiner: Callable[[Any, Any], Any],
                left: bool, name: str | None) -> Stream[Any, Any]:
    """``this.join_global(...)`` (``left_join_global`` when ``left``): each record joins
    ``table``'s value of ``key_selector(key, value)``; no repartition (a global table holds
    every partition)."""
    from aiostreams.dsl.global_table import GlobalTable
    from aiostreams.processors.global_join import GlobalJoinProcessor

    what = "left_join_global" if left else "join_global"
    if not isinstance(table, GlobalTable):
        raise TopologyError(
            f"{what} on stream {this.node!r} needs a GlobalTable (app.global_table(...)), "
            f"got {type(table).__name__}; join a Table with join()/left_join()")
    require_sync(key_selector, what)
    require_sync(joiner, what)
    node = ""

    def make() -> GlobalJoinProcessor:
        return GlobalJoinProcessor(table.store, key_selector, joiner, left, lambda: node)

    builder = this.builder
    node = builder.add_processor("KSTREAM-LEFTJOIN" if left else "KSTREAM-JOIN",
                                 make, [this.node], name=name)
    return Stream(builder, node, key_serde=this.key_serde, key_changed=this.key_changed)
