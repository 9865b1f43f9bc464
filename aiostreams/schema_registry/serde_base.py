"""What the Avro, JSON Schema and Protobuf registry serdes share: subjects, ids, framing.

Encoding a record (``serialize``):

1. the subject is ``subject_name_strategy(topic, is_key, record name)``;
2. its schema id comes from the serde's per-subject cache, else from the registry:
   ``use_latest`` takes the subject's latest version (and writes with *that* schema),
   ``auto_register`` registers the serde's schema (a no-op when it is there), otherwise the
   schema is looked up and must already be registered;
3. the payload is framed as magic byte 0 + the id (+ Protobuf's message indexes).

Decoding (``deserialize``) reads the id, fetches the writer's schema by id (cached) and
decodes with it, against the serde's own schema as the reader's where the format has one.

Invariant: a subject's id is resolved at most once per serde (the cache is only written with
an id the registry returned), so after the first record of a subject, encoding makes no
request. Failures are a :class:`SerializationError` / :class:`DeserializationError` whose
cause is the registry's error, as the :class:`~aiostreams.serde.Serde` protocol requires.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from aiostreams.errors import DeserializationError, SerializationError
from aiostreams.schema_registry.client import Schema, SchemaRegistryClient
from aiostreams.schema_registry.errors import SchemaRegistryError
from aiostreams.schema_registry.naming import SubjectNameStrategy, topic_name
from aiostreams.schema_registry.wire import WireFormatError, frame, unframe

__all__ = ["RegistrySerde"]

T = TypeVar("T")
W = TypeVar("W")  # the format's parsed writer schema


class RegistrySerde(ABC, Generic[T, W]):
    """A serde whose bytes are in the Confluent wire format; see the module docstring.

    Subclasses give the schema (:attr:`schema`, :attr:`record_name`) and three steps: parse a
    registry schema, encode a value with a parsed schema, decode a payload with one.
    """

    schema: Schema
    record_name: str

    def __init__(self, client: SchemaRegistryClient, *, is_key: bool = False,
                 subject_name_strategy: SubjectNameStrategy = topic_name,
                 auto_register: bool = True, use_latest: bool = False) -> None:
        if auto_register and use_latest:
            raise ValueError("auto_register and use_latest exclude each other: use_latest "
                             "writes with the subject's latest registered schema and never "
                             "registers; pass auto_register=False with it")
        self.client = client
        self.is_key = is_key
        self.subject_name_strategy = subject_name_strategy
        self.auto_register = auto_register
        self.use_latest = use_latest
        self._writer_by_subject: dict[str, tuple[int, W]] = {}
        self._writer_by_id: dict[int, W] = {}

    # -- format steps ----------------------------------------------------------------------

    @abstractmethod
    def _parse(self, schema: Schema) -> W:
        """The parsed form of a registry schema of this serde's type."""

    @abstractmethod
    def _encode(self, value: T, writer: W) -> bytes:
        """The payload of ``value`` (after the 5-byte header) written with ``writer``."""

    @abstractmethod
    def _decode(self, payload: memoryview, writer: W) -> T:
        """The value of a payload written with ``writer``."""

    # -- subjects and ids ------------------------------------------------------------------

    def subject(self, topic: str) -> str:
        """The subject this serde's schema is registered under for ``topic``."""
        return self.subject_name_strategy(topic, self.is_key, self.record_name)

    async def _schema_with_references(self) -> Schema:
        """The schema to register or look up, its references resolved (runs on the
        client's thread); Protobuf registers imported files here."""
        return self.schema

    async def _resolve(self, subject: str) -> tuple[int, W]:
        client = self.client
        if self.use_latest:
            latest = await client._latest(subject)
            return latest.schema_id, self._parse(latest.schema)
        schema = await self._schema_with_references()
        if self.auto_register:
            schema_id = await client._register(subject, schema)
        else:
            found = await client._lookup(subject, schema)
            if found is None:
                raise SchemaRegistryError(
                    f"the schema {self.record_name or '(unnamed)'} is not registered under "
                    f"subject {subject!r} and auto_register is off: register it first "
                    f"(await client.register({subject!r}, serde.schema)) or pass "
                    "auto_register=True", status=404)
            schema_id = found
        return schema_id, self._parse(self.schema)

    def _writer_for(self, topic: str) -> tuple[int, W]:
        subject = self.subject(topic)
        known = self._writer_by_subject.get(subject)
        if known is None:
            known = self.client.call_blocking(self._resolve(subject))
            self._writer_by_subject[subject] = known
        return known

    async def prepare(self, topic: str) -> int:
        """Resolve (and register, with ``auto_register``) the schema id for ``topic`` now,
        so the first record does not wait for the registry; returns the id.

        Cancellation: the cache is written only once the id is known, so a cancelled call
        leaves the serde as it was.
        """
        subject = self.subject(topic)
        known = self._writer_by_subject.get(subject)
        if known is None:
            known = await self.client._submit(self._resolve(subject))
            self._writer_by_subject[subject] = known
        return known[0]

    def _writer_by(self, schema_id: int) -> W:
        known = self._writer_by_id.get(schema_id)
        if known is None:
            schema = self.client.call_blocking(self.client._schema_by_id(schema_id))
            known = self._parse(schema)
            self._writer_by_id[schema_id] = known
        return known

    # -- the Serde protocol ----------------------------------------------------------------

    def _prefix(self, value: T) -> bytes:
        """Bytes between the header and the payload (Protobuf's message indexes)."""
        return b""

    def _skip_prefix(self, rest: memoryview) -> memoryview:
        return rest

    def serialize(self, topic: str, value: T | None) -> bytes | None:
        if value is None:
            return None
        try:
            schema_id, writer = self._writer_for(topic)
            return frame(schema_id, self._encode(value, writer), self._prefix(value))
        except SerializationError:
            raise
        except SchemaRegistryError as exc:
            raise SerializationError(str(exc), topic=topic) from exc
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise SerializationError(
                f"cannot encode {type(value).__name__} with the {self.schema.schema_type} "
                f"schema {self.record_name or '(unnamed)'} for topic {topic!r}: {exc}",
                topic=topic) from exc

    def deserialize(self, topic: str, data: bytes | None) -> T | None:
        if data is None:
            return None
        field = "key" if self.is_key else "value"
        try:
            schema_id, rest = unframe(data)
            writer = self._writer_by(schema_id)
            return self._decode(self._skip_prefix(rest), writer)
        except DeserializationError:
            raise
        except SchemaRegistryError as exc:
            raise DeserializationError(str(exc), topic=topic, field=field) from exc
        except WireFormatError as exc:
            raise DeserializationError(str(exc), topic=topic, field=field) from exc
        except Exception as exc:  # a decoder's failure on foreign bytes, whatever its type
            raise DeserializationError(
                f"cannot decode with the {self.schema.schema_type} schema "
                f"{self.record_name or '(unnamed)'}: {type(exc).__name__}: {exc}",
                topic=topic, field=field) from exc

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.record_name or '(unnamed)'}, "
                f"{self.client.url})")


SchemaSource = dict[str, Any] | str | type[BaseModel]


class DocumentSerde(RegistrySerde[T, W]):
    """A registry serde whose schema is a document (a dict or its text), or a pydantic
    model the document is generated from (then :attr:`model` is that model). Subclasses
    say how a model becomes a document and what loading a document sets."""

    def __init__(self, client: SchemaRegistryClient, schema: SchemaSource, *,
                 is_key: bool = False, subject_name_strategy: SubjectNameStrategy = topic_name,
                 auto_register: bool = True, use_latest: bool = False) -> None:
        super().__init__(client, is_key=is_key, subject_name_strategy=subject_name_strategy,
                         auto_register=auto_register, use_latest=use_latest)
        self.model: type[BaseModel] | None = None
        if isinstance(schema, type) and issubclass(schema, BaseModel):
            self.model = schema
            schema = self._document_of(schema)
        self._load(schema)

    @abstractmethod
    def _document_of(self, model: type[BaseModel]) -> dict[str, Any]:
        """The schema document generated from ``model``."""

    @abstractmethod
    def _load(self, document: dict[str, Any] | str) -> None:
        """Set :attr:`schema` and :attr:`record_name` (and any reader) from ``document``."""

