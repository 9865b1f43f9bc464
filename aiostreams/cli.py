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

The commands live in :mod:`aiostreams.commands`, one module each.
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
from aiostreams.commands.describe import describe_app
from aiostreams.commands.dlq import Decoders, replay_dead_letters, show_dead_letters
from aiostreams.commands.render import DECODERS, decoder
from aiostreams.commands.run import (
    CurrentStderr,
    Reporter,
    RunOptions,
    run_app,
    signal_exit_code,
)
from aiostreams.commands.send import send
from aiostreams.commands.supervisor import RestartPolicy, supervise, worker_overrides
from aiostreams.commands.tail import tail
from aiostreams.commands.target import (
    apply_settings,
    client_transport,
    command_line_overrides,
    load_app,
    parse_assignments,
    probe_broker,
    settings_for_tools,
)
from aiostreams.commands.topics import create_topic, describe_topic, list_topics
from aiostreams.config import Settings
from aiostreams.engine.task import TASK_FAILURE_LOG_MARK
from aiostreams.errors import (
    AiostreamsError,
    BrokerUnavailableError,
    ConfigError,
    TopologyError,
)
from aiostreams.topic import Topic

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
                     help="serve Prometheus metrics at /metrics and /health on PORT (0: a "
                          "free port, printed); worker I of --workers uses PORT+I")
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

    topics = commands.add_parser("topics", parents=[common], help="list, create, describe "
                                 "topics", description="The broker's topics.")
    topic_commands = topics.add_subparsers(dest="topics_command", metavar="ACTION",
                                           required=True, parser_class=_Parser)
    listing = topic_commands.add_parser("list", parents=[common, tool],
                                        help="topic names and partition counts")
    listing.set_defaults(handler=_topics_list)
    create = topic_commands.add_parser("create", parents=[common, tool],
                                       help="create a topic")
    create.add_argument("name", metavar="NAME")
    create.add_argument("--partitions", type=int, required=True, metavar="N")
    create.add_argument("--replication-factor", type=int, default=1, metavar="R")
    create.add_argument("--topic-config", action="append", default=[], metavar="KEY=VALUE",
                        help="a topic config, e.g. cleanup.policy=compact (repeatable)")
    create.add_argument("--if-not-exists", action="store_true",
                        help="exit 0 when the topic exists already")
    create.set_defaults(handler=_topics_create)
    desc = topic_commands.add_parser("describe", parents=[common, tool],
                                     help="partitions and offsets of a topic")
    desc.add_argument("name", metavar="NAME")
    desc.set_defaults(handler=_topics_describe)
    register_admin(commands, topic_commands, [common, tool], _tool_target, _run_tool)

    tail_cmd = commands.add_parser(
        "tail", parents=[common, tool], help="print a topic's records, decoded",
        description="Print a topic's records as they arrive (from its end unless "
                    "--from-beginning), until --limit, Ctrl-C, or with --no-follow the end.")
    tail_cmd.add_argument("topic", metavar="TOPIC")
    tail_cmd.add_argument("--from-beginning", action="store_true")
    tail_cmd.add_argument("--limit", type=int, metavar="N", help="stop after N records")
    tail_cmd.add_argument("--no-follow", action="store_true",
                          help="stop at the end of the topic instead of waiting for more")
    for which in ("key", "value"):
        tail_cmd.add_argument(f"--{which}-serde", choices=DECODERS, default="auto",
                              help=f"decode {which}s as str (UTF-8), json or bytes; auto "
                                   "(default): the app's serde for the topic with --app, "
                                   "else UTF-8 text when valid, else bytes")
    tail_cmd.add_argument("--json", action="store_true", help="one JSON object per line")
    tail_cmd.add_argument("--headers", action="store_true", help="show record headers")
    tail_cmd.set_defaults(handler=_tail)

    send_cmd = commands.add_parser(
        "send", parents=[common, tool], help="produce records from stdin, one per line",
        description="Produce one record per stdin line: the value, or KEY<SEP>VALUE with "
                    "--key-separator, or with --json an object {\"key\": ..., \"value\": "
                    "..., \"headers\": {...}, \"timestamp\": SECONDS, \"partition\": N}. "
                    "With --app the topic's serdes check and encode each record (a bad "
                    "line is refused with its number); without, text is sent as UTF-8.",
        epilog="examples:\n  echo '{\"id\": \"o1\", \"amount\": 3}' | aiostreams send "
               "orders --app myproject.app:app\n  printf 'k1=v1\\nk2=v2\\n' | aiostreams "
               "send words --key-separator =",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    send_cmd.add_argument("topic", metavar="TOPIC")
    how = send_cmd.add_mutually_exclusive_group()
    how.add_argument("--json", action="store_true",
                     help="each line is a JSON object with key, value, headers, ...")
    how.add_argument("--key-separator", metavar="SEP",
                     help="each line is KEY, SEP, VALUE (the first SEP splits)")
    send_cmd.set_defaults(handler=_send)

    dlq = commands.add_parser("dlq", parents=[common], help="show or replay dead letters",
                              description="Dead-letter topics: what failed, and replay.")
    dlq_commands = dlq.add_subparsers(dest="dlq_command", metavar="ACTION", required=True,
                                      parser_class=_Parser)
    show = _dlq_action(
        dlq_commands, [common, tool], _dlq_show, "show", help="print dead letters readably",
        description="Print each dead letter: origin topic/partition/offset, processor, "
                    "exception and message, attempts, key and value (decoded with the "
                    "origin topic's serdes when --app is given).", limit="show the first N")
    show.add_argument("--traceback", action="store_true", help="include tracebacks")
    replay = _dlq_action(
        dlq_commands, [common, tool], _dlq_replay, "replay",
        help="re-publish dead letters to their origin",
        description="Re-publish dead letters to their origin topics (original key, value, "
                    "timestamp and headers) once the cause is fixed. The position is kept "
                    "in a consumer group, so a second replay sends only newer dead letters.",
        limit="replay at most N")
    replay.add_argument("--dry-run", action="store_true",
                        help="list what would be replayed; send and commit nothing")
    replay.add_argument("--group", metavar="GROUP_ID",
                        help="consumer group keeping the replay position (default "
                             "aiostreams-dlq-replay-TOPIC)")
    replay.add_argument("--from-beginning", action="store_true",
                        help="ignore the saved position: replay every dead letter")
    return parser


def _dlq_action(actions: Any, parents: list[argparse.ArgumentParser],
                handler: Callable[[argparse.Namespace], int], name: str, *, help: str,
                description: str, limit: str) -> argparse.ArgumentParser:
    """A ``dlq`` action's parser: it takes the dead-letter topic and ``--limit N``."""
    action: argparse.ArgumentParser = actions.add_parser(
        name, parents=parents, help=help, description=description)
    action.add_argument("topic", metavar="TOPIC", nargs="?",
                        help="the dead-letter topic (default: the app's dead_letter_topic)")
    action.add_argument("--limit", type=int, metavar="N", help=limit)
    action.set_defaults(handler=handler)
    return action


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(
            f"{port} is not a TCP port: use 1-65535, or 0 for a free one")
    return port


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


# -- the commands ---------------------------------------------------------------------


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


def _tool_target(args: argparse.Namespace) -> tuple[Settings, App | None]:
    overrides = command_line_overrides(args.broker, args.set)
    if args.app is None:
        return settings_for_tools(overrides, args.config), None
    app = load_app(args.app)
    apply_settings(app, overrides, args.config)
    return app.settings, app


def _topics_list(args: argparse.Namespace) -> int:
    settings, _ = _tool_target(args)
    return _run_tool(list_topics(client_transport(settings, args.connect_timeout)))


def _topics_create(args: argparse.Namespace) -> int:
    settings, _ = _tool_target(args)
    config = parse_assignments(args.topic_config, "--topic-config")
    return _run_tool(create_topic(client_transport(settings, args.connect_timeout),
                                  args.name, args.partitions, args.replication_factor,
                                  config, args.if_not_exists))


def _topics_describe(args: argparse.Namespace) -> int:
    settings, _ = _tool_target(args)
    return _run_tool(describe_topic(client_transport(settings, args.connect_timeout),
                                    args.name))


def _tail(args: argparse.Namespace) -> int:
    settings, app = _tool_target(args)
    topic = app.topology.topic(args.topic) if app is not None else None
    return _run_tool(tail(
        client_transport(settings, args.connect_timeout), args.topic,
        from_beginning=args.from_beginning, limit=args.limit, follow=not args.no_follow,
        key=decoder(args.key_serde, topic, "key"),
        value=decoder(args.value_serde, topic, "value"),
        as_json=args.json, headers=args.headers), stops_on_sigterm=True)


def _send(args: argparse.Namespace) -> int:
    settings, app = _tool_target(args)
    declared = app.topology.topic(args.topic) if app is not None else None
    topic = declared or Topic.of(args.topic, key=bytes, value=bytes)
    return _run_tool(send(client_transport(settings, args.connect_timeout), topic,
                          declared=declared is not None, as_json=args.json,
                          key_separator=args.key_separator))


def _dlq_topic(args: argparse.Namespace, settings: Settings) -> str:
    topic: str | None = args.topic or settings.dead_letter_topic
    if not topic:
        raise UsageError(f"name the dead-letter topic (aiostreams dlq {args.dlq_command} "
                         "TOPIC), or give --app of an app that sets dead_letter_topic")
    return topic


def _dlq_show(args: argparse.Namespace) -> int:
    settings, app = _tool_target(args)
    decoders: Decoders = {"": (decoder("auto", None, "key"), decoder("auto", None, "value"))}
    if app is not None:
        for name, topic in app.topology.topics.items():
            decoders[name] = (decoder("auto", topic, "key"), decoder("auto", topic, "value"))
    return _run_tool(show_dead_letters(
        client_transport(settings, args.connect_timeout), _dlq_topic(args, settings),
        limit=args.limit, decoders=decoders, with_traceback=args.traceback))


def _dlq_replay(args: argparse.Namespace) -> int:
    settings, _ = _tool_target(args)
    return _run_tool(replay_dead_letters(
        client_transport(settings, args.connect_timeout), _dlq_topic(args, settings),
        limit=args.limit, dry_run=args.dry_run, group=args.group,
        from_beginning=args.from_beginning))


__all__ = ["build_parser", "exit_code_for", "main"]
