"""An Avro record schema for a pydantic model, where the mapping is natural.

=====================================  ==========================================
pydantic field type                    Avro type
=====================================  ==========================================
``str`` / ``int`` / ``float``          ``string`` / ``long`` / ``double``
``bool`` / ``bytes``                   ``boolean`` / ``bytes``
``X | None``                           ``["null", X]`` with default ``null``
``list[X]`` / ``dict[str, X]``         ``array`` / ``map``
a nested ``BaseModel``                 a nested ``record`` (named once, then by name)
an ``enum.Enum`` of strings            ``enum``
=====================================  ==========================================

A field default that is JSON-like becomes the Avro default. Anything else (unions of several
types, ``datetime``, ``Decimal``...) is a :class:`ValueError` naming the field: write the
Avro schema by hand for those.

The record's name is the model's class name unless ``name`` says otherwise. Avro readers
resolve a writer's record against theirs by its full name, and the ``record_name``
subject strategies use it as the subject: renaming the class is therefore an
incompatible schema change. Pin the name (``name="com.acme.Order"``) to rename classes
freely.
"""

from __future__ import annotations

import enum
import re
import types
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

__all__ = ["avro_schema_for", "avro_value"]

_AVRO_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
"""An Avro full name: dot-separated names of letters, digits and underscores."""

_PRIMITIVES: dict[Any, str] = {str: "string", int: "long", float: "double", bool: "boolean",
                               bytes: "bytes"}


def _avro_type(annotation: Any, where: str, named: set[str], namespace: str) -> Any:
    if annotation in _PRIMITIVES:
        return _PRIMITIVES[annotation]
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1 and len(get_args(annotation)) == 2:
            return ["null", _avro_type(args[0], where, named, namespace)]
        raise ValueError(f"{where}: the union {annotation} has no natural Avro form; write "
                         "the Avro schema by hand")
    if origin is list:
        (item,) = get_args(annotation)
        return {"type": "array", "items": _avro_type(item, where, named, namespace)}
    if origin is dict:
        key, item = get_args(annotation)
        if key is not str:
            raise ValueError(f"{where}: Avro maps have string keys, not {key}")
        return {"type": "map", "values": _avro_type(item, where, named, namespace)}
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _record(annotation, named, "")
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        if annotation.__name__ in named:
            return annotation.__name__
        named.add(annotation.__name__)
        return {"type": "enum", "name": annotation.__name__,
                "symbols": [str(member.value) for member in annotation]}
    raise ValueError(f"{where}: {annotation} has no natural Avro type; write the Avro schema "
                     "by hand")


def _record(model: type[BaseModel], named: set[str], namespace: str,
            name: str | None = None) -> Any:
    if model.__name__ in named:
        return model.__name__
    named.add(model.__name__)
    fields = []
    for field_name, info in model.model_fields.items():
        where = f"{model.__name__}.{field_name}"
        field: dict[str, Any] = {"name": field_name,
                                 "type": _avro_type(info.annotation, where, named, namespace)}
        if info.default is not PydanticUndefined:
            default = info.default
            if isinstance(default, enum.Enum):
                default = default.value
            elif isinstance(default, bytes):  # Avro writes a bytes default as code points
                default = default.decode("latin-1")
            field["default"] = default
        fields.append(field)
    record: dict[str, Any] = {"type": "record", "name": name or model.__name__,
                              "fields": fields}
    if namespace:
        record["namespace"] = namespace
    return record


def avro_schema_for(model: type[BaseModel], namespace: str = "",
                    name: str | None = None) -> dict[str, Any]:
    """The Avro record schema of ``model`` (see the module docstring for the mapping),
    named ``name`` (a simple name, or a full name ``com.acme.Order`` that also sets the
    namespace) or else after the class. Raises ``ValueError`` for a name Avro refuses."""
    if name is not None:
        if not _AVRO_NAME.fullmatch(name):
            raise ValueError(f"Avro record name {name!r} is not a valid Avro name: use "
                             "letters, digits and underscores, dot-separated for a "
                             "namespace, e.g. 'com.acme.Order'")
        if "." in name:
            if namespace:
                raise ValueError(f"Avro record name {name!r} already has a namespace; do "
                                 f"not also pass namespace={namespace!r}")
            namespace, name = name.rsplit(".", 1)
    schema: dict[str, Any] = _record(model, set(), namespace, name)
    return schema


def avro_value(model: BaseModel) -> dict[str, Any]:
    """``model`` as the datum fastavro writes with :func:`avro_schema_for`'s schema: its
    ``model_dump()`` with enum members replaced by their values."""
    def plain(value: Any) -> Any:
        if isinstance(value, enum.Enum):
            return value.value
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, list):
            return [plain(v) for v in value]
        return value
    datum: dict[str, Any] = plain(model.model_dump())
    return datum
