"""``aiostreams run MODULE:APP --workers N``: N worker processes in one consumer group.

Each worker is ``python -m aiostreams run MODULE:APP ... --worker-index I`` (the same
options, no progress line, its metrics on ``--metrics-port`` + I when a port is given);
the broker shares the input partitions among them as group members. The supervisor:

* forwards SIGINT and SIGTERM to every worker (each then stops gracefully);
* when a worker crashes (exits non-zero, or is killed, while no stop was asked for), starts
  it again after a backoff (1 s, doubling, at most 30 s): meanwhile the group moves its
  partitions to the other workers, which keep running. A worker that crashed more than
  ``max_restarts`` times within ``restart_window`` seconds is not restarted: the supervisor
  says so, stops the others (SIGTERM) and exits with that worker's code - a task that fails
  for good would otherwise move from worker to worker and fail everywhere. Exit code 2 (a
  usage or configuration error) is never retried;
* exits 0 once every worker exited 0, or 130 when it was interrupted by SIGINT (Ctrl-C)
  and every worker stopped gracefully (a worker's 130 after a SIGINT is not a failure).

Identity per worker (:func:`worker_overrides`): with static membership each worker needs an
instance id of its own (two members with one id fence each other). A configured
``group_instance_id`` becomes ``<group_instance_id>-I`` for worker I; the default, derived
one (:mod:`aiostreams.engine.static_membership`) is claimed by each worker in the shared
state directory, one slot each, so the supervisor adds nothing. (Exactly-once needs no
instance id: its transactional ids are per task.)
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from aiostreams.commands import ExitCode
from aiostreams.commands.run import Reporter
from aiostreams.settings.config import Settings

_IDLE_WAKE = 1.0
"""Seconds between checks of the workers while no restart is due (a SIGCHLD wakes it)."""


def worker_overrides(app_name: str, settings: Settings, index: int) -> dict[str, Any]:
    """The settings worker ``index`` adds to its app's (see the module docstring)."""
    if settings.group_instance_id is not None:
        return {"group_instance_id": f"{settings.group_instance_id}-{index}"}
    return {}


def worker_command(base: Sequence[str], index: int, metrics_port: int | None,
                   workers: int = 1) -> list[str]:
    """The command line of worker ``index``: ``base`` (the ``run`` arguments without
    ``--workers``, ``--metrics-port`` and ``--no-progress``) plus its own; with a fixed
    metrics port, the metrics URLs of all ``workers`` (interactive queries redirect there)."""
    command = [sys.executable, "-m", "aiostreams", *base, "--no-progress",
               "--worker-index", str(index)]
    if metrics_port is not None:
        command += ["--metrics-port", str(metrics_port + index if metrics_port else 0)]
    if metrics_port:
        command += ["--query-peers", ",".join(query_peers(base, metrics_port, workers))]
    return command


def query_peers(base: Sequence[str], metrics_port: int, workers: int) -> list[str]:
    """The base URLs of the metrics servers of ``workers`` workers from ``metrics_port``."""
    host = base[base.index("--metrics-host") + 1] if "--metrics-host" in base else "127.0.0.1"
    host = f"[{host}]" if ":" in host else host
    return [f"http://{host}:{metrics_port + i}" for i in range(workers)]


@dataclass(frozen=True)
class RestartPolicy:
    """How the supervisor treats a crashed worker (see the module docstring)."""

    max_restarts: int = 5
    restart_window: float = 300.0
    first_backoff: float = 1.0
    max_backoff: float = 30.0

    def backoff(self, crashes: int) -> float:
        """The pause before the restart that follows crash number ``crashes`` (1, 2, ...)."""
        return float(min(self.max_backoff, self.first_backoff * 2 ** (crashes - 1)))


@dataclass
class _Slot:
    """One worker index: its current process, and its crash times."""

    index: int
    process: subprocess.Popen[bytes] | None = None
    crashes: list[float] = field(default_factory=list)
    restart_at: float | None = None


def supervise(base: Sequence[str], workers: int, metrics_port: int | None,
              reporter: Reporter, policy: RestartPolicy | None = None) -> int:
    """Run ``workers`` worker processes until all exit; returns the exit code (see the
    module docstring). Blocking; meant for the main thread (it installs signal handlers
    and blocks SIGCHLD while it runs, to wait for children and restart deadlines at once)."""
    policy = policy or RestartPolicy()
    slots = [_Slot(index) for index in range(workers)]
    stopping: list[int] = []  # the signals received: once any came, nothing is restarted
    failure: int | None = None

    def start(slot: _Slot) -> None:
        slot.restart_at = None
        slot.process = subprocess.Popen(worker_command(base, slot.index, metrics_port, workers))
        if stopping:  # a signal came while it was being started
            slot.process.send_signal(stopping[-1])

    def forward(signum: int, frame: FrameType | None) -> None:
        stopping.append(signum)
        for slot in slots:
            if slot.process is not None and slot.process.poll() is None:
                slot.process.send_signal(signum)

    def stop_all(signum: int = signal.SIGTERM) -> None:
        stopping.append(signum)
        for slot in slots:
            slot.restart_at = None
            if slot.process is not None and slot.process.poll() is None:
                slot.process.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
    try:
        for slot in slots:
            start(slot)
        reporter.say(f"started {workers} worker(s): pids "
                     f"{', '.join(str(s.process.pid) for s in slots if s.process)}")
        while any(s.process is not None or s.restart_at is not None for s in slots):
            for slot in slots:
                process = slot.process
                if process is None or process.poll() is None:
                    continue
                slot.process = None
                code = _exit_code(process.returncode)
                if code == 0 or stopping:
                    if code != 0 and failure is None and not _stopped_by(code, stopping):
                        failure = code
                    continue
                now = time.monotonic()
                slot.crashes = [t for t in slot.crashes if now - t < policy.restart_window]
                slot.crashes.append(now)
                if code == 2 or len(slot.crashes) > policy.max_restarts:
                    why = ("a usage or configuration error does not go away on its own"
                           if code == 2 else
                           f"it crashed {len(slot.crashes)} times within "
                           f"{policy.restart_window:.0f}s")
                    reporter.say(f"worker {slot.index} (pid {process.pid}) exited with code "
                                 f"{code}; not restarting it ({why}); stopping the others")
                    failure = code
                    stop_all()
                    continue
                delay = policy.backoff(len(slot.crashes))
                slot.restart_at = now + delay
                reporter.say(f"worker {slot.index} (pid {process.pid}) exited with code "
                             f"{code}; restarting it in {delay:.0f}s (crash "
                             f"{len(slot.crashes)} of at most {policy.max_restarts + 1} "
                             f"within {policy.restart_window:.0f}s); its partitions move to "
                             "the other workers meanwhile")
            now = time.monotonic()
            for slot in slots:
                if slot.restart_at is not None and slot.restart_at <= now and not stopping:
                    start(slot)
                    assert slot.process is not None
                    reporter.say(f"restarted worker {slot.index}: pid {slot.process.pid}")
            due = [s.restart_at for s in slots if s.restart_at is not None]
            if not any(s.process is not None for s in slots) and not due:
                break
            wait = max(0.0, min(due) - time.monotonic()) if due else None
            _await_child(wait)
        if failure is not None:
            return failure
        return ExitCode.INTERRUPTED if signal.SIGINT in stopping else ExitCode.OK
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        for slot in slots:
            process = slot.process
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _await_child(timeout: float | None) -> None:
    """Wait until a child may have exited (SIGCHLD, blocked so it queues), a forwarded
    signal ran its handler, or ``timeout`` seconds passed."""
    if timeout is None:
        signal.sigtimedwait({signal.SIGCHLD}, _IDLE_WAKE)
    elif timeout > 0:
        signal.sigtimedwait({signal.SIGCHLD}, timeout)


def _stopped_by(code: int, signals: Sequence[int]) -> bool:
    """Whether exit ``code`` is what a worker we signalled to stop reports for it."""
    return any(code in (128 + sig, 130 if sig == signal.SIGINT else -1) for sig in signals)


def _exit_code(returncode: int) -> int:
    return returncode if returncode >= 0 else 128 - returncode  # killed by N: 128 + N
