"""Building a foreign-key join (``Table.join_on_foreign_key`` /
``Table.left_join_on_foreign_key``): the nodes, topics and stores of
:mod:`aiostreams.processors.fk_join`, wired as Kafka Streams 3.9.1's ``doJoinOnForeignKey``.

Placement: the subscription topic has the right table's partition count and its records
are read where the right table is (the subscription processor reads the right table, which
puts it in that sub-topology); the response topic has the left table's count, each
response sent to the partition its subscription came from, and is read where the left
table is. Bad use fails here, naming the node: the other side must be a :class:`Table`,
the foreign-key function and the joiner plain functions.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aiostreams.dsl.table import Table, require_getter_stores
from aiostreams.errors import TopologyError
from aiostreams.processors.fk_join import (
    ForeignTableJoinProcessor,
    ResponseJoinProcessor,
    SubscriptionProcessor,
    SubscriptionSendProcessor,
)
from aiostreams.processors.fk_join_wire import (
    CombinedKeySerde,
    Response,
    ResponseSerde,
    SubscriptionSerde,
)
from aiostreams.processors.store_values import TimestampedSerde, kv_store_spec
from aiostreams.processors.table_changes import OldValues
from aiostreams.processors.table_sources import TableSourceProcessor
from aiostreams.processors.tables import StoreGetter
from aiostreams.serde import JsonSerde, Serde
from aiostreams.topic import Topic
from aiostreams.topology.internal_topics import REPARTITION_TOPIC_CONFIG

if TYPE_CHECKING:
    from aiostreams.dsl.builder import StreamsBuilder


def _internal_topic(builder: StreamsBuilder, kind: str, name: str | None,
                    key_serde: Serde[Any], value_serde: Serde[Any],
                    partitions: int | None) -> Topic:
    base = builder.new_name(kind, name)
    topic = Topic.of(f"{builder.app_id}-{base}-topic", key_serde, value_serde,
                     partitions=partitions, internal=True, config=REPARTITION_TOPIC_CONFIG)
    builder.topology.add_topic(topic)
    return topic


def _primary_partition(_key: Any, value: Any, _partitions: int) -> int:
    assert isinstance(value, Response) and value.primary_partition >= 0, value
    return value.primary_partition


def join_on_foreign_key(this: Table[Any, Any], other: Any, foreign_key: Callable[[Any], Any],
                        joiner: Callable[[Any, Any], Any], *, left: bool, name: str | None,
                        materialized: str | None, persistent: bool,
                        value_serde: Serde[Any] | None) -> Table[Any, Any]:
    """Build the join described in the module docstring; returns the joined table."""
    what = (f"{'left ' if left else ''}foreign-key join of table {this.node!r}")
    if not isinstance(other, Table):
        raise TopologyError(
            f"{what}: the other side must be a Table (keyed by the foreign key), got "
            f"{type(other).__name__}; turn a stream into one with .to_table() or read the "
            "topic with app.table()")
    from aiostreams.dsl.versioned_wiring import refuse_versioned

    refuse_versioned(this, what)
    refuse_versioned(other, what)
    for role, fn in (("foreign_key", foreign_key), ("joiner", joiner)):
        if not callable(fn) or inspect.iscoroutinefunction(fn):
            raise TopologyError(
                f"{what}: {role} must be a plain (not async) function, got {fn!r}; a "
                "foreign-key join cannot await (enrich the table before joining)")
    builder = this.builder
    what = f"{what} with table {other.node!r}"
    this.old_values.enable()
    other.old_values.enable()
    pk_serde = this.key_serde or JsonSerde()
    fk_serde = other.key_serde or JsonSerde()
    left_values = this.value_serde or JsonSerde()
    prefix = None if name is None else f"{name}-"
    sub_topic = _internal_topic(
        builder, "KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION",
        prefix and f"{prefix}subscription-registration", fk_serde,
        SubscriptionSerde(pk_serde), builder.declared_partitions([other.node]))
    # the result node and its store are named below; the suppliers run when tasks are made
    names: dict[str, str] = {}
    send = builder.add_processor(
        "KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION",
        lambda: SubscriptionSendProcessor(
            foreign_key, fk_serde, left_values, left, sub_topic.name,
            subscriptions=names["sink"], result=names["result"],
            result_store=names["store"]),
        [this.node], name=prefix and f"{prefix}subscription-registration-processor")
    names["sink"] = builder.add_sink(
        "KTABLE-SINK", sub_topic, [send],
        name=prefix and f"{prefix}subscription-registration-sink")
    sub_source = builder.add_source(
        "KTABLE-SOURCE", [sub_topic], name=prefix and f"{prefix}subscription-registration-source")
    store = builder.store_name("KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE",
                               prefix and f"{prefix}subscription-store")
    foreign_getter = other.getter
    receive = builder.add_processor(
        "KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR",
        lambda: SubscriptionProcessor(store, foreign_getter), [sub_source],
        name=prefix and f"{prefix}subscription-receive")
    builder.add_store(kv_store_spec(
        store, persistent=persistent, key_serde=CombinedKeySerde(fk_serde, pk_serde),
        value_serde=TimestampedSerde(SubscriptionSerde(pk_serde))), receive)
    require_getter_stores(builder, foreign_getter, receive, what)
    foreign = builder.add_processor(
        "KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR", lambda: ForeignTableJoinProcessor(store),
        [other.node], name=prefix and f"{prefix}foreign-join-subscription")
    builder.connect_store(store, foreign)
    builder.check_copartitioned(sub_source, other.node, what)

    response_topic = _internal_topic(
        builder, "KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE",
        prefix and f"{prefix}subscription-response", pk_serde,
        ResponseSerde(other.value_serde or JsonSerde()),
        builder.declared_partitions([this.node]))
    builder.add_sink("KTABLE-SINK", response_topic, [receive, foreign],
                     partitioner=_primary_partition,
                     name=prefix and f"{prefix}subscription-response-sink")
    response_source = builder.add_source(
        "KTABLE-SOURCE", [response_topic],
        name=prefix and f"{prefix}subscription-response-source")
    primary_getter = this.getter
    resolver = builder.add_processor(
        "KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-RESOLVER-PROCESSOR",
        lambda: ResponseJoinProcessor(primary_getter, left_values, joiner, left,
                                      sub_topic.name, names["store"]),
        [response_source], name=prefix and f"{prefix}subscription-response-resolver")
    require_getter_stores(builder, primary_getter, resolver, what)

    result_store = names["store"] = builder.store_name("KTABLE-FK-JOIN-OUTPUT-STATE-STORE",
                                                       materialized)
    old_values = OldValues()
    # the subscription sender is a parent too: an inner join's local retractions (fk_join)
    result = names["result"] = builder.add_processor(
        "KTABLE-FK-JOIN-OUTPUT", lambda: TableSourceProcessor(result_store, old_values),
        [resolver, send], name=prefix and f"{prefix}result")
    result_values = value_serde if value_serde is not None else JsonSerde()
    builder.add_store(kv_store_spec(result_store, persistent=persistent, key_serde=pk_serde,
                                    value_serde=TimestampedSerde(result_values)), result)
    builder.connect_store(result_store, send)
    builder.connect_store(result_store, resolver)
    return Table(builder, result, StoreGetter(result_store), key_serde=this.key_serde,
                 value_serde=value_serde, store=result_store, old_values=old_values)


__all__ = ["join_on_foreign_key"]
