"""A real Apicurio Registry on 127.0.0.1 for tests/registry: built once, started per session.

Build: ``mvn package`` of ``apicurio/pom.xml`` (Apicurio Registry 2.4.2.Final from Maven
Central, re-built as a runnable Quarkus app; the pom says why) into
``<cache>/apicurio-registry/<digest of the build inputs>/``, complete exactly when its
``.complete`` marker exists (written after ``mvn`` succeeded); a file lock serializes
concurrent builds. Maven runs with settings that send every repository other than Maven
Central to an empty folder, so a parent POM's unreachable repository cannot stall it.

Start: ``java -jar`` on a free port with in-memory storage; ready when
``/apis/ccompat/v7/subjects`` answers 200 (allow ~30 s). Stop: SIGTERM, then wait.
``AIOSTREAMS_SCHEMA_REGISTRY=<url>`` skips both and uses a registry already running.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from aiostreams.localkafka.jars import cache_dir

PROJECT = Path(__file__).with_name("apicurio")
CCOMPAT = "/apis/ccompat/v7"
_MVN_TIMEOUT = 900.0
_START_TIMEOUT = 120.0


class RegistrySetupError(RuntimeError):
    """The registry could not be built or started; the message says why."""


def _inputs_digest() -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in PROJECT.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(PROJECT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def ensure_runner(cache: Path | None = None) -> Path:
    """The registry's runner jar, building it when needed."""
    root = (cache if cache is not None else cache_dir()) / "apicurio-registry"
    build = root / _inputs_digest()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        runner = build / "target" / "apicurio-runner-1-runner.jar"
        if (build / ".complete").is_file() and runner.is_file():
            return runner
        mvn = shutil.which("mvn")
        if mvn is None:
            raise RegistrySetupError(
                "Apache Maven ('mvn') is not on PATH; it builds Apicurio Registry for the "
                "registry tests (tests/registry). Install Maven 3.8+ or deselect them with "
                "-m 'not registry'.")
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
            raise RegistrySetupError(f"mvn building Apicurio Registry in {build} did not "
                                     f"finish within {_MVN_TIMEOUT:.0f} s") from exc
        if result.returncode != 0 or not runner.is_file():
            tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-30:])
            raise RegistrySetupError(
                f"mvn building Apicurio Registry in {build} failed (exit "
                f"{result.returncode}; check access to Maven Central):\n{tail}")
        (build / ".complete").write_text("ok\n")
        return runner


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/subjects", timeout=2.0) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@contextlib.contextmanager
def running_registry() -> Iterator[str]:
    """The Confluent-API base URL of a running registry (see the module docstring)."""
    configured = os.environ.get("AIOSTREAMS_SCHEMA_REGISTRY")
    if configured:
        yield configured.rstrip("/")
        return
    runner = ensure_runner()
    port = _free_port()
    url = f"http://127.0.0.1:{port}{CCOMPAT}"
    with tempfile.TemporaryDirectory(prefix="apicurio-") as workdir:
        log_path = Path(workdir) / "registry.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                ["java", "-Xms128m", "-Xmx512m", f"-Dquarkus.http.port={port}",
                 "-Dquarkus.http.host=127.0.0.1", "-Dquarkus.log.level=WARN",
                 "-jar", str(runner)],
                cwd=workdir, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + _START_TIMEOUT
            # Polling is the only readiness signal a separate process gives; each probe
            # waits on a socket, not on a timer.
            while not _answers(url):
                if proc.poll() is not None or time.monotonic() > deadline:
                    tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-30:])
                    raise RegistrySetupError(
                        f"Apicurio Registry did not answer at {url} within "
                        f"{_START_TIMEOUT:.0f} s (exit code {proc.poll()}):\n{tail}")
                time.sleep(0.2)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
