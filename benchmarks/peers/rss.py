"""Resident memory and CPU time of a process and its descendants, from ``/proc`` (Linux)."""

from __future__ import annotations

import os
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> list[int]:
    """``pid``'s children, grandchildren, ... (``/proc/<pid>/task/*/children``)."""
    found: list[int] = []
    todo = [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children = (task / "children").read_text().split()
            except OSError:
                continue
            for child in map(int, children):
                found.append(child)
                todo.append(child)
    return found


def rss_bytes(pid: int) -> int:
    """VmRSS of ``pid`` in bytes (0 once it has exited)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def tree_rss_bytes(pid: int) -> int:
    """Summed VmRSS of ``pid`` and its descendants (a supervisor and its workers)."""
    return sum(rss_bytes(p) for p in [pid, *descendants(pid)])


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` so far (0 once it has exited)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime (fields 14, 15)


def tree_cpu_seconds(pid: int) -> float:
    """Summed CPU time of ``pid`` and its live descendants."""
    return sum(cpu_seconds(p) for p in [pid, *descendants(pid)])
