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

import fcntl
import hashlib
import shutil
import subprocess
from pathlib import Path

from aiostreams.localkafka.jars import cache_dir
from aiostreams.localregistry.errors import LocalRegistryError

__all__ = ["APICURIO_VERSION", "PROJECT", "ensure_runner", "require_java"]

APICURIO_VERSION = "2.4.2.Final"
PROJECT = Path(__file__).with_name("apicurio")
"""The Maven project (package data: see ``[tool.setuptools.package-data]`` in pyproject)."""
_RUNNER = Path("target") / "apicurio-runner-1-runner.jar"
_MARKER = ".complete"
_MVN_TIMEOUT = 900.0


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
    java = shutil.which("java")
    if java is None:
        raise LocalRegistryError(
            "Java ('java') is not on PATH; the local schema registry (Apicurio Registry) is a "
            "Java program. Install a JDK 17+ (e.g. apt install openjdk-17-jdk-headless), or "
            "use a registry you run yourself (Confluent, Karapace, Redpanda, Apicurio)")
    return java


def ensure_runner(cache: Path | None = None) -> Path:
    """The runner jar, built first if no complete build of this project is cached."""
    root = (cache if cache is not None else cache_dir()) / "apicurio-registry"
    build = root / _inputs_digest()
    runner = build / _RUNNER
    if (build / _MARKER).is_file() and runner.is_file():
        return runner
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (build / _MARKER).is_file() and runner.is_file():  # built while we waited
            return runner
        require_java()  # mvn needs it too: say so before mvn says it less clearly
        mvn = shutil.which("mvn")
        if mvn is None:
            raise LocalRegistryError(
                "Apache Maven ('mvn') is not on PATH; it builds the local schema registry "
                f"(Apicurio Registry {APICURIO_VERSION}) from Maven Central's jars, once "
                f"(a few minutes), into {root}. Install Maven 3.8+ (e.g. apt install maven), "
                "or use a registry you run yourself (Confluent, Karapace, Redpanda)")
        shutil.rmtree(build, ignore_errors=True)
        shutil.copytree(PROJECT, build)
        empty = root / "no-other-repositories"
        empty.mkdir(exist_ok=True)
        settings = build / "settings.xml"
        settings.write_text(
            "<settings><mirrors><mirror><id>only-central</id>"
            "<mirrorOf>external:*,!central</mirrorOf>"
            f"<url>{empty.as_uri()}</url></mirror></mirrors></settings>\n")
        try:
            result = subprocess.run(
                [mvn, "-q", "-B", "-s", str(settings), "-f", str(build / "pom.xml"),
                 "package", "-DskipTests"],
                capture_output=True, text=True, timeout=_MVN_TIMEOUT, check=False)
        except subprocess.TimeoutExpired as exc:
            raise LocalRegistryError(f"mvn building Apicurio Registry in {build} did not "
                                     f"finish within {_MVN_TIMEOUT:.0f} s") from exc
        if result.returncode != 0 or not runner.is_file():
            tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-30:])
            raise LocalRegistryError(
                f"mvn building Apicurio Registry in {build} failed (exit "
                f"{result.returncode}; check access to Maven Central):\n{tail}")
        (build / _MARKER).write_text("ok\n")
        assert runner.is_file(), "a complete build has its runner"
        return runner
