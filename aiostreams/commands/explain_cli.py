"""The ``aiostreams explain TOPIC PARTITION OFFSET`` command line (the walk itself is
:mod:`aiostreams.commands.explain`).

:func:`register` adds it to the parser ``cli.py`` builds; the handler reaches the broker
through the tool target and runner ``cli.py`` passes in (``--app``, ``--broker``,
``--config``, ``--set`` as every tool).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from aiostreams.commands import UsageError
from aiostreams.commands.admin import ToolTarget
from aiostreams.commands.explain import (
    Answers,
    explain,
    recorded_answers,
    render_json,
    render_text,
)
from aiostreams.commands.records_cli import ToolRunner
from aiostreams.commands.target import client_transport
from aiostreams.runtime.lineage import Origin


def register(commands: Any, parents: Sequence[argparse.ArgumentParser],
             tool_target: ToolTarget, run_tool: ToolRunner) -> None:
    """Add ``explain`` to ``commands``."""
    cmd = commands.add_parser(
        "explain", parents=list(parents),
        help="trace an output record back to the input records it came from",
        description="Read the record at TOPIC PARTITION OFFSET, follow its "
                    "aiostreams-lineage header (written by apps with lineage=True) back "
                    "through repartition topics to the source record, and show each "
                    "step: where, the key, the sub-topology and nodes that made it (with "
                    "--app), the recorded service answers used (with --recording).",
        epilog="example:\n  aiostreams explain alerts 3 1207 --app fraud.app:app "
               "--recording rec/",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    cmd.add_argument("topic", metavar="TOPIC")
    cmd.add_argument("partition", metavar="PARTITION", type=int)
    cmd.add_argument("offset", metavar="OFFSET", type=int)
    cmd.add_argument("--recording", metavar="DIR",
                     help="a recording of service answers (the app's "
                          "record_services_dir): show those each step's record got")
    cmd.add_argument("--json", action="store_true", help="one JSON object: {\"steps\": [...]}")
    cmd.set_defaults(handler=lambda args: _explain(args, tool_target, run_tool))


def _explain(args: argparse.Namespace, tool_target: ToolTarget, run_tool: ToolRunner) -> int:
    if args.partition < 0 or args.offset < 0:
        raise UsageError(f"explain: PARTITION and OFFSET are >= 0, got {args.partition} "
                         f"{args.offset}")
    settings, app = tool_target(args)
    answers: Answers | None = (recorded_answers(args.recording)
                               if args.recording is not None else None)

    async def work() -> int:
        steps = await explain(client_transport(settings, args.connect_timeout),
                              Origin(args.topic, args.partition, args.offset), app=app,
                              answers=answers)
        print(render_json(steps) if args.json else render_text(steps), flush=True)
        return 0

    return run_tool(work())
