"""The dead-letter commands' command line: ``aiostreams dlq show [TOPIC]`` and ``aiostreams
dlq replay [TOPIC]`` (:mod:`aiostreams.commands.dlq`).

:func:`register` adds them to the parser ``cli.py`` builds; the handlers reach the broker
through the tool target and runner ``cli.py`` passes in. The topic defaults to the app's
``dead_letter_topic`` (with ``--app``); without either, a usage error says what to give.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

from aiostreams.commands import UsageError
from aiostreams.commands.admin import RunTool, ToolTarget
from aiostreams.commands.dlq import (
    Decoders,
    LetterFilter,
    replay_dead_letters,
    show_dead_letters,
)
from aiostreams.commands.render import decoder
from aiostreams.commands.target import client_transport
from aiostreams.settings.config import Settings


def register(commands: Any, common: argparse.ArgumentParser,
             parents: Sequence[argparse.ArgumentParser], tool_target: ToolTarget,
             run_tool: RunTool) -> None:
    """Add ``dlq`` (``show``, ``replay``) to ``commands``."""
    dlq = commands.add_parser("dlq", parents=[common], help="show or replay dead letters",
                              description="Dead-letter topics: what failed, and replay.")
    dlq_commands = dlq.add_subparsers(dest="dlq_command", metavar="ACTION", required=True,
                                      parser_class=type(dlq))
    show = _dlq_action(
        dlq_commands, list(parents), lambda args: _dlq_show(args, tool_target, run_tool),
        "show", help="print dead letters readably",
        description="Print each dead letter: origin topic/partition/offset, processor, "
                    "exception and message, attempts, key and value (decoded with the "
                    "origin topic's serdes when --app is given).", limit="show the first N")
    show.add_argument("--traceback", action="store_true", help="include tracebacks")
    replay = _dlq_action(
        dlq_commands, list(parents), lambda args: _dlq_replay(args, tool_target, run_tool),
        "replay", help="re-publish dead letters to their origin",
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
    replay.add_argument("--exception", metavar="NAME", action="append", default=[],
                        help="replay only dead letters of this exception class, e.g. "
                             "ConnectionError (repeatable: any of them)")
    replay.add_argument("--header", metavar="NAME[=VALUE]", action="append", default=[],
                        help="replay only dead letters with this header (and value), e.g. "
                             "aiostreams.dlq.processor=enrich (repeatable: all of them); "
                             "a filtered replay keeps its own position")


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


def _dlq_topic(args: argparse.Namespace, settings: Settings) -> str:
    topic: str | None = args.topic or settings.dead_letter_topic
    if not topic:
        raise UsageError(f"name the dead-letter topic (aiostreams dlq {args.dlq_command} "
                         "TOPIC), or give --app of an app that sets dead_letter_topic")
    return topic


def _dlq_show(args: argparse.Namespace, tool_target: ToolTarget, run_tool: RunTool) -> int:
    settings, app = tool_target(args)
    decoders: Decoders = {"": (decoder("auto", None, "key"), decoder("auto", None, "value"))}
    if app is not None:
        for name, topic in app.topology.topics.items():
            decoders[name] = (decoder("auto", topic, "key"), decoder("auto", topic, "value"))
    return run_tool(show_dead_letters(
        client_transport(settings, args.connect_timeout), _dlq_topic(args, settings),
        limit=args.limit, decoders=decoders, with_traceback=args.traceback))


def _dlq_replay(args: argparse.Namespace, tool_target: ToolTarget,
                run_tool: RunTool) -> int:
    settings, _ = tool_target(args)
    return run_tool(replay_dead_letters(
        client_transport(settings, args.connect_timeout), _dlq_topic(args, settings),
        limit=args.limit, dry_run=args.dry_run, group=args.group,
        from_beginning=args.from_beginning, only=LetterFilter.parse(args.exception,
                                                                    args.header)))
