"""What the three aiokafka adapters share: connection options, a bounded start, metadata.

Durations are float seconds here and become aiokafka's integer milliseconds only in
:meth:`KafkaOptions.client_kwargs` and the adapters' constructors.

aiokafka internals used by the adapters, all in this module or named here so an upgrade has
one list to check (``aiokafka>=0.13,<0.15``): ``AIOKafkaConsumer._client``,
``AIOKafkaProducer.client``, ``AIOKafkaAdminClient._client`` (the ``AIOKafkaClient`` under each),
and ``AIOKafkaClient.send``/``get_random_node``/``cluster``; and
``AIOKafkaConnection.connected``/``send``, wrapped by
:mod:`~aiostreams.transport.kafka_broken_connections` when this module is imported.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import ssl
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import Any

from aiokafka.errors import KafkaConnectionError, KafkaError, for_code
from aiokafka.protocol.metadata import MetadataRequest
from pydantic import SecretStr

from aiostreams.errors import (
    BrokerUnavailableError,
    ConfigError,
    TransportError,
    UnknownTopicError,
)
from aiostreams.transport.kafka_broken_connections import guard_broken_connections
from aiostreams.types import TopicPartition

log = logging.getLogger(__name__)

guard_broken_connections()  # every adapter imports this module before it makes a client

SCHEME = "kafka://"
_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_UNKNOWN_TOPIC = 3  # Kafka's UNKNOWN_TOPIC_OR_PARTITION error code
_START_BACKOFF = (0.05, 1.0)  # first and largest pause between connection attempts
NO_BROKER_WAIT = 15.0
"""Seconds :func:`a_broker` waits for the cluster's metadata to list a broker."""
_NO_BROKER_RETRY = 0.2


@dataclass(frozen=True, slots=True)
class KafkaOptions:
    """Client settings of a :class:`~aiostreams.transport.kafka.KafkaTransport`.

    Every duration is in seconds. The consumer's group timeouts keep Kafka's meaning:
    ``session_timeout`` (a member that sends no heartbeat for that long is dropped),
    ``heartbeat_interval`` (also how fast a member learns of a rebalance) and
    ``max_poll_interval`` (the longest a member may go without calling ``getmany``; it also
    bounds how long a rebalance waits for ``on_partitions_revoked`` to return).
    """

    security_protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    sasl_mechanism: str = "PLAIN"
    sasl_plain_username: str | None = None
    sasl_plain_password: SecretStr | None = None
    """Kept a ``SecretStr`` (a ``str`` given is wrapped) so no repr, log line or traceback
    shows it; unwrapped only in :meth:`client_kwargs`, as it is handed to aiokafka."""
    connect_timeout: float = 30.0
    """How long ``start()`` keeps trying to reach a broker before BrokerUnavailableError."""
    request_timeout: float = 40.0
    metadata_max_age: float = 300.0
    retry_backoff: float = 0.1
    session_timeout: float = 45.0
    heartbeat_interval: float = 1.0
    """A member learns of a rebalance at its next heartbeat, so this bounds the pause in
    output while another worker joins or leaves: at Kafka's 3 s a leaving worker stalled
    the others' output 2.2 s (benchmarks ``scaleout``); at 1 s it costs one small request
    per second per consumer."""
    max_poll_interval: float = 300.0
    fetch_max_wait: float = 0.5
    max_batch_size: int = 256 * 1024
    """Producer batch size in bytes; aiokafka sends one request per broker at a time, so
    batches larger than Kafka's 16 KiB default are what carries throughput."""
    linger: float = 0.0
    compression_type: str | None = None
    transaction_timeout: float = 60.0

    def __post_init__(self) -> None:
        if isinstance(self.sasl_plain_password, str):
            object.__setattr__(self, "sasl_plain_password", SecretStr(self.sasl_plain_password))
        if self.security_protocol not in _SECURITY_PROTOCOLS:
            raise ConfigError(
                f"security_protocol must be one of {_SECURITY_PROTOCOLS}, "
                f"got {self.security_protocol!r}"
            )
        if self.security_protocol in ("SSL", "SASL_SSL") and self.ssl_context is None:
            raise ConfigError(
                f"security_protocol={self.security_protocol!r} needs an ssl_context, e.g. "
                "aiokafka.helpers.create_ssl_context(cafile=...)"
            )
        for name in ("connect_timeout", "request_timeout", "session_timeout",
                     "heartbeat_interval", "max_poll_interval", "transaction_timeout"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be > 0 seconds, got {getattr(self, name)}")
        if self.heartbeat_interval >= self.session_timeout:
            raise ConfigError(
                f"heartbeat_interval ({self.heartbeat_interval} s) must be shorter than "
                f"session_timeout ({self.session_timeout} s); Kafka suggests a third of it"
            )

    @classmethod
    def from_kwargs(cls, options: dict[str, Any]) -> KafkaOptions:
        """Build from keyword arguments, naming the accepted ones if one is misspelt."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ConfigError(
                f"unknown Kafka transport option(s) {unknown}; accepted: {sorted(known)}"
            )
        return cls(**options)

    def client_kwargs(self, bootstrap: str, client_id: str) -> dict[str, Any]:
        """The connection keyword arguments every aiokafka client takes."""
        return {
            "bootstrap_servers": bootstrap,
            "client_id": client_id,
            "request_timeout_ms": to_ms(self.request_timeout),
            "retry_backoff_ms": to_ms(self.retry_backoff),
            "metadata_max_age_ms": to_ms(self.metadata_max_age),
            "security_protocol": self.security_protocol,
            "ssl_context": self.ssl_context,
            "sasl_mechanism": self.sasl_mechanism,
            "sasl_plain_username": self.sasl_plain_username,
            "sasl_plain_password": (None if self.sasl_plain_password is None
                                    else self.sasl_plain_password.get_secret_value()),
        }


def closed_mid_request(exc: BaseException) -> bool:
    """Whether ``exc`` is the ``RuntimeError`` a request meets when its connection was
    reset under it: aiokafka writes the request to a transport that is already closed, and
    uvloop refuses ("unable to perform operation on <TCPTransport closed=True ...>; the
    handler is closed"). aiokafka raises it as it is, not as a ``KafkaConnectionError``, so
    the adapters turn it into :class:`BrokerUnavailableError` (passing trouble, ridden out
    like a dropped connection) instead of letting it stop the worker as a bug would."""
    return isinstance(exc, RuntimeError) and "handler is closed" in str(exc)


def to_ms(seconds: float) -> int:
    """Seconds (the API's unit) → Kafka's integer milliseconds, at the aiokafka boundary."""
    return round(seconds * 1000)


def parse_bootstrap(url_or_servers: str) -> str:
    """``kafka://h1:p1,h2:p2`` or ``h1:p1,h2:p2`` → ``h1:p1,h2:p2``, each checked."""
    servers = url_or_servers.removeprefix(SCHEME).strip("/")
    if not servers:
        raise ConfigError(f"no broker address in {url_or_servers!r}; use kafka://host:port")
    for server in servers.split(","):
        host, _, port = server.strip().rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(
                f"bad broker address {server!r} in {url_or_servers!r}: expected host:port, "
                "e.g. kafka://127.0.0.1:9092 or kafka://b1:9092,b2:9092"
            )
    return ",".join(server.strip() for server in servers.split(","))


_STARTING: set[asyncio.Task[Any]] = set()
"""The tasks running a :func:`start_or_unavailable` retry loop now. By task, not by context
variable: aiokafka's background tasks created during a start (metadata sync, fetcher,
heartbeat) copy the context, and their later connection errors must still be logged."""
_AIOKAFKA_ATTEMPT_ERRORS = ("Unable connect to ", "Unable to update metadata from ")
CONNECT_RETRY_LOG_MARK = "aiostreams_connect_retry"
"""Set on the one WARNING a start logs while it retries, so the command line, which
reports the outcome itself (exit code 3 and one line), can leave it out."""


class _QuietAttempts(logging.Filter):
    """Drops aiokafka's ERROR line for each failed connection attempt of a client that
    :func:`start_or_unavailable` is starting: it retries them, says once (a WARNING) that
    the broker is not reachable yet and raises one error in the end, where aiokafka would
    print a line per attempt (34 in 30 s). Outside a start (a running client losing its
    broker) aiokafka's lines pass unchanged."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not (isinstance(record.msg, str) and record.msg.startswith(_AIOKAFKA_ATTEMPT_ERRORS)):
            return True
        try:
            task = asyncio.current_task()
        except RuntimeError:  # logged outside an event loop
            return True
        return task not in _STARTING


_QUIET_ATTEMPTS = _QuietAttempts()


async def start_or_unavailable(
    start: Callable[[], Awaitable[None]],
    close: Callable[[], Awaitable[None]],
    *,
    bootstrap: str,
    options: KafkaOptions,
    what: str,
) -> None:
    """Run an aiokafka client's ``start``, retrying connection failures until
    ``options.connect_timeout`` has passed; then close it and raise BrokerUnavailableError.

    Only the bootstrap (the first step of every aiokafka ``start``) is retried: the adapters
    start their clients before subscribing, so nothing else can fail half-way. Cancellation
    closes the client and propagates. The first failed attempt is logged once, as a
    WARNING; aiokafka's own line per attempt is left out (:class:`_QuietAttempts`).
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + options.connect_timeout
    pause, largest_pause = _START_BACKOFF
    logging.getLogger("aiokafka").addFilter(_QUIET_ATTEMPTS)  # idempotent
    this_task = asyncio.current_task()
    assert this_task is not None, "a coroutine runs in a task"
    _STARTING.add(this_task)
    warned = False
    try:
        while True:
            remaining = deadline - loop.time()
            try:
                async with asyncio.timeout(max(remaining, 0.001)):
                    await start()
                return
            except (KafkaConnectionError, TimeoutError, OSError) as exc:
                last_error = str(exc) or type(exc).__name__
                if loop.time() + pause >= deadline:
                    raise BrokerUnavailableError(
                        f"the {what} reached no Kafka broker at {bootstrap} within "
                        f"{options.connect_timeout:g} s (last error: {last_error}). Check "
                        "that the broker runs, that host:port is one of its listeners as "
                        "advertised (advertised.listeners), that nothing (firewall, container "
                        "port mapping) blocks the port, and that security_protocol "
                        f"({options.security_protocol}) matches the listener; or wait longer: "
                        "the connect_timeout setting (at most broker_timeout; the command "
                        "line's --connect-timeout)."
                    ) from exc
                if not warned:
                    warned = True
                    log.warning("the %s reaches no Kafka broker at %s yet (%s); retrying for "
                                "up to %g s (connect_timeout)", what, bootstrap, last_error,
                                options.connect_timeout, extra={CONNECT_RETRY_LOG_MARK: True})
                else:
                    log.debug("%s: broker at %s not reachable yet: %s", what, bootstrap,
                              last_error)
                await asyncio.sleep(pause)
                pause = min(pause * 2, largest_pause)
    except BaseException:
        await close()
        raise
    finally:
        _STARTING.discard(this_task)


async def partition_counts(
    client: Any, topics: Collection[str], *, bootstrap: str, require_leaders: bool = False
) -> dict[str, int | None]:
    """Each topic's partition count, None where the broker does not know the topic (or,
    with ``require_leaders``, where a partition has no leader yet).

    One Metadata request with ``allow_auto_topic_creation=False``: asking must never create
    a topic, even on a broker with ``auto.create.topics.enable=true`` (aiokafka's own
    metadata requests allow creation). ``client`` is an ``aiokafka.AIOKafkaClient``.
    """
    request = MetadataRequest(sorted(topics), allow_auto_topic_creation=False)
    node = await a_broker(client, bootstrap=bootstrap)
    try:
        response = await client.send(node, request)
    except KafkaError as exc:
        raise TransportError(
            f"cannot read the metadata of {sorted(topics)} from {bootstrap}: {exc!r}"
        ) from exc
    counts: dict[str, int | None] = dict.fromkeys(topics)
    for topic in response.to_object()["topics"]:
        if known_topic(topic["error_code"], f"the metadata of topic {topic['topic']!r}",
                       bootstrap=bootstrap):
            led = all(p["error_code"] == 0 and p["leader"] >= 0 for p in topic["partitions"])
            if led or not require_leaders:
                counts[topic["topic"]] = len(topic["partitions"])
    return counts


async def a_broker(client: Any, *, bootstrap: str, timeout: float = NO_BROKER_WAIT) -> int:
    """The node id of a broker the cluster's metadata lists, for a request any broker
    answers. ``client`` is an ``aiokafka.AIOKafkaClient``.

    A broker that just restarted, or resumed after a pause longer than its KRaft session
    (the controller fenced it meanwhile), answers Metadata before its controller counts it
    live again: for a moment it lists no broker at all, and a client bootstrapped then knows
    none - aiokafka would send to node ``None`` and fail with ``NodeNotReadyError`` (seen
    on 4.4.0 right after a broker outage). So while the client knows none, refresh its
    metadata (through the bootstrap connection it keeps for that) every 0.2 s - polling:
    nothing announces it - for up to ``timeout`` seconds, then raise
    :class:`BrokerUnavailableError`, which the engine rides out like any outage.

    Cancellation: propagates at once."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        node = client.get_random_node()
        if node is not None:
            return int(node)
        if asyncio.get_running_loop().time() > deadline:
            raise BrokerUnavailableError(
                f"the cluster at {bootstrap} lists no live broker in its metadata after "
                f"{timeout:.0f} s: a broker that just started or came back from an outage "
                "is not registered with its controller yet. Check the brokers' logs (the "
                "controller quorum) and try again")
        await client.force_metadata_update()
        if client.get_random_node() is None:
            await asyncio.sleep(_NO_BROKER_RETRY)


def known_topic(error_code: int, reading: str, *, bootstrap: str) -> bool:
    """Whether a topic of a Metadata response is one the broker knows: True for error code 0,
    False for UNKNOWN_TOPIC_OR_PARTITION; any other code raises :class:`TransportError`
    "cannot read ``reading`` from ``bootstrap``" with Kafka's name and description of it."""
    if error_code == 0:
        return True
    if error_code == _UNKNOWN_TOPIC:
        return False
    error = for_code(error_code)
    raise TransportError(
        f"cannot read {reading} from {bootstrap}: "
        f"{error.__name__} (Kafka error code {error_code}): {error.description}"
    )


CREATE_IT_FIRST = "Create it first (Admin.create_topics), or check the name."


async def existing_partition_counts(
    client: Any, topics: Collection[str], *, bootstrap: str, action: str, advice: str
) -> dict[str, int]:
    """:func:`partition_counts` of topics that must all exist: else raise
    :class:`UnknownTopicError` "cannot ``action`` topic(s) [...]: ... ``advice``"."""
    counts = await partition_counts(client, topics, bootstrap=bootstrap)
    missing = sorted(topic for topic, count in counts.items() if count is None)
    if missing:
        raise UnknownTopicError(
            f"cannot {action} topic(s) {missing}: the broker at {bootstrap} has no such "
            f"topic. {advice}"
        )
    return {topic: count for topic, count in counts.items() if count is not None}


class KnownTopics:
    """The partition counts of the topics a consumer reads, checked against the broker
    once per topic: a topic named by ``subscribe`` or ``assign`` is verified at the next
    :meth:`verify` (aiokafka would wait for it forever)."""

    def __init__(self, bootstrap: str) -> None:
        self._bootstrap = bootstrap
        self.unverified: set[str] = set()
        self._counts: dict[str, int] = {}

    async def verify(self, client: Any) -> None:
        """Raise :class:`UnknownTopicError` if an unverified topic does not exist."""
        if not self.unverified:
            return
        self._counts.update(await existing_partition_counts(
            client, self.unverified, bootstrap=self._bootstrap, action="read",
            advice=CREATE_IT_FIRST))
        self.unverified.clear()

    async def check_partitions(self, client: Any, partitions: Collection[TopicPartition]
                               ) -> None:
        """Raise :class:`UnknownTopicError` for a missing topic, ``ValueError`` for a
        partition number the topic does not have."""
        unknown = {tp.topic for tp in partitions} - self._counts.keys()
        if unknown:
            self.unverified |= unknown
            await self.verify(client)
        for tp in partitions:
            if not 0 <= tp.partition < self._counts[tp.topic]:
                raise ValueError(f"topic {tp.topic!r} has partitions "
                                 f"0..{self._counts[tp.topic] - 1}, not {tp.partition}")
