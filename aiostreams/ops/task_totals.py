"""App-wide totals over every task an app has run: what the progress line, the final
summary and the metrics read (re-exported by :mod:`aiostreams.ops.metrics`).

The engine keeps plain counters per task (:class:`~aiostreams.engine.task.TaskMetrics`);
a rebalance closes tasks, and with them their counters, so :class:`TaskTracker` remembers
each task's counters object (which outlives its task) and sums them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aiostreams.engine.task import StreamTask, TaskMetrics
    from aiostreams.ops.inspection import OperatedApp as App

__all__ = ["AppTotals", "TaskTracker", "retire_lag"]


def retire_lag(task: StreamTask, now: float) -> float:
    """Seconds between ``now`` (wall clock) and the timestamp of the oldest record the task
    has not retired (0 when nothing is in flight): how far retirement trails event time.
    A head stuck in retries or a slow call makes it grow while records behind it finish."""
    oldest = task.oldest_unretired
    if oldest is None:
        return 0.0
    return max(0.0, now - oldest.timestamp)



@dataclass(frozen=True)
class AppTotals:
    """App-wide numbers at one instant (see :meth:`TaskTracker.totals`)."""

    records_in: int = 0
    records_out: int = 0
    retries: int = 0
    dead_lettered: int = 0
    skipped: int = 0
    in_flight: int = 0
    buffered: int = 0
    retire_lag: float = 0.0
    commits: int = 0
    tasks: int = 0


class TaskTracker:
    """Totals over every task an app has run, including tasks a rebalance closed since.

    ``observe(app)`` remembers the :class:`TaskMetrics` object of each live task (the
    object outlives its task, with its final counts); call it regularly (every scrape and
    progress tick does) and at each commit (:meth:`watch_commits`, so the final commit of
    a stop sees every task before it is closed). A task that opened and closed between two
    observations is missed; with commit watching that needs a task that committed nothing.
    """

    def __init__(self) -> None:
        self._seen: dict[int, TaskMetrics] = {}

    def observe(self, app: App) -> None:
        for task in app.inspect().tasks.values():
            self._seen.setdefault(id(task.metrics), task.metrics)

    def watch_commits(self, app: App) -> None:
        """Observe ``app`` at every commit (through :meth:`App.on_commit`)."""
        app.on_commit(lambda entry: self.observe(app))

    def totals(self, app: App) -> AppTotals:
        self.observe(app)
        metrics = list(self._seen.values())
        tasks = list(app.inspect().tasks.values())
        now = app.clock.wall_time()
        return AppTotals(
            records_in=sum(m.records_in for m in metrics),
            records_out=sum(m.records_out for m in metrics),
            retries=sum(m.retries for m in metrics),
            dead_lettered=sum(m.dead_lettered for m in metrics),
            skipped=sum(m.skipped for m in metrics),
            in_flight=sum(t.in_flight for t in tasks),
            buffered=sum(t.buffered() for t in tasks),
            retire_lag=max((retire_lag(t, now) for t in tasks), default=0.0),
            commits=app.inspect().commits,
            tasks=len(tasks),
        )
