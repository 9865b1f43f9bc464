"""Where aiostreams' time goes in a Nexmark query: the top functions of a cProfile written
by ``python -m benchmarks.nexmark --profile DIR`` (the timed span of the aiostreams
side, wall clock, the event loop's thread), by own time and by cumulative time, as a
Markdown table.

The profiler slows the process several times over: a run with ``--profile`` says where the
time goes, not how much there is (take the figures from a run without it).
"""

from __future__ import annotations

import pstats
from pathlib import Path
from typing import Any

ROOT = str(Path(__file__).parents[2]) + "/"


def _name(func: tuple[str, int, str]) -> str:
    path, line, name = func
    if path == "~":
        return name  # a builtin: "<method 'execute' of 'sqlite3.Cursor' objects>"
    short = path.removeprefix(ROOT)
    if "site-packages/" in short:
        short = short.split("site-packages/", 1)[1]
    elif "/lib/python3" in short:
        short = "stdlib/" + short.split("/lib/python3", 1)[1].split("/", 1)[1]
    return f"{short}:{line} {name}"


def top(path: Path, limit: int = 12) -> str:
    """The ``limit`` functions with the most own time, and the ``limit`` with the most
    cumulative time (seconds; share of the total), as two Markdown tables."""
    profile: Any = pstats.Stats(str(path))  # typeshed omits .stats
    stats = profile.stats  # func -> (cc, nc, tt, ct, callers)
    total = sum(tt for _cc, _nc, tt, _ct, _callers in stats.values()) or 1.0
    lines = [f"profile {path.name}: {total:.2f} s in the event loop's thread", "",
             "| own s | share | calls | function |", "| ---: | ---: | ---: | --- |"]
    by_own = sorted(stats.items(), key=lambda kv: kv[1][2], reverse=True)[:limit]
    for func, (_cc, nc, tt, _ct, _callers) in by_own:
        lines.append(f"| {tt:.2f} | {tt / total:.0%} | {nc:,} | `{_name(func)}` |")
    lines += ["", "| cumulative s | share | function |", "| ---: | ---: | --- |"]
    by_cum = sorted(stats.items(), key=lambda kv: kv[1][3], reverse=True)[:limit]
    for func, (_cc, _nc, _tt, ct, _callers) in by_cum:
        lines.append(f"| {ct:.2f} | {ct / total:.0%} | `{_name(func)}` |")
    return "\n".join(lines)
