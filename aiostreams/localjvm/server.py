"""A server on 127.0.0.1 run as a ``java`` child: the lifecycle the local schema registry
and the local Iceberg REST catalog share.

Lifecycle: ``CREATED --start--> RUNNING --stop--> STOPPED`` (:class:`ServerState`; stop is
idempotent, also before a start; a stopped server is not started again: make a new one).
:meth:`LocalJvmServer.start` refuses a requested port another process holds before anything
starts, finds ``java``, then lets the subclass spawn its child (:meth:`_spawn`: the jars,
the command, the log) and wait until it serves (:meth:`_await_ready`, which returns the
port). A start that fails or is interrupted stops the child before it raises: nothing is
left running. :meth:`~LocalJvmServer.stop` ends the child (SIGTERM, SIGKILL after
:data:`STOP_TIMEOUT` seconds), then lets the subclass clean up (:meth:`_cleanup`).

Invariant: ``state is RUNNING`` exactly while a child started by :meth:`start` may run, and
the server's address is known only while it is RUNNING and ready.
"""

from __future__ import annotations

import enum
import subprocess
from types import TracebackType
from typing import Any, ClassVar, Self

from aiostreams.localjvm.java import find_java
from aiostreams.localjvm.ports import HOST, check_port_free
from aiostreams.localjvm.process import end_process

__all__ = ["DEFAULT_START_TIMEOUT", "STOP_TIMEOUT", "LocalJvmServer", "ServerState"]

DEFAULT_START_TIMEOUT = 120.0
STOP_TIMEOUT = 30.0


class ServerState(enum.Enum):
    CREATED = "created"
    RUNNING = "running"
    STOPPED = "stopped"


class LocalJvmServer:
    """See the module docstring. Subclasses name themselves (:attr:`noun`, :attr:`program`,
    :attr:`instead`), their error type (:attr:`error`), and implement :meth:`_spawn`,
    :meth:`_await_ready` and, when they leave files, :meth:`_cleanup`.

    All methods block; call them from a thread (``asyncio.to_thread``) inside an event loop
    if the loop must keep running meanwhile."""

    error: ClassVar[type[Exception]]
    noun: ClassVar[str]
    """What the messages call it: "registry", "catalog"."""
    program: ClassVar[str]
    """What the message of a missing ``java`` calls it: "the local Iceberg REST catalog"."""
    instead: ClassVar[str]
    """What a user without Java may do instead (ends the message of a missing ``java``)."""

    def __init__(self, port: int | None = None) -> None:
        self._requested_port = port
        self._port: int | None = None
        self._process: subprocess.Popen[Any] | None = None
        self.state = ServerState.CREATED

    def require_java(self) -> str:
        """The ``java`` executable, or :attr:`error` saying what to install."""
        return find_java(self.error, self.program, self.instead)

    @property
    def _address(self) -> str:
        """``http://127.0.0.1:PORT`` of the running server."""
        if self.state is not ServerState.RUNNING or self._port is None:
            raise self.error(f"the {self.noun} is {self.state.value}: start() it first")
        return f"http://{HOST}:{self._port}"

    def start(self, timeout: float = DEFAULT_START_TIMEOUT) -> None:
        """Start the server and return once it serves; :attr:`error` with the end of its log
        if it does not within ``timeout`` seconds (fetching or building its jars, the first
        time, comes before and is not counted)."""
        if self.state is not ServerState.CREATED:
            raise self.error(f"start() of a {self.state.value} {self.noun}: make a new "
                             f"{type(self).__name__}")
        if self._requested_port is not None:
            check_port_free(self._requested_port, self.error)
        self._process = self._spawn(self.require_java())
        self.state = ServerState.RUNNING
        try:
            port = self._await_ready(self._process, timeout)
        except BaseException:
            self.stop()
            raise
        assert 0 < port < 65536
        self._port = port

    def stop(self) -> None:
        """Stop the child (SIGTERM, SIGKILL after :data:`STOP_TIMEOUT` s) and clean up.
        Idempotent."""
        process, self._process = self._process, None
        if process is not None:
            end_process(process, STOP_TIMEOUT)
        self._port = None
        self._cleanup()
        self.state = ServerState.STOPPED

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # -- what a server adds --------------------------------------------------------------

    def _spawn(self, java: str) -> subprocess.Popen[Any]:
        """Fetch what the server needs and start its child (bound to :data:`HOST`, on the
        requested port or a free one); its log goes to a file :meth:`_await_ready` reads."""
        raise NotImplementedError

    def _await_ready(self, process: subprocess.Popen[Any], timeout: float) -> int:
        """Return the port once the child serves; :attr:`error` with its log's end if not
        within ``timeout`` seconds or if it exits."""
        raise NotImplementedError

    def _cleanup(self) -> None:
        """Remove what the server's run left (temporary directories). Idempotent."""
