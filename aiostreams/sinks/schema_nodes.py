"""The typed nodes of a :class:`~aiostreams.sinks.schema.RowSchema`: one per field (and per
list item, map key and value), each knowing its Arrow type, how to check a Python value
against it, and how to build an Arrow column from many values.

Invariant (the schema's): a value that passes :meth:`Node.check` converts in
:meth:`Node.build` without error and without loss (no rounding, no truncation, no
overflow). Columns are built column by column from the models' attributes (``pa.array``
per leaf column, ``StructArray``/``ListArray`` assembled around them).

:class:`SchemaMismatch` is defined here, below the nodes that raise it, and belongs to
:mod:`aiostreams.sinks.schema` (its ``__module__``, which dead-letter headers name).
"""

from __future__ import annotations

import copy
import datetime as dt
import operator
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

import pyarrow as pa
from pydantic import BaseModel

__all__ = [
    "LEAVES",
    "TIMESTAMP",
    "DecimalNode",
    "Leaf",
    "ListNode",
    "MapNode",
    "Node",
    "SchemaMismatch",
    "StructNode",
    "TextNode",
]

TIMESTAMP = pa.timestamp("us", tz="UTC")

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class SchemaMismatch(ValueError):
    """A value does not fit the Arrow schema. ``path`` names the field (``Order.addr.zip``,
    ``Order.tags[3]``); ``reason`` says what was expected."""

    # Its public home: dead-letter headers name an error by module and class, and this
    # one has always been aiostreams.sinks.schema.SchemaMismatch.
    __module__ = "aiostreams.sinks.schema"

    def __init__(self, reason: str, path: str = "") -> None:
        super().__init__(reason, path)
        self.reason = reason
        self.path = path

    def within(self, prefix: str) -> SchemaMismatch:
        """This mismatch, seen from the field or item ``prefix`` that contains it."""
        if not self.path or self.path.startswith("["):
            path = prefix + self.path
        else:
            path = f"{prefix}.{self.path}"
        return SchemaMismatch(self.reason, path)

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}" if self.path else self.reason


class Node:
    """One typed position in the schema. ``plain``: ``pa.array`` converts its Python values
    as they are (no enum, model or UUID inside), so a column of it is built in one call."""

    __slots__ = ("arrow", "nullable", "plain")

    def __init__(self, arrow: pa.DataType, nullable: bool, plain: bool) -> None:
        self.arrow = arrow
        self.nullable = nullable
        self.plain = plain

    def optional(self) -> Node:
        twin = copy.copy(self)
        twin.nullable = True
        return twin

    def check(self, value: Any) -> None:
        """Raise :class:`SchemaMismatch` (with a path relative to this node) unless
        ``value`` converts exactly."""
        if value is None:
            if not self.nullable:
                raise SchemaMismatch("is None, but the field is not Optional")
            return
        self._check(value)

    def _check(self, value: Any) -> None:
        raise NotImplementedError

    def build(self, values: list[Any]) -> pa.Array:
        return pa.array(values, type=self.arrow)


class Leaf(Node):
    __slots__ = ("accepts", "expected")

    def __init__(self, arrow: pa.DataType, accepts: Callable[[Any], bool], expected: str,
                 nullable: bool = False) -> None:
        super().__init__(arrow, nullable, plain=True)
        self.accepts = accepts
        self.expected = expected

    def _check(self, value: Any) -> None:
        if not self.accepts(value):
            raise SchemaMismatch(f"expected {self.expected}, got {_describe(value)}")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and _INT64_MIN <= v <= _INT64_MAX


def _is_float(v: Any) -> bool:
    return isinstance(v, float) or (isinstance(v, int) and not isinstance(v, bool))


def _is_utf8(v: Any) -> bool:
    if not isinstance(v, str):
        return False
    if v.isascii():
        return True
    try:
        v.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates
        return False
    return True


def _is_date(v: Any) -> bool:
    return isinstance(v, dt.date) and not isinstance(v, dt.datetime)


LEAVES: dict[type, tuple[pa.DataType, Callable[[Any], bool], str]] = {
    bool: (pa.bool_(), lambda v: isinstance(v, bool), "a bool"),
    int: (pa.int64(), _is_int, "an int within 64 bits"),
    float: (pa.float64(), _is_float, "a float"),
    str: (pa.string(), _is_utf8, "a str encodable as UTF-8"),
    bytes: (pa.binary(), lambda v: isinstance(v, bytes | bytearray), "bytes"),
    dt.datetime: (TIMESTAMP, lambda v: isinstance(v, dt.datetime), "a datetime"),
    dt.date: (pa.date32(), _is_date, "a date"),
}


class DecimalNode(Node):
    __slots__ = ("precision", "scale")

    def __init__(self, arrow: pa.Decimal128Type) -> None:
        super().__init__(arrow, False, plain=True)
        self.precision: int = arrow.precision
        self.scale: int = arrow.scale

    def _check(self, value: Any) -> None:
        if not isinstance(value, Decimal):
            raise SchemaMismatch(f"expected a Decimal, got {_describe(value)}")
        if not value.is_finite():
            raise SchemaMismatch(f"{value} cannot be stored in a Parquet decimal")
        _, digits, exponent = value.as_tuple()
        assert isinstance(exponent, int)
        n = len(digits)
        # trailing zeros past the scale are not data: Decimal("1.20") fits a scale of 1
        while exponent < -self.scale and n > 1 and digits[n - 1] == 0:
            n -= 1
            exponent += 1
        if exponent < -self.scale:
            raise SchemaMismatch(
                f"{value} has more than {self.scale} decimal places (the column is "
                f"decimal({self.precision}, {self.scale})); round it first or raise "
                "decimal_places")
        integer_digits = 0 if digits == (0,) else max(0, n + exponent)
        if integer_digits > self.precision - self.scale:
            raise SchemaMismatch(
                f"{value} has more than {self.precision - self.scale} integer digits "
                f"(the column is decimal({self.precision}, {self.scale})); raise max_digits")


class TextNode(Node):
    """Values turned into strings: enum members (and their raw values, for models with
    ``use_enum_values``) and UUIDs."""

    __slots__ = ("expected", "lookup", "to_text")

    def __init__(self, lookup: Mapping[Any, str] | None, to_text: Callable[[Any], str] | None,
                 expected: str) -> None:
        super().__init__(pa.string(), False, plain=False)
        self.lookup: dict[Any, str] | None = dict(lookup) if lookup is not None else None
        self.to_text: Callable[[Any], str] | None = to_text
        self.expected = expected

    def _convert(self, value: Any) -> str:
        if self.lookup is not None:
            return self.lookup[value]
        assert self.to_text is not None
        return self.to_text(value)

    def _check(self, value: Any) -> None:
        try:
            self._convert(value)
        except (KeyError, TypeError, AttributeError):
            raise SchemaMismatch(f"expected {self.expected}, got {_describe(value)}") from None

    def build(self, values: list[Any]) -> pa.Array:
        convert = self._convert
        return pa.array([None if v is None else convert(v) for v in values], type=pa.string())


class ListNode(Node):
    __slots__ = ("item",)

    def __init__(self, item: Node) -> None:
        super().__init__(pa.list_(pa.field("element", item.arrow, nullable=item.nullable)),
                         False, plain=item.plain)
        self.item = item

    def _check(self, value: Any) -> None:
        if not isinstance(value, list | tuple):
            raise SchemaMismatch(f"expected a list, got {_describe(value)}")
        check = self.item.check
        for i, item in enumerate(value):
            try:
                check(item)
            except SchemaMismatch as e:
                raise e.within(f"[{i}]") from None

    def build(self, values: list[Any]) -> pa.Array:
        if self.plain:
            return pa.array(values, type=self.arrow)
        offsets = [0]
        flat: list[Any] = []
        nulls = [v is None for v in values]
        for v in values:
            if v is not None:
                flat.extend(v)
            offsets.append(len(flat))
        mask = pa.array(nulls, type=pa.bool_()) if any(nulls) else None
        return pa.ListArray.from_arrays(pa.array(offsets, type=pa.int32()),
                                        self.item.build(flat), type=self.arrow, mask=mask)


class MapNode(Node):
    __slots__ = ("key", "value")

    def __init__(self, key: Node, value: Node) -> None:
        super().__init__(pa.map_(key.arrow, pa.field("value", value.arrow,
                                                     nullable=value.nullable)),
                         False, plain=True)
        self.key = key
        self.value = value

    def _check(self, value: Any) -> None:
        if not isinstance(value, dict):
            raise SchemaMismatch(f"expected a dict, got {_describe(value)}")
        for k, v in value.items():
            try:
                self.key.check(k)
            except SchemaMismatch as e:
                raise e.within("<key>") from None
            try:
                self.value.check(v)
            except SchemaMismatch as e:
                raise e.within(f"[{k!r}]") from None


class StructNode(Node):
    __slots__ = ("fields", "getters", "model", "names", "nodes")

    def __init__(self, model: type[BaseModel], names: list[str], nodes: list[Node]) -> None:
        fields = [pa.field(n, node.arrow, nullable=node.nullable)
                  for n, node in zip(names, nodes, strict=True)]
        super().__init__(pa.struct(fields), False, plain=False)
        self.model = model
        self.names = names
        self.nodes = nodes
        self.fields = fields
        self.getters = [operator.attrgetter(n) for n in names]

    def _check(self, value: Any) -> None:
        if not isinstance(value, self.model):
            raise SchemaMismatch(f"expected a {self.model.__name__}, got {_describe(value)}")
        for get, node in zip(self.getters, self.nodes, strict=True):
            try:
                node.check(get(value))
            except AttributeError:
                raise SchemaMismatch("is missing").within(self._name_of(get)) from None
            except SchemaMismatch as e:
                raise e.within(self._name_of(get)) from None

    def _name_of(self, getter: operator.attrgetter[Any]) -> str:
        return self.names[self.getters.index(getter)]

    def columns(self, values: list[Any]) -> list[pa.Array]:
        """One array per field, from values none of which is None."""
        return [node.build(list(map(get, values)))
                for get, node in zip(self.getters, self.nodes, strict=True)]

    def build(self, values: list[Any]) -> pa.Array:
        nulls = [v is None for v in values]
        if any(nulls):
            placeholder = _Placeholder()
            present = [placeholder if v is None else v for v in values]
            children = [node.build([None if v is placeholder else get(v) for v in present])
                        for get, node in zip(self.getters, self.nodes, strict=True)]
            mask = pa.array(nulls, type=pa.bool_())
        else:
            children = self.columns(values)
            mask = None
        if not self.fields:
            return pa.array([None if n else {} for n in nulls], type=self.arrow)
        return pa.StructArray.from_arrays(children, fields=self.fields, mask=mask)


class _Placeholder:
    __slots__ = ()


def _describe(value: Any) -> str:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"
