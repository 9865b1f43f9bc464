"""Linux network namespaces for tests that need separate "hosts" on one machine.

Each :class:`NetNamespace` is a network namespace of its own (``ip netns add``) with only a
loopback, up. A process started in it (:meth:`NetNamespace.popen`) sees its own 127.0.0.1
and nothing else: it reaches the outside only through a listening socket this process made
*inside* the namespace (:meth:`NetNamespace.listen`) and serves from its own namespace - a
socket keeps the namespace it was created in, whatever thread later uses it.

Needs root (``CAP_SYS_ADMIN``); :func:`namespaces_available` says whether this machine allows
them. Names carry this process's id and a counter, so concurrent test runs on one machine do
not meet, and :meth:`NetNamespace.delete` (or the context manager) removes the namespace after
killing every process still in it.

Invariant: while a namespace exists, :attr:`NetNamespace.name` is listed by ``ip netns`` and
every process :meth:`popen` started is in it; after :meth:`delete`, neither.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import itertools
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

_CLONE_NEWNET = 0x40000000
_IP = "/usr/sbin/ip" if Path("/usr/sbin/ip").exists() else "ip"
_counter = itertools.count()


class NamespaceError(RuntimeError):
    """A namespace could not be made or used; the message says what the machine refused."""


def namespaces_available() -> str | None:
    """None when network namespaces can be made here, else why not (for a skip reason)."""
    if os.geteuid() != 0:
        return "network namespaces need root (run the fleet tests as root, as CI does)"
    probe = f"ais-probe-{os.getpid()}"
    made = subprocess.run([_IP, "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"`ip netns add` was refused: {made.stderr.strip()}"
    subprocess.run([_IP, "netns", "delete", probe], capture_output=True)
    return None


class NetNamespace:
    """A network namespace with its loopback up (see the module doc)."""

    def __init__(self, label: str) -> None:
        self.name = f"ais-{label}-{os.getpid()}-{next(_counter)}"
        self._processes: list[subprocess.Popen[bytes]] = []
        made = subprocess.run([_IP, "netns", "add", self.name], capture_output=True, text=True)
        if made.returncode != 0:
            raise NamespaceError(f"ip netns add {self.name}: {made.stderr.strip()}")
        self._run("ip", "link", "set", "lo", "up")

    def _run(self, *command: str) -> None:
        done = subprocess.run([_IP, "netns", "exec", self.name, *command],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise NamespaceError(f"in {self.name}: {' '.join(command)}: {done.stderr.strip()}")

    def listen(self, port: int, host: str = "127.0.0.1") -> socket.socket:
        """A TCP socket listening on ``host:port`` *inside* this namespace (made by a thread
        that enters the namespace and leaves; the socket stays in it)."""
        made: list[socket.socket | BaseException] = []

        def enter_and_bind() -> None:
            try:
                libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
                with open(f"/var/run/netns/{self.name}") as handle:
                    if libc.setns(handle.fileno(), _CLONE_NEWNET) != 0:
                        raise NamespaceError(f"setns into {self.name}: "
                                             f"{os.strerror(ctypes.get_errno())}")
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind((host, port))
                sock.listen(128)
                sock.setblocking(False)
                made.append(sock)
            except BaseException as exc:  # handed to the caller's thread below
                made.append(exc)

        # a thread of its own: setns changes only the calling thread's namespace, and this
        # thread ends in the namespace instead of leaving the caller's there
        thread = threading.Thread(target=enter_and_bind, name=f"netns-{self.name}")
        thread.start()
        thread.join()
        result = made[0]
        if isinstance(result, BaseException):
            raise result
        return result

    def popen(self, command: Sequence[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        """Start ``command`` in this namespace (``ip netns exec``), in a session of its own."""
        process = subprocess.Popen([_IP, "netns", "exec", self.name, *command],
                                   start_new_session=True, **kwargs)
        self._processes.append(process)
        return process

    def pids(self) -> list[int]:
        """Every process in this namespace now (started here or not)."""
        listed = subprocess.run([_IP, "netns", "pids", self.name], capture_output=True,
                                text=True)
        return [int(pid) for pid in listed.stdout.split()]

    def kill_all(self, timeout: float = 30.0) -> None:
        """SIGKILL every process in the namespace - the host "loses power" - and reap the
        ones started here; returns once none is left (raises after ``timeout``)."""
        deadline = time.monotonic() + timeout
        while pids := self.pids():
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            for process in self._processes:
                if process.poll() is None:
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        process.wait(timeout=max(deadline - time.monotonic(), 0.1))
            if time.monotonic() > deadline:
                raise NamespaceError(f"processes {pids} of {self.name} survived SIGKILL")
            time.sleep(0.01)  # pids of children not ours: nothing to wait on but the kernel
        for process in self._processes:
            process.wait()
        self._processes.clear()

    def delete(self) -> None:
        """Kill what runs here and remove the namespace."""
        self.kill_all()
        subprocess.run([_IP, "netns", "delete", self.name], capture_output=True)

    def __enter__(self) -> NetNamespace:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.delete()
