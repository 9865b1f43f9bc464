"""The vocabulary of aiostreams: records, partitions and the shapes user code implements.

Kept small on purpose (like starlette's ``types.py``): everything else in the package is
built from these names.

Units: timestamps are ``float`` seconds since the epoch (as :func:`time.time` returns);
transports convert to and from Kafka's integer milliseconds at the boundary.

Records are treated as immutable values (derive new ones with ``with_value``/
``with_key_value``) but are not ``frozen`` dataclasses: a frozen ``__init__`` costs about
0.5 µs more per record, and records are created several times per record processed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, fields
from typing import Any, Generic, NamedTuple, TypeVar

K = TypeVar("K")
V = TypeVar("V")

Headers = tuple[tuple[str, bytes | None], ...]
"""Record headers as Kafka has them: ordered (name, value) pairs, names may repeat."""


class TopicPartition(NamedTuple):
    """One partition of one topic."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(slots=True)
class RawRecord:
    """A record as a transport stores and returns it: bytes, with its position in the log."""

    topic: str
    partition: int
    offset: int
    timestamp: float
    key: bytes | None
    value: bytes | None
    headers: Headers = ()

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(slots=True)
class OutgoingRecord:
    """A record to produce. ``partition=None`` lets the producer's partitioner choose
    (Kafka's murmur2 of the key bytes, so the same key lands where a Java client puts it)."""

    topic: str
    key: bytes | None
    value: bytes | None
    timestamp: float | None = None
    headers: Headers = ()
    partition: int | None = None


@dataclass(slots=True)
class Record(Generic[K, V]):
    """A deserialized record flowing through a topology.

    ``topic``/``partition``/``offset`` name where it came from (the source record for
    records a processor derives from it); ``timestamp`` is event time in seconds.
    """

    key: K
    value: V
    topic: str = ""
    partition: int = -1
    offset: int = -1
    timestamp: float = 0.0
    headers: Headers = field(default=())

    def with_key_value(self, key: Any, value: Any) -> Record[Any, Any]:
        """A copy carrying a new key and value and the same metadata."""
        # Record(key, value, self.topic, ...) without the class call (see _RECORD_FIELDS)
        record: Record[Any, Any] = _new(Record)
        record.key = key
        record.value = value
        record.topic = self.topic
        record.partition = self.partition
        record.offset = self.offset
        record.timestamp = self.timestamp
        record.headers = self.headers
        return record

    def with_value(self, value: Any) -> Record[K, Any]:
        """A copy carrying a new value and the same key and metadata."""
        record: Record[K, Any] = _new(Record)
        record.key = self.key
        record.value = value
        record.topic = self.topic
        record.partition = self.partition
        record.offset = self.offset
        record.timestamp = self.timestamp
        record.headers = self.headers
        return record

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


_new = object.__new__
# with_value and with_key_value build their copy by storing every field on a bare instance:
# a class call to the dataclass __init__ costs about 250 ns more per record. So these must be
# all of Record's fields, and Record must not grow a __post_init__.
_RECORD_FIELDS = ("key", "value", "topic", "partition", "offset", "timestamp", "headers")
assert tuple(f.name for f in fields(Record)) == _RECORD_FIELDS \
    and not hasattr(Record, "__post_init__"), "Record changed: update with_value/with_key_value"


Punctuator = Callable[[float], Awaitable[None] | None]
"""A scheduled callback; it receives the (stream or wall-clock) time it fires for."""
