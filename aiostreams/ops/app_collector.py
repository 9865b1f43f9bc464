"""The Prometheus collector of a running app: :class:`AppCollector` reads one app's tasks,
commits and services at scrape time (:func:`metrics_registry` gives it a registry of its
own); :class:`~aiostreams.ops.metrics.MetricsServer` serves what it collects.

Nothing here is on the record path. The engine keeps plain integer counters per task
(:class:`~aiostreams.engine.task.TaskMetrics`, ``in_flight``, ``enforced_processing_total``)
and the app keeps its commit log; a scrape reads them on the event loop thread that updates
them, so there are no per-record locks and no torn reads.

Per-task series carry the labels ``app`` and ``task`` and exist while the task does: a
rebalance that closes a task ends its series, and one that re-creates it starts its counters
again from zero (Prometheus' ``rate()`` treats that as a counter reset).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar

from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from aiostreams.engine.task import StreamTask, TaskMetrics
from aiostreams.lifecycle.state import AppState
from aiostreams.ops.drain_time import DrainTime
from aiostreams.ops.inspection import OperatedApp as App
from aiostreams.ops.restore_metrics import restore_metrics, standby_metrics
from aiostreams.ops.table_metrics import table_metrics
from aiostreams.ops.task_totals import TaskTracker, retire_lag
from aiostreams.services.prometheus import service_metrics
from aiostreams.types import TopicPartition

if TYPE_CHECKING:
    from aiostreams.engine.worker import CommitRecord

__all__ = ["COMMIT_LATENCY_BUCKETS", "AppCollector", "metrics_registry"]

COMMIT_LATENCY_BUCKETS: tuple[float, ...] = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Seconds; a commit flushes the producer and the stores, so milliseconds to seconds."""

# TaskMetrics field -> (metric name without the aiostreams_task_ prefix, help). Counters
# end in "_total" in the exposition; fields not listed here are exported as counters
# named after the field, so a counter added to the engine shows up without a change here.
_COUNTERS: dict[str, tuple[str, str]] = {
    "records_in": ("records_in", "Records fetched into the task."),
    "records_out": ("records_out",
                    "Records the task released at retire (outputs, sends, changelog, DLQ)."),
    "retries": ("retries", "Failed attempts that were retried after a backoff."),
    "skipped": ("skipped", "Records that failed for good and were skipped (on_error=skip)."),
    "dead_lettered": ("dead_letters",
                      "Records that failed for good and went to the dead-letter topic."),
    "punctuations": ("punctuations", "Scheduled callbacks (ctx.schedule) the task issued."),
    "deferred": ("deferred",
                 "Times a record asked to run again later (ctx.defer): waits that are not "
                 "failures and do not count as attempts."),
}
_UNMAINTAINED = frozenset({"retired"})
"""TaskMetrics fields the engine does not update (yet): a series stuck at 0 would mislead."""
_GAUGES: dict[str, tuple[str, str]] = {
    "max_rob_depth": ("reorder_buffer_max_depth",
                      "The most slots the reorder buffer has held at once."),
}
_LABELS = ("app", "task")


# -- reading the engine ---------------------------------------------------------------


def _counter_fields() -> list[str]:
    return [f.name for f in dataclasses.fields(TaskMetrics)
            if f.type in (int, "int") and f.name not in _GAUGES
            and f.name not in _UNMAINTAINED]



# -- the Prometheus collector -----------------------------------------------------------


class _CommitLatency:
    """A cumulative histogram of commit durations, fed by :meth:`App.on_commit` (every
    commit, however long the app runs; ``App.commit_log`` keeps only the latest)."""

    def __init__(self, buckets: Sequence[float]) -> None:
        self.bounds = sorted(buckets)
        self.counts = [0] * (len(self.bounds) + 1)  # the last one is +Inf
        self.total = 0.0

    def observe(self, record: CommitRecord) -> None:
        self.total += record.duration
        i = 0
        while i < len(self.bounds) and record.duration > self.bounds[i]:
            i += 1
        self.counts[i] += 1

    def buckets(self) -> list[tuple[str, float]]:
        out: list[tuple[str, float]] = []
        running = 0
        for bound, count in zip([*map(str, self.bounds), "+Inf"], self.counts, strict=True):
            running += count
            out.append((bound, running))
        return out


class AppCollector:
    """A prometheus-client collector reading one :class:`App` at scrape time.

    Register it in a registry of its own (``CollectorRegistry()``): the default registry is
    process-wide and would mix apps. ``end_offsets`` (set by :class:`MetricsServer` before
    each scrape) feeds the consumer-lag gauge; without it the gauge is left out.
    """

    def __init__(self, app: App, buckets: Sequence[float] = COMMIT_LATENCY_BUCKETS) -> None:
        self.app = app
        self.end_offsets: Mapping[TopicPartition, int] = {}
        self._latency = _CommitLatency(buckets)
        app.on_commit(self._latency.observe)
        self._tracker = TaskTracker()  # records consumed, over tasks a rebalance closed too
        self._tracker.watch_commits(app)
        self._drain = DrainTime(clock=app.clock.monotonic)

    def describe(self) -> Iterable[Metric]:
        return []  # no describe-time work: metrics exist only while the app runs

    def collect(self) -> Iterable[Metric]:
        app = self.app
        name = app.name
        state = GaugeMetricFamily("aiostreams_app_state",
                                  "1 for the app's current lifecycle state, else 0.",
                                  labels=["app", "state"])
        for s in AppState:
            state.add_metric([name, s.value], 1.0 if app.state is s else 0.0)
        yield state
        tasks = sorted(app.inspect().tasks.values(), key=lambda t: t.task_id)
        yield _gauge("aiostreams_tasks", "Tasks this worker runs.", ["app"],
                     [([name], len(tasks))])
        yield from self._task_metrics(name, tasks)
        commits = app.inspect().commits
        yield _counter("aiostreams_commits", "Commits that committed offsets.", ["app"],
                       [([name], commits)])
        latency = HistogramMetricFamily(
            "aiostreams_commit_latency_seconds",
            "Duration of a commit: flush outputs and stores, commit offsets, checkpoint.",
            labels=["app"])
        latency.add_metric([name], self._latency.buckets(), self._latency.total)
        yield latency
        yield from self._lag(name, tasks)
        yield from restore_metrics(name, app.inspect().worker, tasks)
        yield from standby_metrics(name, app.status().standbys)
        yield self._offset_resets(name)
        yield from service_metrics(name, app.services)  # see aiostreams.services.prometheus
        yield from table_metrics(name, app.topology.external_sinks)  # their maintenance

    def _task_metrics(self, name: str, tasks: list[StreamTask]) -> Iterable[Metric]:
        now = self.app.clock.wall_time()
        for field in _counter_fields():
            metric, doc = _COUNTERS.get(field, (field, f"TaskMetrics.{field}."))
            yield _counter(f"aiostreams_task_{metric}", doc, _LABELS,
                           [([name, t.task_id], getattr(t.metrics, field)) for t in tasks])
        for field, (metric, doc) in _GAUGES.items():
            yield _gauge(f"aiostreams_task_{metric}", doc, _LABELS,
                         [([name, t.task_id], getattr(t.metrics, field)) for t in tasks])
        yield _counter("aiostreams_task_enforced_processing",
                       "Records processed while a partition of the task had no data, after "
                       "waiting max_task_idle_ms (KIP-353's enforced-processing-total).",
                       _LABELS, [([name, t.task_id], t.enforced_processing_total)
                                 for t in tasks])
        yield _gauge("aiostreams_task_in_flight",
                     "Slots in the reorder buffer now (issued, not yet retired).", _LABELS,
                     [([name, t.task_id], t.in_flight) for t in tasks])
        yield _gauge("aiostreams_task_reorder_buffer_capacity",
                     "Reorder-buffer slots (max_in_flight).", _LABELS,
                     [([name, t.task_id], t.settings.max_in_flight) for t in tasks])
        yield _gauge("aiostreams_task_buffered_records",
                     "Records fetched and waiting in the partition queues (not issued).",
                     _LABELS, [([name, t.task_id], t.buffered()) for t in tasks])
        yield _gauge("aiostreams_task_retire_lag_seconds",
                     "Wall-clock time minus the timestamp of the oldest record not retired "
                     "(0 when nothing is in flight).", _LABELS,
                     [([name, t.task_id], retire_lag(t, now)) for t in tasks])
        yield _counter("aiostreams_task_head_of_line_wait_seconds",
                       "Seconds finished records waited to retire behind an earlier record "
                       "still executing (head-of-line blocking), summed.", _LABELS,
                       [([name, t.task_id], t.head_of_line.total) for t in tasks])
        yield _gauge("aiostreams_task_head_of_line_wait_max_seconds",
                     "The longest head-of-line wait of one record since the task started.",
                     _LABELS, [([name, t.task_id], t.head_of_line.longest) for t in tasks])
        yield _counter("aiostreams_task_head_of_line_blocked_records",
                       "Retired records that waited behind an earlier record at all.",
                       _LABELS, [([name, t.task_id], t.head_of_line.blocked) for t in tasks])
        yield self._dropped(name, {t.task_id for t in tasks})
        errors = CounterMetricFamily("aiostreams_processor_errors",
                                     "Records that failed for good, by the node that failed.",
                                     labels=["app", "task", "node"])
        for t in tasks:
            for node, count in sorted(t.metrics.by_node_errors.items()):
                errors.add_metric([name, t.task_id, node], count)
        yield errors

    def _dropped(self, name: str, running: set[str]) -> Metric:
        """Kafka Streams' task-level ``dropped-records-total``, by node and reason (see
        :class:`~aiostreams.windows.DroppedRecords`), for the tasks this worker runs now;
        the app keeps the counts across rebalances, so they never go down."""
        dropped = self.app.dropped_records.by_task_node_reason
        return _counter(
            "aiostreams_task_dropped_records",
            "Records a processor dropped without output or error, by node and reason "
            "(late: its window had closed, once per window; null_key, null_value, "
            "expired), as Kafka Streams' dropped-records-total.",
            [*_LABELS, "node", "reason"],
            [([name, task, node, reason], count)
             for (task, node, reason), count in sorted(dropped.items()) if task in running])

    def _lag(self, name: str, tasks: list[StreamTask]) -> Iterable[Metric]:
        if not self.end_offsets:
            return
        lag = GaugeMetricFamily(
            "aiostreams_consumer_lag_records",
            "Records of a partition not yet retired: log end offset minus retired position.",
            labels=["app", "topic", "partition"])
        total = 0
        for task in tasks:
            retired = task.committable()
            for tp in task.partitions:
                end = self.end_offsets.get(tp)
                position = retired.get(tp, self._committed(tp))
                if end is not None and position is not None:
                    behind = max(0, end - position)
                    total += behind
                    lag.add_metric([name, tp.topic, str(tp.partition)], behind)
        yield lag
        seconds = self._drain.observe(self._tracker.totals(self.app).records_in, total)
        if seconds is not None:
            yield _gauge("aiostreams_drain_time_seconds",
                         "Seconds this worker needs to consume its lag at the pace it consumed "
                         "over the last two minutes (+Inf: lag and nothing consumed); for "
                         "autoscalers.", ["app"], [([name], seconds)])

    def _offset_resets(self, name: str) -> Metric:
        worker = self.app.inspect().worker
        resets = worker.offset_resets if worker is not None else None
        counts = sorted(resets.counts.items(), key=lambda item: (
            item[0][0], item[0][1], item[0][2].value)) if resets is not None else []
        return _counter(
            "aiostreams_source_offset_resets",
            "Input positions found out of range and reset per offset_out_of_range, by "
            "reason: deleted (records deleted before they were read) or past_end (the log "
            "was truncated or created again).", ["app", "topic", "partition", "reason"],
            [([name, topic, str(partition), reason.value], count)
             for (topic, partition, reason), count in counts])

    def _committed(self, tp: TopicPartition) -> int | None:
        worker = self.app.inspect().worker
        # the position the task started from, until it retires something of its own
        return worker.committed_offset(tp) if worker is not None else None


_Family = TypeVar("_Family", CounterMetricFamily, GaugeMetricFamily)


def _family(kind: type[_Family], name: str, doc: str, labels: Sequence[str],
            samples: Iterable[tuple[list[str], float]]) -> _Family:
    """A metric family of ``kind`` with one sample per ``(label values, value)``."""
    family = kind(name, doc, labels=labels)
    for values, value in samples:
        family.add_metric(values, value)
    return family


def _counter(name: str, doc: str, labels: Sequence[str],
             samples: Iterable[tuple[list[str], float]]) -> CounterMetricFamily:
    return _family(CounterMetricFamily, name, doc, labels, samples)


def _gauge(name: str, doc: str, labels: Sequence[str],
           samples: Iterable[tuple[list[str], float]]) -> GaugeMetricFamily:
    return _family(GaugeMetricFamily, name, doc, labels, samples)


def metrics_registry(app: App) -> tuple[CollectorRegistry, AppCollector]:
    """A registry of its own holding an :class:`AppCollector` of ``app``."""
    registry = CollectorRegistry(auto_describe=False)
    collector = AppCollector(app)
    registry.register(collector)
    return registry, collector
