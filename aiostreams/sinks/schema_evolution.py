"""Whether a sink's schema can append to a dataset written before: checked at start, before
anything is written, so a changed model never leaves files that no reader can read together.

Rules, per column (recursively inside structs, with the field's path in the error):

* a column in both must have the same type, up to how a writer spells nullability and the
  names of list items and map entries (Spark and pyarrow differ there); ``int`` → ``str``,
  ``int`` → ``float``, a changed decimal scale, ... are refused;
* a column new in the model must be nullable (``X | None``): the rows written before read
  back as null;
* a column only in the dataset is allowed (earlier rows keep it; new ones have none).

Partition columns are not in the files (they are directory names) and are not compared.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from aiostreams.errors import ConfigError

__all__ = ["IncompatibleSchemaError", "check_appendable"]


class IncompatibleSchemaError(ConfigError):
    """The model's schema cannot append to the dataset's existing files."""


def _spelling_free(t: pa.DataType) -> pa.DataType:
    """``t`` with nullability and list/map child names normalized."""
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _spelling_free(f.type)) for f in t])
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(pa.field("element", _spelling_free(t.value_type)))
    if pa.types.is_map(t):
        return pa.map_(_spelling_free(t.key_type), _spelling_free(t.item_type))
    if pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_large_binary(t):
        return pa.binary()
    return t


def _problems(existing: Sequence[pa.Field], wanted: Sequence[pa.Field], path: str
              ) -> list[str]:
    found = {f.name: f for f in existing}
    out: list[str] = []
    for field in wanted:
        where = f"{path}.{field.name}"
        old = found.get(field.name)
        if old is None:
            if not field.nullable:
                out.append(f"{where} is new and required; rows written before have no "
                           "value for it: make it optional (X | None)")
            continue
        if pa.types.is_struct(old.type) and pa.types.is_struct(field.type):
            out.extend(_problems(list(old.type), list(field.type), where))
        elif _spelling_free(old.type) != _spelling_free(field.type):
            out.append(f"{where} is {old.type} in the dataset and {field.type} in the model")
    return out


def check_appendable(existing: pa.Schema, wanted: pa.Schema, *, model: str, dataset: str,
                     partition_by: Sequence[str] = ()) -> None:
    """Raise :class:`IncompatibleSchemaError` naming every field of ``wanted`` (the sink's
    schema) that cannot append to files of schema ``existing``."""
    fields = [f for f in wanted if f.name not in partition_by]
    problems = _problems(list(existing), fields, model)
    if problems:
        raise IncompatibleSchemaError(
            f"the model no longer fits the dataset at {dataset}: {'; '.join(problems)}. "
            "Nothing was written. Revert the change, write the new schema to a new path, or "
            "rewrite the dataset with the new types")
