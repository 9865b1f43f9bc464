"""A schema registry process on 127.0.0.1: Apicurio Registry with in-memory storage.

::

    with LocalRegistry() as registry:              # builds once (mvn), then starts java
        client = SchemaRegistryClient(registry.url)  # http://127.0.0.1:PORT/apis/ccompat/v7

:attr:`LocalRegistry.url` is the Confluent-compatible API (``/apis/ccompat/v7``) that
:class:`~aiostreams.schema_registry.SchemaRegistryClient` and Confluent's clients speak.
Schemas live in memory: a stopped registry forgets them (fine for development and tests,
not for production).

Lifecycle: ``CREATED --start--> RUNNING --stop--> STOPPED`` (stop is idempotent, also
before a start). Start blocks until the registry answers ``/subjects`` (polled with a
deadline: a separate process announces nothing) or raises :class:`LocalRegistryError`
with the end of its log; stop sends SIGTERM, then waits (SIGKILL after 30 s).
"""

from __future__ import annotations

import enum
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

from aiostreams.localregistry.build import ensure_runner, require_java
from aiostreams.localregistry.errors import LocalRegistryError

__all__ = ["CCOMPAT", "DEFAULT_START_TIMEOUT", "LocalRegistry", "RegistryState"]

CCOMPAT = "/apis/ccompat/v7"
"""The path of Apicurio's Confluent-compatible API."""
DEFAULT_START_TIMEOUT = 120.0
_HOST = "127.0.0.1"
_STOP_TIMEOUT = 30.0


class RegistryState(enum.Enum):
    CREATED = "created"
    RUNNING = "running"
    STOPPED = "stopped"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((_HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def _check_port_free(port: int) -> None:
    if not 0 < port < 65536:
        raise LocalRegistryError(f"--port must be within 1..65535, got {port}")
    with socket.socket() as sock:
        # as the server will: a port whose last connections linger in TIME_WAIT is free
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((_HOST, port))
        except OSError as exc:
            raise LocalRegistryError(
                f"port {port} of {_HOST} is taken ({exc.strerror}): choose another --port, "
                "or leave it out for a free one") from None


class LocalRegistry:
    """See the module docstring. ``port``: the HTTP port (default: a free one, chosen at
    start); ``cache``: where the build lives (default: the package's cache dir)."""

    def __init__(self, port: int | None = None, *, cache: Path | None = None) -> None:
        self._requested_port = port
        self._cache = cache
        self._port: int | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._workdir: tempfile.TemporaryDirectory[str] | None = None
        self.state = RegistryState.CREATED

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` of the running registry."""
        if self.state is not RegistryState.RUNNING or self._port is None:
            raise LocalRegistryError(f"the registry is {self.state.value}: start() it first")
        return f"http://{_HOST}:{self._port}"

    @property
    def url(self) -> str:
        """The Confluent-compatible API, for ``SchemaRegistryClient(url)``."""
        return self.base_url + CCOMPAT

    def start(self, timeout: float = DEFAULT_START_TIMEOUT) -> None:
        """Build if needed (minutes, the first time), start, and wait until it answers."""
        if self.state is not RegistryState.CREATED:
            raise LocalRegistryError(f"start() of a {self.state.value} registry: make a new "
                                     "LocalRegistry")
        if self._requested_port is not None:
            _check_port_free(self._requested_port)
        java = require_java()
        runner = ensure_runner(self._cache)
        port = self._requested_port if self._requested_port is not None else _free_port()
        self._workdir = tempfile.TemporaryDirectory(prefix="aiostreams-registry-")
        log_path = Path(self._workdir.name) / "registry.log"
        with open(log_path, "wb") as log:
            self._process = subprocess.Popen(
                [java, "-Xms128m", "-Xmx512m", f"-Dquarkus.http.port={port}",
                 f"-Dquarkus.http.host={_HOST}", "-Dquarkus.log.level=WARN",
                 "-jar", str(runner)],
                cwd=self._workdir.name, stdout=log, stderr=subprocess.STDOUT)
        self._port = port
        self.state = RegistryState.RUNNING
        try:
            self._await_answer(port, log_path, timeout)
        except BaseException:
            self.stop()
            raise

    def _await_answer(self, port: int, log_path: Path, timeout: float) -> None:
        assert self._process is not None
        subjects = f"http://{_HOST}:{port}{CCOMPAT}/subjects"
        deadline = time.monotonic() + timeout
        while not _answers(subjects):
            if self._process.poll() is not None or time.monotonic() > deadline:
                tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-30:])
                raise LocalRegistryError(
                    f"Apicurio Registry did not answer at {subjects} within {timeout:g} s "
                    f"(exit code {self._process.poll()}); its log ends:\n{tail}")
            time.sleep(0.2)  # the next probe; the process gives no other signal

    def stop(self) -> None:
        """Stop the process and remove its working directory. Idempotent."""
        process, self._process = self._process, None
        if process is not None:
            process.terminate()
            try:
                process.wait(timeout=_STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        workdir, self._workdir = self._workdir, None
        if workdir is not None:
            workdir.cleanup()
        self.state = RegistryState.STOPPED

    def __enter__(self) -> LocalRegistry:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2.0) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False
