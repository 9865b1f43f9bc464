"""A real Apicurio Registry for the session (tests/support/registry_server.py) and a client
per test; subjects are made unique per test, so tests share the server but no state."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable, Iterator

import pytest
from registry_server import running_registry

from aiostreams.schema_registry import SchemaRegistryClient

_unique = itertools.count()


@pytest.fixture(scope="session")
def registry_url() -> Iterator[str]:
    with running_registry() as url:
        yield url


@pytest.fixture
async def registry(registry_url: str) -> AsyncIterator[SchemaRegistryClient]:
    client = SchemaRegistryClient(registry_url, timeout=30.0)
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
def fresh_topic(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """A topic name no other test (or earlier run against the same server) has used."""
    import os

    def make(stem: str) -> str:
        return f"{stem}-{request.node.name[:40]}-{os.getpid()}-{next(_unique)}"
    return make
