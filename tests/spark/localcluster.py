"""A Spark standalone cluster on 127.0.0.1 for tests: one master and one worker, both run
from the pyspark package (``<pyspark>/bin/spark-class``), as child processes.

::

    with LocalSparkCluster() as cluster:                 # worker shares the driver's disk
        config = cluster.config()                        # a SparkConfig for spark://...
    with LocalSparkCluster(private_dir=Path("/tmp/x")):  # worker has its own disk there

``private_dir``: the worker runs in a private mount namespace (``unshare -m``, needs root)
with a fresh tmpfs mounted over that directory, so its executors write files the driver
never sees: what happens when executors run on other hosts and the table path is not
shared. Everything else (the rest of the filesystem) is shared.

Invariants: each process leads its own process group (the executors a worker launches are in
the worker's), ports are free on 127.0.0.1 when chosen, and :meth:`stop` (or the context
manager's exit, or interpreter exit at the latest) ends every process of both groups and
removes the cluster's scratch directory. The worker counts as started once the master lists
it as ALIVE (the master's ``/json`` status page), so a session started after
:meth:`start` gets an executor.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import weakref
from pathlib import Path
from types import TracebackType
from typing import Any

from aiostreams.sinks import SparkConfig

HOST = "127.0.0.1"
WORKER_MEMORY = "1200m"
_LOG_TAIL = 30
_POLL = 0.2

# Runs in the worker's private mount namespace: a tmpfs over $1, then the worker.
_PRIVATE_DISK = 'mount -t tmpfs -o size=2g aiostreams-private "$1" && shift && exec "$@"'


class ClusterError(RuntimeError):
    """The cluster did not start (the message carries the tail of its logs)."""


def spark_class() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-class"


def free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind((HOST, 0))
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for s in sockets:
            s.close()


class LocalSparkCluster:
    """A master and one worker (``cores`` cores, :data:`WORKER_MEMORY`) on 127.0.0.1."""

    def __init__(self, *, cores: int = 1, private_dir: Path | None = None) -> None:
        self.cores = cores
        self.private_dir = private_dir
        self.scratch = Path(tempfile.mkdtemp(prefix="aiostreams-spark-cluster-"))
        self.port, self.webui_port, self.worker_port, self.worker_webui_port = free_ports(4)
        self._processes: list[subprocess.Popen[bytes]] = []
        self._groups: list[int] = []  # every process group started, kept after stop()
        self._reaper = weakref.finalize(self, _kill_all, self._processes)

    @property
    def master_url(self) -> str:
        return f"spark://{HOST}:{self.port}"

    def config(self, *, conf: dict[str, str] | None = None, app_name: str = "aiostreams-cluster"
               ) -> SparkConfig:
        """A :class:`SparkConfig` for this cluster: ``spark.cores.max`` = the worker's cores
        (so an idle session does not take more than there is), the driver on 127.0.0.1, and
        executors running this interpreter."""
        settings = {
            "spark.cores.max": str(self.cores),
            "spark.executor.memory": "1g",
            "spark.driver.host": HOST,
            "spark.driver.bindAddress": HOST,
            "spark.pyspark.python": sys.executable,
            **(conf or {}),
        }
        return SparkConfig(master=self.master_url, driver_memory="1g", app_name=app_name,
                           conf=settings)

    def start(self, timeout: float = 90.0) -> None:
        """Start the master, then the worker; return once the worker is ALIVE. Raises
        :class:`ClusterError` (with the logs' tails) otherwise; nothing is left running."""
        if self.private_dir is not None:
            self.private_dir.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + timeout
        try:
            self._launch("master", ["org.apache.spark.deploy.master.Master", "--host", HOST,
                                    "--port", str(self.port), "--webui-port",
                                    str(self.webui_port)])
            self._await(lambda: self._status() is not None, deadline, "the master")
            worker = ["org.apache.spark.deploy.worker.Worker", self.master_url, "--host", HOST,
                      "--port", str(self.worker_port), "--webui-port",
                      str(self.worker_webui_port), "--cores", str(self.cores), "--memory",
                      WORKER_MEMORY, "--work-dir", str(self.scratch / "work")]
            self._launch("worker", worker, private=self.private_dir)
            self._await(self._worker_alive, deadline, "the worker")
        except BaseException:
            self.stop()
            raise

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM every process group (worker first), wait, SIGKILL what is left after
        ``timeout`` seconds; then remove the scratch directory. Idempotent."""
        for process in reversed(self._processes):
            _signal_group(process, signal.SIGTERM)
        for process in reversed(self._processes):
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                _signal_group(process, signal.SIGKILL)
                process.wait()
            _await_group_gone(process.pid, timeout)
        self._processes.clear()
        shutil.rmtree(self.scratch, ignore_errors=True)

    def alive_groups(self) -> list[int]:
        """Process groups this cluster ever started (master, worker with its executors)
        that still have a live process: empty after :meth:`stop` (for leak checks)."""
        alive = []
        for pgid in self._groups:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                continue
            alive.append(pgid)
        return alive

    def __enter__(self) -> LocalSparkCluster:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # -- steps ---------------------------------------------------------------------------

    def _launch(self, name: str, args: list[str], private: Path | None = None) -> None:
        command = [str(spark_class()), *args]
        if private is not None:
            command = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                       _PRIVATE_DISK, "sh", str(private), *command]
        env = {**os.environ, "SPARK_LOCAL_IP": HOST, "SPARK_LOG_DIR": str(self.scratch),
               "SPARK_WORKER_DIR": str(self.scratch / "work"),
               "PYSPARK_PYTHON": sys.executable}
        (self.scratch / "work").mkdir(exist_ok=True)
        with open(self.scratch / f"{name}.log", "ab") as out:
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out,
                                       stderr=subprocess.STDOUT, env=env,
                                       start_new_session=True, cwd=self.scratch)
        self._processes.append(process)
        self._groups.append(process.pid)

    def _status(self) -> dict[str, Any] | None:
        try:
            with urllib.request.urlopen(f"http://{HOST}:{self.webui_port}/json/",
                                        timeout=2.0) as response:
                doc: dict[str, Any] = json.loads(response.read())
                return doc
        except (OSError, urllib.error.URLError, ValueError):
            return None

    def _worker_alive(self) -> bool:
        status = self._status()
        return status is not None and any(w.get("state") == "ALIVE"
                                          for w in status.get("workers", []))

    def _await(self, ready: Any, deadline: float, what: str) -> None:
        while not ready():
            for process in self._processes:
                if process.poll() is not None:
                    raise ClusterError(f"{what} exited with code {process.returncode} while "
                                       f"the cluster started\n{self._log_tail()}")
            if time.monotonic() > deadline:
                raise ClusterError(f"{what} was not ready in time\n{self._log_tail()}")
            time.sleep(_POLL)  # polling a status page: there is no event to await

    def _log_tail(self) -> str:
        parts = []
        for path in sorted(self.scratch.glob("*.log")):
            lines = path.read_text(errors="replace").splitlines()[-_LOG_TAIL:]
            parts.append(f"--- {path.name} ---\n" + "\n".join(lines))
        return "\n".join(parts)


def _signal_group(process: subprocess.Popen[bytes], signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signum)


def _await_group_gone(pgid: int, timeout: float) -> None:
    """Wait until no process of group ``pgid`` (the executors a worker started) is left;
    SIGKILL the group if one outlives ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        if time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
            return
        time.sleep(_POLL)


def _kill_all(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        if process.poll() is None:
            _signal_group(process, signal.SIGKILL)
            process.wait()
