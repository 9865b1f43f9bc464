"""Serdes: how a topic's keys and values become bytes and come back.

A :class:`Serde` is two methods keyed by topic. ``None`` passes through both ways in every
serde here: a ``None`` value is a Kafka tombstone and a ``None`` key a null key, so neither is
ever encoded (``JsonSerde`` writes ``None`` as no payload, not as ``b"null"``).

The numeric serdes match Kafka's Java serializers byte for byte, so a topic can be shared with
Kafka Streams or any Java client: ``IntSerde`` = ``IntegerSerializer`` (4 bytes), ``LongSerde``
= ``LongSerializer`` (8 bytes), ``FloatSerde`` = ``DoubleSerializer`` (8 bytes, IEEE 754), all
big-endian. ``StrSerde`` is UTF-8 like ``StringSerializer`` but strict: malformed input is a
:class:`~aiostreams.errors.DeserializationError`, where Java silently substitutes U+FFFD.

Failures: ``serialize`` raises :class:`~aiostreams.errors.SerializationError`; ``deserialize``
raises :class:`~aiostreams.errors.DeserializationError` and nothing else, whatever the bytes.
A serde sees only bytes, so it names the topic but not the partition, offset or whether it was
decoding a key; the caller fills those in with :meth:`DeserializationError.at`.

Shortcuts: a serde may also carry ``fast_deserialize(data)`` and ``fast_serialize(value)``,
one compiled callable each (``bytes.decode``, ``orjson.loads``...) that the engine's
compiled record path calls instead of the two methods, saving a Python call per key and
value. For non-``None`` input a shortcut returns exactly what the method returns; on bad
input it may raise anything, and the engine then calls the method, whose typed error (or
result) is the one that counts. :func:`shortcuts` reads them.

:func:`serde_for` turns what users write in ``app.topic("orders", key=str, value=Order)`` into
a serde.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import (
    Any,
    ClassVar,
    Final,
    Generic,
    Protocol,
    TypeVar,
    get_origin,
    runtime_checkable,
)

import orjson
from pydantic import BaseModel

from aiostreams import compact_json
from aiostreams.errors import (
    ConfigError,
    DeserializationError,
    SerializationError,
    short_repr,
)
from aiostreams.pydantic_serde import PydanticSerde

__all__ = [
    "BytesSerde",
    "FloatSerde",
    "IntSerde",
    "JsonSerde",
    "LongSerde",
    "PydanticSerde",
    "Serde",
    "StrSerde",
    "serde_for",
    "shortcuts",
]

T = TypeVar("T")
N = TypeVar("N", int, float)


@runtime_checkable
class Serde(Protocol[T]):
    """Encodes values of type ``T`` for a topic and decodes them back.

    Both directions take and return ``None`` for a tombstone or null key; that is why the
    value side is ``T | None`` rather than ``T``. ``deserialize`` raises only
    ``DeserializationError``, ``serialize`` only ``SerializationError``.
    """

    def serialize(self, topic: str, value: T | None) -> bytes | None: ...

    def deserialize(self, topic: str, data: bytes | None) -> T | None: ...


class _Stateless:
    """A serde without settings: all its instances are interchangeable, hence equal."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self)

    def __hash__(self) -> int:
        return hash(type(self))

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class BytesSerde(_Stateless):
    """Raw bytes, unchanged. ``bytearray`` and ``memoryview`` are copied to ``bytes``."""

    __slots__ = ()

    def serialize(self, topic: str, value: bytes | None) -> bytes | None:
        if value is None or type(value) is bytes:
            return value
        if isinstance(value, bytes | bytearray | memoryview):
            return bytes(value)
        raise SerializationError(
            f"BytesSerde takes bytes, got {type(value).__name__}; declare the topic with "
            "key=str or value=str to write text, or another serde for other types",
            topic=topic,
        )

    def deserialize(self, topic: str, data: bytes | None) -> bytes | None:
        return data

    # bytes(b) is b itself for bytes, which is all transports return
    fast_deserialize: ClassVar[Callable[[bytes], bytes]] = staticmethod(bytes)


class StrSerde(_Stateless):
    """Text as UTF-8 (Kafka ``StringSerializer``); malformed UTF-8 is an error, not U+FFFD."""

    __slots__ = ()

    fast_deserialize: ClassVar[Callable[[bytes], str]] = staticmethod(bytes.decode)
    fast_serialize: ClassVar[Callable[[str], bytes]] = staticmethod(str.encode)

    def serialize(self, topic: str, value: str | None) -> bytes | None:
        if value is None:
            return None
        try:
            # str.encode rather than value.encode: refuses non-str values that have an encode().
            return str.encode(value, "utf-8")
        except TypeError:
            raise SerializationError(
                f"StrSerde takes a str, got {type(value).__name__}; convert it with str() "
                "or declare the topic with a serde for that type",
                topic=topic,
            ) from None
        except UnicodeEncodeError as exc:
            raise SerializationError(
                f"cannot encode {short_repr(value)} as UTF-8: {exc.reason} at index "
                f"{exc.start} (a lone surrogate, e.g. from os.fsdecode or a bad decode)",
                topic=topic,
            ) from exc

    def deserialize(self, topic: str, data: bytes | None) -> str | None:
        if data is None:
            return None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DeserializationError(
                f"invalid UTF-8 at byte {exc.start} of {len(data)}: {exc.reason}; "
                "if the topic holds binary data, declare it with bytes",
                topic=topic,
            ) from None


class _FixedWidthSerde(_Stateless, Generic[N]):
    """A big-endian fixed-width number, the layout Kafka's Java number serializers use."""

    __slots__ = ()

    _struct: ClassVar[struct.Struct]
    _what: ClassVar[str]  # "an int (Kafka IntegerSerializer)": named in decode errors

    def serialize(self, topic: str, value: N | None) -> bytes | None:
        if value is None:
            return None
        try:
            return self._struct.pack(value)
        except (struct.error, OverflowError, TypeError) as exc:
            raise SerializationError(self._why_unencodable(value), topic=topic) from exc

    def deserialize(self, topic: str, data: bytes | None) -> N | None:
        if data is None:
            return None
        try:
            number: N = self._struct.unpack(data)[0]
        except struct.error:
            raise DeserializationError(
                f"expected {self._struct.size} bytes for {self._what}, got {len(data)}"
                f"{self._hint_for_size(len(data))}",
                topic=topic,
            ) from None
        return number

    def _why_unencodable(self, value: object) -> str:
        raise NotImplementedError

    def _hint_for_size(self, size: int) -> str:
        return ""


class _IntegralSerde(_FixedWidthSerde[int]):
    __slots__ = ()

    _bits: ClassVar[int]

    def _why_unencodable(self, value: object) -> str:
        name = type(self).__name__
        if not hasattr(type(value), "__index__"):
            return f"{name} takes an int, got {type(value).__name__}"
        low, high = -(2 ** (self._bits - 1)), 2 ** (self._bits - 1) - 1
        advice = (
            "use LongSerde (key=int / value=int) for 64-bit values"
            if self._bits < 64
            else "write it as str or in a JSON/pydantic value instead"
        )
        return f"{name} takes an int in [{low}, {high}], got {short_repr(value)}; {advice}"


class IntSerde(_IntegralSerde):
    """A 32-bit signed int, 4 bytes big-endian: Kafka ``IntegerSerializer``."""

    __slots__ = ()
    _struct = struct.Struct(">i")
    _bits = 32
    _what = "an int (Kafka IntegerSerializer)"

    def _hint_for_size(self, size: int) -> str:
        return "; 8 bytes looks like a long: use LongSerde" if size == 8 else ""


class LongSerde(_IntegralSerde):
    """A 64-bit signed int, 8 bytes big-endian: Kafka ``LongSerializer``.

    What ``int`` resolves to, as Kafka Streams' counts and aggregates are longs.
    """

    __slots__ = ()
    _struct = struct.Struct(">q")
    _bits = 64
    _what = "a long (Kafka LongSerializer)"

    def _hint_for_size(self, size: int) -> str:
        return "; 4 bytes looks like an int: use IntSerde" if size == 4 else ""


class FloatSerde(_FixedWidthSerde[float]):
    """An IEEE 754 double, 8 bytes big-endian: Kafka ``DoubleSerializer``.

    ``int`` values are accepted and written as doubles (exactly up to 2**53).
    """

    __slots__ = ()
    _struct = struct.Struct(">d")
    _what = "a double (Kafka DoubleSerializer)"

    def _why_unencodable(self, value: object) -> str:
        if isinstance(value, int):
            return f"{short_repr(value)} is too large for a double (max about 1.8e308)"
        return f"FloatSerde takes a float, got {type(value).__name__}"


class JsonSerde(_Stateless):
    """Any JSON value, with orjson.

    Writes what orjson can (dict, list, str, int within 64 bits, float, bool, also dataclasses,
    datetimes, UUIDs, enums); reads plain JSON back (dict, list, str, int, float, bool, None).
    Dict keys must be ``str``. NaN and infinities are written as ``null`` (orjson's choice):
    keep them out of JSON values.
    """

    __slots__ = ()

    fast_deserialize: ClassVar[Callable[[bytes], Any]] = staticmethod(orjson.loads)
    fast_serialize: ClassVar[Callable[[Any], bytes]] = staticmethod(compact_json.dumps)

    def serialize(self, topic: str, value: Any) -> bytes | None:
        if value is None:
            return None
        try:
            return compact_json.dumps(value)
        except orjson.JSONEncodeError as exc:
            raise SerializationError(
                f"cannot write {type(value).__name__} as JSON: {exc}", topic=topic
            ) from exc

    def deserialize(self, topic: str, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise DeserializationError(f"invalid JSON: {exc}", topic=topic) from None


_SERDE_BY_TYPE: Final[dict[type, Callable[[], Serde[Any]]]] = {
    bytes: BytesSerde,
    str: StrSerde,
    int: LongSerde,
    float: FloatSerde,
    dict: JsonSerde,
    list: JsonSerde,
}

_ACCEPTED: Final = (
    "bytes, str, int (a Kafka long), float (a Kafka double), dict, list or 'json' (any JSON), "
    "a pydantic BaseModel subclass, a serde instance such as IntSerde(), or None (raw bytes)"
)


def shortcuts(
    serde: Serde[Any],
) -> tuple[Callable[[bytes], Any] | None, Callable[[Any], bytes] | None]:
    """``serde``'s ``(fast_deserialize, fast_serialize)``, ``None`` where it has none (see
    the module docstring for what they promise).

    A shortcut counts only where the method it stands for is not overridden below the
    class that gave it: a subclass of :class:`StrSerde` with its own ``deserialize`` gets
    no ``fast_deserialize`` (its method runs), but keeps ``fast_serialize``."""
    return (_shortcut(serde, "fast_deserialize", "deserialize"),
            _shortcut(serde, "fast_serialize", "serialize"))


def _shortcut(serde: object, name: str, method: str) -> Any:
    if name in getattr(serde, "__dict__", ()):
        return getattr(serde, name)  # set on the instance itself: stands for its method
    mro = type(serde).__mro__
    given = next((i for i, cls in enumerate(mro) if name in vars(cls)), None)
    defined = next((i for i, cls in enumerate(mro) if method in vars(cls)), None)
    if given is None or defined is None or defined < given:
        return None
    return getattr(serde, name, None)


def serde_for(spec: object) -> Serde[Any]:
    """The serde for what a user declared as a topic's key or value type.

    ``bytes`` → BytesSerde, ``str`` → StrSerde, ``int`` → LongSerde, ``float`` → FloatSerde,
    ``dict``/``list``/``"json"`` → JsonSerde, a ``BaseModel`` subclass → PydanticSerde, an
    object with ``serialize``/``deserialize`` → itself, ``None`` → BytesSerde.

    Raises :class:`ConfigError` naming ``spec`` and the accepted choices for anything else.
    """
    if spec is None:
        return BytesSerde()
    if isinstance(spec, str):
        if spec == "json":
            return JsonSerde()
        raise _not_a_serde(spec, "the only name accepted is 'json'; pass types themselves")
    if isinstance(spec, type):
        make = _SERDE_BY_TYPE.get(spec)
        if make is not None:
            return make()
        if issubclass(spec, BaseModel):
            return PydanticSerde(spec)
        if hasattr(spec, "serialize") and hasattr(spec, "deserialize"):
            raise _not_a_serde(spec, f"that is a serde class; pass an instance: {spec.__name__}()")
        raise _not_a_serde(spec)
    if isinstance(spec, Serde):
        return spec
    if isinstance(spec, BaseModel):
        name = type(spec).__name__
        raise _not_a_serde(spec, f"that is an instance of {name}; pass the class: {name}")
    if get_origin(spec) in (dict, list):
        hint = "item types would go unchecked; use dict or list for any JSON, or a pydantic model"
        raise _not_a_serde(spec, hint)
    raise _not_a_serde(spec)


def _not_a_serde(spec: object, hint: str = "") -> ConfigError:
    described = spec.__qualname__ if isinstance(spec, type) else short_repr(spec)
    because = f" ({hint})" if hint else ""
    return ConfigError(f"no serde for {described}{because}; accepted: {_ACCEPTED}")
