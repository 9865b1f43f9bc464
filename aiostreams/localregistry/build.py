"""The registry's runner jar: built once with ``mvn`` from Maven Central's jars, cached.

The Maven project (``apicurio/``: a pom and two small files, shipped as package data) re-runs
Quarkus' build on Apicurio Registry 2.4.2's published classes; the pom says why. The build
lands in ``<cache>/apicurio-registry/<digest of the project's files>/`` (the cache of
:func:`aiostreams.localkafka.cache_dir`: ``$AIOSTREAMS_CACHE_DIR``, a checkout's ``.cache``,
else ``~/.cache/aiostreams``).

Invariant: a build directory is complete exactly when its ``.complete`` marker exists, and
the marker is written only after ``mvn`` succeeded, so an interrupted build is redone from
scratch; an edited project has another digest, so another directory. A file lock serializes
concurrent builds (several test workers at once). Maven runs with settings that send every
repository other than Maven Central to an empty folder, so a parent POM's unreachable
repository cannot stall it.

Blocking: the first build takes minutes (about 300 s with an empty ``~/.m2``, most of it
downloading); later calls read the marker only.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from aiostreams.localjvm.java import find_java
from aiostreams.localjvm.maven import CentralBuild, cache_dir
from aiostreams.localregistry.errors import LocalRegistryError

__all__ = ["APICURIO_VERSION", "PROGRAM", "PROJECT", "WITHOUT_JAVA", "ensure_runner",
           "require_java"]

APICURIO_VERSION = "2.4.2.Final"
PROJECT = Path(__file__).with_name("apicurio")
"""The Maven project (package data: see ``[tool.setuptools.package-data]`` in pyproject)."""
PROGRAM = "the local schema registry (Apicurio Registry)"
WITHOUT_JAVA = "use a registry you run yourself (Confluent, Karapace, Redpanda, Apicurio)"
_RUNNER = Path("target") / "apicurio-runner-1-runner.jar"


def _project_files() -> list[Path]:
    files = sorted(p for p in PROJECT.rglob("*") if p.is_file())
    if (PROJECT / "pom.xml") not in files:
        raise LocalRegistryError(
            f"the registry's Maven project is missing from {PROJECT} (no pom.xml): the "
            "package was installed without its data files; reinstall aiostreams")
    return files


def _inputs_digest() -> str:
    digest = hashlib.sha256()
    for path in _project_files():
        digest.update(str(path.relative_to(PROJECT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def require_java() -> str:
    """The ``java`` executable; :class:`LocalRegistryError` saying what to install if not."""
    return find_java(LocalRegistryError, PROGRAM, WITHOUT_JAVA)


def ensure_runner(cache: Path | None = None) -> Path:
    """The runner jar, built first if no complete build of this project is cached."""
    root = (cache if cache is not None else cache_dir()) / "apicurio-registry"
    build = CentralBuild(
        PROJECT, ("package", "-DskipTests"), LocalRegistryError,
        f"builds the local schema registry (Apicurio Registry {APICURIO_VERSION}) from "
        f"Maven Central's jars, once (a few minutes), into {root}",
        "use a registry you run yourself (Confluent, Karapace, Redpanda)",
        "building Apicurio Registry")
    digest = _inputs_digest()
    runner = root / digest / _RUNNER
    build.ensure(root, digest, require_java=require_java, product=runner)
    assert runner.is_file(), "a complete build has its runner"
    return runner
