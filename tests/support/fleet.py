"""A fleet test bed: "hosts" on one machine, each a network namespace of its own.

A :class:`Host` is a network namespace (:mod:`netns`) with its own state directory. Its
processes reach the test session's broker through one link: a :class:`FaultProxy` listening
*inside* the namespace on the broker's own address (127.0.0.1 and the broker's port, so the
address the broker advertises leads there too) and forwarding to the real broker outside.
So a whole host can be

* killed (:meth:`Host.kill`: SIGKILL to every process in its namespace, a power cut), and
  started again on the state directory it left;
* cut from the broker and healed (:meth:`Host.cut`, :meth:`Host.heal`: the link holds every
  byte, as a network that stopped answering, and delivers it when it heals).

::

    async with Fleet(kafka_bootstrap, hosts=3, root=tmp_path) as fleet:
        for host in fleet.hosts:
            host.start(SCRIPT, app, src, dst, WORKER_GUARANTEE="exactly_once")
        ...
        fleet.hosts[1].kill()

Needs network namespaces (root): :func:`fleet_unavailable` says why not, for a skip.
Invariant: a host's processes run in its namespace only, with ``WORKER_HOST_ID`` set to
the host's name and ``WORKER_STATE_DIR`` to its state directory; on exit every namespace and
its processes are gone.
"""

from __future__ import annotations

import enum
import subprocess
from pathlib import Path
from types import TracebackType
from typing import Any

from faultproxy import FaultProxy
from kafkakit import WORKER, worker_command
from netns import NetNamespace, namespaces_available


class HostState(enum.Enum):
    UP = "up"  # linked to the broker (processes may or may not run)
    CUT = "cut"  # cut from the broker; its processes run on
    DOWN = "down"  # killed: nothing runs in it


def fleet_unavailable() -> str | None:
    """None when this machine can run a fleet, else why not."""
    return namespaces_available()


class Host:
    """One host of a :class:`Fleet` (see the module doc)."""

    def __init__(self, name: str, namespace: NetNamespace, link: FaultProxy,
                 bootstrap: str, state_dir: Path, logs: Path) -> None:
        self.name = name
        self.namespace = namespace
        self.link = link
        self.bootstrap = bootstrap
        self.state_dir = state_dir
        self.logs = logs
        self.state = HostState.UP
        self.processes: list[subprocess.Popen[bytes]] = []
        self._started = 0

    def start(self, app: str, src: str, dst: str, *, script: Path = WORKER,
              **env: str) -> subprocess.Popen[bytes]:
        """Start ``script``'s worker on this host (``tests/support/kafkakit.worker_command``
        with this host's identity and state directory); its stderr goes to
        :meth:`log_path` of the start's number."""
        assert self.state is not HostState.DOWN, f"host {self.name} is down: restart() it"
        command, environment = worker_command(
            self.bootstrap, app, src, dst, script=script,
            **{"WORKER_HOST_ID": self.name, "WORKER_STATE_DIR": str(self.state_dir),
               **env})
        log = self.log_path(self._started)
        self._started += 1
        with log.open("ab") as sink:
            process = self.namespace.popen(command, env=environment, stderr=sink.fileno())
        self.processes.append(process)
        return process

    def log_path(self, start: int) -> Path:
        return self.logs / f"{self.name}-{start}.log"

    def kill(self) -> None:
        """A power cut: every process of the host SIGKILLed at once; its disk stays."""
        self.namespace.kill_all()
        self.processes.clear()
        self.state = HostState.DOWN

    def restart(self) -> None:
        """Power back on (nothing runs until :meth:`start`), linked again."""
        self.link.forward()
        self.state = HostState.UP

    def cut(self) -> None:
        """Cut the host from the broker: nothing moves either way, nothing is lost."""
        assert self.state is HostState.UP, f"host {self.name} is {self.state.value}"
        self.link.hold()
        self.state = HostState.CUT

    def heal(self) -> None:
        assert self.state is HostState.CUT, f"host {self.name} is {self.state.value}"
        self.link.forward()
        self.state = HostState.UP


class Fleet:
    """``hosts`` hosts linked to the broker at ``bootstrap`` (``127.0.0.1:PORT``), with their
    state under ``root``. An async context manager: made on entry, gone on exit."""

    def __init__(self, bootstrap: str, *, hosts: int, root: Path) -> None:
        address, _, port = bootstrap.rpartition(":")
        assert address == "127.0.0.1", f"the fleet links to a broker on 127.0.0.1, not {address}"
        self.bootstrap = bootstrap
        self.port = int(port)
        self.count = hosts
        self.root = root
        self.hosts: list[Host] = []

    async def __aenter__(self) -> Fleet:
        try:
            for index in range(self.count):
                await self._add(f"host{index}")
        except BaseException:
            await self.close()
            raise
        return self

    async def _add(self, name: str) -> None:
        namespace = NetNamespace(name)
        try:
            link = FaultProxy()
            await link.start(namespace.listen(self.port))
            link.target = self.port
        except BaseException:
            namespace.delete()
            raise
        state_dir = self.root / name / "state"
        logs = self.root / name / "logs"
        state_dir.mkdir(parents=True)
        logs.mkdir(parents=True)
        self.hosts.append(Host(name, namespace, link, self.bootstrap, state_dir, logs))

    async def close(self) -> None:
        for host in self.hosts:
            host.namespace.delete()
            await host.link.stop()
        self.hosts.clear()

    async def __aexit__(self, kind: type[BaseException] | None, value: BaseException | None,
                        trace: TracebackType | None) -> None:
        await self.close()

    def logs(self) -> dict[str, str]:
        """Every host's worker logs so far, by file name (for a failure's message)."""
        found: dict[str, Any] = {}
        for host in self.hosts:
            for log in sorted(host.logs.glob("*.log")):
                found[log.name] = log.read_text(errors="replace")[-4000:]
        return found
