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

Lifecycle (:class:`aiostreams.localjvm.server.LocalJvmServer`'s): ``CREATED --start-->
RUNNING --stop--> STOPPED`` (stop is idempotent, also before a start). Start blocks until the
process prints the line announcing its port (it binds port 0, so the kernel picks a free
one, or ``port``), or raises :class:`LocalCatalogError` with the end of its log. The process
also ends when this one does: its standard input is a pipe from here, and it exits at the
pipe's end (and Linux' parent-death signal kills it when started from the main thread). Stop
closes that pipe and sends SIGTERM, then waits (SIGKILL after 30 s).
"""

from __future__ import annotations

import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

from aiostreams.localcatalog.classpath import (
    PROGRAM,
    SERVER,
    WITHOUT_JAVA,
    ensure_classpath,
)
from aiostreams.localcatalog.errors import LocalCatalogError
from aiostreams.localjvm.child_life import die_with_parent
from aiostreams.localjvm.process import log_tail
from aiostreams.localjvm.server import DEFAULT_START_TIMEOUT, LocalJvmServer, ServerState

__all__ = ["DEFAULT_START_TIMEOUT", "CatalogState", "LocalRestCatalog"]

_READY = "listening http://"

CatalogState = ServerState
"""The catalog's lifecycle (the name it had before the servers shared one)."""


class LocalRestCatalog(LocalJvmServer):
    """See the module docstring. ``warehouse``: the directory of the catalog's database and
    tables (default: a temporary one); ``port``: the HTTP port (default: a free one);
    ``cache``: where the jars live (default: the package's cache dir)."""

    error = LocalCatalogError
    noun = "catalog"
    program = PROGRAM
    instead = WITHOUT_JAVA

    def __init__(self, warehouse: str | Path | None = None, *, port: int | None = None,
                 cache: Path | None = None) -> None:
        super().__init__(port)
        self.warehouse = None if warehouse is None else Path(warehouse).resolve()
        self._cache = cache
        self._temporary: tempfile.TemporaryDirectory[str] | None = None
        self._log: Path | None = None

    @property
    def uri(self) -> str:
        """``http://127.0.0.1:PORT/`` of the running catalog."""
        return self._address + "/"

    def client(self, name: str = "local", **properties: str) -> Any:
        """A pyiceberg ``RestCatalog`` of this catalog (needs the ``iceberg`` extra)."""
        from pyiceberg.catalog.rest import RestCatalog

        return RestCatalog(name, uri=self.uri, **properties)

    def start(self, timeout: float = DEFAULT_START_TIMEOUT) -> None:
        """Fetch the jars if needed (a minute, the first time), start the server and wait
        until it announces its port."""
        super().start(timeout)

    def _spawn(self, java: str) -> subprocess.Popen[Any]:
        jars = ensure_classpath(self._cache)
        if self.warehouse is None:
            self._temporary = tempfile.TemporaryDirectory(prefix="aiostreams-catalog-")
            self.warehouse = Path(self._temporary.name)
        self.warehouse.mkdir(parents=True, exist_ok=True)
        self._log = self.warehouse / "rest-catalog.log"
        with open(self._log, "wb") as log:
            return subprocess.Popen(
                [java, "-Xms64m", "-Xmx384m", "-XX:+UseSerialGC",
                 "-Djava.net.preferIPv4Stack=true",
                 "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                 "-cp", f"{jars}/*", str(SERVER), str(self.warehouse),
                 str(self.warehouse / "rest-catalog.db"), str(self._requested_port or 0)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True,
                preexec_fn=die_with_parent())  # None off the main thread: see there

    def _await_ready(self, process: subprocess.Popen[Any], timeout: float) -> int:
        """The announcement is the first line the server prints (it binds port 0 unless
        told, so only it knows the port): read on a thread, waited for with the timeout."""
        assert process.stdout is not None
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
            raise LocalCatalogError(
                f"the Iceberg REST catalog did not announce its port within {timeout:g} s "
                f"(exit code {process.poll()}; printed {line.strip()!r}); its log "
                f"({self._log}) ends:\n{log_tail(self._log)}")
        return int(line[len(_READY):].strip().rstrip("/").rsplit(":", 1)[1])

    def _cleanup(self) -> None:
        temporary, self._temporary = self._temporary, None
        if temporary is not None:
            temporary.cleanup()
