"""The ``memory://`` transport: an in-process broker with Kafka's semantics.

The embedded default and the unit-test transport. ``memory://name`` names a broker shared
by everything in the process that uses the same URL (``memory://`` alone is
``memory://default``); ``MemoryTransport(MemoryBroker())`` is private to its creator.

The broker lives in :mod:`~aiostreams.transport.memory_broker`, group coordination in
:mod:`~aiostreams.transport.memory_group` and the clients in
:mod:`~aiostreams.transport.memory_consumer` and
:mod:`~aiostreams.transport.memory_producer`; this module ties them into a
:class:`~aiostreams.transport.base.Transport`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Unpack

from aiostreams.errors import ConfigError
from aiostreams.transport.base import ConsumerOptions, ConsumerSettings, TopicSpec
from aiostreams.transport.memory_broker import MemoryBroker, check_name
from aiostreams.transport.memory_consumer import MemoryConsumer
from aiostreams.transport.memory_producer import MemoryProducer
from aiostreams.types import TopicPartition

if TYPE_CHECKING:
    from aiostreams.transport.base import Transport

__all__ = ["MemoryAdmin", "MemoryBroker", "MemoryConsumer", "MemoryProducer", "MemoryTransport"]

SCHEME = "memory://"


class MemoryAdmin:
    """Topic administration on a :class:`MemoryBroker`; needs no start, but accepts one."""

    def __init__(self, broker: MemoryBroker) -> None:
        self._broker = broker

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def create_topics(self, specs: Sequence[TopicSpec]) -> None:
        """Create the topics that do not exist yet; existing ones are left as they are.

        ``replication_factor`` is checked (at least 1) and otherwise ignored.
        """
        for spec in specs:
            if spec.replication_factor < 1:
                raise ValueError(
                    f"topic {spec.name!r}: replication_factor must be at least 1, "
                    f"got {spec.replication_factor}"
                )
            self._broker.create_topic(spec.name, spec.partitions, spec.config)

    async def partitions_for(self, topic: str) -> int | None:
        return self._broker.partition_count(topic)

    async def list_topics(self) -> list[str]:
        return self._broker.topic_names()

    async def topic_ids(self, topics: Collection[str]) -> dict[str, str | None]:
        """Each topic's id: new for each topic the broker creates (see
        :meth:`MemoryBroker.topic_id`)."""
        return {topic: self._broker.topic_id(topic) for topic in topics}

    async def delete_topics(self, topics: Sequence[str]) -> None:
        """Delete topics with their records and committed offsets; raises
        :class:`UnknownTopicError` (deleting nothing) if one does not exist, as Kafka does."""
        self._broker.delete_topics(topics)

    async def delete_records(self, before: Mapping[TopicPartition, int]) -> None:
        """Move each partition's beginning offset up to ``before[tp]`` (see
        :meth:`MemoryBroker.delete_records`)."""
        self._broker.delete_records(before)


class MemoryTransport:
    """A :class:`~aiostreams.transport.base.Transport` whose clients share one broker."""

    def __init__(self, broker: MemoryBroker | None = None) -> None:
        self._broker = MemoryBroker() if broker is None else broker

    @classmethod
    def from_url(cls, url: str) -> MemoryTransport:
        """``memory://name`` → the process-wide broker ``name``; ``memory://`` → "default"."""
        if not url.startswith(SCHEME):
            raise ConfigError(
                f"not a memory transport URL: {url!r}; use 'memory://' or 'memory://<name>'"
            )
        name = url[len(SCHEME) :].strip("/") or "default"
        try:
            check_name("memory broker", name)
        except ValueError as exc:
            raise ConfigError(f"bad memory transport URL {url!r}: {exc}") from None
        return cls(MemoryBroker.named(name))

    @property
    def broker(self) -> MemoryBroker:
        return self._broker

    @property
    def url(self) -> str:
        """``memory://<name>``; a private broker's URL does not resolve back to it."""
        name = self._broker.name
        return f"{SCHEME}{name}" if name is not None else f"{SCHEME}<private-{id(self._broker):x}>"

    def consumer(
        self,
        group_id: str | None = None,
        *,
        options: ConsumerOptions | None = None,
        **settings: Unpack[ConsumerSettings],
    ) -> MemoryConsumer:
        return MemoryConsumer(self._broker, ConsumerOptions.of(group_id, options, settings))

    def producer(
        self, *, client_id: str = "aiostreams", transactional_id: str | None = None
    ) -> MemoryProducer:
        return MemoryProducer(
            self._broker, client_id=client_id, transactional_id=transactional_id
        )

    def admin(self) -> MemoryAdmin:
        return MemoryAdmin(self._broker)

    def __repr__(self) -> str:
        return f"MemoryTransport({self.url!r})"


if TYPE_CHECKING:  # mypy proves the memory clients satisfy the Protocols structurally

    def _is_transport(transport: MemoryTransport) -> Transport:
        return transport
