"""A pydantic model as a topic's serde: validated when read, written with its serializer.

Re-exported by :mod:`aiostreams.serde` (and the package), where :func:`~aiostreams.serde.
serde_for` picks it for a ``BaseModel`` subclass; the failure contract is that module's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, Generic, TypeVar

from pydantic import BaseModel, PydanticUndefinedAnnotation, ValidationError
from pydantic_core import PydanticSerializationError

from aiostreams.errors import ConfigError, DeserializationError, SerializationError, short_repr

__all__ = ["PydanticSerde"]

M = TypeVar("M", bound=BaseModel)

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
                f"PydanticSerde takes a pydantic BaseModel subclass, got {short_repr(model_cls)}"
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
