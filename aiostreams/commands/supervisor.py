"""``aiostreams run MODULE:APP --workers N``: N worker processes in one consumer group.

Each worker is ``python -m aiostreams run MODULE:APP ... --worker-index I`` (the same
options, no progress line, its metrics on ``--metrics-port`` + I when a port is given);
the broker shares the input partitions among them as group members. The supervisor:

* forwards SIGINT and SIGTERM to every worker (each then stops gracefully);
* when a worker exits with a non-zero code, stops the others (SIGTERM) and exits with that
  code: a failed task would otherwise move to another worker and fail there too;
* exits 0 once every worker exited 0, or 130 when it was interrupted by SIGINT (Ctrl-C)
  and every worker stopped gracefully (a worker's 130 after a SIGINT is not a failure).

Identity per worker (:func:`worker_overrides`): with static membership
(``group_instance_id``) or ``exactly_once`` each worker needs an id of its own, so worker I
gets ``<group_instance_id or app name>-I``; two members with one id would fence each other.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from types import FrameType
from typing import Any

from aiostreams.commands import ExitCode
from aiostreams.commands.run import Reporter
from aiostreams.config import Settings


def worker_overrides(app_name: str, settings: Settings, index: int) -> dict[str, Any]:
    """The settings worker ``index`` adds to its app's (see the module docstring)."""
    if settings.group_instance_id is not None:
        return {"group_instance_id": f"{settings.group_instance_id}-{index}"}
    if settings.processing_guarantee == "exactly_once":
        return {"group_instance_id": f"{app_name}-{index}"}
    return {}


def worker_command(base: Sequence[str], index: int, metrics_port: int | None) -> list[str]:
    """The command line of worker ``index``: ``base`` (the ``run`` arguments without
    ``--workers``, ``--metrics-port`` and ``--no-progress``) plus its own."""
    command = [sys.executable, "-m", "aiostreams", *base, "--no-progress",
               "--worker-index", str(index)]
    if metrics_port is not None:
        command += ["--metrics-port", str(metrics_port + index if metrics_port else 0)]
    return command


def supervise(base: Sequence[str], workers: int, metrics_port: int | None,
              reporter: Reporter) -> int:
    """Run ``workers`` worker processes until all exit; returns the exit code (see the
    module docstring). Blocking; meant for the main thread (it installs signal handlers)."""
    children: list[subprocess.Popen[bytes]] = []
    first_failure: int | None = None
    received: list[int] = []

    def forward(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        for child in children:
            if child.poll() is None:
                child.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        for index in range(workers):
            child = subprocess.Popen(worker_command(base, index, metrics_port))
            children.append(child)
            if received:  # a signal came while the workers were being started
                child.send_signal(received[-1])
        reporter.say(f"started {workers} worker(s): pids "
                     f"{', '.join(str(c.pid) for c in children)}")
        running = {child.pid: (index, child) for index, child in enumerate(children)}
        while running:
            pid, status = os.wait()
            if pid not in running:
                continue
            index, exited = running.pop(pid)
            exited.returncode = code = _exit_code(status)
            if code != 0 and not (code == ExitCode.INTERRUPTED and signal.SIGINT in received):
                reporter.say(f"worker {index} (pid {pid}) exited with code {code}"
                             + ("; stopping the others" if running and first_failure is None
                                else ""))
                if first_failure is None:
                    first_failure = code
                    for _, other in running.values():
                        other.send_signal(signal.SIGTERM)
        if first_failure is not None:
            return first_failure
        return ExitCode.INTERRUPTED if signal.SIGINT in received else ExitCode.OK
    finally:
        for child in children:
            if child.returncode is None and child.poll() is None:
                child.kill()
                child.wait()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _exit_code(status: int) -> int:
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code  # killed by signal N: 128 + N, as a shell says
