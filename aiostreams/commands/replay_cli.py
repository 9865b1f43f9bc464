"""The replay commands' command line: ``aiostreams replay MODULE:APP --from ... --out DIR``
(:mod:`aiostreams.replay.run`) and ``aiostreams diff RUN_A RUN_B``
(:mod:`aiostreams.replay.diff`).

Exit codes: ``replay`` 0 when every input was processed and every call found its recorded
answer, 1 when calls were missing from the recording (unless ``--allow-missing``) or the app
failed, 2 for bad arguments; ``diff`` 0 when the runs' outputs are equal, 1 when they differ
(so it gates a rollout in CI), 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from aiostreams.app import App
from aiostreams.commands import CommandError, ExitCode, UsageError
from aiostreams.commands.admin import RunTool
from aiostreams.commands.target import (
    apply_settings,
    client_transport,
    command_line_overrides,
    load_app,
)
from aiostreams.commands.topics import partition_count
from aiostreams.replay.diff import diff_runs
from aiostreams.replay.inputs import InputRange, load_inputs, read_ranges, read_times
from aiostreams.replay.outputs import read_outputs
from aiostreams.replay.recording import SEGMENT_GLOB, Recording
from aiostreams.replay.run import replay
from aiostreams.transport.base import Transport
from aiostreams.types import RawRecord

__all__ = ["register"]


def register(commands: Any, common: argparse.ArgumentParser,
             settings: argparse.ArgumentParser, run_tool: RunTool) -> None:
    """Add ``replay`` and ``diff`` to ``commands``."""
    parser = commands.add_parser(
        "replay", parents=[common, settings], help="run an app over recorded traffic",
        description="Run MODULE:APP (possibly a new version) over recorded inputs on a "
                    "private memory broker, its service calls answered from the recording "
                    "(a call the recording lacks is reported, never guessed), and write "
                    "each output topic's records to --out as JSON lines.")
    parser.add_argument("target", metavar="MODULE:APP")
    parser.add_argument("--from", dest="sources", metavar="SOURCE", action="append",
                        default=[],
                        help="a directory with recorded inputs (inputs.jsonl), or "
                             "TOPIC:PARTITION:START-END offsets (both included) read from "
                             "the app's broker (repeatable)")
    parser.add_argument("--since", metavar="TIME",
                        help="with --until: the app's source records from this time "
                             "(ISO 8601 or epoch seconds), read from its broker")
    parser.add_argument("--until", metavar="TIME", help="...up to this time (excluded)")
    parser.add_argument("--recording", metavar="DIR",
                        help="the recorded answers (default: the --from directory, else "
                             "the app's record_services_dir)")
    parser.add_argument("--services", choices=("recorded", "live"), default="recorded",
                        help="answer service calls from the recording (default) or call "
                             "the services")
    parser.add_argument("--out", metavar="DIR", required=True,
                        help="where the outputs go (outputs/<topic>.jsonl, run.json, "
                             "inputs.jsonl)")
    parser.add_argument("--max-in-flight", type=int, metavar="N",
                        help="the reorder buffer's size for this run (default: the app's)")
    parser.add_argument("--allow-missing", action="store_true",
                        help="exit 0 even when calls were missing from the recording")
    parser.add_argument("--latency-scale", type=float, default=0.0, metavar="X",
                        help="recorded answers take their recorded latency times X "
                             "(default 0: at once)")
    parser.set_defaults(handler=lambda args: _replay(args, run_tool))

    diff = commands.add_parser(
        "diff", parents=[common], help="compare two runs' outputs",
        description="Compare two replay runs' outputs per output topic and key (records "
                    "matched by topic, key and the input record that produced them): "
                    "added, removed and changed records. Exit code 1 when they differ.")
    diff.add_argument("run_a", metavar="RUN_A")
    diff.add_argument("run_b", metavar="RUN_B")
    diff.add_argument("--json", metavar="FILE", help="write every difference there")
    diff.add_argument("--examples", type=int, default=10, metavar="N",
                      help="differences shown (default %(default)s)")
    diff.add_argument("--headers", action="store_true",
                      help="compare headers too (a dead letter's differ between any runs)")
    diff.set_defaults(handler=_diff)


def _time(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise UsageError(f"expected a time as ISO 8601 (2026-11-29T10:00:00+00:00) or "
                         f"epoch seconds, got {text!r}") from None


def _replay(args: argparse.Namespace, run_tool: RunTool) -> int:
    app = load_app(args.target)
    apply_settings(app, command_line_overrides(args.broker, args.set), args.config)
    dirs = [s for s in args.sources if Path(s).is_dir()]
    try:
        ranges = [InputRange.parse(s) for s in args.sources if s not in dirs]
    except ValueError as e:
        raise UsageError(f"--from: {e} (or a directory that exists)") from None
    since, until = _time(args.since), _time(args.until)
    if not dirs and not ranges and since is None and until is None:
        raise UsageError("say what to replay: --from DIR (recorded inputs), --from "
                         "TOPIC:PARTITION:START-END, or --since/--until")
    recording = None
    if args.services == "recorded":
        where = args.recording or next(
            (d for d in dirs if any(Path(d).glob(SEGMENT_GLOB))), None) \
            or app.settings.record_services_dir
        if where is None:
            raise UsageError("no recording to answer the calls from: give --recording DIR "
                             "(or --services live)")
        recording = Recording.open(where)
    settings = app.settings
    if args.max_in_flight is not None and args.max_in_flight < 1:
        raise UsageError(f"--max-in-flight must be at least 1, got {args.max_in_flight}")

    async def work() -> int:
        inputs: list[RawRecord] = []
        for d in dirs:
            inputs.extend(load_inputs(d))
        if ranges or since is not None or until is not None:
            transport = client_transport(settings, args.connect_timeout)
            if ranges:
                inputs.extend(await read_ranges(transport, ranges))
            if since is not None or until is not None:
                topics = {t: await _width(app, transport, t) for t in _sources(app)}
                inputs.extend(await read_times(transport, topics, since, until))
        result = await replay(app, inputs, args.out, recording=recording,
                                  max_in_flight=args.max_in_flight,
                                  latency_scale=args.latency_scale)
        print(f"replayed {result.inputs} input(s): "
              + ", ".join(f"{t} {n}" for t, n in result.outputs.items())
              + f"; {result.answered} call(s) answered from the recording"
              + f"; outputs in {args.out}")
        if result.missing_count:
            print(f"{result.missing_count} call(s) missing from the recording, first: "
                  + "; ".join(str(m) for m in result.missing[:5]), file=sys.stderr)
            if not args.allow_missing:
                return ExitCode.FAILURE
        return ExitCode.OK

    return run_tool(work())


def _sources(app: App) -> list[str]:
    internal = {t for sub in app.build() for t in sub.sink_topics}
    return sorted({t for sub in app.build() for t in sub.source_topics} - internal)


async def _width(app: App, transport: Transport, topic: str) -> int:
    admin = transport.admin()
    await admin.start()
    try:
        return int(await partition_count(admin, transport, topic))
    finally:
        await admin.stop()


def _diff(args: argparse.Namespace) -> int:
    if args.examples < 0:
        raise UsageError(f"--examples must be >= 0, got {args.examples}")
    try:
        a, b = read_outputs(args.run_a), read_outputs(args.run_b)
    except FileNotFoundError as e:
        raise CommandError(str(e), ExitCode.USAGE) from None
    result = diff_runs(a, b, headers=args.headers)
    print(result.summary(args.examples))
    if args.json:
        Path(args.json).write_text(json.dumps(result.to_json(), indent=1, default=str) + "\n",
                                   encoding="utf-8")
    return ExitCode.OK if result.equal else ExitCode.FAILURE
