"""The table maintenance of the Delta and Iceberg sinks as Prometheus metric families (the
metrics server's collector yields them with the rest, see :mod:`~aiostreams.ops.metrics`).

Read at scrape time from each sink's :class:`~aiostreams.runtime.table_health.TableHealth`
(a sink without maintenance has no series). Every family carries the labels ``app`` and
``sink``:

- ``aiostreams_table_files`` (gauge, label ``partition``): data files of the table's
  current snapshot per partition, sampled after each maintenance task;
- ``aiostreams_table_bytes_reclaimed`` / ``_files_deleted`` (counters): what vacuums
  deleted;
- ``aiostreams_table_compactions`` / ``_vacuums`` (counters): tasks run;
  ``aiostreams_table_files_compacted`` (counter): small files compactions replaced;
- ``aiostreams_table_maintenance_conflicts`` (counter): maintenance commits that lost a race
  with another writer (dropped, tried again); ``_maintenance_errors`` (counter): tasks that
  failed otherwise (logged, tried again).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from aiostreams.runtime.table_health import MaintainedSink, TableHealth

__all__ = ["table_metrics"]

_COUNTERS: tuple[tuple[str, str, str], ...] = (
    ("bytes_reclaimed", "bytes_reclaimed",
     "Bytes of files no table commit lists that vacuums deleted."),
    ("files_deleted", "files_deleted", "Files no table commit lists that vacuums deleted."),
    ("compactions", "compactions", "Compaction tasks the sink ran on its table."),
    ("vacuums", "vacuums", "Vacuum tasks the sink ran on its table."),
    ("files_compacted", "files_compacted",
     "Small data files that compactions replaced by larger ones."),
    ("conflicts", "maintenance_conflicts",
     "Maintenance commits that lost a race with another writer (dropped, tried again)."),
    ("errors", "maintenance_errors",
     "Maintenance tasks that failed for another reason (logged, tried again)."),
)


def table_metrics(app: str, sinks: Sequence[object]) -> Iterable[Metric]:
    """The families for app ``app`` and those of its external ``sinks`` that maintain
    their tables."""
    maintained: list[tuple[str, TableHealth]] = []
    for sink in sinks:
        if isinstance(sink, MaintainedSink):
            health = sink.table_health
            if health is not None:
                maintained.append((sink.name, health))
    files = GaugeMetricFamily(
        "aiostreams_table_files", "Data files of the table's current snapshot per partition, "
        "sampled after each maintenance task.", labels=["app", "sink", "partition"])
    for name, health in maintained:
        for partition, count in sorted(health.files_per_partition.items()):
            files.add_metric([app, name, partition], count)
    yield files
    for field, metric, doc in _COUNTERS:
        family = CounterMetricFamily(f"aiostreams_table_{metric}", doc, labels=["app", "sink"])
        for name, health in maintained:
            family.add_metric([app, name], getattr(health, field))
        yield family
