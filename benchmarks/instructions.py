"""CPU instructions per record through the engine, counted by valgrind (deterministic).

    python -m benchmarks.instructions [CASE ...] [--records N]

Wall-clock rates on a shared 2-core machine swing by +-30% between runs, which hides a 10%
change to the engine. Instructions retired do not swing: this runs each case of
:mod:`benchmarks.engine` under ``valgrind --tool=callgrind`` at ``N`` and ``3N`` records and
prints the difference per record, so start-up, imports and warm-up cancel out. Use it to
compare two versions of the engine (run it on each checkout); use ``benchmarks.engine`` for
the rates the targets are stated in. Each case takes a minute or two (valgrind runs the
interpreter about 50 times slower).

Cases: ``sync`` (a), ``async`` (an async processor that does not await: the engine's async
path alone), ``sleep`` (b), ``sleep_defaults`` ((b) at the default window of 20,000 and
1,000 executing: slots wait for an executor; run it with ``--records`` of 20,000 or more),
``hand`` (a'), ``floor`` (b''), ``hand_async`` (b'''), ``api`` (a*) and ``api_async``
(b*) (the processor API's floors, see :mod:`benchmarks.engine_controls`), and
``preload`` (filling the memory broker with the input, which every case but ``floor``
includes; subtract it to compare with ``floor``).

Needs valgrind (``apt-get install valgrind``); it is not a dependency of the project.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from aiostreams import Processor, Record
from aiostreams.app import run_event_loop, tune_gc
from aiostreams.engine.task_state import TaskSettings
from aiostreams.transport.memory import MemoryBroker
from benchmarks.engine import run_app
from benchmarks.engine_controls import (
    AsyncSleep,
    SyncIdentity,
    identity,
    preload,
    run_asyncio_floor,
    run_hand_rolled,
    run_hand_rolled_async,
)

IN_FLIGHT = 1000
DEFAULT_IN_FLIGHT = TaskSettings().max_in_flight  # with the default max_concurrency (1,000)


class AsyncIdentity(Processor[str, str]):
    async def process(self, record: Record[str, str]) -> None:
        self.context.forward(record.with_value(identity(record.value)))


async def _preload_only(n: int) -> float:
    preload(MemoryBroker(), "in", n)
    return 0.0


CASES: dict[str, Callable[[int], Coroutine[Any, Any, float]]] = {
    "sync": lambda n: run_app(SyncIdentity, n, IN_FLIGHT),
    "async": lambda n: run_app(AsyncIdentity, n, IN_FLIGHT),
    "sleep": lambda n: run_app(AsyncSleep, n, IN_FLIGHT),
    "sleep_defaults": lambda n: run_app(AsyncSleep, n, DEFAULT_IN_FLIGHT),
    "hand": run_hand_rolled,
    "floor": lambda n: run_asyncio_floor(n, IN_FLIGHT),
    "hand_async": lambda n: run_hand_rolled_async(n, IN_FLIGHT),
    "api": lambda n: run_hand_rolled(n, api=True),
    "api_async": lambda n: run_hand_rolled_async(n, IN_FLIGHT, api=True),
    "preload": _preload_only,
}


def count(case: str, n: int, module: str = "benchmarks.instructions",
          extra: Sequence[str] = ()) -> int:
    """Instructions of one process running ``case`` over ``n`` records: ``python -m
    module --run case --records n *extra`` under valgrind."""
    proc = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
         "-m", module, "--run", case, "--records", str(n), *extra],
        capture_output=True, text=True, check=False)
    found = re.search(r"Collected : (\d+)", proc.stderr)
    if proc.returncode != 0 or found is None:
        raise SystemExit(f"valgrind run of {case!r} ({n} records) failed "
                         f"(exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("cases", nargs="*", metavar="CASE",
                        help=f"cases to count, of {', '.join(CASES)} (default: sync async "
                             "sleep)")
    parser.add_argument("--records", type=int, default=5000,
                        help="N: runs at N and 3N records are compared (default 5,000)")
    parser.add_argument("--run", choices=list(CASES), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run is not None:  # the child process valgrind runs
        tune_gc()
        run_event_loop(CASES[args.run](args.records))
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed; install it (apt-get install valgrind) "
                         "or compare wall-clock rates with python -m benchmarks.engine")
    cases = args.cases or ["sync", "async", "sleep"]
    unknown = sorted(set(cases) - set(CASES))
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; choose from {', '.join(CASES)}")
    n = args.records
    print(f"{'case':10} {'instructions/record':>20}")
    figures: dict[str, int] = {}
    for case in cases:
        figures[case] = (count(case, 3 * n) - count(case, n)) // (2 * n)
        print(f"{case:10} {figures[case]:20,}", flush=True)
    print(json.dumps({"benchmark": "instructions", "records": [n, 3 * n], **figures}))


if __name__ == "__main__":
    main()
