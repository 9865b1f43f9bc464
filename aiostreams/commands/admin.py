"""The administration commands' command line: ``aiostreams topics delete`` and
``aiostreams groups [show [GROUP]] | reset GROUP ...`` (:mod:`aiostreams.commands.groups`).

:func:`register` adds them to the parser ``cli.py`` builds; the handlers reach the broker
through the tool target and runner ``cli.py`` passes in, as its own tools do."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from aiostreams.commands import CommandError, UsageError
from aiostreams.commands.groups import ResetTo, parse_datetime, reset_group, show_groups
from aiostreams.commands.target import client_transport
from aiostreams.errors import UnknownTopicError
from aiostreams.settings.config import Settings
from aiostreams.transport.base import Transport

ToolTarget = Callable[[argparse.Namespace], tuple[Settings, Any]]
RunTool = Callable[[Coroutine[Any, Any, int]], int]


def register(commands: Any, topic_commands: Any, parents: Sequence[argparse.ArgumentParser],
             tool_target: ToolTarget, run_tool: RunTool) -> None:
    """Add ``topics delete`` to ``topic_commands`` and ``groups`` to ``commands``."""

    def transport_of(args: argparse.Namespace) -> Transport:
        settings, _ = tool_target(args)
        return client_transport(settings, args.connect_timeout)

    delete = topic_commands.add_parser(
        "delete", parents=list(parents), help="delete topics with their records",
        description="Delete topics, with their records and the offsets groups committed "
                    "on them. Refused as a whole when one does not exist (unless "
                    "--if-exists).")
    delete.add_argument("names", metavar="NAME", nargs="+")
    delete.add_argument("--if-exists", action="store_true",
                        help="skip topics that do not exist instead of refusing")
    delete.set_defaults(handler=lambda args: run_tool(
        delete_topics(transport_of(args), args.names, if_exists=args.if_exists)))

    groups = commands.add_parser(
        "groups", parents=list(parents), help="consumer groups: members, lag, reset",
        description="Kafka consumer groups: show members and lag per partition, or reset "
                    "a group's committed offsets (refused while it has members).")
    group_commands = groups.add_subparsers(dest="groups_command", metavar="ACTION",
                                           parser_class=type(groups))
    groups.set_defaults(handler=lambda args: run_tool(
        show_groups(transport_of(args), None)))
    show = group_commands.add_parser(
        "show", parents=list(parents), help="members and lag per partition (the default)")
    show.add_argument("group", metavar="GROUP", nargs="?", help="one group (default: all)")
    show.set_defaults(handler=lambda args: run_tool(
        show_groups(transport_of(args), args.group)))
    reset = group_commands.add_parser(
        "reset", parents=list(parents), help="move a group's committed offsets",
        description="Move GROUP's committed offsets on the partitions it has committed "
                    "(or of --topic). Refused while the group has members.")
    reset.add_argument("group", metavar="GROUP")
    where = reset.add_mutually_exclusive_group(required=True)
    where.add_argument("--to-earliest", action="store_true",
                       help="to each partition's earliest offset")
    where.add_argument("--to-datetime", metavar="WHEN",
                       help="to the first record at or after WHEN (ISO 8601; no zone: UTC)")
    where.add_argument("--shift", type=int, metavar="N",
                       help="by N records from the committed offset (negative: back)")
    reset.add_argument("--topic", action="append", default=[], metavar="TOPIC",
                       help="reset this topic's partitions (repeatable; default: every "
                            "partition the group committed)")
    reset.add_argument("--dry-run", action="store_true",
                       help="print the new offsets; change nothing")
    reset.set_defaults(handler=lambda args: run_tool(_reset(transport_of(args), args)))


async def _reset(transport: Transport, args: argparse.Namespace) -> int:
    if args.to_earliest:
        to, when = ResetTo.EARLIEST, None
    elif args.to_datetime is not None:
        to, when = ResetTo.DATETIME, parse_datetime(args.to_datetime)
    else:
        to, when = ResetTo.SHIFT, None
    return await reset_group(transport, args.group, to, when=when, shift=args.shift,
                             topics=args.topic, dry_run=args.dry_run)


async def delete_topics(transport: Transport, names: Sequence[str], *,
                        if_exists: bool) -> int:
    if len(set(names)) != len(names):
        raise UsageError(f"a topic is named twice in {list(names)}")
    admin = transport.admin()
    await admin.start()
    try:
        missing = [n for n in names if await admin.partitions_for(n) is None]
        if missing and not if_exists:
            raise CommandError(f"no topic(s) {missing} on {transport.url}; nothing was "
                               "deleted (pass --if-exists to delete the others)")
        present = [n for n in names if n not in missing]
        try:
            await admin.delete_topics(present)
        except UnknownTopicError as e:  # deleted by someone else meanwhile
            raise CommandError(str(e)) from None
    finally:
        await admin.stop()
    for name in present:
        print(f"deleted topic {name!r}", flush=True)
    for name in missing:
        print(f"no topic {name!r} (skipped)", flush=True)
    return 0
