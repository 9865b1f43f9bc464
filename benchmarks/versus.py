"""The engine benchmark of two versions of the code, side by side in one run.

    python -m benchmarks.versus REV [--rounds 4] [--records N] [--async-records N]

Checks REV out into a temporary directory (``git archive``, nothing in this tree changes),
then runs ``python -m benchmarks.engine`` alternately from REV's tree and from this one, each
run a fresh interpreter, ``--rounds`` times each. Alternating spreads the machine's drift
(other work, thermal state) over both sides; the spread (min..max) of each side is printed
beside its median, so a difference smaller than the spread reads as "no difference".

Used for refactors that must not slow the engine (issue 22): REV is the commit before them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CASES = [("a_sync_engine", "(a)  sync identity"), ("a1_hand_rolled", "(a') hand-rolled loop"),
         ("b_async_engine", "(b)  await sleep(5 ms)"),
         ("b2_asyncio_floor", "(b'') bare asyncio")]


def export(rev: str, into: Path, *, our_benchmarks: bool = False) -> Path:
    """REV's tree (the package and the benchmarks) unpacked under ``into``; with
    ``our_benchmarks``, REV's package beside this tree's benchmarks (so both sides measure
    the same way, e.g. when REV's benchmark lacks a figure)."""
    archive = into / "rev.tar"
    parts = ["aiostreams"] if our_benchmarks else ["aiostreams", "benchmarks"]
    with archive.open("wb") as out:
        subprocess.run(["git", "-C", str(ROOT), "archive", rev, *parts],
                       stdout=out, check=True)
    tree = into / "tree"
    with tarfile.open(archive) as tar:
        tar.extractall(tree, filter="data")
    if our_benchmarks:
        shutil.copytree(ROOT / "benchmarks", tree / "benchmarks",
                        ignore=shutil.ignore_patterns("__pycache__"))
    return tree


def run_once(tree: Path, records: int, async_records: int) -> dict[str, Any]:
    """One engine benchmark from ``tree`` in a fresh interpreter: its JSON line."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.engine", "--records", str(records),
         "--async-records", str(async_records)],
        cwd=tree, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the engine benchmark failed in {tree}:\n{done.stderr[-2000:]}")
    last = [line for line in done.stdout.splitlines() if line.startswith("{")][-1]
    result: dict[str, Any] = json.loads(last)
    return result


def summary(runs: list[dict[str, Any]], key: str) -> tuple[float, float, float]:
    values = [float(r[key]) for r in runs]
    return statistics.median(values), min(values), max(values)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.versus", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("rev", help="the other version: a commit, branch or tag")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--async-records", type=int, default=100_000)
    parser.add_argument("--our-benchmarks", action="store_true",
                        help="run this tree's benchmarks against REV's package")
    args = parser.parse_args(argv)
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True, check=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="aiostreams-versus-") as tmp:
        before = export(args.rev, Path(tmp), our_benchmarks=args.our_benchmarks)
        runs: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
        for _ in range(args.rounds):
            runs["before"].append(run_once(before, args.records, args.async_records))
            runs["after"].append(run_once(ROOT, args.records, args.async_records))
    print(f"before = {args.rev}, after = this tree ({head}), {args.rounds} runs each, "
          "alternating; median [min..max] records/s")
    print(f"{'case':26} {'before':>30} {'after':>30} {'after/before':>13}")
    out: dict[str, Any] = {"benchmark": "versus", "before": args.rev, "after": head,
                           "rounds": args.rounds}
    for key, name in CASES:
        b_med, b_lo, b_hi = summary(runs["before"], key)
        a_med, a_lo, a_hi = summary(runs["after"], key)
        print(f"{name:26} {b_med:>12,.0f} [{b_lo:>7,.0f}..{b_hi:>7,.0f}]"
              f" {a_med:>12,.0f} [{a_lo:>7,.0f}..{a_hi:>7,.0f}] {a_med / b_med:>12.2f}x")
        out[key] = {"before": [r[key] for r in runs["before"]],
                    "after": [r[key] for r in runs["after"]]}
    for side in ("before", "after"):
        ratios = [r["b_async_engine"] / r["b2_asyncio_floor"] for r in runs[side]]
        print(f"(b)/(b'') {side}: " + ", ".join(f"{x:.2f}" for x in ratios))
        if all("cpu_b_median" in r for r in runs[side]):  # benchmarks that measure CPU
            print(f"(b) CPU us per record {side}: "
                  + ", ".join(f"{r['cpu_b_median']:.2f}" for r in runs[side])
                  + "; CPU ratio (b'')/(b): "
                  + ", ".join(f"{r['cpu_ratio_median']:.2f}" for r in runs[side]))
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
