"""Building versioned tables and the joins that read them (see
:mod:`aiostreams.processors.versioned_join` for the semantics).

``app.table(topic, versioned=Versioned(history_retention=...))`` (and
``stream.to_table(versioned=...)``) materialize the table in a versioned store;
``stream.join(table, joiner, grace=...)`` / ``left_join`` join each record with the
value valid at its timestamp, after holding it back up to ``grace`` seconds.

Kafka Streams' stateful table operators (table-table and foreign-key joins, ``group_by``,
``suppress``) drop a versioned table's out-of-order updates; aiostreams does not carry
that flag yet, so it refuses them on a versioned table (and on tables derived from one)
at build time rather than compute something else.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aiostreams.errors import ConfigError, TopologyError
from aiostreams.processors.store_values import kv_store_spec
from aiostreams.processors.table_changes import OldValues
from aiostreams.processors.versioned_join import (
    BufferSerde,
    VersionedGetter,
    VersionedStreamTableJoinProcessor,
    VersionedTableSourceProcessor,
)
from aiostreams.serde import BytesSerde, JsonSerde, Serde
from aiostreams.state.versioned import Versioned, versioned_store

if TYPE_CHECKING:
    from aiostreams.dsl.builder import StreamsBuilder
    from aiostreams.dsl.stream import Stream
    from aiostreams.dsl.table import Table

__all__ = ["check_grace", "join_versioned", "refuse_versioned", "versioned_source_table"]


def versioned_source_table(builder: StreamsBuilder, kind: str, parent: str, store: str,
                           key_serde: Serde[Any], value_serde: Serde[Any], *,
                           name: str | None, persistent: bool,
                           versioned: Versioned) -> Table[Any, Any]:
    """A table of ``parent``'s records kept in a versioned store named ``store``."""
    from aiostreams.dsl.table import Table

    if not isinstance(versioned, Versioned):
        raise ConfigError(f"versioned= takes ais.Versioned(history_retention=...), got "
                          f"{type(versioned).__name__}")
    old_values = OldValues()
    node = builder.add_processor(kind, lambda: VersionedTableSourceProcessor(
        store, old_values, builder.dropped),
                                 [parent], name=name)
    builder.add_store(versioned_store(store, history_retention=versioned.history_retention,
                                      persistent=persistent, key_serde=key_serde,
                                      value_serde=value_serde), node)
    table: Table[Any, Any] = Table(builder, node, VersionedGetter(store), key_serde=key_serde,
                                   value_serde=value_serde, store=store,
                                   old_values=old_values)
    table.versioned_source = node
    return table


def refuse_versioned(table: Table[Any, Any], what: str) -> None:
    """A :class:`TopologyError` when ``table`` is (or derives from) a versioned table."""
    source = getattr(table, "versioned_source", None)
    if source is not None:
        raise TopologyError(
            f"{what} on table {table.node!r}: it reads the versioned table {source!r}, whose "
            "out-of-order updates Kafka Streams' stateful table operators drop; aiostreams "
            "supports to_stream(), filter(), map_values() and stream-table joins on "
            "versioned tables - materialize the table without versioned= for this operator")


def check_grace(table: Table[Any, Any], grace: float | None, node: str) -> int | None:
    """``grace`` in ms after checking it; an error naming ``node`` when the table is not
    versioned (Kafka refuses it too: a grace period needs the table's history)."""
    if grace is None:
        return None
    if isinstance(grace, bool) or not isinstance(grace, int | float) or not 0 <= grace < 1e12:
        raise ConfigError(f"join {node!r}: grace must be float seconds >= 0, got {grace!r}")
    if not isinstance(table.getter, VersionedGetter):
        raise TopologyError(
            f"join {node!r}: a grace period needs a versioned table, and table "
            f"{table.node!r} is not one; declare it with versioned=ais.Versioned("
            "history_retention=...) (at least the grace), or drop grace=")
    return round(grace * 1000)


def join_versioned(builder: StreamsBuilder, stream: Stream[Any, Any], table: Table[Any, Any],
                   joiner: Callable[[Any, Any], Any], left: bool, grace: float | None, *,
                   name: str | None) -> str:
    """Add the versioned stream-table join node (and its grace buffer); its name."""
    kind = "KSTREAM-LEFTJOIN" if left else "KSTREAM-JOIN"
    node = builder.new_name(kind, name)
    grace_ms = check_grace(table, grace, node)
    getter = table.getter
    assert isinstance(getter, VersionedGetter), "check_grace refuses unversioned tables"
    key_serde = stream.key_serde or table.key_serde or JsonSerde()
    value_serde = stream.value_serde or JsonSerde()
    buffer = (None if grace_ms is None
              else builder.store_name("KSTREAM-JOIN-BUFFER-STORE",
                                      None if name is None else f"{name}-buffer"))
    builder.add_processor(kind, lambda: VersionedStreamTableJoinProcessor(
        getter, joiner, left, grace_ms=grace_ms, buffer=buffer, key_serde=key_serde),
        [stream.node], name=node)
    if buffer is not None:
        builder.add_store(kv_store_spec(buffer, persistent=False, key_serde=BytesSerde(),
                                        value_serde=BufferSerde(key_serde, value_serde)),
                          node)
    return node
