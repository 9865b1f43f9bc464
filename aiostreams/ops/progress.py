"""The live one-line status ``aiostreams run`` shows on a terminal (rich).

::

    enricher ▸ 4,210 rec/s · in-flight 37 · buffered 120 · retire lag 0.21s · retries 3 ·
        dead letters 1 · commits 12          (one line on the terminal)

Rates are computed between two ticks from :class:`~aiostreams.ops.task_totals.TaskTracker` totals
(records retired or released are not counted twice: ``rec/s`` is records *fetched into*
tasks per second, which in steady state is the processing rate). The line is redrawn in place
and removed when the app stops; log lines are printed above it through the same console.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from rich.console import Console
from rich.live import Live
from rich.text import Text

from aiostreams.ops.inspection import OperatedApp as App
from aiostreams.ops.task_totals import AppTotals, TaskTracker
from aiostreams.services.prometheus import service_status

TICK = 0.5
"""Seconds between two redraws (and two samples of the totals)."""


@dataclass(frozen=True)
class Sample:
    at: float
    totals: AppTotals


def rate(previous: Sample | None, current: Sample) -> float:
    """Records fetched per second between two samples (0 for the first one)."""
    if previous is None or current.at <= previous.at:
        return 0.0
    return max(0, current.totals.records_in - previous.totals.records_in) / (
        current.at - previous.at)


def render(name: str, totals: AppTotals, per_second: float, services: str = "") -> str:
    """The status line (plain text; the caller styles it); ``services`` is the declared
    services' part (:func:`~aiostreams.services.prometheus.service_status`), if any."""
    line = (f"{name} ▸ {per_second:,.0f} rec/s · in-flight {totals.in_flight:,} · "
            f"buffered {totals.buffered:,} · retire lag {totals.retire_lag:.2f}s · "
            f"retries {totals.retries:,} · dead letters {totals.dead_lettered:,} · "
            f"commits {totals.commits:,}")
    return f"{line} ‖ {services}" if services else line


class ProgressLine:
    """Redraws :func:`render` every :data:`TICK` seconds while :meth:`run` runs.

    ``run`` returns only when cancelled (it removes the line then); cancelling it is the
    way to stop it and is safe at any point."""

    def __init__(self, app: App, tracker: TaskTracker, console: Console) -> None:
        self.app = app
        self.tracker = tracker
        self.console = console

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        previous: Sample | None = None
        with Live(Text(""), console=self.console, transient=True,
                  auto_refresh=False) as live:
            while True:
                current = Sample(loop.time(), self.tracker.totals(self.app))
                line = render(self.app.name, current.totals, rate(previous, current),
                              service_status(self.app.services))
                live.update(Text(line, style="bold" if current.totals.in_flight else ""),
                            refresh=True)
                previous = current
                await asyncio.sleep(TICK)
