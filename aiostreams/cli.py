"""The ``aiostreams`` command line (``python -m aiostreams``): argument parsing, dispatch, and
the one rule for errors: **one line on stderr, no traceback** (``--debug`` adds it), and an
exit code that means something (:class:`~aiostreams.commands.ExitCode`: 0 ok, 1 runtime
failure, 2 usage or configuration error, 3 broker unreachable, 130 interrupted by Ctrl-C,
141 the reader of stdout went away, as in ``aiostreams tail T | head -1``: quietly, as Unix
tools do).

::

    aiostreams run myproject.app:app [--workers N] [--broker URL] [--config FILE]
                                     [--set KEY=VALUE ...] [--metrics-port P] [--no-progress]
    aiostreams describe myproject.app:app [--mermaid]
    aiostreams topics list | create NAME --partitions N | describe NAME
    aiostreams tail TOPIC [--from-beginning] [--limit N] [--key-serde/--value-serde S]
    aiostreams send TOPIC [--app MODULE:APP] [--json | --key-separator SEP] < lines
    aiostreams dlq show TOPIC [--limit N] [--traceback]
    aiostreams dlq replay TOPIC [--limit N] [--dry-run]
    aiostreams store upgrade myproject.app:app --store NAME [--unmarked-as FORMAT] [--dry-run]
    aiostreams replay myproject.app:app --from DIR|TOPIC:P:START-END [--since T --until T]
                      --out DIR [--services recorded|live] [--max-in-flight N]
    aiostreams diff RUN_A RUN_B [--json FILE] [--examples N]
    aiostreams explain TOPIC PARTITION OFFSET [--app MODULE:APP] [--recording DIR] [--json]

The commands live in :mod:`aiostreams.commands`, one module each, and each family's parser
and handlers in a ``*_cli`` module there (``app_cli``: run, describe; ``topics_cli``;
``records_cli``: tail, send; ``dlq_cli``; ``admin``: topics delete, groups; ``store_cli``:
store upgrade; ``replay_cli``: replay, diff; ``explain_cli``); this module
builds the parser from them and owns what every command shares.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
import traceback
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, NoReturn, TypeVar

from aiostreams.app import App, run_event_loop
from aiostreams.commands import CommandError, ExitCode, UsageError
from aiostreams.commands.admin import register as register_admin
from aiostreams.commands.app_cli import register as register_app
from aiostreams.commands.dlq_cli import register as register_dlq
from aiostreams.commands.explain_cli import register as register_explain
from aiostreams.commands.records_cli import register as register_records
from aiostreams.commands.replay_cli import register as register_replay
from aiostreams.commands.run import CurrentStderr, signal_exit_code
from aiostreams.commands.store_cli import register as register_store
from aiostreams.commands.target import (
    apply_settings,
    command_line_overrides,
    load_app,
    settings_for_tools,
)
from aiostreams.commands.topics_cli import register as register_topics
from aiostreams.engine.task import TASK_FAILURE_LOG_MARK
from aiostreams.errors import (
    AiostreamsError,
    BrokerUnavailableError,
    ConfigError,
    TopologyError,
    UncommittedStopError,
)
from aiostreams.settings.config import Settings
from aiostreams.transport.kafka_connection import CONNECT_RETRY_LOG_MARK

T = TypeVar("T")
DEFAULT_CONNECT_TIMEOUT = 10.0


class _Parser(argparse.ArgumentParser):
    """Reports a usage error as one line (naming ``--help``), not usage text plus a line."""

    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix("aiostreams").strip()
        where = f"{command}: " if command else ""
        raise UsageError(f"{where}{message} (see '{self.prog} --help')")


# -- the parser -------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    common = _Parser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="log at DEBUG level and print tracebacks of errors")
    settings = _Parser(add_help=False)
    settings.add_argument("--broker", metavar="URL",
                          help="memory://NAME or kafka://HOST:PORT[,HOST:PORT] (overrides "
                               "the app's and AIOSTREAMS_BROKER)")
    settings.add_argument("--config", metavar="FILE",
                          help="a TOML settings file (table [aiostreams]); code, "
                               "AIOSTREAMS_* variables and --set override it")
    settings.add_argument("--set", metavar="KEY=VALUE", action="append", default=[],
                          help="a setting, e.g. --set max_in_flight=500 (repeatable; "
                               "highest precedence)")
    settings.add_argument("--connect-timeout", metavar="SECONDS", type=float,
                          default=DEFAULT_CONNECT_TIMEOUT,
                          help="how long to try reaching a Kafka broker before exit code 3 "
                               "(default %(default)s)")
    tool = _Parser(add_help=False, parents=[settings])
    tool.add_argument("--app", metavar="MODULE:APP",
                      help="take the broker, settings and topic serdes from this app "
                           "(importing it also runs what its module does, e.g. preloading "
                           "a memory:// broker)")

    parser = _Parser(
        prog="aiostreams",
        description="Run and inspect aiostreams apps. Exit codes: 0 ok, 1 runtime failure, "
                    "2 usage or configuration error, 3 broker unreachable.",
        parents=[common])
    # No set_defaults(debug=...): parents share their actions, so a default set here would
    # be the subcommands' default too and undo a --debug given before the subcommand.
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True,
                                     parser_class=_Parser)

    register_app(commands, common, settings)
    tool_parents = [common, tool]
    topic_commands = register_topics(commands, common, tool_parents, _tool_target, _run_tool)
    register_admin(commands, topic_commands, tool_parents, _tool_target, _run_tool)
    register_records(commands, tool_parents, _tool_target, _run_tool)
    register_dlq(commands, common, tool_parents, _tool_target, _run_tool)
    register_store(commands, common, settings, _run_tool)
    register_replay(commands, common, settings, _run_tool)
    register_explain(commands, tool_parents, _tool_target, _run_tool)
    return parser


# -- main -----------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (the console script exits with it)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as e:
        _error(e, debug=False)
        return ExitCode.USAGE
    except SystemExit as e:  # --help
        return e.code if isinstance(e.code, int) else 0
    args.debug = getattr(args, "debug", False)
    _configure_logging(args)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except KeyboardInterrupt:
        return ExitCode.INTERRUPTED
    except BrokenPipeError:
        return _stdout_closed()
    except Exception as e:
        _error(e, debug=args.debug)
        return exit_code_for(e)


def _stdout_closed() -> int:
    """The reader of stdout left (``| head -1``): exit quietly with SIGPIPE's code. What is
    still buffered for stdout goes nowhere, so the interpreter's final flush cannot fail
    and print its own traceback."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)
    return ExitCode.PIPE_CLOSED


def exit_code_for(error: BaseException) -> int:
    if isinstance(error, CommandError):
        return error.code
    if isinstance(error, BrokerUnavailableError):
        return ExitCode.BROKER_UNREACHABLE
    if isinstance(error, UncommittedStopError):
        return ExitCode.UNCOMMITTED
    if isinstance(error, ConfigError | TopologyError):
        return ExitCode.USAGE
    return ExitCode.FAILURE


def _error(error: BaseException, *, debug: bool) -> None:
    if debug:
        traceback.print_exception(error, file=sys.stderr)
    message = " ".join(str(error).split()) or type(error).__name__
    if not isinstance(error, CommandError | ConfigError | TopologyError) and not debug:
        if not isinstance(error, AiostreamsError):
            message = f"unexpected {type(error).__name__}: {message}"
        message += " (--debug shows the traceback)"
    print(f"aiostreams: error: {message}", file=sys.stderr, flush=True)


def _configure_logging(args: argparse.Namespace) -> None:
    index = getattr(args, "worker_index", None)
    who = "aiostreams" if index is None else f"aiostreams[worker {index}]"
    handler = logging.StreamHandler(CurrentStderr())
    handler.setFormatter(logging.Formatter(
        f"%(asctime)s {who} %(levelname)s %(name)s: %(message)s"))
    # a task failure ends the command with its own error line; logging it too says it twice
    handler.addFilter(lambda record: not getattr(record, TASK_FAILURE_LOG_MARK, False))
    # so is an unreachable broker: exit code 3 and its one error line say it
    handler.addFilter(lambda record: not getattr(record, CONNECT_RETRY_LOG_MARK, False))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if args.debug else logging.WARNING)
    if args.debug:
        return
    if args.command == "run":
        logging.getLogger("aiostreams").setLevel(logging.INFO)
    else:
        # A tool's failure to connect is reported once, as its error line; aiokafka would
        # log each attempt first.
        logging.getLogger("aiokafka").setLevel(logging.CRITICAL)


async def _until_signal(work: Coroutine[Any, Any, T]) -> tuple[T | None, int | None]:
    """Run ``work``; SIGINT/SIGTERM cancel it. Returns (result, None) or (None, signum)."""
    loop = asyncio.get_running_loop()
    task = loop.create_task(work)
    interrupted: list[int] = []

    def cancel(signum: int) -> None:
        interrupted.append(signum)
        task.cancel()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, cancel, sig)
    try:
        return await task, None
    except asyncio.CancelledError:
        if interrupted:  # the cancellation is ours (of the inner task), not of this one
            return None, interrupted[0]
        raise
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def _run_tool(work: Coroutine[Any, Any, int], *, stops_on_sigterm: bool = False) -> int:
    """Run a tool's coroutine; SIGINT exits 130, SIGTERM too unless the tool stops on it
    as its normal end (``tail``: 0)."""
    result, signum = run_event_loop(_until_signal(work))
    if signum is None:
        return int(result)
    if stops_on_sigterm:
        return signal_exit_code(signum)
    return ExitCode.INTERRUPTED


# -- what a tool acts on -------------------------------------------------------------


def _tool_target(args: argparse.Namespace) -> tuple[Settings, App | None]:
    overrides = command_line_overrides(args.broker, args.set)
    if args.app is None:
        return settings_for_tools(overrides, args.config), None
    app = load_app(args.app)
    apply_settings(app, overrides, args.config)
    return app.settings, app


__all__ = ["build_parser", "exit_code_for", "main"]
