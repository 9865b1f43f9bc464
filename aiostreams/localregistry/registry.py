"""A schema registry process on 127.0.0.1: Apicurio Registry with in-memory storage.

::

    with LocalRegistry() as registry:              # builds once (mvn), then starts java
        client = SchemaRegistryClient(registry.url)  # http://127.0.0.1:PORT/apis/ccompat/v7

:attr:`LocalRegistry.url` is the Confluent-compatible API (``/apis/ccompat/v7``) that
:class:`~aiostreams.schema_registry.SchemaRegistryClient` and Confluent's clients speak.
Schemas live in memory: a stopped registry forgets them (fine for development and tests,
not for production).

Lifecycle (:class:`aiostreams.localjvm.server.LocalJvmServer`'s): ``CREATED --start-->
RUNNING --stop--> STOPPED`` (stop is idempotent, also before a start). Start blocks until
the registry answers ``/subjects`` (polled with a deadline: a separate process announces
nothing) or raises :class:`LocalRegistryError` with the end of its log; stop sends SIGTERM,
then waits (SIGKILL after 30 s).
"""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from aiostreams.localjvm.child_life import die_with_parent
from aiostreams.localjvm.ports import HOST, free_port
from aiostreams.localjvm.process import await_ready, log_tail
from aiostreams.localjvm.server import DEFAULT_START_TIMEOUT, LocalJvmServer, ServerState
from aiostreams.localregistry.build import PROGRAM, WITHOUT_JAVA, ensure_runner
from aiostreams.localregistry.errors import LocalRegistryError

__all__ = ["CCOMPAT", "DEFAULT_START_TIMEOUT", "LocalRegistry", "RegistryState"]

CCOMPAT = "/apis/ccompat/v7"
"""The path of Apicurio's Confluent-compatible API."""
_PROBE_INTERVAL = 0.2

RegistryState = ServerState
"""The registry's lifecycle (the name it had before the servers shared one)."""


class LocalRegistry(LocalJvmServer):
    """See the module docstring. ``port``: the HTTP port (default: a free one, chosen at
    start); ``cache``: where the build lives (default: the package's cache dir)."""

    error = LocalRegistryError
    noun = "registry"
    program = PROGRAM
    instead = WITHOUT_JAVA

    def __init__(self, port: int | None = None, *, cache: Path | None = None) -> None:
        super().__init__(port)
        self._cache = cache
        self._workdir: tempfile.TemporaryDirectory[str] | None = None
        self._spawned_port: int | None = None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` of the running registry."""
        return self._address

    @property
    def url(self) -> str:
        """The Confluent-compatible API, for ``SchemaRegistryClient(url)``."""
        return self.base_url + CCOMPAT

    def start(self, timeout: float = DEFAULT_START_TIMEOUT) -> None:
        """Build if needed (minutes, the first time), start, and wait until it answers."""
        super().start(timeout)

    def _spawn(self, java: str) -> subprocess.Popen[Any]:
        runner = ensure_runner(self._cache)
        port = self._requested_port if self._requested_port is not None else free_port()
        self._spawned_port = port
        self._workdir = tempfile.TemporaryDirectory(prefix="aiostreams-registry-")
        with open(self._log_path, "wb") as log:
            return subprocess.Popen(
                [java, "-Xms128m", "-Xmx512m", f"-Dquarkus.http.port={port}",
                 f"-Dquarkus.http.host={HOST}", "-Dquarkus.log.level=WARN",
                 "-jar", str(runner)],
                cwd=self._workdir.name, stdout=log, stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent())  # None off the main thread: see there

    @property
    def _log_path(self) -> Path:
        assert self._workdir is not None
        return Path(self._workdir.name) / "registry.log"

    def _await_ready(self, process: subprocess.Popen[Any], timeout: float) -> int:
        port = self._spawned_port
        assert port is not None
        subjects = f"http://{HOST}:{port}{CCOMPAT}/subjects"
        with contextlib.suppress(TimeoutError):  # then it is still starting: say so below
            if await_ready(process, lambda: _answers(subjects), time.monotonic() + timeout,
                           interval=_PROBE_INTERVAL) is None:
                return port
        raise LocalRegistryError(
            f"Apicurio Registry did not answer at {subjects} within {timeout:g} s "
            f"(exit code {process.poll()}); its log ends:\n{log_tail(self._log_path)}")

    def _cleanup(self) -> None:
        workdir, self._workdir = self._workdir, None
        if workdir is not None:
            workdir.cleanup()


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2.0) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False
