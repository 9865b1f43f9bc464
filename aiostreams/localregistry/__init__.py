"""A schema registry on 127.0.0.1 for development and tests, as
:mod:`aiostreams.localkafka` is for the broker.

It runs Apicurio Registry 2.4.2 (in-memory storage) with its Confluent-compatible API, built
once by ``mvn`` from Maven Central's jars (a few minutes the first time; cached, see
:mod:`aiostreams.localregistry.build`) and started with ``java``::

    with LocalRegistry() as registry:
        client = SchemaRegistryClient(registry.url)

From a shell: ``python -m aiostreams.localregistry run`` (start one, print its URL, stop on
Ctrl-C; ``--port P``) and ``python -m aiostreams.localregistry build`` (build only).
"""

from aiostreams.localregistry.build import APICURIO_VERSION, ensure_runner
from aiostreams.localregistry.errors import LocalRegistryError
from aiostreams.localregistry.registry import CCOMPAT, LocalRegistry, RegistryState

__all__ = ["APICURIO_VERSION", "CCOMPAT", "LocalRegistry", "LocalRegistryError",
           "RegistryState", "ensure_runner"]
