"""What a foreign-key join writes: its two internal topics' records and its store's keys,
byte for byte as Kafka Streams 3.9 writes them (``kstream/internals/foreignkeyjoin``).

* **Subscription** (:class:`Subscription`, topic ``...-SUBSCRIPTION-REGISTRATION-...-topic``,
  keyed by the foreign key): ``[version | 0x80 if no hash][instruction][hash: 2 longs, when
  there is one][primary key bytes][primary partition: int32]`` (version 1).
* **Response** (:class:`Response`, topic ``...-SUBSCRIPTION-RESPONSE-...-topic``, keyed by the
  primary key): ``[version | 0x80 if no hash][hash: 2 longs][foreign value bytes, absent for
  null]`` (version 0; the primary partition is not written, it only routes the record).
* **Subscription store key** (:class:`CombinedKey`): ``[int32 length of the foreign key
  bytes][foreign key bytes][primary key bytes]``, so all subscribers of one foreign key are a
  byte-prefix range of the store.
* **The value hash**: MurmurHash3 x64 128-bit with Kafka's seed 104729 of the left value's
  serialized bytes (Kafka's ``Murmur3.hash128``), two signed longs.

Invariant: ``deserialize(serialize(x)) == x`` for every value each serde accepts (a
subscription's primary partition always present: this is version 1 only).
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass
from typing import Any

from aiostreams.errors import DeserializationError, SerializationError
from aiostreams.serde import Serde

_MASK = (1 << 64) - 1
_C1 = 0x87C37B91114253D5
_C2 = 0x4CF5AD432745937F
SEED = 104729
"""Kafka Streams' ``Murmur3.DEFAULT_SEED``."""


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _MASK


def _fmix(h: int) -> int:
    h ^= h >> 33
    h = (h * 0xFF51AFD7ED558CCD) & _MASK
    h ^= h >> 33
    h = (h * 0xC4CEB9FE1A85EC53) & _MASK
    return h ^ (h >> 33)


def _signed(x: int) -> int:
    return x - (1 << 64) if x & (1 << 63) else x


def hash128(data: bytes, seed: int = SEED) -> tuple[int, int]:
    """MurmurHash3 x64 128 of ``data`` as Kafka's ``Murmur3.hash128`` returns it: two
    signed 64-bit longs."""
    h1 = h2 = seed & _MASK
    n = len(data)
    blocks = n // 16
    for i in range(blocks):
        k1, k2 = struct.unpack_from("<QQ", data, i * 16)
        k1 = (_rotl((k1 * _C1) & _MASK, 31) * _C2) & _MASK
        h1 ^= k1
        h1 = (_rotl(h1, 27) + h2) & _MASK
        h1 = (h1 * 5 + 0x52DCE729) & _MASK
        k2 = (_rotl((k2 * _C2) & _MASK, 33) * _C1) & _MASK
        h2 ^= k2
        h2 = (_rotl(h2, 31) + h1) & _MASK
        h2 = (h2 * 5 + 0x38495AB5) & _MASK
    tail = data[blocks * 16:]
    if len(tail) > 8:
        k2 = int.from_bytes(tail[8:], "little")
        h2 ^= (_rotl((k2 * _C2) & _MASK, 33) * _C1) & _MASK
    if tail:
        k1 = int.from_bytes(tail[:8], "little")
        h1 ^= (_rotl((k1 * _C1) & _MASK, 31) * _C2) & _MASK
    h1 ^= n
    h2 ^= n
    h1 = (h1 + h2) & _MASK
    h2 = (h2 + h1) & _MASK
    h1, h2 = _fmix(h1), _fmix(h2)
    h1 = (h1 + h2) & _MASK
    h2 = (h2 + h1) & _MASK
    return _signed(h1), _signed(h2)


class Instruction(enum.IntEnum):
    """What the foreign side does with a subscription (Kafka's byte values)."""

    DELETE_KEY_NO_PROPAGATE = 0
    DELETE_KEY_AND_PROPAGATE = 1
    PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE = 2
    PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE = 3


@dataclass(frozen=True, slots=True)
class Subscription:
    """A left row subscribing to (or leaving) a foreign key: the hash of its value when
    sent (``None`` for a deleted row), what to do, its key and the partition it lives on."""

    value_hash: tuple[int, int] | None
    instruction: Instruction
    primary_key: Any
    primary_partition: int


@dataclass(frozen=True, slots=True)
class Response:
    """The foreign value (``None``: none) for a subscriber, with the hash it subscribed
    with; ``primary_partition`` routes it back and is not serialized."""

    value_hash: tuple[int, int] | None
    foreign_value: Any
    primary_partition: int = -1


_HASH = struct.Struct(">qq")
_INT = struct.Struct(">i")
SUBSCRIPTION_VERSION = 1
RESPONSE_VERSION = 0


def _bytes(serde: Serde[Any], topic: str, value: Any, what: str) -> bytes:
    data = serde.serialize(topic, value)
    if data is None:
        raise SerializationError(f"a foreign-key join's {what} serialized to null; it must "
                                 "have bytes", topic=topic)
    return data


class SubscriptionSerde:
    """:class:`Subscription` in Kafka's ``SubscriptionWrapperSerde`` format (version 1)."""

    def __init__(self, primary_key_serde: Serde[Any]) -> None:
        self.primary_key_serde = primary_key_serde

    def serialize(self, topic: str, value: Subscription | None) -> bytes | None:
        if value is None:
            return None
        head = bytes([SUBSCRIPTION_VERSION | (0x80 if value.value_hash is None else 0),
                      int(value.instruction)])
        hashed = b"" if value.value_hash is None else _HASH.pack(*value.value_hash)
        key = _bytes(self.primary_key_serde, topic, value.primary_key, "primary key")
        return head + hashed + key + _INT.pack(value.primary_partition)

    def deserialize(self, topic: str, data: bytes | None) -> Subscription | None:
        if data is None:
            return None
        if len(data) < 6 or data[0] & 0x7F != SUBSCRIPTION_VERSION or data[1] > 3:
            raise DeserializationError(
                "not a foreign-key join subscription (Kafka's SubscriptionWrapper version "
                f"{SUBSCRIPTION_VERSION})", topic=topic)
        pos = 2
        value_hash = None
        if not data[0] & 0x80:
            if len(data) < 2 + _HASH.size + _INT.size:
                raise DeserializationError("a subscription's hash is truncated", topic=topic)
            value_hash = _HASH.unpack_from(data, pos)
            pos += _HASH.size
        key = self.primary_key_serde.deserialize(topic, data[pos:-_INT.size])
        (partition,) = _INT.unpack_from(data, len(data) - _INT.size)
        return Subscription(value_hash, Instruction(data[1]), key, partition)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, SubscriptionSerde)
                and other.primary_key_serde == self.primary_key_serde)

    def __hash__(self) -> int:
        return hash(("SubscriptionSerde", self.primary_key_serde))


class ResponseSerde:
    """:class:`Response` in Kafka's ``SubscriptionResponseWrapperSerde`` format (version 0).
    As in Kafka, a foreign value that serializes to no bytes reads back as ``None``."""

    def __init__(self, foreign_value_serde: Serde[Any]) -> None:
        self.foreign_value_serde = foreign_value_serde

    def serialize(self, topic: str, value: Response | None) -> bytes | None:
        if value is None:
            return None
        head = bytes([RESPONSE_VERSION | (0x80 if value.value_hash is None else 0)])
        hashed = b"" if value.value_hash is None else _HASH.pack(*value.value_hash)
        body = (b"" if value.foreign_value is None
                else self.foreign_value_serde.serialize(topic, value.foreign_value) or b"")
        return head + hashed + body

    def deserialize(self, topic: str, data: bytes | None) -> Response | None:
        if data is None:
            return None
        if not data or data[0] & 0x7F != RESPONSE_VERSION:
            raise DeserializationError(
                "not a foreign-key join response (Kafka's SubscriptionResponseWrapper version "
                f"{RESPONSE_VERSION})", topic=topic)
        pos = 1
        value_hash = None
        if not data[0] & 0x80:
            if len(data) < 1 + _HASH.size:
                raise DeserializationError("a response's hash is truncated", topic=topic)
            value_hash = _HASH.unpack_from(data, pos)
            pos += _HASH.size
        body = data[pos:]
        foreign = self.foreign_value_serde.deserialize(topic, body) if body else None
        return Response(value_hash, foreign)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, ResponseSerde)
                and other.foreign_value_serde == self.foreign_value_serde)

    def __hash__(self) -> int:
        return hash(("ResponseSerde", self.foreign_value_serde))


@dataclass(frozen=True, slots=True)
class CombinedKey:
    """A subscription store key: ``(foreign key, primary key)``. ``primary_key=None`` with
    ``bound`` ``"low"``/``"high"`` are the two ends of a foreign key's prefix range."""

    foreign_key: Any
    primary_key: Any
    bound: str = ""


class CombinedKeySerde:
    """:class:`CombinedKey` as Kafka's ``CombinedKeySchema`` writes it; the range ends are
    the foreign key's prefix and the prefix incremented (Kafka's ``Bytes.increment``)."""

    def __init__(self, foreign_key_serde: Serde[Any], primary_key_serde: Serde[Any]) -> None:
        self.foreign_key_serde = foreign_key_serde
        self.primary_key_serde = primary_key_serde

    def prefix(self, topic: str, foreign_key: Any) -> bytes:
        fk = _bytes(self.foreign_key_serde, topic, foreign_key, "foreign key")
        return _INT.pack(len(fk)) + fk

    def serialize(self, topic: str, value: CombinedKey | None) -> bytes | None:
        if value is None:
            return None
        prefix = self.prefix(topic, value.foreign_key)
        if value.bound == "low":
            return prefix
        if value.bound == "high":
            return _increment(prefix)
        return prefix + _bytes(self.primary_key_serde, topic, value.primary_key,
                               "primary key")

    def deserialize(self, topic: str, data: bytes | None) -> CombinedKey | None:
        if data is None:
            return None
        (size,) = _INT.unpack_from(data, 0)
        if not 0 <= size <= len(data) - _INT.size:
            raise DeserializationError("a foreign-key join store key is malformed",
                                       topic=topic)
        end = _INT.size + size
        return CombinedKey(self.foreign_key_serde.deserialize(topic, data[_INT.size:end]),
                           self.primary_key_serde.deserialize(topic, data[end:]))

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, CombinedKeySerde)
                and other.foreign_key_serde == self.foreign_key_serde
                and other.primary_key_serde == self.primary_key_serde)

    def __hash__(self) -> int:
        return hash(("CombinedKeySerde", self.foreign_key_serde, self.primary_key_serde))


def _increment(prefix: bytes) -> bytes:
    """The smallest byte string greater than every string starting with ``prefix``...
    within the prefix's length (Kafka's ``Bytes.increment``: add one, carrying)."""
    out = bytearray(prefix)
    for i in range(len(out) - 1, -1, -1):
        if out[i] != 0xFF:
            out[i] += 1
            return bytes(out)
        out[i] = 0
    raise SerializationError("a foreign key's store prefix is all 0xff bytes and has no "
                             "upper bound", topic="")


__all__ = [
    "CombinedKey",
    "CombinedKeySerde",
    "Instruction",
    "Response",
    "ResponseSerde",
    "Subscription",
    "SubscriptionSerde",
    "hash128",
]
