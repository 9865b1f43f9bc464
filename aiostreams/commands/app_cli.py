"""The app commands' command line: ``aiostreams run MODULE:APP`` (one process, or
``--workers N`` under a supervisor) and ``aiostreams describe MODULE:APP``.

:func:`register` adds them to the parser ``cli.py`` builds. Settings precedence is
:mod:`aiostreams.commands.target`'s; a run's exit codes are :mod:`aiostreams.commands`'.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from aiostreams.app import App, run_event_loop
from aiostreams.commands import UsageError
from aiostreams.commands.describe import describe_app
from aiostreams.commands.run import Reporter, RunOptions, run_app
from aiostreams.commands.supervisor import RestartPolicy, supervise, worker_overrides
from aiostreams.commands.target import (
    apply_settings,
    command_line_overrides,
    load_app,
    probe_broker,
)


def register(commands: Any, common: argparse.ArgumentParser,
             settings: argparse.ArgumentParser) -> None:
    """Add ``run`` and ``describe`` to ``commands``."""
    run = commands.add_parser(
        "run", parents=[common, settings], help="run an app until SIGINT/SIGTERM",
        description="Run an app: join its consumer group and process until SIGINT/SIGTERM\n"
                    "(a graceful stop: drain, retire, commit; exit 0) or a task failure\n"
                    "(exit 1).",
        epilog="examples:\n  aiostreams run myproject.app:app\n"
               "  aiostreams run myproject.app:app --workers 4 --broker kafka://b1:9092 "
               "--metrics-port 9108\n  aiostreams run myproject.app:app --set "
               "max_in_flight=500 --set on_error=skip",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("app", metavar="MODULE:APP", help="module and name of the App")
    run.add_argument("--workers", type=int, default=1, metavar="N",
                     help="run N worker processes in one consumer group (default 1: this "
                          "process); SIGINT/SIGTERM are forwarded; exit code of the first "
                          "that fails")
    run.add_argument("--max-restarts", type=int, default=RestartPolicy.max_restarts,
                     metavar="N",
                     help="with --workers: restart a crashed worker (backoff 1 s doubling to "
                          "30 s) unless it crashed more than N times in "
                          f"{RestartPolicy.restart_window:.0f} s; then stop all (default "
                          "%(default)s; 0: stop all at the first crash)")
    run.add_argument("--metrics-port", type=_port, metavar="PORT",
                     help="serve Prometheus metrics at /metrics, /health and a live status "
                          "page at / on PORT (0: a free port, printed); worker I of "
                          "--workers uses PORT+I")
    run.add_argument("--metrics-host", default="127.0.0.1", metavar="HOST",
                     help="interface for the metrics server (default %(default)s)")
    run.add_argument("--no-progress", action="store_true",
                     help="no live status line (it is shown only on a terminal anyway)")
    run.add_argument("--worker-index", type=int, help=argparse.SUPPRESS)
    run.add_argument("--query-peers", default="", help=argparse.SUPPRESS)  # queries.py
    run.set_defaults(handler=_run)

    describe = commands.add_parser(
        "describe", parents=[common, settings], help="print an app's topology",
        description="Print the app's topology (sub-topologies, sources, processors, "
                    "stores, sinks) and the settings it sets; secrets print as **********.")
    describe.add_argument("app", metavar="MODULE:APP")
    describe.add_argument("--mermaid", action="store_true",
                          help="print a Mermaid flowchart only")
    describe.set_defaults(handler=_describe)


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(
            f"{port} is not a TCP port: use 1-65535, or 0 for a free one")
    return port


def _run(args: argparse.Namespace) -> int:
    reporter = Reporter(args.worker_index)
    if args.workers < 1:
        raise UsageError(f"--workers must be at least 1, got {args.workers}")
    if args.max_restarts < 0:
        raise UsageError(f"--max-restarts must be 0 or more, got {args.max_restarts}")
    if args.metrics_port and args.metrics_port + args.workers - 1 > 65535:
        raise UsageError(f"--metrics-port {args.metrics_port} with --workers {args.workers}: "
                         f"worker I serves on PORT+I, past 65535; choose a lower port")
    app = load_app(args.app)
    apply_settings(app, command_line_overrides(args.broker, args.set), args.config)
    if args.worker_index is not None:
        apply_settings(app, worker_overrides(app.name, app.settings, args.worker_index), None)
    if args.workers > 1 and args.worker_index is None:
        return _supervise(args, app, reporter)
    options = RunOptions(
        metrics_host=args.metrics_host, metrics_port=args.metrics_port,
        progress=not args.no_progress and sys.stderr.isatty(),
        connect_timeout=args.connect_timeout,
        query_peers=tuple(p for p in args.query_peers.split(",") if p))
    code: int = run_event_loop(run_app(app, options, reporter))
    return code


def _supervise(args: argparse.Namespace, app: App, reporter: Reporter) -> int:
    broker = app.settings.broker
    if broker.startswith("memory://"):
        reporter.say(f"warning: {broker} lives inside each worker process: the "
                     f"{args.workers} workers share no topics, offsets or group")
    run_event_loop(probe_broker(app.settings, args.connect_timeout))  # exit code 3 once
    base = ["run", args.app, "--metrics-host", args.metrics_host,
            "--connect-timeout", repr(args.connect_timeout)]
    if args.broker is not None:
        base += ["--broker", args.broker]
    if args.config is not None:
        base += ["--config", args.config]
    for item in args.set:
        base += ["--set", item]
    if args.debug:
        base.append("--debug")
    return supervise(base, args.workers, args.metrics_port, reporter,
                     RestartPolicy(max_restarts=args.max_restarts))


def _describe(args: argparse.Namespace) -> int:
    app = load_app(args.app)
    apply_settings(app, command_line_overrides(args.broker, args.set), args.config)
    print(app.topology.describe_mermaid() if args.mermaid else describe_app(app))
    return 0
