"""An HTTP client of a Confluent-compatible schema registry, with the caches serdes need.

Speaks the Confluent REST API (Confluent Schema Registry, Karapace, Apicurio Registry under
``/apis/ccompat/v7``, Redpanda): pass the API's base URL, e.g.
``http://127.0.0.1:8080/apis/ccompat/v7``.

**Thread boundary.** A serde's ``serialize``/``deserialize`` are synchronous and run on the
app's event loop, yet a cache miss (the first record of a subject, the first record written
with an unknown schema id) needs an HTTP round trip. The client therefore owns one daemon
thread, ``aiostreams-schema-registry``, running its own event loop and aiohttp session; every
request runs there. Coroutines (``await client.register(...)``) wait for it without blocking
the caller's loop; serdes call :meth:`SchemaRegistryClient.call_blocking`, which blocks the
calling thread for at most ``timeout`` seconds, on cache misses only. Warm the caches before
starting an app (``await serde.prepare(topic)``) to keep even those off the loop.

Caches (never evicted; ids are immutable in a registry): schema id -> schema, and
(subject, schema) -> id. ``latest`` answers are not cached here; the serdes cache them.

Cancellation: cancelling a coroutine of this client cancels the request on the client's
thread; the caches are only written after a complete answer, so they stay consistent.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeVar
from urllib.parse import quote

import aiohttp

from aiostreams.schema_registry.errors import IncompatibleSchemaError, SchemaRegistryError

__all__ = ["RegisteredSchema", "Schema", "SchemaReference", "SchemaRegistryClient",
           "SchemaType"]

T = TypeVar("T")
SchemaType = Literal["AVRO", "JSON", "PROTOBUF"]
_CONTENT_TYPE: Final = "application/vnd.schemaregistry.v1+json"
# Where registries name what broke. Apicurio: "<what> at <path>", with <what> the Avro field
# ("customer at /fields/2") or a diff type ("SUBSCHEMA_TYPE_CHANGED at /properties/a");
# Confluent: "The field 'customer' at path '/fields/2' ...".
_DIFF_AT: Final = re.compile(r"(\S+) at '?(/[^\s',\]]*)")
_DIFF_TYPE: Final = re.compile(r"[A-Z0-9]+(?:_[A-Z0-9]+)+")
_PROPERTY: Final = re.compile(r"/properties/([^/]+)")
_QUOTED_FIELD: Final = re.compile(r"[Ff]ield '([^']+)'")


@dataclass(frozen=True)
class SchemaReference:
    """A schema that another imports as ``name`` (a Protobuf file name, say): ``version`` of
    ``subject``."""

    name: str
    subject: str
    version: int


@dataclass(frozen=True)
class Schema:
    """A schema as the registry stores it: its text, its type, the schemas it references."""

    schema_str: str
    schema_type: SchemaType = "AVRO"
    references: tuple[SchemaReference, ...] = ()

    def payload(self) -> dict[str, Any]:
        body: dict[str, Any] = {"schema": self.schema_str}
        if self.schema_type != "AVRO":  # Confluent omits the default type; so do we
            body["schemaType"] = self.schema_type
        if self.references:
            body["references"] = [{"name": r.name, "subject": r.subject,
                                   "version": r.version} for r in self.references]
        return body


def _schema_from(answer: dict[str, Any]) -> Schema:
    references = tuple(SchemaReference(str(r["name"]), str(r["subject"]), int(r["version"]))
                       for r in answer.get("references") or ())
    return Schema(answer["schema"], answer.get("schemaType", "AVRO"), references)


@dataclass(frozen=True)
class RegisteredSchema:
    """A schema registered under ``subject`` as ``version`` with the global id ``schema_id``."""

    schema_id: int
    subject: str
    version: int
    schema: Schema


def _fields_named_in(messages: list[str]) -> tuple[str, ...]:
    """The field names a registry's compatibility messages point at, in order, once each."""
    found: list[str] = []

    def add(name: str) -> None:
        if name and name not in found:
            found.append(name)
    for message in messages:
        for name in _QUOTED_FIELD.findall(message):
            add(name)
        for what, path in _DIFF_AT.findall(message):
            properties = _PROPERTY.findall(path)
            if properties:
                add(".".join(properties))
            elif "/fields/" in path and not _DIFF_TYPE.fullmatch(what):
                add(what.strip("'[\""))
    return tuple(found)


class SchemaRegistryClient:
    """A Confluent-API schema registry at ``url``; see the module docstring.

    ``timeout`` (float seconds) bounds every request, connection included. Close the client
    (``await client.close()`` or ``async with``) to stop its thread and session.
    """

    def __init__(self, url: str, *, timeout: float = 10.0) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"schema registry url {url!r} must start with http:// or "
                             "https:// (for Apicurio, end it with /apis/ccompat/v7)")
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._ids_by_schema: dict[tuple[str, Schema], int] = {}
        self._schemas_by_id: dict[int, Schema] = {}
        self._loop = asyncio.new_event_loop()
        self._session: aiohttp.ClientSession | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._loop.run_forever,
                                        name="aiostreams-schema-registry", daemon=True)
        self._thread.start()

    # -- the thread boundary ---------------------------------------------------------------

    def _submit(self, coro: Coroutine[Any, Any, T]) -> asyncio.Future[T]:
        if self._closed:
            coro.close()
            raise SchemaRegistryError(f"the schema registry client for {self.url} is closed")
        return asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._loop))

    def call_blocking(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run one of this client's coroutines on its thread and wait for the result.

        Blocks the calling thread (at most ``timeout`` seconds per request); for synchronous
        callers such as serdes. Never call it from the client's own thread.
        """
        assert threading.current_thread() is not self._thread, "would deadlock"
        if self._closed:
            coro.close()
            raise SchemaRegistryError(f"the schema registry client for {self.url} is closed")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    async def close(self) -> None:
        """Close the session and stop the client's thread; idempotent."""
        if self._closed:
            return
        self._closed = True

        async def _shutdown() -> None:
            if self._session is not None:
                await self._session.close()

        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(_shutdown(), self._loop))
        self._loop.call_soon_threadsafe(self._loop.stop)
        await asyncio.to_thread(self._thread.join)
        self._loop.close()

    async def __aenter__(self) -> SchemaRegistryClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- requests (run on the client's thread) ---------------------------------------------

    async def _request(self, method: str, path: str, body: dict[str, Any] | None = None,
                       *, params: dict[str, str] | None = None) -> Any:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self.timeout),
                headers={"Accept": _CONTENT_TYPE})
        what = f"{method} {self.url}{path}"
        try:
            async with self._session.request(
                    method, self.url + path, json=body, params=params,
                    headers={"Content-Type": _CONTENT_TYPE} if body is not None else None,
            ) as response:
                text = await response.text()
                answer: Any = None
                if text:
                    try:
                        answer = await response.json(content_type=None)
                    except ValueError:
                        answer = {"message": text}
                if response.status >= 400:
                    message = (answer or {}).get("message", text) if isinstance(
                        answer, dict) else text
                    code = (answer or {}).get("error_code", 0) if isinstance(
                        answer, dict) else 0
                    raise SchemaRegistryError(
                        f"{what} answered HTTP {response.status}: {message}",
                        status=response.status, error_code=int(code or 0), request=what)
                return answer
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise SchemaRegistryError(
                f"{what} failed: {type(exc).__name__}: {exc or 'timed out'} (is the registry "
                f"running at {self.url}? timeout {self.timeout} s)", request=what) from exc

    async def _register(self, subject: str, schema: Schema) -> int:
        cached = self._ids_by_schema.get((subject, schema))
        if cached is not None:
            return cached
        path = f"/subjects/{quote(subject, safe='')}/versions"
        try:
            answer = await self._request("POST", path, schema.payload())
        except SchemaRegistryError as exc:
            if exc.status != 409:
                raise
            messages = await self._why_incompatible(subject, schema)
            raise IncompatibleSchemaError(
                subject=subject,
                registry_message="; ".join([str(exc).split(": ", 1)[-1], *messages]),
                fields=_fields_named_in([str(exc), *messages]), status=exc.status,
                error_code=exc.error_code, request=exc.request) from exc
        schema_id = int(answer["id"])
        self._remember(subject, schema, schema_id)
        return schema_id

    async def _why_incompatible(self, subject: str, schema: Schema) -> list[str]:
        """The registry's verbose compatibility messages, or none when it gives none."""
        path = f"/compatibility/subjects/{quote(subject, safe='')}/versions/latest"
        try:
            answer = await self._request("POST", path, schema.payload(),
                                         params={"verbose": "true"})
        except SchemaRegistryError:
            return []
        messages = answer.get("messages") if isinstance(answer, dict) else None
        return [str(m) for m in messages] if isinstance(messages, list) else []

    async def _lookup_registered(self, subject: str,
                                 schema: Schema) -> RegisteredSchema | None:
        try:
            answer = await self._request("POST", f"/subjects/{quote(subject, safe='')}",
                                         schema.payload())
        except SchemaRegistryError as exc:
            if exc.status == 404:
                return None
            raise
        registered = RegisteredSchema(int(answer["id"]), subject, int(answer["version"]),
                                      schema)
        self._remember(subject, schema, registered.schema_id)
        return registered

    async def _lookup(self, subject: str, schema: Schema) -> int | None:
        cached = self._ids_by_schema.get((subject, schema))
        if cached is not None:
            return cached
        registered = await self._lookup_registered(subject, schema)
        return None if registered is None else registered.schema_id

    async def _schema_by_id(self, schema_id: int) -> Schema:
        cached = self._schemas_by_id.get(schema_id)
        if cached is not None:
            return cached
        answer = await self._request("GET", f"/schemas/ids/{schema_id}")
        schema = _schema_from(answer)
        self._schemas_by_id[schema_id] = schema
        return schema

    async def _latest(self, subject: str) -> RegisteredSchema:
        answer = await self._request("GET",
                                     f"/subjects/{quote(subject, safe='')}/versions/latest")
        schema = _schema_from(answer)
        registered = RegisteredSchema(int(answer["id"]), subject, int(answer["version"]),
                                      schema)
        self._schemas_by_id.setdefault(registered.schema_id, schema)
        return registered

    def _remember(self, subject: str, schema: Schema, schema_id: int) -> None:
        self._ids_by_schema[(subject, schema)] = schema_id
        self._schemas_by_id.setdefault(schema_id, schema)

    # -- the public coroutines -------------------------------------------------------------

    async def register(self, subject: str, schema: Schema) -> int:
        """Register ``schema`` under ``subject`` (a no-op when it is there) and return its id.

        Raises :class:`IncompatibleSchemaError` when the subject's compatibility rule
        refuses it.
        """
        return await self._submit(self._register(subject, schema))

    async def lookup(self, subject: str, schema: Schema) -> int | None:
        """The id of ``schema`` under ``subject``, or ``None`` when it is not registered."""
        return await self._submit(self._lookup(subject, schema))

    async def lookup_registered(self, subject: str,
                                schema: Schema) -> RegisteredSchema | None:
        """``schema`` as registered under ``subject`` (id and version), or ``None``."""
        return await self._submit(self._lookup_registered(subject, schema))

    async def schema_by_id(self, schema_id: int) -> Schema:
        """The schema with the global id ``schema_id``."""
        return await self._submit(self._schema_by_id(schema_id))

    async def latest(self, subject: str) -> RegisteredSchema:
        """The latest version registered under ``subject``."""
        return await self._submit(self._latest(subject))

    async def set_compatibility(self, level: str, subject: str | None = None) -> None:
        """Set the compatibility level (``BACKWARD``, ``FULL``, ``NONE``...) of ``subject``,
        or the global default when ``subject`` is ``None``."""
        path = "/config" + (f"/{quote(subject, safe='')}" if subject is not None else "")
        await self._submit(self._request("PUT", path, {"compatibility": level}))

    async def delete_subject(self, subject: str) -> None:
        """Delete every version of ``subject`` (a soft delete, as the registry does it)."""
        await self._submit(self._request("DELETE", f"/subjects/{quote(subject, safe='')}"))
