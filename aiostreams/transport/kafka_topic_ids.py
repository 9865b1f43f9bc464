"""Kafka topic ids: which incarnation of a topic name a client is reading.

Kafka gives every topic a random 16-byte id when it is created (KIP-516, Kafka 2.8+); a
topic deleted and created again under the same name, or the same name on a broker whose
data was wiped, gets a new one, and its offsets start again at 0. Metadata v10+ returns
the ids; aiokafka speaks Metadata up to v5 only, so this module sends one Metadata v10
request of its own (flexible encoding) through aiokafka's client, as
:mod:`~aiostreams.transport.kafka_raw_fetch` does for Fetch.

An id is written as Kafka's tools write it (``kafka-topics.sh --describe``): URL-safe
base64 of the 16 bytes without padding, e.g. ``"Xi3gPbE9SOuuwYW4g-zvsw"``. A broker older
than 2.8 has no ids: every topic's id is then None. aiokafka internals used:
``AIOKafkaClient.send``/``get_random_node`` and its Request/Struct protocol classes.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from aiokafka.errors import IncompatibleBrokerVersion, KafkaError
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.types import (
    Boolean,
    CompactArray,
    CompactString,
    Int16,
    Int32,
    Schema,
    TaggedFields,
)

from aiostreams.errors import TransportError
from aiostreams.transport.base import format_topic_id
from aiostreams.transport.kafka_connection import a_broker, known_topic
from aiostreams.transport.kafka_wire import Uuid

__all__ = ["read_topic_ids"]

_ZERO_ID = bytes(16)  # Kafka's "no id" (a topic written before ids, or ZooKeeper < 2.8)


_IDS = CompactArray(Int32)


class _MetadataResponseV10(Response):  # type: ignore[misc]  # aiokafka is untyped here
    API_KEY = 3
    API_VERSION = 10
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        ("brokers", CompactArray(("node_id", Int32), ("host", CompactString("utf-8")),
                                 ("port", Int32), ("rack", CompactString("utf-8")),
                                 ("tags", TaggedFields))),
        ("cluster_id", CompactString("utf-8")),
        ("controller_id", Int32),
        ("topics", CompactArray(
            ("error_code", Int16), ("name", CompactString("utf-8")), ("topic_id", Uuid),
            ("is_internal", Boolean),
            ("partitions", CompactArray(
                ("error_code", Int16), ("partition_index", Int32), ("leader_id", Int32),
                ("leader_epoch", Int32), ("replica_nodes", _IDS), ("isr_nodes", _IDS),
                ("offline_replicas", _IDS), ("tags", TaggedFields))),
            ("topic_authorized_operations", Int32), ("tags", TaggedFields))),
        ("cluster_authorized_operations", Int32),
        ("tags", TaggedFields),
    )


class _MetadataRequestV10(RequestStruct):  # type: ignore[misc]
    FLEXIBLE_VERSION = True
    API_KEY = 3
    API_VERSION = 10
    RESPONSE_TYPE = _MetadataResponseV10
    SCHEMA = Schema(
        ("topics", CompactArray(("topic_id", Uuid), ("name", CompactString("utf-8")),
                                ("tags", TaggedFields))),
        ("allow_auto_topic_creation", Boolean),
        ("include_cluster_authorized_operations", Boolean),
        ("include_topic_authorized_operations", Boolean),
        ("tags", TaggedFields),
    )


class _TopicIdsRequest(Request[_MetadataRequestV10]):  # type: ignore[misc]
    """Metadata v10 for named topics, never creating one."""

    API_KEY = 3

    def __init__(self, topics: list[str]) -> None:
        self._topics = topics

    def build(self, request_struct_class: type[_MetadataRequestV10]) -> _MetadataRequestV10:
        return request_struct_class(
            [(_ZERO_ID, name, {}) for name in self._topics], False, False, False, {})


async def read_topic_ids(client: Any, topics: Collection[str], *,
                         bootstrap: str) -> dict[str, str | None]:
    """Each topic's id; None for a topic the broker does not know, or for every topic when
    the broker has no topic ids (older than Kafka 2.8). ``client`` is an
    ``aiokafka.AIOKafkaClient``; raises :class:`TransportError` on another broker error."""
    ids: dict[str, str | None] = dict.fromkeys(topics)
    if not topics:
        return ids
    node = await a_broker(client, bootstrap=bootstrap)
    try:
        response = await client.send(node, _TopicIdsRequest(sorted(topics)))
    except (IncompatibleBrokerVersion, NotImplementedError):
        return ids  # Metadata v10 unsupported: the broker has no topic ids
    except KafkaError as exc:
        raise TransportError(
            f"cannot read the topic ids of {sorted(topics)} from {bootstrap}: {exc!r}"
        ) from exc
    for topic in response.to_object()["topics"]:
        known = known_topic(topic["error_code"], f"the topic id of {topic['name']!r}",
                            bootstrap=bootstrap)
        if known and topic["topic_id"] != _ZERO_ID:
            ids[topic["name"]] = format_topic_id(topic["topic_id"])
    return ids
