"""A single-node Apache Kafka broker (KRaft, loopback only) run as a child process.

For integration tests, benchmarks and first runs on a machine without a broker. The jars come
from Maven Central through :mod:`aiostreams.localkafka.jars`; the broker binds to 127.0.0.1 only,
on free ports, with its data in a fresh temporary directory.
"""

from __future__ import annotations

import base64
import enum
import logging
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
import weakref
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from aiostreams.localjvm.child_life import die_with_parent
from aiostreams.localjvm.java import find_java
from aiostreams.localjvm.ports import HOST, check_port_free, free_port
from aiostreams.localjvm.process import await_ready, end_process, log_tail, send_signal
from aiostreams.localkafka.errors import LocalKafkaError
from aiostreams.localkafka.jars import cache_dir, ensure_jars
from aiostreams.localkafka.probe import metadata_answers
from aiostreams.localkafka.releases import KafkaRelease, kafka_release

log = logging.getLogger(__name__)

_NODE_ID = 1
_BROKER_HEAP = ("-Xms512m", "-Xmx1g")
_TOOL_HEAP = ("-Xmx256m",)
_PROBE_TIMEOUT = 2.0
_LOG_TAIL_LINES = 40
_STARTED_LINE = b"Kafka Server started"
"""What the broker logs once it serves (log4j.properties keeps that one INFO line)."""


class BrokerState(enum.Enum):
    """Lifecycle of a :class:`LocalKafka`.

    ``NEW``/``CLOSED`` → ``RUNNING`` (``start``: fresh ports, fresh data dir);
    ``RUNNING`` → ``DOWN`` (``kill``; or the first half of ``restart``);
    ``DOWN`` → ``RUNNING`` (``restart``: same ports, same data);
    any → ``CLOSED`` (``stop``: the process is ended and the data dir removed).
    """

    NEW = "new"
    RUNNING = "running"
    DOWN = "down"
    CLOSED = "closed"


class LocalKafka:
    """One Kafka broker+controller in a child JVM, reachable at :attr:`bootstrap`, of the
    release :attr:`release` (3.9 or 4.x: :mod:`aiostreams.localkafka.releases`).

    Invariants: the process, when there is one, leads its own process group (a terminal's
    Ctrl-C does not reach it; :meth:`stop` does), and is ended by :meth:`stop`, by the context
    manager's exit, or at the latest when this interpreter exits. The data dir exists from
    :meth:`start` until :meth:`stop` and survives :meth:`kill` and :meth:`restart`, which keep
    the ports too, so clients reconnect to the same address.

    All methods block; call them from a thread (``asyncio.to_thread``) inside an event loop
    if the loop must keep running meanwhile.
    """

    def __init__(self, *, port: int | None = None, cache: Path | None = None,
                 proxied_port: int | None = None, version: str | None = None,
                 server_properties: Mapping[str, str] | None = None) -> None:
        """``port``: the client port to bind (default: a free one). ``cache``: where jars
        are cached (default: :func:`aiostreams.localkafka.jars.cache_dir`). ``version``:
        the Kafka release to run (default: ``$AIOSTREAMS_KAFKA_VERSION``, else
        :data:`~aiostreams.localkafka.releases.DEFAULT_KAFKA_VERSION`); an unknown one
        raises :class:`LocalKafkaError` here, before anything starts.

        ``proxied_port``: also open a second listener (``PROXIED``, on a free port:
        :attr:`proxied_target`) that tells its clients to connect to ``proxied_port``, where
        a fault-injection proxy listens and forwards to :attr:`proxied_target`. A client
        bootstrapped at ``127.0.0.1:<proxied_port>`` then talks to the broker only through
        the proxy, while clients of :attr:`bootstrap` talk to it directly: a network fault
        between one client and the broker.

        ``server_properties``: written over the broker's defaults (a test's misconfigured
        broker, e.g. ``offsets.topic.replication.factor`` above its one node)."""
        self.release: KafkaRelease = kafka_release(version)
        self._extra_properties = dict(server_properties or {})
        self._proxied_port = proxied_port
        self.proxied_target: int | None = None
        self._requested_port = port
        self._cache = cache if cache is not None else cache_dir()
        self._state = BrokerState.NEW
        self._process: subprocess.Popen[bytes] | None = None
        self._data_dir: Path | None = None
        self._port: int | None = None
        self._controller_port: int | None = None
        self._reaper: weakref.finalize[[subprocess.Popen[bytes]], LocalKafka] | None = None

    # -- public surface ------------------------------------------------------------------

    @property
    def state(self) -> BrokerState:
        return self._state

    @property
    def bootstrap(self) -> str:
        """``"127.0.0.1:<port>"``, stable across :meth:`restart` and :meth:`kill`."""
        if self._port is None:
            raise LocalKafkaError("the broker has no address yet: call start() first")
        return f"{HOST}:{self._port}"

    @property
    def data_dir(self) -> Path:
        if self._data_dir is None:
            raise LocalKafkaError("the broker has no data dir: call start() first")
        return self._data_dir

    def ensure_jars(self) -> Path:
        """The directory of the broker's jars, downloaded with ``mvn`` on first use."""
        return ensure_jars(self._cache, self.release)

    def tool_command(self, main_class: str, *args: str) -> list[str]:
        """A ``java`` command line running ``main_class`` from the broker's jars, with
        warnings on stderr. Needs no running broker. The console tools' class names differ
        between releases: take them from :attr:`release` (``release.console_producer``)."""
        return [_java(), *_TOOL_HEAP, "-Djava.awt.headless=true",
                self.release.logging.option(self.release.tools_log_config), "-cp",
                str(self.ensure_jars() / "*"), main_class, *args]

    def start(self, timeout: float = 60.0) -> None:
        """Format fresh storage and start the broker; return once it serves metadata requests.

        Raises :class:`LocalKafkaError` with the tail of the broker's log if it exits or is
        not ready within ``timeout`` seconds; nothing is left running or on disk then.
        """
        if self._state not in (BrokerState.NEW, BrokerState.CLOSED):
            raise LocalKafkaError(
                f"start() needs a new or stopped broker, this one is {self._state.value}; "
                "use restart() to bring a running or killed broker back on the same data"
            )
        libs = self.ensure_jars()  # not counted in ``timeout``: a cold download takes a while
        deadline = time.monotonic() + timeout
        self._port, self._controller_port = _free_ports(self._requested_port)
        if self._proxied_port is not None:
            taken = {self._port, self._controller_port, self._proxied_port}
            self.proxied_target = free_port(avoid=taken)
        self._data_dir = Path(tempfile.mkdtemp(prefix="aiostreams-kafka-"))
        try:
            (self._data_dir / "logs").mkdir()
            self._write_server_properties()
            self._format_storage(libs, deadline)
            self._launch(libs, deadline)
        except BaseException:
            self.stop()
            raise

    def restart(self, timeout: float = 60.0) -> None:
        """End the broker gracefully (SIGTERM) if it runs, then start it again on the same
        ports and data: what a rolling restart or a crash recovery looks like to clients."""
        if self._state not in (BrokerState.RUNNING, BrokerState.DOWN):
            raise LocalKafkaError(
                f"restart() needs a started broker, this one is {self._state.value}; "
                "call start() first"
            )
        self._terminate(timeout=30.0)
        self._launch(self.ensure_jars(), time.monotonic() + timeout)

    def kill(self) -> None:
        """SIGKILL the broker, as a crash would; data and ports stay for :meth:`restart`."""
        if self._process is not None:
            send_signal(self._process, signal.SIGKILL, group=True)
            self._process.wait()
            self._forget_process()
        if self._state is BrokerState.RUNNING:
            self._state = BrokerState.DOWN

    def pause(self) -> None:
        """Freeze the broker (SIGSTOP): it keeps its connections but answers nothing, as an
        unreachable or hung broker would to its clients. :meth:`resume` undoes it."""
        if self._process is None or self._state is not BrokerState.RUNNING:
            raise LocalKafkaError(f"pause() needs a running broker, this one is "
                                  f"{self._state.value}")
        send_signal(self._process, signal.SIGSTOP, group=True)

    def resume(self, timeout: float = 60.0) -> None:
        """Let a paused broker run again (SIGCONT); return once it serves metadata
        requests again."""
        if self._process is not None:
            send_signal(self._process, signal.SIGCONT, group=True)
            self._await_ready(time.monotonic() + timeout, log_start=0)

    def stop(self, timeout: float = 30.0) -> None:
        """End the broker (SIGTERM; SIGKILL after ``timeout`` seconds) and remove its data.
        Idempotent."""
        self._terminate(timeout)
        if self._data_dir is not None:
            shutil.rmtree(self._data_dir, ignore_errors=True)
        self._data_dir = None
        self._port = self._controller_port = None
        self._state = BrokerState.CLOSED

    def __enter__(self) -> LocalKafka:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = f" at {HOST}:{self._port}" if self._port is not None else ""
        return f"<LocalKafka {self.release.version} {self._state.value}{where}>"

    # -- steps -----------------------------------------------------------------------------

    def _write_server_properties(self) -> None:
        data_dir = self.data_dir
        properties = {
            "process.roles": "broker,controller",
            "node.id": str(_NODE_ID),
            "controller.quorum.voters": f"{_NODE_ID}@{HOST}:{self._controller_port}",
            "listeners": f"PLAINTEXT://{HOST}:{self._port},CONTROLLER://{HOST}:"
                         f"{self._controller_port}",
            "advertised.listeners": f"PLAINTEXT://{HOST}:{self._port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(data_dir / "kraft-logs"),
            "num.partitions": "1",
            "auto.create.topics.enable": "false",
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            # One node: a few partitions for the internal topics make the first group join
            # and the first transactional producer quick (the default is 50 each).
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.num.partitions": "4",
            # Let tests and chaos runs use short consumer session timeouts (default 6 s).
            "group.min.session.timeout.ms": "1000",
            # After a SIGKILL the restarted broker may register only once the controller has
            # expired its previous incarnation's session (default 9 s, then backoff: ~14 s).
            "broker.session.timeout.ms": "2000",
            "broker.heartbeat.interval.ms": "500",
        }
        properties.update(self.release.server_properties)
        properties.update(self._extra_properties)
        if self.proxied_target is not None:
            properties["listeners"] += f",PROXIED://{HOST}:{self.proxied_target}"
            properties["advertised.listeners"] += f",PROXIED://{HOST}:{self._proxied_port}"
            properties["listener.security.protocol.map"] += ",PROXIED:PLAINTEXT"
        text = "".join(f"{key}={value}\n" for key, value in properties.items())
        (data_dir / "server.properties").write_text(text)

    def _format_storage(self, libs: Path, deadline: float) -> None:
        cluster_id = _random_cluster_id()
        command = [
            _java(), *_TOOL_HEAP, *self._jvm_properties(), "-cp", str(libs / "*"),
            "kafka.tools.StorageTool", "format", "-t", cluster_id,
            "-c", str(self.data_dir / "server.properties"),
        ]
        try:
            result = subprocess.run(
                command, capture_output=True, text=True, check=False,
                timeout=max(deadline - time.monotonic(), 1.0),
            )
        except subprocess.TimeoutExpired as exc:
            raise LocalKafkaError("formatting the broker's storage (kafka.tools.StorageTool) "
                                  "timed out; raise start(timeout=...)") from exc
        if result.returncode != 0:
            raise LocalKafkaError(
                f"kafka.tools.StorageTool format failed (exit {result.returncode}):\n"
                + (result.stdout + result.stderr).strip()
            )

    def _launch(self, libs: Path, deadline: float) -> None:
        assert self._process is None, "a broker process is already running"
        data_dir = self.data_dir
        command = [
            _java(), *_BROKER_HEAP, *self._jvm_properties(), "-cp", str(libs / "*"),
            "kafka.Kafka", str(data_dir / "server.properties"),
        ]
        began = time.monotonic()
        server_log = data_dir / "logs" / "server.log"
        log_start = server_log.stat().st_size if server_log.exists() else 0  # a restart appends
        with open(data_dir / "logs" / "stdout.log", "ab") as output:
            process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
                start_new_session=True, cwd=data_dir, preexec_fn=die_with_parent(),
            )
        self._process = process
        self._reaper = weakref.finalize(self, _kill_at_exit, process)
        try:
            self._await_ready(deadline, log_start)
        except BaseException:
            self.kill()
            self._state = BrokerState.DOWN
            raise
        self._state = BrokerState.RUNNING
        log.info("Kafka broker ready at %s after %.1f s", self.bootstrap,
                 time.monotonic() - began)

    def _await_ready(self, deadline: float, log_start: int) -> None:
        """Ready means: *this* broker's log says it started, its process is alive, and its
        port answers a metadata request. The port alone could be another process's (one
        that took it after :func:`_free_ports` looked), while this JVM is dying."""
        process = self._process
        port = self._port
        assert process is not None and port is not None
        try:
            code = await_ready(
                process, lambda: (self._logged_started(log_start) and process.poll() is None
                                  and metadata_answers(HOST, port, timeout=_PROBE_TIMEOUT)),
                deadline)
        except TimeoutError:
            raise LocalKafkaError(
                f"the Kafka broker at {self.bootstrap} did not answer a metadata request "
                "in time; raise start(timeout=...) on a slow machine.\n"
                + self._log_tail()
            ) from None
        if code is not None:
            raise LocalKafkaError(
                f"the Kafka broker exited with code {code} while starting (is port "
                f"{self._port} or {self._controller_port} taken? is Java too old? 17 is "
                "what aiostreams tests with).\n"
                + self._log_tail()
            )

    def _logged_started(self, log_start: int) -> bool:
        """Whether this run of the broker logged that it started (past ``log_start``)."""
        try:
            with open(self.data_dir / "logs" / "server.log", "rb") as log_file:
                log_file.seek(log_start)
                return _STARTED_LINE in log_file.read()
        except FileNotFoundError:
            return False

    def _terminate(self, timeout: float) -> None:
        process = self._process
        if process is None:
            return
        if end_process(process, timeout, group=True):  # SIGCONT first: a paused broker too
            log.warning("Kafka broker ignored SIGTERM for %.0f s; sent SIGKILL", timeout)
        self._forget_process()
        if self._state is BrokerState.RUNNING:
            self._state = BrokerState.DOWN

    def _forget_process(self) -> None:
        if self._reaper is not None:
            self._reaper.detach()
        self._reaper = None
        self._process = None

    def _jvm_properties(self) -> list[str]:
        return [
            "-Djava.awt.headless=true",
            self.release.logging.option(self.release.broker_log_config),
            f"-Dkafka.logs.dir={self.data_dir / 'logs'}",
        ]

    def _log_tail(self) -> str:
        parts = []
        for name in ("server.log", "stdout.log"):
            tail = log_tail(self.data_dir / "logs" / name, _LOG_TAIL_LINES)
            if tail:
                parts.append(f"--- the broker's {name}, last lines ---\n" + tail)
        return "\n".join(parts) if parts else "The broker wrote no log."


def _java() -> str:
    return find_java(LocalKafkaError, "the local Kafka broker",
                     "point AIOSTREAMS_KAFKA at a running broker instead")


def _free_ports(port: int | None) -> tuple[int, int]:
    """A client port (``port`` if given, checked to be free) and another, the controller's,
    free on 127.0.0.1 now. Raises :class:`LocalKafkaError` when ``port`` is taken: a broker
    started there would fail, and clients would meet whatever holds the port."""
    if port:
        check_port_free(port, LocalKafkaError)
        return port, free_port(avoid={port})
    client = free_port()
    return client, free_port(avoid={client})


def _random_cluster_id() -> str:
    """A Kafka ``Uuid`` string (url-safe base64 of 16 random bytes), as ``StorageTool
    random-uuid`` prints, without starting a JVM for it."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):  # Kafka avoids ids that read like a command-line flag
            return text


def _kill_at_exit(process: subprocess.Popen[bytes]) -> None:
    """Last resort when a LocalKafka is garbage-collected or the interpreter exits running."""
    if process.poll() is None:
        send_signal(process, signal.SIGKILL, group=True)
        process.wait()
