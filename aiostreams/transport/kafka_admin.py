"""The Kafka transport's topic administration, on aiokafka's ``AIOKafkaAdminClient``.

Kafka creates and deletes topics asynchronously: a CreateTopics response can come before
every broker's metadata shows the topic. ``create_topics`` and ``delete_topics`` therefore
return only once the metadata agrees (all partitions led, or the topic gone), so a producer
or consumer started right after sees what was asked for.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient, NewTopic, RecordsToDelete
from aiokafka.errors import KafkaError, for_code
from aiokafka.structs import TopicPartition as AIOTopicPartition

from aiostreams.errors import TransportError
from aiostreams.transport.base import TopicSpec
from aiostreams.transport.kafka_connection import (
    KafkaOptions,
    existing_partition_counts,
    partition_counts,
    start_or_unavailable,
)
from aiostreams.transport.kafka_topic_ids import read_topic_ids
from aiostreams.types import TopicPartition

__all__ = ["KafkaAdmin"]

_TOPIC_ALREADY_EXISTS = 36


class KafkaAdmin:
    """Creates, lists, sizes and deletes topics of one Kafka cluster."""

    def __init__(self, bootstrap: str, options: KafkaOptions) -> None:
        self._bootstrap = bootstrap
        self._options = options
        self._admin: AIOKafkaAdminClient | None = None

    async def start(self) -> None:
        """Connect (waiting up to ``connect_timeout`` for a broker, then raising
        :class:`~aiostreams.errors.BrokerUnavailableError`). Idempotent."""
        if self._admin is not None:
            return
        admin = AIOKafkaAdminClient(
            **self._options.client_kwargs(self._bootstrap, "aiostreams-admin")
        )
        await start_or_unavailable(
            admin.start, admin.close, bootstrap=self._bootstrap, options=self._options,
            what="admin client",
        )
        self._admin = admin

    async def stop(self) -> None:
        admin, self._admin = self._admin, None
        if admin is not None:
            await admin.close()

    async def create_topics(self, specs: Sequence[TopicSpec]) -> None:
        """Create the topics that do not exist yet; existing ones are left as they are.

        Returns once the broker's metadata shows every requested topic with a leader for
        each partition. Raises :class:`TransportError` naming the topic the broker refused
        (e.g. a replication factor above the number of brokers).
        """
        admin = self._require_started()
        for spec in specs:
            if spec.partitions < 1:
                raise ValueError(f"topic {spec.name!r} needs at least 1 partition, "
                                 f"got {spec.partitions}")
            if spec.replication_factor < 1:
                raise ValueError(
                    f"topic {spec.name!r}: replication_factor must be at least 1, "
                    f"got {spec.replication_factor}"
                )
        if not specs:
            return
        new_topics = [
            NewTopic(spec.name, spec.partitions, spec.replication_factor,
                     topic_configs=dict(spec.config))
            for spec in specs
        ]
        try:
            response = await admin.create_topics(new_topics)
        except KafkaError as exc:
            raise TransportError(
                f"cannot create topics {[s.name for s in specs]} at {self._bootstrap}: {exc!r}"
            ) from exc
        self._check_results(
            response.to_object()["topic_errors"], "create", ok=(0, _TOPIC_ALREADY_EXISTS),
            advice="Fix the TopicSpec (partitions, replication_factor, config) to suit the "
                   "cluster.")
        await self._await_metadata(admin, [spec.name for spec in specs], present=True)

    async def partitions_for(self, topic: str) -> int | None:
        """The topic's partition count, or None when it does not exist (never creates it)."""
        admin = self._require_started()
        return (await partition_counts(admin._client, [topic], bootstrap=self._bootstrap))[topic]

    async def list_topics(self) -> list[str]:
        """Names of the cluster's topics, without Kafka's internal ones, sorted."""
        admin = self._require_started()
        try:
            described = await admin.describe_topics()
        except KafkaError as exc:
            raise TransportError(f"cannot list the topics of {self._bootstrap}: {exc!r}") from exc
        return sorted(t["topic"] for t in described if not t["is_internal"])

    async def topic_ids(self, topics: Collection[str]) -> dict[str, str | None]:
        """Each topic's id (see :mod:`~aiostreams.transport.kafka_topic_ids`)."""
        admin = self._require_started()
        return await read_topic_ids(admin._client, topics, bootstrap=self._bootstrap)

    async def delete_topics(self, topics: Sequence[str]) -> None:
        """Delete topics with their records and committed offsets. Raises
        :class:`UnknownTopicError` (deleting nothing) if one does not exist, as Kafka does;
        returns once the metadata no longer shows them."""
        admin = self._require_started()
        if not topics:
            return
        await existing_partition_counts(admin._client, topics, bootstrap=self._bootstrap,
                                        action="delete", advice="Nothing was deleted.")
        try:
            response = await admin.delete_topics(list(topics))
        except KafkaError as exc:
            raise TransportError(
                f"cannot delete topics {list(topics)} at {self._bootstrap}: {exc!r}"
            ) from exc
        self._check_results(response.to_object()["topic_error_codes"], "delete", ok=(0,))
        await self._await_metadata(admin, list(topics), present=False)

    async def delete_records(self, before: Mapping[TopicPartition, int]) -> None:
        """Kafka's delete-records (how repartition topics are purged once consumed)."""
        admin = self._require_started()
        if not before:
            return
        request = {AIOTopicPartition(tp.topic, tp.partition): RecordsToDelete(offset)
                   for tp, offset in before.items()}
        try:
            await admin.delete_records(request)
        except KafkaError as exc:
            raise TransportError(
                f"cannot delete records of {sorted(map(str, before))} at {self._bootstrap}: "
                f"{exc!r}") from exc

    async def _await_metadata(
        self, admin: AIOKafkaAdminClient, topics: list[str], *, present: bool
    ) -> None:
        """Poll metadata until every topic is ready (``present``) or gone; bounded by
        ``request_timeout``. A deadline poll: Kafka offers no notification for this."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._options.request_timeout
        while True:
            counts = await partition_counts(
                admin._client, topics, bootstrap=self._bootstrap, require_leaders=present
            )
            waiting = sorted(t for t, n in counts.items() if (n is None) is present)
            if not waiting:
                return
            if loop.time() > deadline:
                state = "appear with a leader for every partition" if present else "disappear"
                raise TransportError(
                    f"topics {waiting} did not {state} in the metadata of {self._bootstrap} "
                    f"within {self._options.request_timeout:g} s; check the broker's health "
                    "(its controller log) and retry"
                )
            await asyncio.sleep(self._options.retry_backoff)

    def _check_results(self, results: list[dict[str, Any]], verb: str, *,
                       ok: tuple[int, ...], advice: str = "") -> None:
        """Raise :class:`TransportError` for the first topic whose error code is not ``ok``."""
        for result in results:
            code = result["error_code"]
            if code not in ok:
                error = for_code(code)
                detail = result.get("error_message") or error.description
                raise TransportError(
                    f"the broker at {self._bootstrap} refused to {verb} topic "
                    f"{result['topic']!r}: {error.__name__}: {detail} {advice}".rstrip()
                )

    def _require_started(self) -> AIOKafkaAdminClient:
        if self._admin is None:
            raise TransportError("the admin client is not started: `await admin.start()` first")
        return self._admin
