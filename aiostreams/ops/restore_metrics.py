"""Restore progress as Prometheus metric families (the metrics server's collector yields
them with the rest, see :mod:`~aiostreams.ops.metrics`):

- ``aiostreams_tasks_restoring`` (gauge): tasks restoring their stores from their
  changelogs now; they process nothing until restored;
- ``aiostreams_restored_records`` (counter, ``_total`` in the exposition): changelog
  records replayed into this worker's stores since it started (its rate is the restore's
  pace).

Both carry the label ``app``, and exist from the first scrape (0 before the worker starts).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from aiostreams.engine.task import StreamTask
from aiostreams.engine.task_state import TaskState
from aiostreams.engine.worker import Worker

__all__ = ["restore_metrics"]


def restore_metrics(app: str, worker: Worker | None,
                    tasks: Sequence[StreamTask]) -> Iterable[Metric]:
    """The two families for app ``app``, its ``worker`` and its live ``tasks``."""
    restoring = GaugeMetricFamily(
        "aiostreams_tasks_restoring", "Tasks restoring their stores from their changelogs "
        "(processing nothing until restored).", labels=["app"])
    restoring.add_metric([app], sum(t.state is TaskState.RESTORING for t in tasks))
    yield restoring
    restored = CounterMetricFamily(
        "aiostreams_restored_records",
        "Changelog records replayed into the stores since the worker started.",
        labels=["app"])
    restored.add_metric([app], worker.restorer.restored_records if worker is not None else 0)
    yield restored
