"""Compiling a pydantic model (or one field's type) into the typed nodes of
:mod:`aiostreams.sinks.schema_nodes`, by the type table of :mod:`aiostreams.sinks.schema`.

Anything without a Parquet type (``Any``, unions of several types, sets, recursive models,
fixed-size tuples, maps with non-plain values, ...) is a
:class:`~aiostreams.errors.ConfigError` naming the field's path, raised here, when the
schema is built, never when data flows.
"""

from __future__ import annotations

import datetime as dt
import enum
import types
import uuid
from collections.abc import Sequence
from decimal import Decimal
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import pyarrow as pa
from pydantic import BaseModel

from aiostreams.errors import ConfigError
from aiostreams.sinks.schema_nodes import (
    LEAVES,
    DecimalNode,
    Leaf,
    ListNode,
    MapNode,
    Node,
    StructNode,
    TextNode,
)

__all__ = ["DEFAULT_DECIMAL", "compile_model", "compile_type", "decimal_type"]

DEFAULT_DECIMAL = (38, 18)
"""``decimal128(38, 18)``: a ``Decimal`` without ``max_digits``/``decimal_places``."""

_MAX_PRECISION = 38


def decimal_type(max_digits: int | None, decimal_places: int | None) -> pa.Decimal128Type:
    """The Arrow type of a ``Decimal`` field: ``decimal128(max_digits, decimal_places)`` when
    both are set; ``decimal128(38, decimal_places)`` with only the places; with only
    ``max_digits``, ``decimal128(38, min(max_digits, 18))``; else :data:`DEFAULT_DECIMAL`.
    Values that do not fit (more fractional digits than the scale, or too many integer
    digits) fail :meth:`RowSchema.check`: they are never rounded."""
    if max_digits is not None and not 1 <= max_digits <= _MAX_PRECISION:
        raise ConfigError(f"max_digits={max_digits} is outside Parquet's decimal128 range 1..38")
    if decimal_places is not None and decimal_places < 0:
        raise ConfigError(f"decimal_places={decimal_places} must be >= 0")
    if max_digits is not None and decimal_places is not None:
        if decimal_places > max_digits:
            raise ConfigError(f"decimal_places={decimal_places} exceeds max_digits={max_digits}")
        return pa.decimal128(max_digits, decimal_places)
    if decimal_places is not None:
        return pa.decimal128(_MAX_PRECISION, min(decimal_places, _MAX_PRECISION))
    if max_digits is not None:
        return pa.decimal128(_MAX_PRECISION, min(max_digits, DEFAULT_DECIMAL[1]))
    return pa.decimal128(*DEFAULT_DECIMAL)


def compile_type(tp: Any, path: str, metadata: Sequence[Any], stack: tuple[type, ...]) -> Node:
    """The node of type ``tp`` at ``path`` (``metadata``: the field's pydantic
    constraints; ``stack``: the models being compiled, to refuse recursion)."""
    origin = get_origin(tp)
    if origin is Annotated:
        inner, *extra = get_args(tp)
        more: list[Any] = list(metadata)
        for item in extra:
            more.append(item)
            more.extend(getattr(item, "metadata", ()) or ())
        return compile_type(inner, path, more, stack)
    if origin is Union or origin is types.UnionType:
        args = get_args(tp)
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1 and len(args) == 2:
            return compile_type(rest[0], path, metadata, stack).optional()
        raise ConfigError(
            f"{path}: the union {_name(tp)} has no Parquet type; use one type, optionally "
            "with None (X | None), or a nested model")
    if origin is Literal:
        kinds = {type(a) for a in get_args(tp)}
        for kind in (bool, int, str):
            if kinds == {kind}:
                arrow, accepts, expected = LEAVES[kind]
                return Leaf(arrow, accepts, expected)
        raise ConfigError(f"{path}: {_name(tp)} mixes value types; a Literal must be all str, "
                          "all int or all bool to have a Parquet type")
    if origin in (list, tuple, Sequence):
        args = get_args(tp)
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            raise ConfigError(f"{path}: fixed-size tuples ({_name(tp)}) have no Parquet type; "
                              "use tuple[X, ...], list[X] or a nested model")
        if not args:
            raise ConfigError(f"{path}: give the item type: list[X], not a bare list")
        return ListNode(compile_type(args[0], f"{path}[]", (), stack))
    if origin is dict:
        args = get_args(tp)
        if len(args) != 2:
            raise ConfigError(f"{path}: give the key and value types: dict[str, X]")
        key = compile_type(args[0], f"{path}<key>", (), stack)
        if key.arrow not in (pa.string(), pa.int64()) or key.nullable or not key.plain:
            raise ConfigError(f"{path}: map keys must be str or int, got {_name(args[0])}")
        value = compile_type(args[1], f"{path}[]", (), stack)
        if not value.plain:
            raise ConfigError(f"{path}: map values must be plain types (no model, enum or "
                              f"UUID), got {_name(args[1])}; use list[NestedModel] instead")
        return MapNode(key, value)
    if origin is not None:
        raise ConfigError(f"{path}: {_name(tp)} has no Parquet type")
    if not isinstance(tp, type):
        raise ConfigError(f"{path}: {_name(tp)} has no Parquet type")
    if issubclass(tp, BaseModel):
        return compile_model(tp, path, stack)
    if issubclass(tp, enum.Enum):
        lookup: dict[Any, str] = {}
        for member in tp:
            text = member.value if isinstance(member.value, str) else member.name
            lookup[member] = text
        for member in tp:
            lookup.setdefault(member.value, lookup[member])  # models with use_enum_values
        return TextNode(lookup, None, f"a member of {tp.__name__}")
    if issubclass(tp, uuid.UUID):
        return TextNode(None, _uuid_text, "a UUID")
    if issubclass(tp, Decimal):
        places, digits = _decimal_constraints(metadata)
        try:
            return DecimalNode(decimal_type(digits, places))
        except ValueError as e:
            raise ConfigError(f"{path}: {e}") from None
    for python_type in (bool, dt.datetime, dt.date, int, float, str, bytes):
        if issubclass(tp, python_type) and not (python_type is int and tp is bool):
            arrow, accepts, expected = LEAVES[python_type]
            return Leaf(arrow, accepts, expected)
    raise ConfigError(
        f"{path}: {_name(tp)} has no Parquet type; supported: bool, int, float, str, bytes, "
        "datetime, date, Decimal, Enum, UUID, Literal, nested models, list, dict, Optional")


def _uuid_text(value: Any) -> str:
    if not isinstance(value, uuid.UUID):
        raise TypeError(value)
    return str(value)


def _decimal_constraints(metadata: Sequence[Any]) -> tuple[int | None, int | None]:
    places = digits = None
    for item in metadata:
        places = getattr(item, "decimal_places", None) if places is None else places
        digits = getattr(item, "max_digits", None) if digits is None else digits
    return places, digits


def compile_model(model: type[BaseModel], path: str, stack: tuple[type, ...]) -> StructNode:
    """The struct node of ``model``'s fields, at ``path``."""
    if model in stack:
        raise ConfigError(f"{path}: {model.__name__} contains itself; recursive models have no "
                          "fixed Parquet schema")
    if not model.__pydantic_complete__:
        model.model_rebuild()
    names: list[str] = []
    nodes: list[Node] = []
    for name, info in model.model_fields.items():
        node = compile_type(info.annotation, f"{path}.{name}", info.metadata, (*stack, model))
        names.append(name)
        nodes.append(node)
    return StructNode(model, names, nodes)


def _name(tp: Any) -> str:
    return tp.__name__ if isinstance(tp, type) else str(tp).replace("typing.", "")
