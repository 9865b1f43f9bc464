"""The local REST catalog's jars: copied once by ``mvn`` from Maven Central, cached.

The Maven project is ``pom.xml`` beside this module (package data); ``mvn
dependency:copy-dependencies`` copies its jars into ``<cache>/iceberg-rest/<digest of the
pom>/jars/`` (the cache of :func:`aiostreams.localkafka.cache_dir`: ``$AIOSTREAMS_CACHE_DIR``,
a checkout's ``.cache``, else ``~/.cache/aiostreams``). Nothing is compiled: the server is a
single-file Java program that ``java`` compiles in memory when it starts.

Invariant: a directory is complete exactly when its ``.complete`` marker exists, written only
after ``mvn`` succeeded, so an interrupted copy is redone; an edited pom has another digest,
so another directory. A file lock serializes concurrent fetches (several test workers).
Maven runs with settings that send every repository other than Maven Central to an empty
folder, so a parent POM's unreachable repository cannot stall it.

Blocking: the first call takes a minute or so (about 80 MB of jars, most of it Hadoop's
shaded client); later calls read the marker only.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from aiostreams.localcatalog.errors import LocalCatalogError
from aiostreams.localjvm.java import find_java
from aiostreams.localjvm.maven import CentralBuild, cache_dir

__all__ = ["ICEBERG_VERSION", "POM", "PROGRAM", "SERVER", "WITHOUT_JAVA", "ensure_classpath",
           "require_java"]

ICEBERG_VERSION = "1.10.0"
POM = Path(__file__).with_name("pom.xml")
SERVER = Path(__file__).with_name("RestCatalogServer.java")
"""The server's source (package data), run by ``java`` as a single-file program."""
PROGRAM = "the local Iceberg REST catalog"
WITHOUT_JAVA = ("pass the sink another pyiceberg catalog (the default SQL catalog on SQLite "
                "needs no server)")


def _digest() -> str:
    if not POM.is_file() or not SERVER.is_file():
        raise LocalCatalogError(
            f"the local catalog's pom.xml or RestCatalogServer.java is missing from "
            f"{POM.parent}: the package was installed without its data files; reinstall "
            "aiostreams")
    return hashlib.sha256(POM.read_bytes()).hexdigest()[:16]


def require_java() -> str:
    """The ``java`` executable; :class:`LocalCatalogError` saying what to install if not."""
    return find_java(LocalCatalogError, PROGRAM, WITHOUT_JAVA)


def ensure_classpath(cache: Path | None = None) -> Path:
    """The directory of the server's jars, copied from Maven Central first if no complete
    copy of this pom's is cached."""
    root = (cache if cache is not None else cache_dir()) / "iceberg-rest"
    build = CentralBuild(
        POM, ("dependency:copy-dependencies", "-DoutputDirectory={home}/jars"),
        LocalCatalogError,
        f"copies the local Iceberg REST catalog's jars (Iceberg {ICEBERG_VERSION}, Jetty "
        f"11, sqlite-jdbc) from Maven Central, once, into {root}",
        "use a catalog you run yourself", "copying the REST catalog's jars")
    digest = _digest()
    jars = root / digest / "jars"
    build.ensure(root, digest, require_java=require_java, product=jars,
                 produced=lambda: any(jars.glob("iceberg-core-*-tests.jar")))
    return jars
