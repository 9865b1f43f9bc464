"""An Iceberg REST catalog process on 127.0.0.1: Iceberg's reference REST adapter over a
JdbcCatalog on SQLite, its tables' files under a local warehouse directory.

::

    with LocalRestCatalog(warehouse="/data/lake") as catalog:   # fetches jars once (mvn)
        sink = stream.to_iceberg("lake.orders", Order, catalog=catalog.client())

:attr:`LocalRestCatalog.uri` is what pyiceberg's ``RestCatalog(name, uri=...)`` and Spark's
``spark.sql.catalog.<name>.uri`` (``type=rest``) take. The catalog's state (namespaces, each
table's current metadata file) is ``<warehouse>/rest-catalog.db``; the metadata and data
files are under ``<warehouse>/<namespace>/<table>/``. Both outlive the process: a catalog
started again on the same warehouse serves the same tables. Without ``warehouse`` a
temporary directory is used and removed at stop.

Lifecycle: ``CREATED --start--> RUNNING --stop--> STOPPED`` (stop is idempotent, also before
a start). Start blocks until the process prints the line announcing its port (it binds port
0, so the kernel picks a free one, or ``port``), or raises :class:`LocalCatalogError` with
the end of its log. The process also ends when this one does: its standard input is a pipe
from here, and it exits at the pipe's end (and Linux' parent-death signal kills it when
started from the main thread). Stop closes that pipe and sends SIGTERM, then waits (SIGKILL
after 30 s).
"""

from __future__ import annotations

import enum
import socket
import subprocess
import tempfile
import threading
from pathlib import Path
from types import TracebackType
from typing import Any

from aiostreams.localcatalog.classpath import SERVER, ensure_classpath, require_java
from aiostreams.localcatalog.errors import LocalCatalogError
from aiostreams.localkafka.child_life import die_with_parent

__all__ = ["DEFAULT_START_TIMEOUT", "CatalogState", "LocalRestCatalog"]

DEFAULT_START_TIMEOUT = 120.0
_HOST = "127.0.0.1"
_READY = "listening http://"
_STOP_TIMEOUT = 30.0


class CatalogState(enum.Enum):
    CREATED = "created"
    RUNNING = "running"
    STOPPED = "stopped"


def _check_port_free(port: int) -> None:
    if not 0 < port < 65536:
        raise LocalCatalogError(f"--port must be within 1..65535, got {port}")
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((_HOST, port))
        except OSError as exc:
            raise LocalCatalogError(
                f"port {port} of {_HOST} is taken ({exc.strerror}): choose another --port, "
                "or leave it out for a free one") from None


class LocalRestCatalog:
    """See the module docstring. ``warehouse``: the directory of the catalog's database and
    tables (default: a temporary one); ``port``: the HTTP port (default: a free one);
    ``cache``: where the jars live (default: the package's cache dir)."""

    def __init__(self, warehouse: str | Path | None = None, *, port: int | None = None,
                 cache: Path | None = None) -> None:
        self.warehouse = None if warehouse is None else Path(warehouse).resolve()
        self._requested_port = port
        self._cache = cache
        self._port: int | None = None
        self._process: subprocess.Popen[str] | None = None
        self._temporary: tempfile.TemporaryDirectory[str] | None = None
        self._log: Path | None = None
        self.state = CatalogState.CREATED

    @property
    def uri(self) -> str:
        """``http://127.0.0.1:PORT/`` of the running catalog."""
        if self.state is not CatalogState.RUNNING or self._port is None:
            raise LocalCatalogError(f"the catalog is {self.state.value}: start() it first")
        return f"http://{_HOST}:{self._port}/"

    def client(self, name: str = "local", **properties: str) -> Any:
        """A pyiceberg ``RestCatalog`` of this catalog (needs the ``iceberg`` extra)."""
        from pyiceberg.catalog.rest import RestCatalog

        return RestCatalog(name, uri=self.uri, **properties)

    def start(self, timeout: float = DEFAULT_START_TIMEOUT) -> None:
        """Fetch the jars if needed (a minute, the first time), start the server and wait
        until it announces its port."""
        if self.state is not CatalogState.CREATED:
            raise LocalCatalogError(f"start() of a {self.state.value} catalog: make a new "
                                    "LocalRestCatalog")
        if self._requested_port is not None:
            _check_port_free(self._requested_port)
        java = require_java()
        jars = ensure_classpath(self._cache)
        if self.warehouse is None:
            self._temporary = tempfile.TemporaryDirectory(prefix="aiostreams-catalog-")
            self.warehouse = Path(self._temporary.name)
        self.warehouse.mkdir(parents=True, exist_ok=True)
        self._log = self.warehouse / "rest-catalog.log"
        with open(self._log, "wb") as log:
            self._process = subprocess.Popen(
                [java, "-Xms64m", "-Xmx384m", "-XX:+UseSerialGC",
                 "-Djava.net.preferIPv4Stack=true",
                 "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                 "-cp", f"{jars}/*", str(SERVER), str(self.warehouse),
                 str(self.warehouse / "rest-catalog.db"), str(self._requested_port or 0)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True,
                preexec_fn=die_with_parent())  # None off the main thread: see there
        self.state = CatalogState.RUNNING
        try:
            self._port = self._await_announcement(timeout)
        except BaseException:
            self.stop()
            raise

    def _await_announcement(self, timeout: float) -> int:
        process = self._process
        assert process is not None and process.stdout is not None
        stdout = process.stdout
        lines: list[str] = []

        def read_first_line() -> None:  # blocks until the line, or EOF if the process ends
            lines.append(stdout.readline())

        reader = threading.Thread(target=read_first_line, name="rest-catalog-announcement",
                                  daemon=True)
        reader.start()
        reader.join(timeout)
        line = lines[0] if lines else ""
        if not line.startswith(_READY):
            assert self._log is not None
            tail = "\n".join(self._log.read_text(errors="replace").splitlines()[-30:])
            raise LocalCatalogError(
                f"the Iceberg REST catalog did not announce its port within {timeout:g} s "
                f"(exit code {process.poll()}; printed {line.strip()!r}); its log "
                f"({self._log}) ends:\n{tail}")
        return int(line[len(_READY):].strip().rstrip("/").rsplit(":", 1)[1])

    def stop(self) -> None:
        """Stop the process (and remove a temporary warehouse). Idempotent."""
        process, self._process = self._process, None
        if process is not None:
            if process.stdin is not None:
                process.stdin.close()
            process.terminate()
            try:
                process.wait(timeout=_STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            if process.stdout is not None:
                process.stdout.close()
        temporary, self._temporary = self._temporary, None
        if temporary is not None:
            temporary.cleanup()
        self.state = CatalogState.STOPPED

    def __enter__(self) -> LocalRestCatalog:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
