"""The engine's instruction-count gate: fails when a hot path costs more than 5% over its
committed baseline.

    python -m benchmarks.instruction_gate              # check (exit 1 on a regression)
    python -m benchmarks.instruction_gate --update --reason "why the cost moved"

Each gated case is the engine's instructions per record on a path (counted by valgrind, as
:mod:`benchmarks.instructions` counts them: runs at N and 3N records, the difference per
record, so imports and start-up cancel out) *divided by* a hand-rolled loop's doing the same
work in the same run (``hand``): ``sync`` / ``hand`` and ``async`` / ``hand``. Instruction
counts repeat to a few hundred instructions in a billion on one machine whatever else it
runs; the ratio also cancels what differs between machines (the C library's string and
memory routines, the interpreter's build), so the gate is neither noisy on a loaded CI
machine nor fooled by a different one.

The baseline (``benchmarks/instruction_baseline.json``) holds each ratio, the counts behind
it, the commit it was measured on and the reason it was last changed. A rise of more than
:data:`TOLERANCE` fails the gate naming the case, the baseline, the measurement and what to
do; a fall passes and says so (update the baseline to keep the gain). Updating is
deliberate: ``--update`` needs ``--reason``, and the baseline is committed with the change
that moved it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from benchmarks.instructions import count

BASELINE = Path(__file__).with_name("instruction_baseline.json")
TOLERANCE = 0.05
RECORDS = 1000
GATED: dict[str, tuple[str, str]] = {"sync": ("sync", "hand"), "async": ("async", "hand")}
"""Gated case -> (the engine's case, the hand-rolled loop it is divided by)."""


@dataclass(frozen=True)
class Verdict:
    case: str
    baseline: float
    measured: float

    @property
    def rise(self) -> float:
        return self.measured / self.baseline - 1.0

    @property
    def failed(self) -> bool:
        return self.rise > TOLERANCE

    def line(self) -> str:
        word = "REGRESSED" if self.failed else ("faster" if self.rise < 0 else "ok")
        return (f"{self.case:6} baseline {self.baseline:.4f}  measured {self.measured:.4f}  "
                f"{self.rise:+.1%}  {word}")


def per_record(case: str, n: int) -> int:
    """Instructions a record of ``case``: (count at 3n - count at n) / 2n."""
    return (count(case, 3 * n) - count(case, n)) // (2 * n)


def measure(n: int = RECORDS) -> dict[str, int]:
    """Instructions a record of every case the gate needs, two valgrind runs at a time."""
    os.environ["PYTHONHASHSEED"] = "0"  # the children's dict orders, and so their counts
    cases = sorted({c for pair in GATED.values() for c in pair})
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(cases, pool.map(lambda c: per_record(c, n), cases), strict=True))


def ratios(counts: dict[str, int]) -> dict[str, float]:
    return {name: counts[engine] / counts[hand] for name, (engine, hand) in GATED.items()}


def judge(baseline: dict[str, float], measured: dict[str, float]) -> list[Verdict]:
    missing = sorted(set(GATED) - set(baseline))
    if missing:
        raise SystemExit(f"the baseline {BASELINE} has no ratio for {missing}: run "
                         "python -m benchmarks.instruction_gate --update --reason '...'")
    return [Verdict(name, baseline[name], measured[name]) for name in GATED]


def _commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True, cwd=Path(__file__).parent, check=False)
    return done.stdout.strip() or "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.instruction_gate",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--update", action="store_true",
                        help="write the measurement as the new baseline (needs --reason)")
    parser.add_argument("--reason", help="why the baseline moves (kept in the file)")
    parser.add_argument("--records", type=int, default=RECORDS)
    args = parser.parse_args(argv)
    if args.update and not args.reason:
        parser.error("--update needs --reason: say why the engine's cost moved")
    counts = measure(args.records)
    measured = ratios(counts)
    if args.update:
        BASELINE.write_text(json.dumps(
            {"records": args.records, "ratios": {k: round(v, 4) for k, v in measured.items()},
             "counts": counts, "commit": _commit(), "reason": args.reason}, indent=2) + "\n")
        print(f"baseline written to {BASELINE}: {measured}")
        return 0
    baseline = json.loads(BASELINE.read_text())
    verdicts = judge(baseline["ratios"], measured)
    for verdict in verdicts:
        print(verdict.line())
    print(json.dumps({"benchmark": "instruction_gate", "counts": counts,
                      "ratios": measured}))
    failed = [v for v in verdicts if v.failed]
    if failed:
        print(f"the engine's instructions a record rose more than {TOLERANCE:.0%} over the "
              f"baseline of {baseline['commit']} ({', '.join(v.case for v in failed)}): find "
              "the change that costs it (python -m benchmarks.instructions CASE), or, if "
              "the cost is deliberate, update the baseline with a reason in the same commit",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
