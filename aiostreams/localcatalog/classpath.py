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

import fcntl
import hashlib
import shutil
import subprocess
from pathlib import Path

from aiostreams.localcatalog.errors import LocalCatalogError
from aiostreams.localkafka.jars import cache_dir

__all__ = ["ICEBERG_VERSION", "POM", "SERVER", "ensure_classpath", "require_java"]

ICEBERG_VERSION = "1.10.0"
POM = Path(__file__).with_name("pom.xml")
SERVER = Path(__file__).with_name("RestCatalogServer.java")
"""The server's source (package data), run by ``java`` as a single-file program."""
_MARKER = ".complete"
_MVN_TIMEOUT = 900.0


def _digest() -> str:
    if not POM.is_file() or not SERVER.is_file():
        raise LocalCatalogError(
            f"the local catalog's pom.xml or RestCatalogServer.java is missing from "
            f"{POM.parent}: the package was installed without its data files; reinstall "
            "aiostreams")
    return hashlib.sha256(POM.read_bytes()).hexdigest()[:16]


def require_java() -> str:
    """The ``java`` executable; :class:`LocalCatalogError` saying what to install if not."""
    java = shutil.which("java")
    if java is None:
        raise LocalCatalogError(
            "Java ('java') is not on PATH; the local Iceberg REST catalog is a Java program. "
            "Install a JDK 17+ (e.g. apt install openjdk-17-jdk-headless), or pass the sink "
            "another pyiceberg catalog (the default SQL catalog on SQLite needs no server)")
    return java


def ensure_classpath(cache: Path | None = None) -> Path:
    """The directory of the server's jars, copied from Maven Central first if no complete
    copy of this pom's is cached."""
    root = (cache if cache is not None else cache_dir()) / "iceberg-rest"
    home = root / _digest()
    jars = home / "jars"
    if (home / _MARKER).is_file():
        return jars
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (home / _MARKER).is_file():  # copied while we waited
            return jars
        require_java()  # mvn needs it too: say so before mvn says it less clearly
        mvn = shutil.which("mvn")
        if mvn is None:
            raise LocalCatalogError(
                "Apache Maven ('mvn') is not on PATH; it copies the local Iceberg REST "
                f"catalog's jars (Iceberg {ICEBERG_VERSION}, Jetty 11, sqlite-jdbc) from "
                f"Maven Central, once, into {root}. Install Maven 3.8+ (e.g. apt install "
                "maven), or use a catalog you run yourself")
        shutil.rmtree(home, ignore_errors=True)
        home.mkdir()
        empty = root / "no-other-repositories"
        empty.mkdir(exist_ok=True)
        settings = home / "settings.xml"
        settings.write_text(
            "<settings><mirrors><mirror><id>only-central</id>"
            "<mirrorOf>external:*,!central</mirrorOf>"
            f"<url>{empty.as_uri()}</url></mirror></mirrors></settings>\n")
        shutil.copy(POM, home / "pom.xml")
        try:
            result = subprocess.run(
                [mvn, "-q", "-B", "-s", str(settings), "-f", str(home / "pom.xml"),
                 "dependency:copy-dependencies", f"-DoutputDirectory={jars}"],
                capture_output=True, text=True, timeout=_MVN_TIMEOUT, check=False)
        except subprocess.TimeoutExpired as exc:
            raise LocalCatalogError(f"mvn copying the REST catalog's jars into {jars} did "
                                    f"not finish within {_MVN_TIMEOUT:.0f} s") from exc
        if result.returncode != 0 or not any(jars.glob("iceberg-core-*-tests.jar")):
            tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-30:])
            raise LocalCatalogError(
                f"mvn copying the REST catalog's jars into {jars} failed (exit "
                f"{result.returncode}; check access to Maven Central):\n{tail}")
        (home / _MARKER).write_text("ok\n")
        return jars
