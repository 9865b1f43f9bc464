"""The broker's jars: downloaded once from Maven Central with ``mvn``, cached on disk.

Where the cache lives (first that applies):

1. ``$AIOSTREAMS_CACHE_DIR``;
2. ``<repo>/.cache`` when this package sits in a source checkout (the directory holding the
   ``aiostreams`` package also holds ``pyproject.toml``); the repo's ``.gitignore`` ignores it;
3. ``~/.cache/aiostreams``.

Each release (:mod:`aiostreams.localkafka.releases`) has its own pom and its own directory.
Invariant: ``<cache>/kafka-<version>/libs`` is complete exactly when the marker file next to it
holds the SHA-256 of the pom it was resolved from. The marker is written only after ``mvn``
succeeded, so an interrupted or failed download (or an edited pom) is redone from scratch. A file
lock serializes concurrent downloads (several pytest workers starting at once).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from aiostreams.localkafka.errors import LocalKafkaError
from aiostreams.localkafka.releases import DEFAULT_KAFKA_VERSION, KafkaRelease, kafka_release

KAFKA_VERSION = DEFAULT_KAFKA_VERSION
"""The Apache Kafka release LocalKafka runs unless told otherwise (kept for old imports:
:data:`aiostreams.localkafka.releases.DEFAULT_KAFKA_VERSION`)."""

__all__ = ["KAFKA_VERSION", "LocalKafkaError", "cache_dir", "ensure_jars"]

_MARKER = ".complete"
_MVN_TIMEOUT = 900.0


def cache_dir() -> Path:
    """The directory that holds downloaded jars (see the module docstring for the order)."""
    configured = os.environ.get("AIOSTREAMS_CACHE_DIR")
    if configured:
        return Path(configured).expanduser()
    checkout = Path(__file__).resolve().parent.parent.parent
    if (checkout / "pyproject.toml").is_file():
        return checkout / ".cache"
    return Path.home() / ".cache" / "aiostreams"


def ensure_jars(cache: Path | None = None, release: KafkaRelease | None = None) -> Path:
    """Return the directory of ``release``'s jars (default: :func:`kafka_release`'s choice),
    downloading them first if needed.

    Blocking: the first call runs ``mvn`` (a minute or so on a cold ``~/.m2``); later calls
    only read the marker file.
    """
    release = release if release is not None else kafka_release()
    version = release.version
    home = (cache if cache is not None else cache_dir()) / f"kafka-{version}"
    libs = home / "libs"
    marker = home / _MARKER
    digest = hashlib.sha256(release.pom.read_bytes()).hexdigest()
    if _is_complete(marker, digest):
        return libs
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _is_complete(marker, digest):  # another process finished while we waited
            return libs
        marker.unlink(missing_ok=True)
        shutil.rmtree(libs, ignore_errors=True)
        _run_maven(release, libs)
        if not any(libs.glob(f"kafka_2.13-{version}.jar")):
            raise LocalKafkaError(
                f"mvn finished but {libs} holds no kafka_2.13-{version}.jar; "
                f"check {release.pom} pins org.apache.kafka:kafka_2.13:{version}"
            )
        marker.write_text(digest + "\n")
    return libs


def _is_complete(marker: Path, digest: str) -> bool:
    try:
        return marker.read_text().strip() == digest
    except FileNotFoundError:
        return False


def _run_maven(release: KafkaRelease, libs: Path) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise LocalKafkaError(
            "Apache Maven ('mvn') is not on PATH; it downloads the Kafka broker's jars. "
            "Install Maven 3.8+ (e.g. 'apt-get install maven'), or point AIOSTREAMS_KAFKA at a "
            "running broker instead."
        )
    command = [
        mvn, "-q", "-B", "-f", str(release.pom), "dependency:copy-dependencies",
        "-DincludeScope=runtime", f"-DoutputDirectory={libs}",
    ]
    try:
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=_MVN_TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise LocalKafkaError(
            f"mvn did not finish within {_MVN_TIMEOUT:.0f} s while downloading Kafka's jars; "
            "check the network access to Maven Central (or the mirror in ~/.m2/settings.xml)"
        ) from exc
    if result.returncode != 0:
        output = (result.stdout + result.stderr).strip().splitlines()[-30:]
        raise LocalKafkaError(
            f"mvn failed (exit {result.returncode}) downloading Kafka {release.version}'s jars "
            f"into {libs}; check the network access to Maven Central (or the mirror in "
            "~/.m2/settings.xml). Its last output:\n" + "\n".join(output)
        )
