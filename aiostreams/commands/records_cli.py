"""The record commands' command line: ``aiostreams tail TOPIC`` (print a topic's records,
decoded: :mod:`aiostreams.commands.tail`) and ``aiostreams send TOPIC`` (produce stdin's
lines: :mod:`aiostreams.commands.send`).

:func:`register` adds them to the parser ``cli.py`` builds; the handlers reach the broker
through the tool target and runner ``cli.py`` passes in. ``tail`` ends normally (exit 0) on
SIGTERM, as a service manager's stop; ``send`` exits 130 on it.
"""

from __future__ import annotations

import argparse
from collections.abc import Coroutine, Sequence
from typing import Any, Protocol

from aiostreams.commands.admin import ToolTarget
from aiostreams.commands.render import DECODERS, decoder
from aiostreams.commands.send import send
from aiostreams.commands.tail import tail
from aiostreams.commands.target import client_transport
from aiostreams.topic import Topic


class ToolRunner(Protocol):
    """``cli.py``'s runner of a tool's coroutine, under SIGINT/SIGTERM."""

    def __call__(self, work: Coroutine[Any, Any, int], *,
                 stops_on_sigterm: bool = False) -> int: ...


def register(commands: Any, parents: Sequence[argparse.ArgumentParser],
             tool_target: ToolTarget, run_tool: ToolRunner) -> None:
    """Add ``tail`` and ``send`` to ``commands``."""
    tail_cmd = commands.add_parser(
        "tail", parents=list(parents), help="print a topic's records, decoded",
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
    tail_cmd.set_defaults(handler=lambda args: _tail(args, tool_target, run_tool))

    send_cmd = commands.add_parser(
        "send", parents=list(parents), help="produce records from stdin, one per line",
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
    send_cmd.set_defaults(handler=lambda args: _send(args, tool_target, run_tool))


def _tail(args: argparse.Namespace, tool_target: ToolTarget, run_tool: ToolRunner) -> int:
    settings, app = tool_target(args)
    topic = app.topology.topic(args.topic) if app is not None else None
    return run_tool(tail(
        client_transport(settings, args.connect_timeout), args.topic,
        from_beginning=args.from_beginning, limit=args.limit, follow=not args.no_follow,
        key=decoder(args.key_serde, topic, "key"),
        value=decoder(args.value_serde, topic, "value"),
        as_json=args.json, headers=args.headers), stops_on_sigterm=True)


def _send(args: argparse.Namespace, tool_target: ToolTarget, run_tool: ToolRunner) -> int:
    settings, app = tool_target(args)
    declared = app.topology.topic(args.topic) if app is not None else None
    topic = declared or Topic.of(args.topic, key=bytes, value=bytes)
    return run_tool(send(client_transport(settings, args.connect_timeout), topic,
                         declared=declared is not None, as_json=args.json,
                         key_separator=args.key_separator))
