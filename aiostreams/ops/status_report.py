"""What the status page shows, at one instant: per task, per service, and the dead letters.

:func:`status_report` reads a running app through its status snapshot (``app.status()``),
its live worker (for the stall watch's head ages), its declared services and the log end
offsets the caller fetched (the metrics server's lag consumer), and returns a
:class:`StatusReport`. The page renders it as HTML at load and as JSON every second after;
both name each number by the same key (:meth:`StatusReport.fields`), so the page's script
updates numbers in place: ``committed:<task>:<topic>:<partition>``,
``in_flight:<task>``, ``limit:<service>``, ... (see :meth:`StatusReport.fields`).

Definitions (the same as the Prometheus metrics' where both exist):

- *committed*: the offset last committed for the partition (the next record to read);
- *lag*: log end offset minus the retired position (one past the last retired record,
  else the committed offset); unknown when the broker did not answer;
- *retire lag*: wall-clock time minus the event time of the oldest record not retired;
- *oldest age*: seconds the record at the head of the reorder buffer has been there (the
  stall watch's sample, up to one commit interval old; unknown when the watch is off).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from aiostreams.ops.inspection import OperatedApp
from aiostreams.types import TopicPartition

__all__ = ["PartitionRow", "ServiceRow", "StatusReport", "TaskRow", "status_report"]


@dataclass(frozen=True)
class PartitionRow:
    topic: str
    partition: int
    committed: int | None
    """The offset last committed (the next record to read); None before a first commit."""
    position: int | None
    """One past the last retired record, else the committed offset."""
    end: int | None
    """The log end offset; None when the broker did not answer."""
    lag: int | None = field(init=False)
    """``end - position`` (never below 0); None when either is unknown."""

    def __post_init__(self) -> None:
        lag = None if self.end is None or self.position is None else max(
            0, self.end - self.position)
        object.__setattr__(self, "lag", lag)


@dataclass(frozen=True)
class TaskRow:
    task_id: str
    state: str
    partitions: tuple[PartitionRow, ...]
    in_flight: int
    max_in_flight: int
    buffered: int
    retire_lag: float
    oldest_age: float | None
    records_in: int
    dead_lettered: int


@dataclass(frozen=True)
class ServiceRow:
    name: str
    limit: int
    learned_rate: float | None
    """Calls/s dispatch is paced at, learned from slow-downs (None: not paced)."""
    breaker: str
    held: int
    in_flight: int
    waiting: int


@dataclass(frozen=True)
class StatusReport:
    """An app at one instant, as the status page shows it.

    Invariant: :meth:`fields` has one key per number the page shows, and the keys depend
    only on :meth:`layout` (the tasks, their partitions and the services)."""

    app: str
    state: str
    commits: int
    failure: str | None
    tasks: tuple[TaskRow, ...]
    services: tuple[ServiceRow, ...]

    @property
    def dead_letters(self) -> int:
        return sum(t.dead_lettered for t in self.tasks)

    def layout(self) -> str:
        """What the page's structure depends on: when it changes (a rebalance moved
        tasks, a service made its first call, the worker failed) the page reloads instead
        of updating."""
        tasks = ";".join(f"{t.task_id}=" + ",".join(f"{p.topic}[{p.partition}]"
                                                   for p in t.partitions) for t in self.tasks)
        failed = "|failed" if self.failure else ""  # the page shows a failure in a box
        return f"{tasks}|{','.join(s.name for s in self.services)}{failed}"

    def fields(self) -> dict[str, str]:
        """Every number the page shows, formatted, by key (see the module docstring)."""
        out = {"state": self.state, "commits": _int(self.commits),
               "dead_letters": _int(self.dead_letters), "failure": self.failure or ""}
        for t in self.tasks:
            out[f"state:{t.task_id}"] = t.state
            for p in t.partitions:
                where = f"{t.task_id}:{p.topic}:{p.partition}"
                out[f"committed:{where}"] = _int(p.committed)
                out[f"lag:{where}"] = _int(p.lag)
            out[f"in_flight:{t.task_id}"] = f"{t.in_flight:,} / {t.max_in_flight:,}"
            out[f"buffered:{t.task_id}"] = _int(t.buffered)
            out[f"retire_lag:{t.task_id}"] = _seconds(t.retire_lag)
            out[f"oldest_age:{t.task_id}"] = _seconds(t.oldest_age)
            out[f"records_in:{t.task_id}"] = _int(t.records_in)
            out[f"dead_lettered:{t.task_id}"] = _int(t.dead_lettered)
        for s in self.services:
            out[f"limit:{s.name}"] = _int(s.limit)
            out[f"learned_rate:{s.name}"] = ("not paced" if s.learned_rate is None
                                             else f"{s.learned_rate:,.1f}/s")
            out[f"breaker:{s.name}"] = s.breaker
            out[f"held:{s.name}"] = _int(s.held)
            out[f"service_in_flight:{s.name}"] = _int(s.in_flight)
            out[f"waiting:{s.name}"] = _int(s.waiting)
        return out


UNKNOWN = "\u2013"  # an en dash: a number not known (yet)


def _int(value: int | None) -> str:
    return UNKNOWN if value is None else f"{value:,}"


def _seconds(value: float | None) -> str:
    return UNKNOWN if value is None else f"{value:,.2f} s"


def status_report(app: OperatedApp, end_offsets: Mapping[TopicPartition, int]) -> StatusReport:
    """``app`` now; ``end_offsets`` are the log end offsets known (lag is unknown for the
    partitions missing from them)."""
    status = app.status()
    worker = app.inspect().worker
    committed = status.worker.committed if status.worker is not None else {}
    now = app.clock.wall_time()
    monotonic = app.clock.monotonic()
    tasks = []
    for t in status.tasks:
        partitions = tuple(
            PartitionRow(tp.topic, tp.partition, committed.get(tp),
                         t.committable.get(tp, committed.get(tp)), end_offsets.get(tp))
            for tp in sorted(t.partitions))
        oldest = t.oldest_unretired_timestamp
        tasks.append(TaskRow(
            task_id=t.task_id, state=t.state, partitions=partitions, in_flight=t.in_flight,
            max_in_flight=t.max_in_flight, buffered=t.buffered,
            retire_lag=0.0 if oldest is None else max(0.0, now - oldest),
            oldest_age=(worker.stall_watch.head_age(t.task_id, monotonic)
                        if worker is not None and t.in_flight else None),
            records_in=t.counters.get("records_in", 0),
            dead_lettered=t.counters.get("dead_lettered", 0)))
    services = []
    for name, declared in sorted(app.services.items()):
        service = declared.current
        if service is None:
            continue  # not called yet: nothing to show
        services.append(ServiceRow(
            name=name, limit=service.limit,
            learned_rate=service.learned.pace(service.clock.monotonic()),
            breaker=service.breaker_state.value, held=service.held,
            in_flight=service.in_flight, waiting=service.waiting))
    return StatusReport(app=status.name, state=status.state.value,
                        commits=status.worker.commits if status.worker is not None else 0,
                        failure=status.worker.failure if status.worker is not None else None,
                        tasks=tuple(tasks), services=tuple(services))
