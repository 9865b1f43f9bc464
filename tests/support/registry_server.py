"""A schema registry for tests/registry: ``AIOSTREAMS_SCHEMA_REGISTRY=<url>`` when one is
already running, else the package's own (:class:`aiostreams.localregistry.LocalRegistry`:
Apicurio Registry built from Maven Central's jars, cached), started once per session."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from aiostreams.localregistry import LocalRegistry


@contextlib.contextmanager
def running_registry() -> Iterator[str]:
    """The Confluent-API base URL of a running registry."""
    configured = os.environ.get("AIOSTREAMS_SCHEMA_REGISTRY")
    if configured:
        yield configured.rstrip("/")
        return
    with LocalRegistry() as registry:
        yield registry.url
