"""Errors of the schema registry client and the registry serdes.

Every registry answer that is not a success becomes a :class:`SchemaRegistryError` carrying
the HTTP status, the registry's own error code and message and the request that got them;
a refused registration (HTTP 409) becomes an :class:`IncompatibleSchemaError` that also names
the subject and what broke. A serde that meets one while encoding a record raises a
:class:`~aiostreams.errors.SerializationError` *from* it (while decoding, a
:class:`~aiostreams.errors.DeserializationError`), as every serde must; the registry error
is its ``__cause__``.
"""

from __future__ import annotations

from aiostreams.errors import AiostreamsError

__all__ = ["IncompatibleSchemaError", "SchemaRegistryError"]


class SchemaRegistryError(AiostreamsError):
    """The registry refused a request or could not be reached.

    ``status`` is the HTTP status (0 when no answer came), ``error_code`` the registry's
    Confluent-style code (``40401`` subject not found, ``40403`` schema not found, ``42201``
    invalid schema...; 0 when the body had none).
    """

    def __init__(self, message: str, *, status: int = 0, error_code: int = 0,
                 request: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.request = request


class IncompatibleSchemaError(SchemaRegistryError):
    """The registry refused a schema because it breaks the subject's compatibility rule.

    ``subject`` is the subject the schema was registered under, ``registry_message`` the
    registry's own words (its 409 body and, when it gave them, the verbose compatibility
    messages) and ``fields`` the names of the fields that broke it, as far as they could be
    found (empty when the registry named none).
    """

    def __init__(self, *, subject: str, registry_message: str, fields: tuple[str, ...],
                 status: int, error_code: int, request: str) -> None:
        where = f" (fields: {', '.join(fields)})" if fields else ""
        super().__init__(
            f"schema registry refused the new schema for subject {subject!r}{where}: "
            f"{registry_message}. Make the change compatible (e.g. give a new field a "
            f"default, keep removed fields optional) or change the subject's compatibility "
            f"level with PUT /config/{subject}",
            status=status, error_code=error_code, request=request)
        self.subject = subject
        self.registry_message = registry_message
        self.fields = fields
