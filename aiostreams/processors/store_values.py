"""How the DSL declares and reads its state stores.

The DSL's stateful operators need two kinds of store: key-value (aggregations, tables) and
window stores (windowed aggregations, session windows, stream-stream join buffers). They
are declared with :func:`aiostreams.state.kv_store` / :func:`aiostreams.state.window_store`
(changelog-backed, in memory or on SQLite) and read through the views the engine hands to
processors (``ctx.store(name)``), whose reads see the buffered writes of earlier records.

Times are float seconds, as everywhere in the API; the DSL computes window bounds from whole
milliseconds (Kafka's unit), and the window store keeps starts to the millisecond, so one
window always has one float start.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple, Protocol, cast

from aiostreams.errors import SerializationError
from aiostreams.serde import Serde
from aiostreams.state import kv_store, window_store
from aiostreams.topology.topology import StoreSpec


def kv_store_spec(name: str, *, persistent: bool, key_serde: Serde[Any],
                  value_serde: Serde[Any]) -> StoreSpec:
    """A changelog-backed key-value store named ``name``."""
    return kv_store(name, persistent=persistent, key_serde=key_serde,
                    value_serde=value_serde)


def window_store_spec(name: str, *, retention: float, persistent: bool,
                      key_serde: Serde[Any], value_serde: Serde[Any]) -> StoreSpec:
    """A changelog-backed window store named ``name`` keeping ``retention`` seconds."""
    return window_store(name, retention=retention, persistent=persistent,
                        key_serde=key_serde, value_serde=value_serde)


class WindowAccess(Protocol):
    """The window-store view operations the DSL uses (``start`` in float seconds)."""

    async def get(self, key: Any, start: float) -> Any | None: ...

    @property
    def reads_now(self) -> bool: ...

    def get_now(self, key: Any, start: float) -> Any | None: ...

    def put(self, key: Any, start: float, value: Any) -> None: ...

    def delete(self, key: Any, start: float) -> None: ...

    async def fetch(self, key: Any, time_from: float,
                    time_to: float) -> list[tuple[float, Any]]: ...


def window_access(view: Any) -> WindowAccess:
    """What ``ctx.store(name)`` returned, as a window store (checked: a key-value store
    connected where a window store is expected is a wiring bug)."""
    if not hasattr(view, "fetch"):
        raise TypeError(f"store {getattr(view, 'name', view)!r} is not a window store")
    return cast(WindowAccess, view)


async def fetch_all(store: WindowAccess, key: Any, time_from: float,
                    time_to: float) -> list[tuple[float, Any]]:
    """``(start, value)`` pairs of ``key`` with ``time_from <= start <= time_to``, in start
    order, buffered writes of earlier records included."""
    return await store.fetch(key, time_from, time_to)


# -- serdes of the DSL's own store values ------------------------------------------------


class ValueAndTimestamp(NamedTuple):
    """A stored aggregate with its timestamp (seconds): the largest timestamp of the records
    that made it (Kafka Streams' ``ValueAndTimestamp``). Store snapshots for users (the test
    driver's ``store()``) show the value alone: see :func:`plain_value`."""

    value: Any
    timestamp: float


def plain_value(stored: Any) -> Any:
    """What a user reads from a store: the value of a :class:`ValueAndTimestamp`, else the
    stored value itself."""
    return stored.value if isinstance(stored, ValueAndTimestamp) else stored


_STAMP = struct.Struct(">q")


class TimestampedSerde:
    """A :class:`ValueAndTimestamp` as Kafka Streams' timestamped stores write it: the
    timestamp as 8 bytes of big-endian milliseconds, then ``inner``'s bytes."""

    store_layout = "timestamped"  # a store of these values is kv-/window-timestamped/2

    def __init__(self, inner: Serde[Any]) -> None:
        self.inner = inner

    def serialize(self, topic: str, value: ValueAndTimestamp | None) -> bytes | None:
        if value is None:
            return None
        data = self.inner.serialize(topic, value.value)
        return _STAMP.pack(round(value.timestamp * 1000)) + (data or b"")

    def deserialize(self, topic: str, data: bytes | None) -> ValueAndTimestamp | None:
        if data is None:
            return None
        (ms,) = _STAMP.unpack_from(data, 0)
        return ValueAndTimestamp(self.inner.deserialize(topic, data[_STAMP.size:]), ms / 1000)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TimestampedSerde) and other.inner == self.inner

    def __hash__(self) -> int:
        return hash(("TimestampedSerde", self.inner))

_LEN = struct.Struct(">i")
_TIME = struct.Struct(">d")


class ListSerde:
    """A list of values, each encoded by ``inner`` and length-prefixed (join buffers)."""

    def __init__(self, inner: Serde[Any]) -> None:
        self.inner = inner

    def serialize(self, topic: str, value: list[Any] | None) -> bytes | None:
        if value is None:
            return None
        parts: list[bytes] = []
        for item in value:
            data = self.inner.serialize(topic, item)
            if data is None:
                raise SerializationError(
                    f"a buffered value of {topic!r} serialized to null; join buffers hold "
                    "non-null values only", topic=topic)
            parts.append(_LEN.pack(len(data)))
            parts.append(data)
        return b"".join(parts)

    def deserialize(self, topic: str, data: bytes | None) -> list[Any] | None:
        if data is None:
            return None
        items: list[Any] = []
        pos = 0
        while pos < len(data):
            (size,) = _LEN.unpack_from(data, pos)
            pos += _LEN.size
            items.append(self.inner.deserialize(topic, data[pos:pos + size]))
            pos += size
        return items

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ListSerde) and other.inner == self.inner

    def __hash__(self) -> int:
        return hash(("ListSerde", self.inner))


class TimedSerde:
    """A ``(time, value)`` pair: 8 bytes of big-endian double, then ``inner``'s bytes
    (session windows store ``(start, aggregate)`` under their end time)."""

    store_layout = "timed"  # a window store of these values is window-timed/1

    def __init__(self, inner: Serde[Any]) -> None:
        self.inner = inner

    def serialize(self, topic: str, value: tuple[float, Any] | None) -> bytes | None:
        if value is None:
            return None
        data = self.inner.serialize(topic, value[1])
        return _TIME.pack(value[0]) + (data or b"")

    def deserialize(self, topic: str, data: bytes | None) -> tuple[float, Any] | None:
        if data is None:
            return None
        (time,) = _TIME.unpack_from(data, 0)
        return time, self.inner.deserialize(topic, data[_TIME.size:])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TimedSerde) and other.inner == self.inner

    def __hash__(self) -> int:
        return hash(("TimedSerde", self.inner))
