"""The ``kafka://`` transport: aiokafka clients of a real Apache Kafka cluster.

``KafkaTransport("127.0.0.1:9092")`` or ``KafkaTransport.from_url("kafka://b1:9092,b2:9092")``,
with client options (security, timeouts in seconds, batch size) as keyword arguments; see
:class:`~aiostreams.transport.kafka_connection.KafkaOptions` for the list.

The clients live in :mod:`~aiostreams.transport.kafka_consumer`,
:mod:`~aiostreams.transport.kafka_producer` and :mod:`~aiostreams.transport.kafka_admin`; what
they share (options, the bounded start, metadata without auto-creation) in
:mod:`~aiostreams.transport.kafka_connection`. This module ties them into a
:class:`~aiostreams.transport.base.Transport`.

Every client is idempotent and ``acks=all`` (producer) or commits manually only (consumer).
Tested against Kafka 3.9 (KRaft) started by :mod:`aiostreams.localkafka`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Unpack

from aiostreams.errors import ConfigError
from aiostreams.transport.base import ConsumerOptions, ConsumerSettings
from aiostreams.transport.kafka_admin import KafkaAdmin
from aiostreams.transport.kafka_connection import SCHEME, KafkaOptions, parse_bootstrap
from aiostreams.transport.kafka_consumer import KafkaConsumer
from aiostreams.transport.kafka_producer import KafkaProducer

if TYPE_CHECKING:
    from aiostreams.transport.base import Transport

__all__ = ["KafkaAdmin", "KafkaConsumer", "KafkaOptions", "KafkaProducer", "KafkaTransport"]


class KafkaTransport:
    """A :class:`~aiostreams.transport.base.Transport` whose clients talk to one cluster.

    Creating it does no I/O; each client connects in its ``start()`` and raises
    :class:`~aiostreams.errors.BrokerUnavailableError` when no broker answers within
    ``connect_timeout`` seconds.
    """

    def __init__(self, bootstrap: str, **options: Any) -> None:
        """``bootstrap``: ``host:port[,host:port...]``. ``options``: the fields of
        :class:`KafkaOptions` (e.g. ``connect_timeout=5.0``, ``security_protocol="SSL"``,
        ``ssl_context=...``); a misspelt one raises :class:`ConfigError` listing them."""
        self._bootstrap = parse_bootstrap(bootstrap)
        self.options = KafkaOptions.from_kwargs(options)

    @classmethod
    def from_url(cls, url: str, **options: Any) -> KafkaTransport:
        """``kafka://host:port[,host:port...]`` → a transport for that cluster."""
        if not url.startswith(SCHEME):
            raise ConfigError(
                f"not a Kafka transport URL: {url!r}; use kafka://host:port[,host:port]"
            )
        return cls(parse_bootstrap(url), **options)

    @property
    def url(self) -> str:
        return f"{SCHEME}{self._bootstrap}"

    @property
    def bootstrap(self) -> str:
        return self._bootstrap

    def consumer(
        self,
        group_id: str | None = None,
        *,
        options: ConsumerOptions | None = None,
        **settings: Unpack[ConsumerSettings],
    ) -> KafkaConsumer:
        return KafkaConsumer(
            self._bootstrap, self.options, ConsumerOptions.of(group_id, options, settings))

    def producer(
        self, *, client_id: str = "aiostreams", transactional_id: str | None = None
    ) -> KafkaProducer:
        return KafkaProducer(
            self._bootstrap, self.options, client_id=client_id, transactional_id=transactional_id
        )

    def admin(self) -> KafkaAdmin:
        return KafkaAdmin(self._bootstrap, self.options)

    def __repr__(self) -> str:
        return f"KafkaTransport({self.url!r})"


if TYPE_CHECKING:  # mypy proves the Kafka clients satisfy the Protocols structurally

    def _is_transport(transport: KafkaTransport) -> Transport:
        return transport
