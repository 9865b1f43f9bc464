"""The shape the ``python -m aiostreams.local*`` CLIs share: ``run`` starts a server, says
where it is, keeps it up until Ctrl-C or SIGTERM and stops it; an error of the package is a
message on stderr and exit code 1."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType

__all__ = ["add_run_arguments", "exit_code", "run_until_signal"]


def add_run_arguments(run: argparse.ArgumentParser, *, port: str, timeout: float,
                      first_run: str) -> None:
    """``--port P`` (``port`` names it: "HTTP port"; default a free one) and ``--timeout S``
    (default ``timeout``; ``first_run`` says what a first run does before it counts)."""
    run.add_argument("--port", type=int, default=None, help=f"{port} (default: a free one)")
    run.add_argument("--timeout", type=float, default=timeout,
                     help=f"seconds to wait for it to start (default %(default)s; {first_run})")


def exit_code(command: Callable[[], int], error: type[Exception]) -> int:
    """``command()``'s exit code; 1 after printing ``error: <message>`` on stderr when it
    raises ``error`` (the message says what to do)."""
    try:
        return command()
    except error as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def run_until_signal(start: Callable[[], None], announce: Callable[[], None],
                     stop: Callable[[], None]) -> int:
    """``start()``, ``announce()`` (print where it runs), wait for SIGINT or SIGTERM, then
    ``stop()`` — also when ``start`` or ``announce`` raised — and put the previous signal
    handlers back. Returns 0. Call it from the main thread (signal handlers live there)."""
    done = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        done.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        start()
        announce()
        sys.stdout.flush()
        sys.stderr.flush()
        done.wait()
    finally:
        stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0
