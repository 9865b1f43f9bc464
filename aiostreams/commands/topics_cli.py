"""The topic commands' command line: ``aiostreams topics list | create NAME --partitions N |
describe NAME`` (:mod:`aiostreams.commands.topics`; ``topics delete`` is
:mod:`aiostreams.commands.admin`'s).

:func:`register` adds them to the parser ``cli.py`` builds and returns the ``topics``
actions, for more to be added; the handlers reach the broker through the tool target and
runner ``cli.py`` passes in.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from aiostreams.commands.admin import RunTool, ToolTarget
from aiostreams.commands.target import client_transport, parse_assignments
from aiostreams.commands.topics import create_topic, describe_topic, list_topics


def register(commands: Any, common: argparse.ArgumentParser,
             parents: Sequence[argparse.ArgumentParser], tool_target: ToolTarget,
             run_tool: RunTool) -> Any:
    """Add ``topics`` (``list``, ``create``, ``describe``) to ``commands``; returns its
    actions' subparsers."""
    topics = commands.add_parser("topics", parents=[common], help="list, create, describe "
                                 "topics", description="The broker's topics.")
    topic_commands = topics.add_subparsers(dest="topics_command", metavar="ACTION",
                                           required=True, parser_class=type(topics))
    listing = topic_commands.add_parser("list", parents=list(parents),
                                        help="topic names and partition counts")
    listing.set_defaults(handler=lambda args: _topics_list(args, tool_target, run_tool))
    create = topic_commands.add_parser("create", parents=list(parents),
                                       help="create a topic")
    create.add_argument("name", metavar="NAME")
    create.add_argument("--partitions", type=int, required=True, metavar="N")
    create.add_argument("--replication-factor", type=int, default=1, metavar="R")
    create.add_argument("--topic-config", action="append", default=[], metavar="KEY=VALUE",
                        help="a topic config, e.g. cleanup.policy=compact (repeatable)")
    create.add_argument("--if-not-exists", action="store_true",
                        help="exit 0 when the topic exists already")
    create.set_defaults(handler=lambda args: _topics_create(args, tool_target, run_tool))
    desc = topic_commands.add_parser("describe", parents=list(parents),
                                     help="partitions and offsets of a topic")
    desc.add_argument("name", metavar="NAME")
    desc.set_defaults(handler=lambda args: _topics_describe(args, tool_target, run_tool))
    return topic_commands


def _topics_list(args: argparse.Namespace, tool_target: ToolTarget, run_tool: RunTool) -> int:
    settings, _ = tool_target(args)
    return run_tool(list_topics(client_transport(settings, args.connect_timeout)))


def _topics_create(args: argparse.Namespace, tool_target: ToolTarget,
                   run_tool: RunTool) -> int:
    settings, _ = tool_target(args)
    config = parse_assignments(args.topic_config, "--topic-config")
    return run_tool(create_topic(client_transport(settings, args.connect_timeout),
                                 args.name, args.partitions, args.replication_factor,
                                 config, args.if_not_exists))


def _topics_describe(args: argparse.Namespace, tool_target: ToolTarget,
                     run_tool: RunTool) -> int:
    settings, _ = tool_target(args)
    return run_tool(describe_topic(client_transport(settings, args.connect_timeout),
                                   args.name))
