"""The one error of :mod:`aiostreams.localcatalog`."""

from __future__ import annotations


class LocalCatalogError(RuntimeError):
    """The local Iceberg REST catalog could not be fetched or started; the message says why
    and what to do."""
