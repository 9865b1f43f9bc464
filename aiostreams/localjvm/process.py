"""A server's child process: waiting until it is ready, ending it, the tail of its log.

A separate process announces nothing to this one, so readiness is polled with a deadline;
between polls this waits on the child itself, so a child that dies while starting is seen
at once, not at the deadline.

Ending is ``SIGCONT`` (a stopped child cannot act on what follows), ``SIGTERM``, and
``SIGKILL`` for a child still running ``timeout`` seconds later. With ``group=True`` the
signals go to the child's process group (a child started with ``start_new_session``, and
whatever it started).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["POLL_INTERVAL", "await_ready", "end_process", "log_tail", "send_signal"]

POLL_INTERVAL = 0.1


def await_ready(process: subprocess.Popen[Any], ready: Callable[[], bool], deadline: float,
                interval: float = POLL_INTERVAL) -> int | None:
    """Poll ``ready()`` every ``interval`` seconds until it holds (return None) or the
    process exits (return its exit code); raise :class:`TimeoutError` past ``deadline``
    (a :func:`time.monotonic` time). ``ready()`` must not raise for a child still starting."""
    while not ready():
        if time.monotonic() > deadline:
            raise TimeoutError("not ready by the deadline")
        try:
            return process.wait(timeout=interval)  # returns early if it died
        except subprocess.TimeoutExpired:
            continue
    return None


def send_signal(process: subprocess.Popen[Any], signum: signal.Signals, *,
                group: bool = False) -> None:
    """Send ``signum`` to the process (or its group); nothing if it has exited already."""
    with contextlib.suppress(ProcessLookupError):
        if group:
            os.killpg(process.pid, signum)
        else:
            process.send_signal(signum)


def end_process(process: subprocess.Popen[Any], timeout: float, *,
                group: bool = False) -> bool:
    """End the process: SIGTERM, then SIGKILL if it still runs after ``timeout`` seconds;
    return whether it had to be killed. Closes its pipes (standard input first: a child that
    exits at its end may be gone before the signal). Blocks until it has exited."""
    killed = False
    if process.stdin is not None:
        process.stdin.close()
    if process.poll() is None:
        send_signal(process, signal.SIGCONT, group=group)
        send_signal(process, signal.SIGTERM, group=group)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            send_signal(process, signal.SIGKILL, group=group)
            process.wait()
            killed = True
    for pipe in (process.stdout, process.stderr):
        if pipe is not None:
            pipe.close()
    assert process.returncode is not None, "an ended process has an exit code"
    return killed


def log_tail(path: Path, lines: int = 30) -> str:
    """The last ``lines`` lines of the log at ``path`` without Java's stack frames (they
    crowd out what matters: the messages and their "Caused by" lines); "" if no log."""
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return ""
    return "\n".join([line for line in text.splitlines()
                      if not line.startswith(("\tat ", "\t... "))][-lines:])
