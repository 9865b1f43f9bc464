"""``aiostreams run MODULE:APP``: run one app in this process until SIGINT/SIGTERM or a failure.

The steps, each reported on stderr as one ``aiostreams: ...`` line:

1. for a ``kafka://`` broker, reach it within ``--connect-timeout`` (else exit code 3, in
   bounded time, instead of the app's longer start-up retry);
2. serve metrics and ``/health`` when ``--metrics-port`` is given (``/health`` answers 503
   until the app runs);
3. start the app (``running`` line), show the live status line on a terminal;
4. on SIGINT/SIGTERM stop gracefully (drain, retire, commit); then exit 130 after SIGINT
   (Ctrl-C: interrupted, as shells report it) and 0 after SIGTERM (a service manager's
   normal stop); on a task failure stop and raise it (exit code 1). A final line sums up
   what the app did.

A signal during start-up cancels the start (the app cleans up) and exits the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from dataclasses import dataclass
from typing import TextIO

from rich.console import Console

from aiostreams.app import App
from aiostreams.commands import ExitCode, UsageError
from aiostreams.commands.target import probe_broker
from aiostreams.ops.metrics import MetricsServer, TaskTracker
from aiostreams.ops.progress import ProgressLine


class CurrentStderr:
    """Writes to whatever ``sys.stderr`` is at the time of the write, so that log lines and
    status lines go above rich's live line while it redirects stderr."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


class Reporter:
    """Prints ``aiostreams: <line>`` (``aiostreams[worker N]: ...`` in a worker process)."""

    def __init__(self, worker_index: int | None = None, stream: TextIO | None = None) -> None:
        self.prefix = ("aiostreams" if worker_index is None
                       else f"aiostreams[worker {worker_index}]")
        self._stream = stream

    def say(self, line: str) -> None:
        stream = self._stream or sys.stderr
        print(f"{self.prefix}: {line}", file=stream, flush=True)


@dataclass(frozen=True)
class RunOptions:
    metrics_host: str = "127.0.0.1"
    metrics_port: int | None = None
    progress: bool = True
    connect_timeout: float = 10.0
    query_peers: tuple[str, ...] = ()  # metrics URLs of all workers (interactive queries)


async def run_app(app: App, options: RunOptions, reporter: Reporter) -> int:
    """Run ``app`` as described in the module docstring; returns the exit code, or raises
    what stopped the app (a task failure, an unreachable broker, a bad setting)."""
    await probe_broker(app.settings, options.connect_timeout)
    tracker = TaskTracker()
    tracker.watch_commits(app)
    loop = asyncio.get_running_loop()
    interrupted = asyncio.Event()
    received: list[int] = []

    def on_signal(signum: int) -> None:
        if not interrupted.is_set():
            reporter.say(f"{signal.Signals(signum).name}: stopping {app.name!r} (draining "
                         "in-flight records, then committing)")
        received.append(signum)
        interrupted.set()
        app.request_stop()

    def stopped_code() -> int:
        return signal_exit_code(received[0]) if received else ExitCode.OK

    signals = (signal.SIGINT, signal.SIGTERM)
    for sig in signals:
        loop.add_signal_handler(sig, on_signal, sig)
    server: MetricsServer | None = None
    progress: asyncio.Task[None] | None = None
    started = False
    try:
        if options.metrics_port is not None:
            server = MetricsServer(app, host=options.metrics_host, port=options.metrics_port,
                                   peers=options.query_peers)
            try:
                await server.start()
            except OSError as e:
                raise UsageError(
                    f"cannot serve metrics on {options.metrics_host}:{options.metrics_port}: "
                    f"{os.strerror(e.errno) if e.errno else e}; choose another --metrics-port "
                    "(0 picks a free one)"
                ) from e
            base = server.base_url
            reporter.say(f"metrics on {server.metrics_url} (health: {base}/health; "
                         f"status page: {base}/)")
        if not await _start_unless_interrupted(app, interrupted):
            reporter.say("interrupted while starting; stopped")
            return stopped_code()
        started = True
        reporter.say(f"app {app.name!r} running on {app.settings.broker} "
                     f"({len(app.inspect().tasks)} task(s) so far)")
        if interrupted.is_set():
            app.request_stop()
        if options.progress:
            console = Console(stderr=True, force_terminal=True)
            progress = loop.create_task(ProgressLine(app, tracker, console).run())
        await app.wait()
        return stopped_code()
    finally:
        if progress is not None:
            progress.cancel()
            await asyncio.gather(progress, return_exceptions=True)
        await app.stop()
        if server is not None:
            await server.stop()
        for sig in signals:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(sig)
        if started:
            reporter.say(summary(app, tracker))


def signal_exit_code(signum: int) -> int:
    """The exit code of a graceful stop on ``signum``: 130 for SIGINT, 0 for SIGTERM."""
    return ExitCode.INTERRUPTED if signum == signal.SIGINT else ExitCode.OK


async def _start_unless_interrupted(app: App, interrupted: asyncio.Event) -> bool:
    """Start the app; False (the start cancelled, the app cleaned up) if a signal came
    first. Raises what the start raised."""
    start = asyncio.ensure_future(app.start())
    signalled = asyncio.ensure_future(interrupted.wait())
    try:
        await asyncio.wait({start, signalled}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        signalled.cancel()
    if not start.done():
        start.cancel()
        await asyncio.gather(start, return_exceptions=True)
        return False
    start.result()
    return True


def summary(app: App, tracker: TaskTracker) -> str:
    t = tracker.totals(app)
    verb = "failed" if app.inspect().failure is not None else "stopped"
    return (f"app {app.name!r} {verb}: {t.records_in} record(s) in, {t.records_out} out, "
            f"{t.retries} retries, {t.dead_lettered} dead letter(s), {t.skipped} skipped, "
            f"{t.commits} commit(s)")
