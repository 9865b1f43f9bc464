"""Ending a server's child: SIGTERM, and SIGKILL for one that ignores it; waiting until a
child is ready sees it die at once, and gives up at the deadline."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aiostreams.localjvm.child_life import die_with_parent
from aiostreams.localjvm.process import await_ready, end_process, log_tail

IGNORES_TERM = """
import signal, sys
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ignoring SIGTERM", flush=True)
sys.stdin.read()
signal.pause()  # stdin closed: keep ignoring, as a hung JVM would
"""

HEEDS_TERM = """
import sys
print("running", flush=True)
sys.stdin.read()
import signal; signal.pause()
"""


def child(code: str) -> subprocess.Popen[str]:
    process = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True,
                               preexec_fn=die_with_parent())  # none left if a test hangs
    assert process.stdout is not None
    assert process.stdout.readline()  # its signal disposition is set: it said so
    return process


@pytest.mark.timeout(30)
def test_a_child_that_ignores_sigterm_is_killed_after_the_timeout() -> None:
    process = child(IGNORES_TERM)
    began = time.monotonic()
    assert end_process(process, timeout=0.5) is True
    assert process.returncode == -signal.SIGKILL
    assert time.monotonic() - began >= 0.5  # it was given its time to end first


@pytest.mark.timeout(30)
def test_a_child_that_heeds_sigterm_ends_by_it_and_is_not_killed() -> None:
    process = child(HEEDS_TERM)
    assert end_process(process, timeout=20.0) is False
    assert process.returncode == -signal.SIGTERM
    assert process.stdout is not None and process.stdout.closed


def test_ending_a_child_that_already_exited_is_a_no_op() -> None:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    assert end_process(process, timeout=1.0) is False
    assert process.returncode == 0


@pytest.mark.timeout(30)
def test_a_child_that_dies_while_starting_is_seen_before_the_deadline() -> None:
    process = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    began = time.monotonic()
    assert await_ready(process, lambda: False, time.monotonic() + 25) == 3
    assert time.monotonic() - began < 20


@pytest.mark.timeout(30)
def test_waiting_gives_up_at_the_deadline_and_says_ready_when_it_is() -> None:
    process = child(HEEDS_TERM)
    try:
        with pytest.raises(TimeoutError):
            await_ready(process, lambda: False, time.monotonic() + 0.3)
        polls: list[float] = []
        assert await_ready(process, lambda: polls.append(1) or len(polls) == 3,
                           time.monotonic() + 20, interval=0.01) is None
        assert len(polls) == 3
    finally:
        end_process(process, timeout=5.0)


def test_the_log_tail_drops_java_stack_frames(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("starting\nERROR boom\n\tat a.B.c(B.java:1)\n\t... 3 more\n"
                   "Caused by: java.net.BindException\n")
    assert log_tail(log, lines=2) == "ERROR boom\nCaused by: java.net.BindException"
    assert log_tail(tmp_path / "none.log") == ""
