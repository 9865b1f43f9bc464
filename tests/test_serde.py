"""Serdes: round trips, Kafka wire compatibility, error types and messages, ``serde_for``."""

from __future__ import annotations

import math
import re
import struct
import warnings
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field, field_validator

from aiostreams.errors import ConfigError, DeserializationError, SerializationError
from aiostreams.serde import (
    BytesSerde,
    FloatSerde,
    IntSerde,
    JsonSerde,
    LongSerde,
    PydanticSerde,
    Serde,
    StrSerde,
    serde_for,
    shortcuts,
)

TOPIC = "orders"
INT32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)
INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=25,
)


class Item(BaseModel):
    sku: str
    count: int


class Order(BaseModel):
    order_id: str
    customer: str
    qty: int
    price: float
    items: list[Item] = []


class Nothing(BaseModel):
    pass


class AliasedOrder(BaseModel):
    order_id: str = Field(alias="orderId")
    unit_price: float = Field(alias="unitPrice")


class PickyOrder(BaseModel):
    sku: str

    @field_validator("sku")
    @classmethod
    def _look_up(cls, sku: str) -> str:
        return {"known": sku}[sku]  # KeyError for any other sku: a validator bug


def an_order(**changes: Any) -> Order:
    fields: dict[str, Any] = {"order_id": "o-1", "customer": "acme", "qty": 3, "price": 9.5}
    return Order(**(fields | changes))


ALL_SERDES: list[Serde[Any]] = [
    BytesSerde(),
    StrSerde(),
    IntSerde(),
    LongSerde(),
    FloatSerde(),
    JsonSerde(),
    PydanticSerde(Order),
]


def decode_error(serde: Serde[Any], data: bytes) -> DeserializationError:
    with pytest.raises(DeserializationError) as caught:
        serde.deserialize(TOPIC, data)
    return caught.value


def encode_error(serde: Serde[Any], value: Any) -> SerializationError:
    with pytest.raises(SerializationError) as caught:
        serde.serialize(TOPIC, value)
    assert caught.value.topic == TOPIC
    return caught.value


# --- the protocol and None --------------------------------------------------------------------


def test_serdes_satisfy_the_protocol() -> None:
    typed: tuple[Serde[bytes], Serde[str], Serde[int], Serde[int], Serde[float], Serde[Order]] = (
        BytesSerde(), StrSerde(), IntSerde(), LongSerde(), FloatSerde(), PydanticSerde(Order)
    )
    json_serde: Serde[Any] = JsonSerde()
    assert all(isinstance(serde, Serde) for serde in (*typed, json_serde))


@pytest.mark.parametrize("serde", ALL_SERDES, ids=repr)
def test_none_passes_through_both_ways_as_a_tombstone(serde: Serde[Any]) -> None:
    assert serde.serialize(TOPIC, None) is None
    assert serde.deserialize(TOPIC, None) is None


# --- round trips ------------------------------------------------------------------------------


@given(st.binary())
def test_bytes_round_trip_unchanged(data: bytes) -> None:
    assert BytesSerde().deserialize(TOPIC, BytesSerde().serialize(TOPIC, data)) == data


def test_bytes_serde_copies_bytearray_and_memoryview_to_bytes() -> None:
    assert BytesSerde().serialize(TOPIC, bytearray(b"ab")) == b"ab"  # type: ignore[arg-type]
    assert BytesSerde().serialize(TOPIC, memoryview(b"ab")) == b"ab"  # type: ignore[arg-type]


@given(st.text())
def test_str_round_trips_any_text(text: str) -> None:
    serde = StrSerde()
    encoded = serde.serialize(TOPIC, text)
    assert encoded == text.encode("utf-8")
    assert serde.deserialize(TOPIC, encoded) == text


@given(INT32)
def test_int_round_trips_the_32_bit_range(number: int) -> None:
    serde = IntSerde()
    assert serde.deserialize(TOPIC, serde.serialize(TOPIC, number)) == number


@given(INT64)
def test_long_round_trips_the_64_bit_range(number: int) -> None:
    serde = LongSerde()
    assert serde.deserialize(TOPIC, serde.serialize(TOPIC, number)) == number


@given(st.floats())
def test_float_round_trips_every_double_bit_for_bit(number: float) -> None:
    serde = FloatSerde()
    decoded = serde.deserialize(TOPIC, serde.serialize(TOPIC, number))
    assert decoded is not None
    assert struct.pack(">d", decoded) == struct.pack(">d", number)  # NaN and -0.0 included


def test_float_serde_writes_ints_as_doubles() -> None:
    assert FloatSerde().serialize(TOPIC, 3) == struct.pack(">d", 3.0)


@given(JSON_VALUES)
def test_json_round_trips_any_json_value(value: Any) -> None:
    serde = JsonSerde()
    assert serde.deserialize(TOPIC, serde.serialize(TOPIC, value)) == value


@given(
    st.builds(
        Order,
        order_id=st.text(),
        customer=st.text(),
        qty=INT64,
        price=st.floats(allow_nan=False, allow_infinity=False),
        items=st.lists(st.builds(Item, sku=st.text(), count=INT64), max_size=3),
    )
)
def test_pydantic_model_round_trips(order: Order) -> None:
    serde = PydanticSerde(Order)
    assert serde.deserialize(TOPIC, serde.serialize(TOPIC, order)) == order


def test_pydantic_serde_writes_and_reads_aliases_as_the_wire_names() -> None:
    serde = PydanticSerde(AliasedOrder)
    order = AliasedOrder(orderId="o-1", unitPrice=2.5)
    encoded = serde.serialize(TOPIC, order)
    assert encoded == b'{"orderId":"o-1","unitPrice":2.5}'
    assert serde.deserialize(TOPIC, encoded) == order


def test_pydantic_serde_reads_json_written_by_another_producer() -> None:
    data = b' {"qty": 2, "price": 1, "customer": "acme", "order_id": "o-9", "extra": true} '
    assert PydanticSerde(Order).deserialize(TOPIC, data) == an_order(
        order_id="o-9", qty=2, price=1.0
    )


def test_pydantic_serde_writes_a_subclass_with_the_declared_models_fields() -> None:
    class DetailedOrder(Order):
        note: str = "internal"

    detailed = DetailedOrder(order_id="o-1", customer="acme", qty=3, price=9.5)
    encoded = PydanticSerde(Order).serialize(TOPIC, detailed)
    assert encoded is not None
    assert b"note" not in encoded
    assert PydanticSerde(Order).deserialize(TOPIC, encoded) == an_order()


def test_pydantic_serde_builds_a_deferred_model() -> None:
    class Deferred(BaseModel):
        model_config = ConfigDict(defer_build=True)
        x: int

    serde = PydanticSerde(Deferred)
    assert serde.deserialize(TOPIC, serde.serialize(TOPIC, Deferred(x=1))) == Deferred(x=1)


# --- Kafka wire compatibility -----------------------------------------------------------------


@given(INT32)
def test_int_serde_is_kafka_integer_serializer_4_bytes_big_endian(number: int) -> None:
    assert IntSerde().serialize(TOPIC, number) == struct.pack(">i", number)


@given(INT64)
def test_long_serde_is_kafka_long_serializer_8_bytes_big_endian(number: int) -> None:
    assert LongSerde().serialize(TOPIC, number) == struct.pack(">q", number)


@given(st.floats(allow_nan=False))
def test_float_serde_is_kafka_double_serializer_8_bytes_big_endian(number: float) -> None:
    assert FloatSerde().serialize(TOPIC, number) == struct.pack(">d", number)


# Bytes as Java's serializers write them (ByteBuffer order; Double.doubleToLongBits).
@pytest.mark.parametrize(
    ("serde", "value", "wire_hex"),
    [
        (IntSerde(), 1, "00000001"),
        (IntSerde(), -1, "ffffffff"),
        (IntSerde(), 2**31 - 1, "7fffffff"),
        (IntSerde(), -(2**31), "80000000"),
        (LongSerde(), 256, "0000000000000100"),
        (LongSerde(), -2, "fffffffffffffffe"),
        (LongSerde(), 2**63 - 1, "7fffffffffffffff"),
        (LongSerde(), -(2**63), "8000000000000000"),
        (FloatSerde(), 1.0, "3ff0000000000000"),
        (FloatSerde(), -2.0, "c000000000000000"),
        (FloatSerde(), 0.1, "3fb999999999999a"),
        (FloatSerde(), math.inf, "7ff0000000000000"),
        (StrSerde(), "é€", "c3a9e282ac"),
    ],
    ids=repr,
)
def test_fixed_vectors_match_the_java_serializers(
    serde: Serde[Any], value: Any, wire_hex: str
) -> None:
    assert serde.serialize(TOPIC, value) == bytes.fromhex(wire_hex)
    assert serde.deserialize(TOPIC, bytes.fromhex(wire_hex)) == value


# --- deserialization errors -------------------------------------------------------------------


def test_short_long_says_how_many_bytes_were_expected() -> None:
    error = decode_error(LongSerde(), b"\x00\x01\x02")
    assert error.reason == "expected 8 bytes for a long (Kafka LongSerializer), got 3"
    assert (error.topic, error.partition, error.offset, error.field) == (TOPIC, -1, -1, "value")


def test_wrong_width_suggests_the_serde_that_fits() -> None:
    assert "use LongSerde" in decode_error(IntSerde(), bytes(8)).reason
    assert "use IntSerde" in decode_error(LongSerde(), bytes(4)).reason
    assert decode_error(FloatSerde(), b"").reason == (
        "expected 8 bytes for a double (Kafka DoubleSerializer), got 0"
    )


def test_malformed_utf8_names_the_byte() -> None:
    error = decode_error(StrSerde(), b"ok\xff")
    assert error.reason.startswith("invalid UTF-8 at byte 2 of 3: invalid start byte")


def test_malformed_json_is_a_deserialization_error() -> None:
    assert decode_error(JsonSerde(), b'{"a": ').reason.startswith("invalid JSON: ")


def test_wrong_types_for_the_model_are_summarised_on_one_line() -> None:
    data = b'{"order_id": "o-1", "qty": "three", "items": [{}]}'
    error = decode_error(PydanticSerde(Order), data)
    assert error.reason == (
        "not a valid Order: customer: Field required; "
        "qty: Input should be a valid integer, unable to parse string as an integer; "
        "price: Field required; items[0].sku: Field required; items[0].count: Field required"
    )
    assert "\n" not in str(error)


def test_many_model_errors_are_cut_short() -> None:
    data = b'{"items": [{}, {}, {}]}'
    assert decode_error(PydanticSerde(Order), data).reason.endswith("; and 5 more")


def test_malformed_json_for_a_model_is_a_deserialization_error() -> None:
    error = decode_error(PydanticSerde(Order), b"\xff{")
    assert error.reason.startswith("not a valid Order: Invalid JSON: ")


def test_a_non_object_for_a_model_says_so() -> None:
    error = decode_error(PydanticSerde(Order), b"[1, 2]")
    assert error.reason == "not a valid Order: Input should be an object"


def test_a_buggy_user_validator_still_gives_a_deserialization_error() -> None:
    serde = PydanticSerde(PickyOrder)
    assert serde.deserialize(TOPIC, b'{"sku": "known"}') == PickyOrder(sku="known")
    error = decode_error(serde, b'{"sku": "other"}')
    assert error.reason == "a validator of PickyOrder raised KeyError: 'other'"
    assert isinstance(error.__cause__, KeyError)


@pytest.mark.parametrize("serde", ALL_SERDES, ids=repr)
@given(data=st.binary(max_size=64))
def test_random_bytes_decode_or_raise_only_deserialization_error(
    serde: Serde[Any], data: bytes
) -> None:
    try:
        serde.deserialize(TOPIC, data)
    except DeserializationError as error:
        assert error.topic == TOPIC
        assert error.reason


@given(data=JSON_VALUES.map(lambda value: JsonSerde().serialize(TOPIC, value) or b"null"))
def test_any_json_for_a_model_validates_or_raises_only_deserialization_error(
    data: bytes,
) -> None:
    try:
        PydanticSerde(Order).deserialize(TOPIC, data)
    except DeserializationError as error:
        assert error.reason.startswith("not a valid Order: ")


# --- shortcuts: what the engine calls instead of the methods ---------------------------------

WITH_SHORTCUTS = [serde for serde in ALL_SERDES if any(shortcuts(serde))]
ANY_VALUE = JSON_VALUES | st.binary(max_size=16) | st.builds(an_order, qty=INT32)


def test_the_common_serdes_have_shortcuts() -> None:
    assert {type(serde) for serde in WITH_SHORTCUTS} == {BytesSerde, StrSerde, JsonSerde,
                                                         PydanticSerde}


def test_a_subclass_overriding_a_method_loses_that_methods_shortcut_only() -> None:
    class Shouting(StrSerde):
        def deserialize(self, topic: str, data: bytes | None) -> str | None:
            text = super().deserialize(topic, data)
            return None if text is None else text.upper()

    fast_deserialize, fast_serialize = shortcuts(Shouting())
    assert fast_deserialize is None  # the engine must call Shouting.deserialize
    assert fast_serialize is not None and fast_serialize("a") == b"a"


def test_a_custom_serde_gives_shortcuts_of_its_own() -> None:
    class Latin1:
        fast_deserialize = staticmethod(lambda data: data.decode("latin-1"))

        def serialize(self, topic: str, value: str | None) -> bytes | None:
            return None if value is None else value.encode("latin-1")

        def deserialize(self, topic: str, data: bytes | None) -> str | None:
            return None if data is None else data.decode("latin-1")

    class OnTheInstance(Latin1):
        def __init__(self) -> None:
            self.fast_serialize = lambda value: value.encode("latin-1")

    assert shortcuts(Latin1())[0] is not None
    assert shortcuts(Latin1())[1] is None
    assert all(f is not None for f in shortcuts(OnTheInstance()))


def assert_agrees(method: Callable[[str, Any], Any], fast: Callable[[Any], Any] | None,
                  arg: Any, error: type[Exception]) -> None:
    """``fast(arg)`` returns what ``method(TOPIC, arg)`` returns, or raises (anything: the
    engine then calls the method) where the method raises ``error``."""
    assert fast is not None
    try:
        expected = method(TOPIC, arg)
    except error:
        with pytest.raises(Exception):  # noqa: B017 - any exception sends the engine to the method
            fast(arg)
    else:
        assert fast(arg) == expected


@pytest.mark.parametrize("serde", WITH_SHORTCUTS, ids=repr)
@given(data=st.binary(max_size=64) | JSON_VALUES.map(lambda v: JsonSerde().serialize(TOPIC, v)
                                                    or b"null"))
def test_fast_deserialize_returns_what_deserialize_does_or_raises_where_it_does(
    serde: Serde[Any], data: bytes
) -> None:
    assert_agrees(serde.deserialize, shortcuts(serde)[0], data, DeserializationError)


@pytest.mark.parametrize("serde", [s for s in WITH_SHORTCUTS if shortcuts(s)[1]], ids=repr)
@given(value=ANY_VALUE.filter(lambda v: v is not None) | st.text())
def test_fast_serialize_returns_what_serialize_does_or_raises_where_it_does(
    serde: Serde[Any], value: Any
) -> None:
    assert_agrees(serde.serialize, shortcuts(serde)[1], value, SerializationError)


# --- DeserializationError.at ------------------------------------------------------------------


def test_at_fills_in_where_the_record_came_from() -> None:
    error = decode_error(LongSerde(), b"\x01")
    located = error.at(3, 42, "key")
    assert (located.topic, located.partition, located.offset, located.field) == (
        TOPIC, 3, 42, "key"
    )
    assert located.reason == error.reason
    assert str(located) == f"cannot deserialize the key of {TOPIC}[3]@42: {error.reason}"
    assert error.partition == -1  # the original is left as it was


def test_at_keeps_the_field_and_the_decoders_cause() -> None:
    error = decode_error(PydanticSerde(Order), b"{}")
    try:
        raise error.at(0, 7)
    except DeserializationError as located:
        assert located.field == "value"
        assert located.__cause__ is error.__cause__
        assert located.__suppress_context__


# --- serialization errors ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("serde", "value", "reason"),
    [
        (StrSerde(), 5, "StrSerde takes a str, got int; convert it with str() or declare "
                        "the topic with a serde for that type"),
        (IntSerde(), "5", "IntSerde takes an int, got str"),
        (IntSerde(), 2**31, "IntSerde takes an int in [-2147483648, 2147483647], got "
                            "2147483648; use LongSerde (key=int / value=int) for 64-bit values"),
        (LongSerde(), -(2**63) - 1, "LongSerde takes an int in [-9223372036854775808, "
                                    "9223372036854775807], got -9223372036854775809; write it "
                                    "as str or in a JSON/pydantic value instead"),
        (LongSerde(), 1.5, "LongSerde takes an int, got float"),
        (FloatSerde(), "1.5", "FloatSerde takes a float, got str"),
        (FloatSerde(), 10**400, "1000000000000000000000000000000000000000000000000000000"
                                "00... is too large for a double (max about 1.8e308)"),
        (JsonSerde(), {1: "a"}, "cannot write dict as JSON: Dict key must be str"),
        (JsonSerde(), 2**64, "cannot write int as JSON: Integer exceeds 64-bit range"),
        (JsonSerde(), object(), "cannot write object as JSON: Type is not JSON serializable: "
                                "object"),
        (BytesSerde(), "text", "BytesSerde takes bytes, got str; declare the topic with "
                               "key=str or value=str to write text, or another serde for "
                               "other types"),
        (PydanticSerde(Order), {"order_id": "o-1"}, "PydanticSerde(Order) takes Order "
                                                    "instances, got dict; build one with "
                                                    "Order(...) or Order.model_validate(...)"),
    ],
    ids=lambda param: re.sub(r" at 0x[0-9a-f]+", "", repr(param))[:30],  # same in every process
)
def test_unencodable_values_raise_serialization_error_saying_what_fits(
    serde: Serde[Any], value: Any, reason: str
) -> None:
    assert str(encode_error(serde, value)) == reason


def test_lone_surrogate_cannot_be_written_as_utf8() -> None:
    assert "as UTF-8: surrogates not allowed at index 1" in str(encode_error(StrSerde(), "a\ud800"))


def test_mistyped_model_fields_fail_to_serialize_when_warnings_are_errors() -> None:
    unvalidated = Order.model_construct(order_id="o-1", customer="acme", qty="three", price=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        error = encode_error(PydanticSerde(Order), unvalidated)
    assert str(error).startswith("cannot write Order: ")


# --- serde_for --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (bytes, BytesSerde()),
        (str, StrSerde()),
        (int, LongSerde()),
        (float, FloatSerde()),
        (dict, JsonSerde()),
        (list, JsonSerde()),
        ("json", JsonSerde()),
        (None, BytesSerde()),
        (Order, PydanticSerde(Order)),
    ],
    ids=repr,
)
def test_serde_for_resolves_what_users_write(spec: object, expected: Serde[Any]) -> None:
    resolved = serde_for(spec)
    assert resolved == expected
    assert type(resolved) is type(expected)


def test_serde_for_returns_a_serde_instance_as_is() -> None:
    class Upper:
        def serialize(self, topic: str, value: str | None) -> bytes | None:
            return None if value is None else value.upper().encode()

        def deserialize(self, topic: str, data: bytes | None) -> str | None:
            return None if data is None else data.decode()

    for serde in (IntSerde(), PydanticSerde(Order), Upper()):
        assert serde_for(serde) is serde


def test_pydantic_serdes_are_equal_for_the_same_model_only() -> None:
    assert PydanticSerde(Order) == PydanticSerde(Order)
    assert PydanticSerde(Order) != PydanticSerde(Nothing)
    assert len({PydanticSerde(Order), PydanticSerde(Order), StrSerde(), StrSerde()}) == 2


@pytest.mark.parametrize(
    ("spec", "named", "hint"),
    [
        (bool, "no serde for bool; ", ""),
        (42, "no serde for 42; ", ""),
        ("str", "no serde for 'str' ", "the only name accepted is 'json'; pass types themselves"),
        (StrSerde, "no serde for StrSerde ", "that is a serde class; pass an instance: StrSerde()"),
        (an_order(), "no serde for Order(", "that is an instance of Order; pass the class: Order"),
        (dict[str, int], "no serde for dict[str, int] ", "item types would go unchecked"),
    ],
    ids=repr,
)
def test_serde_for_rejects_anything_else_naming_it_and_the_choices(
    spec: object, named: str, hint: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        serde_for(spec)
    message = str(caught.value)
    assert message.startswith(named)
    assert hint in message
    assert message.endswith(
        "; accepted: bytes, str, int (a Kafka long), float (a Kafka double), dict, list or "
        "'json' (any JSON), a pydantic BaseModel subclass, a serde instance such as IntSerde(), "
        "or None (raw bytes)"
    )


def test_a_model_with_an_undefined_type_is_a_config_error_saying_to_rebuild() -> None:
    class Pending(BaseModel):
        later: Later  # type: ignore[name-defined]  # noqa: F821

    with pytest.raises(ConfigError, match=r"Pending is not fully defined .*Pending.model_rebuild"):
        serde_for(Pending)


def test_pydantic_serde_rejects_what_is_not_a_model() -> None:
    with pytest.raises(ConfigError, match="PydanticSerde takes a pydantic BaseModel subclass"):
        PydanticSerde(dict)  # type: ignore[type-var]
