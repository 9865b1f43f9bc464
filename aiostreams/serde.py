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
from pydantic import BaseModel, PydanticUndefinedAnnotation, ValidationError
from pydantic_core import PydanticSerializationError

from aiostreams import compact_json
from aiostreams.errors import ConfigError, DeserializationError, SerializationError

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
M = TypeVar("M", bound=BaseModel)


@runtime_checkable
class Serde(Protocol[T]):
    """Encodes values of type ``T`` for a topic and decodes them back.

    Both directions take and return ``None`` for a tombstone or null key; that is why the
    value side is ``T | None`` rather than ``T``. ``deserialize`` raises only
    ``DeserializationError``, ``serialize`` only ``SerializationError``.
    """

    def serialize(self, topic: str, value: T | None) -> bytes | None: ...

    def deserialize(self, topic: str, data: bytes | None) -> T | None: ...


def _short_repr(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


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
                f"cannot encode {_short_repr(value)} as UTF-8: {exc.reason} at index "
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
        return f"{name} takes an int in [{low}, {high}], got {_short_repr(value)}; {advice}"


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
            return f"{_short_repr(value)} is too large for a double (max about 1.8e308)"
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


_MAX_REPORTED_ERRORS: Final = 5


def _summarize(exc: ValidationError) -> str:
    """Pydantic's errors on one line: ``qty: Input should be ...; items[0].sku: Field required``."""
    errors = exc.errors(include_url=False, include_context=False, include_input=False)
    parts = []
    for error in errors[:_MAX_REPORTED_ERRORS]:
        path = "".join(f"[{at}]" if isinstance(at, int) else f".{at}" for at in error["loc"])
        parts.append(f"{path.lstrip('.')}: {error['msg']}" if path else error["msg"])
    if len(errors) > _MAX_REPORTED_ERRORS:
        parts.append(f"and {len(errors) - _MAX_REPORTED_ERRORS} more")
    return "; ".join(parts)


class PydanticSerde(Generic[M]):
    """A pydantic model as JSON: validated when read, written with the model's serializer.

    Calls pydantic-core's compiled validator and serializer directly: the work
    ``model_validate_json`` and ``model_dump_json`` wrap, in about half their time per record
    (``to_json`` gives bytes; ``model_dump_json`` a str to encode again).

    Fields are written under the names the validator reads: aliases, unless the model sets
    ``validate_by_alias=False``. Instances of a subclass are written with ``model_cls``'s
    fields only: the topic's schema is the declared model.

    Values whose fields do not match their declared types (possible only through
    ``model_construct`` or unvalidated assignment) are written as pydantic writes them, with
    its ``UserWarning``; where warnings are errors that becomes a ``SerializationError``.

    Any failure while validating, including an exception other than ``ValueError`` raised by
    a user validator, is a ``DeserializationError`` chained to the original.
    """

    __slots__ = ("_by_alias", "_name", "_to_json", "_validate_json", "fast_deserialize",
                 "model_cls")

    def __init__(self, model_cls: type[M]) -> None:
        if not (isinstance(model_cls, type) and issubclass(model_cls, BaseModel)):
            raise ConfigError(
                f"PydanticSerde takes a pydantic BaseModel subclass, got {_short_repr(model_cls)}"
            )
        name = model_cls.__name__
        if not model_cls.__pydantic_complete__:
            try:
                model_cls.model_rebuild()
            except PydanticUndefinedAnnotation as exc:
                raise ConfigError(
                    f"{name} is not fully defined ({exc.message}); define the missing type, "
                    f"then call {name}.model_rebuild() before using {name} on a topic"
                ) from exc
        self.model_cls = model_cls
        self._name = name
        self._validate_json: Callable[[bytes], Any] = model_cls.__pydantic_validator__.validate_json
        # No fast_serialize: writing checks the value's class first.
        self.fast_deserialize: Callable[[bytes], M] = self._validate_json
        self._to_json: Callable[..., bytes] = model_cls.__pydantic_serializer__.to_json
        self._by_alias: bool = model_cls.model_config.get("validate_by_alias", True)

    def serialize(self, topic: str, value: M | None) -> bytes | None:
        if value is None:
            return None
        if not isinstance(value, self.model_cls):
            raise SerializationError(
                f"{self!r} takes {self._name} instances, got {type(value).__name__}; build "
                f"one with {self._name}(...) or {self._name}.model_validate(...)",
                topic=topic,
            )
        try:
            return self._to_json(value, by_alias=self._by_alias)
        except (PydanticSerializationError, UserWarning) as exc:
            raise SerializationError(f"cannot write {self._name}: {exc}", topic=topic) from exc

    def deserialize(self, topic: str, data: bytes | None) -> M | None:
        if data is None:
            return None
        try:
            model: M = self._validate_json(data)
        except ValidationError as exc:
            raise DeserializationError(
                f"not a valid {self._name}: {_summarize(exc)}", topic=topic
            ) from exc
        except Exception as exc:
            # A user validator with a bug: still this record's failure, routed like one.
            raise DeserializationError(
                f"a validator of {self._name} raised {type(exc).__name__}: {exc}", topic=topic
            ) from exc
        return model

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PydanticSerde) and other.model_cls is self.model_cls

    def __hash__(self) -> int:
        return hash((PydanticSerde, self.model_cls))

    def __repr__(self) -> str:
        return f"PydanticSerde({self.model_cls.__qualname__})"


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
    described = spec.__qualname__ if isinstance(spec, type) else _short_repr(spec)
    because = f" ({hint})" if hint else ""
    return ConfigError(f"no serde for {described}{because}; accepted: {_ACCEPTED}")
