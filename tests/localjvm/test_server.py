"""The lifecycle every local Java server shares (``CREATED → RUNNING → STOPPED``), on a toy
server whose child is a small Python program: it binds 127.0.0.1 (the port asked for, or a
free one), says so on stdout, and serves until stopped."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from aiostreams.localjvm.child_life import die_with_parent
from aiostreams.localjvm.process import log_tail
from aiostreams.localjvm.server import LocalJvmServer, ServerState

CHILD = """
import signal, socket, sys
if sys.argv[2] == "ignore-term":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
server = socket.socket()
server.bind(("127.0.0.1", int(sys.argv[1])))
server.listen()
print(f"listening {server.getsockname()[1]}", flush=True)
print("the toy server's log line", file=sys.stderr, flush=True)
if sys.argv[2] == "fail":
    raise SystemExit(2)
while True:
    server.accept()[0].close()
"""


class ToyError(RuntimeError):
    pass


class ToyServer(LocalJvmServer):
    error = ToyError
    noun = "toy"
    program = "the toy server"
    instead = "do without it"

    def __init__(self, log: Path, port: int | None = None, mode: str = "serve") -> None:
        super().__init__(port)
        self.log = log
        self.mode = mode
        self.cleaned = 0
        self.child: subprocess.Popen[Any] | None = None

    def require_java(self) -> str:
        return sys.executable  # the toy's "JVM"

    def _spawn(self, java: str) -> subprocess.Popen[Any]:
        with open(self.log, "wb") as log:
            self.child = subprocess.Popen(
                [java, "-c", CHILD, str(self._requested_port or 0), self.mode],
                stdout=subprocess.PIPE, stderr=log, text=True,
                preexec_fn=die_with_parent())  # none left behind if a test hangs
        return self.child

    def _await_ready(self, process: subprocess.Popen[Any], timeout: float) -> int:
        assert process.stdout is not None
        line = process.stdout.readline()
        if self.mode == "fail":
            process.wait()
            raise ToyError(f"the toy exited {process.returncode}:\n{log_tail(self.log)}")
        return int(line.split()[1])

    def _cleanup(self) -> None:
        self.cleaned += 1


def answers(url: str) -> bool:
    host, port = url.removeprefix("http://").split(":")
    try:
        with socket.create_connection((host, int(port)), timeout=5):
            return True
    except OSError:
        return False


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.timeout(60)
def test_start_serves_on_127_0_0_1_and_stop_ends_the_child_and_cleans_up(
        tmp_path: Path) -> None:
    with ToyServer(tmp_path / "toy.log") as toy:
        assert toy.state is ServerState.RUNNING
        url = toy._address
        assert url.startswith("http://127.0.0.1:") and answers(url)
        assert toy.child is not None
    assert toy.state is ServerState.STOPPED
    assert toy.child.returncode is not None and gone(toy.child.pid)
    assert not answers(url)
    assert toy.cleaned == 1
    toy.stop()  # idempotent
    assert toy.state is ServerState.STOPPED
    with pytest.raises(ToyError, match="the toy is stopped: start\\(\\) it first"):
        _ = toy._address
    with pytest.raises(ToyError, match="start\\(\\) of a stopped toy: make a new ToyServer"):
        toy.start()


@pytest.mark.timeout(60)
def test_the_port_asked_for_is_the_port_served(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with ToyServer(tmp_path / "toy.log", port=port) as toy:
        assert toy._address == f"http://127.0.0.1:{port}"


@pytest.mark.timeout(60)
def test_a_taken_port_is_refused_and_no_child_is_started(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        toy = ToyServer(tmp_path / "toy.log", port=taken.getsockname()[1])
        with pytest.raises(ToyError, match="is taken by another process"):
            toy.start()
    assert toy.child is None and toy.state is ServerState.CREATED


@pytest.mark.timeout(60)
def test_a_start_that_fails_leaves_nothing_running_and_shows_the_log(tmp_path: Path) -> None:
    toy = ToyServer(tmp_path / "toy.log", mode="fail")
    with pytest.raises(ToyError, match="exited 2:\nthe toy server's log line"):
        toy.start()
    assert toy.state is ServerState.STOPPED and toy.cleaned == 1
    assert toy.child is not None and gone(toy.child.pid)


@pytest.mark.timeout(60)
def test_stop_kills_a_child_that_ignores_sigterm(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from aiostreams.localjvm import server as server_module

    monkeypatch.setattr(server_module, "STOP_TIMEOUT", 0.5)
    toy = ToyServer(tmp_path / "toy.log", mode="ignore-term")
    toy.start()
    toy.stop()
    assert toy.child is not None and toy.child.returncode == -9
    assert toy.state is ServerState.STOPPED
