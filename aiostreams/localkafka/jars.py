"""The broker's jars: downloaded once from Maven Central with ``mvn``, cached on disk.

The cache is :func:`aiostreams.localjvm.maven.cache_dir`'s (``$AIOSTREAMS_CACHE_DIR``, a
checkout's ``.cache``, else ``~/.cache/aiostreams``; re-exported here as :func:`cache_dir`).

Each release (:mod:`aiostreams.localkafka.releases`) has its own pom and its own directory.
Invariant (:func:`aiostreams.localjvm.maven.build_once`'s): ``<cache>/kafka-<version>/libs``
is complete exactly when the marker file next to it holds the SHA-256 of the pom it was
resolved from. The marker is written only after ``mvn`` succeeded, so an interrupted or
failed download (or an edited pom) is redone from scratch. A file lock serializes concurrent
downloads (several pytest workers starting at once).
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from aiostreams.localjvm.maven import build_once, cache_dir, require_mvn, run_maven
from aiostreams.localkafka.errors import LocalKafkaError
from aiostreams.localkafka.releases import DEFAULT_KAFKA_VERSION, KafkaRelease, kafka_release

KAFKA_VERSION = DEFAULT_KAFKA_VERSION
"""The Apache Kafka release LocalKafka runs unless told otherwise (kept for old imports:
:data:`aiostreams.localkafka.releases.DEFAULT_KAFKA_VERSION`)."""

__all__ = ["KAFKA_VERSION", "LocalKafkaError", "cache_dir", "ensure_jars"]


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

    def download() -> None:
        shutil.rmtree(libs, ignore_errors=True)
        mvn = require_mvn(LocalKafkaError, "downloads the Kafka broker's jars",
                          "point AIOSTREAMS_KAFKA at a running broker instead")
        run_maven(mvn, ["-f", str(release.pom), "dependency:copy-dependencies",
                        "-DincludeScope=runtime", f"-DoutputDirectory={libs}"],
                  error=LocalKafkaError,
                  doing=f"downloading Kafka {version}'s jars into {libs}")
        if not any(libs.glob(f"kafka_2.13-{version}.jar")):
            raise LocalKafkaError(
                f"mvn finished but {libs} holds no kafka_2.13-{version}.jar; "
                f"check {release.pom} pins org.apache.kafka:kafka_2.13:{version}"
            )

    build_once(home, hashlib.sha256(release.pom.read_bytes()).hexdigest(),
               lock=home / ".lock", build=download)
    return libs
