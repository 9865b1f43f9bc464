"""An Apache Iceberg REST catalog on 127.0.0.1 for development and tests, as
:mod:`aiostreams.localkafka` is for the broker and :mod:`aiostreams.localregistry` for the
schema registry.

It serves Iceberg's own reference REST adapter (the classes behind Iceberg's REST test
fixture, from Maven Central: ``iceberg-core``'s test jar) over a JdbcCatalog on SQLite, with
Jetty bound to 127.0.0.1. The jars are copied once by ``mvn`` (about a minute the first time;
cached, see :mod:`aiostreams.localcatalog.classpath`) and the server starts with ``java``::

    with LocalRestCatalog(warehouse="/data/lake") as catalog:
        stream.to_iceberg("lake.orders", Order, catalog=catalog.client())

From a shell: ``python -m aiostreams.localcatalog run [--warehouse DIR] [--port P]`` (start
one, print its URI, stop on Ctrl-C) and ``python -m aiostreams.localcatalog fetch`` (copy the
jars only). Not for production: no authentication, one process.
"""

from aiostreams.localcatalog.classpath import ICEBERG_VERSION, ensure_classpath
from aiostreams.localcatalog.errors import LocalCatalogError
from aiostreams.localcatalog.server import CatalogState, LocalRestCatalog

__all__ = ["ICEBERG_VERSION", "CatalogState", "LocalCatalogError", "LocalRestCatalog",
           "ensure_classpath"]
