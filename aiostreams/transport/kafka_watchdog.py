"""Is an aiokafka client alive? Its background tasks, and whether its fetcher progresses.

aiokafka does a client's work in background tasks, and when one of them dies nothing
tells its user: the fetcher task, killed by an exception (a flipped bit in a topic name of
a fetch response - no checksum covers it - raised ``KeyError`` inside it), leaves
``getmany`` returning nothing forever, at 0 CPU, with no error. This module looks at
those tasks from outside (:func:`observe_consumer`, :func:`observe_producer`) and judges
what it sees (:func:`judge`, a pure function, so its decisions are tested alone).

The tasks looked at (aiokafka ``>=0.13,<0.15``; one list to check on an upgrade):

* consumer: ``_fetcher._fetch_task`` (fetches for every assigned partition; nothing else
  notices its death), ``_coordinator._coordination_task`` (group membership; its death
  is raised by aiokafka's ``getmany``), ``_coordinator._heartbeat_task`` and
  ``_coordinator._commit_refresh_task`` (come and go with the membership: only an
  exception counts);
* producer: ``_sender.sender_task`` (delivers every batch and transactional request).

Progress: aiokafka stamps each partition's ``timestamp`` (wall-clock ms) when a fetch
response for it arrives. A partition the fetcher should be fetching - assigned, with a
position, nothing buffered for it - whose last response is older than ``stall_after``
seconds is *starved*; the client is judged stalled only when the broker answers
meanwhile (:func:`broker_answers`, on a connection of its own), so an outage is left to
the outage logic.
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiokafka.client import AIOKafkaClient

__all__ = ["ALIVE", "InternalTask", "Liveness", "Observation", "TaskState", "broker_answers",
           "judge", "observe_consumer", "observe_producer", "suspects_stall"]


class TaskState(enum.Enum):
    RUNNING = "running"
    FAILED = "failed"  # done with an exception
    ENDED = "ended"  # done without one (returned, or cancelled)
    ABSENT = "absent"  # not created (yet, or any more)


@dataclass(frozen=True)
class InternalTask:
    """One background task of a client as seen at one moment. ``required``: the task must
    run as long as the client does (else it only comes and goes, and only a failure
    counts)."""

    name: str
    state: TaskState
    error: str | None = None
    required: bool = True


@dataclass(frozen=True)
class Observation:
    """What one look at a client saw: its tasks, and the age in seconds of the oldest last
    fetch response among the partitions its fetcher should be fetching (None: none)."""

    client: str
    tasks: tuple[InternalTask, ...]
    fetch_age: float | None = None
    starved: tuple[str, ...] = ()  # those partitions, as "topic[partition]"


@dataclass(frozen=True)
class Liveness:
    """A verdict: ``dead`` (a task died), ``stalled`` (no progress while the broker
    answers) or neither; ``reason`` says what and why, for a log line and ``/health``."""

    dead: bool = False
    stalled: bool = False
    reason: str = ""
    conflict: str | None = None
    """Set on a dead verdict that rebuilding the client cannot help: another process took
    this member's ``group_instance_id`` (:mod:`~aiostreams.transport.kafka_instance_fence`).
    The message says what to change."""

    @property
    def alive(self) -> bool:
        return not (self.dead or self.stalled)


ALIVE = Liveness()


def judge(seen: Observation, *, stall_after: float | None,
          answers: bool | None) -> Liveness:
    """The verdict on ``seen``. Dead when a required task is not running or any task
    failed; else stalled when ``fetch_age`` exceeds ``stall_after`` (None: never) and the
    broker ``answers`` (None: not asked yet - then not stalled); else alive.

    Invariant: a verdict is never both dead and stalled, and ``reason`` is empty exactly
    when it is alive."""
    deaths = [t for t in seen.tasks if t.state is TaskState.FAILED
              or (t.required and t.state is not TaskState.RUNNING)]
    if deaths:
        what = "; ".join(f"its {t.name} task {t.state.value}"
                         + (f" with {t.error}" if t.error else "") for t in deaths)
        return Liveness(dead=True, reason=f"{seen.client}: {what}")
    if (stall_after is not None and seen.fetch_age is not None
            and seen.fetch_age > stall_after and answers):
        return Liveness(stalled=True, reason=(
            f"{seen.client}: no fetch response for {seen.fetch_age:.0f}s "
            f"({', '.join(seen.starved) or 'its partitions'}) while the broker answers"))
    return ALIVE


def suspects_stall(seen: Observation, stall_after: float | None) -> bool:
    """Whether ``seen`` is worth asking the broker about (:func:`broker_answers`)."""
    return (stall_after is not None and seen.fetch_age is not None
            and seen.fetch_age > stall_after)


def _task(name: str, task: Any, *, required: bool = True) -> InternalTask:
    if task is None:
        return InternalTask(name, TaskState.ABSENT, required=required)
    if not task.done():
        return InternalTask(name, TaskState.RUNNING, required=required)
    if task.cancelled():
        return InternalTask(name, TaskState.ENDED, required=required)
    error = task.exception()
    if error is None:
        return InternalTask(name, TaskState.ENDED, required=required)
    return InternalTask(name, TaskState.FAILED, _describe(error), required=required)


def _describe(error: BaseException) -> str:
    """``KafkaError: ...`` and, aiokafka wrapping the real cause, ``(from KeyError: ...)``."""
    text = f"{type(error).__name__}: {error}"
    cause = error.__cause__
    if cause is not None:
        text += f" (from {type(cause).__name__}: {cause!r})"
    return text


def observe_consumer(consumer: Any, client: str, *,
                     now: Callable[[], float] = time.time) -> Observation:
    """Look at a started ``AIOKafkaConsumer`` (no I/O, no await)."""
    tasks: list[InternalTask] = []
    fetcher = getattr(consumer, "_fetcher", None)
    coordinator = getattr(consumer, "_coordinator", None)
    if fetcher is not None:
        tasks.append(_task("fetcher", getattr(fetcher, "_fetch_task", None)))
    if coordinator is not None and hasattr(coordinator, "_coordination_task"):
        tasks.append(_task("group coordination", coordinator._coordination_task))
        tasks.append(_task("heartbeat", coordinator._heartbeat_task, required=False))
        tasks.append(_task("commit refresh", coordinator._commit_refresh_task,
                           required=False))
    age, starved = _fetch_age(consumer, fetcher, now())
    return Observation(client, tuple(tasks), age, starved)


def _fetch_age(consumer: Any, fetcher: Any, now: float
               ) -> tuple[float | None, tuple[str, ...]]:
    subscription = getattr(consumer, "_subscription", None)
    current = getattr(subscription, "subscription", None)
    assignment = getattr(current, "assignment", None)
    if fetcher is None or assignment is None or not assignment.active:
        return None, ()
    buffered = getattr(fetcher, "_records", {})
    ages: list[tuple[float, str]] = []
    for tp in assignment.tps:
        state = assignment.state_value(tp)
        if (tp in buffered or state.paused or not state.has_valid_position
                or state.timestamp is None):
            continue
        ages.append((now - state.timestamp / 1000.0, f"{tp.topic}[{tp.partition}]"))
    if not ages:
        return None, ()
    oldest = max(age for age, _ in ages)
    return oldest, tuple(sorted(name for age, name in ages if age >= oldest - 1.0))


def observe_producer(producer: Any, client: str) -> Observation:
    """Look at a started ``AIOKafkaProducer`` (no I/O, no await)."""
    sender = getattr(producer, "_sender", None)
    task = getattr(sender, "sender_task", None) if sender is not None else None
    return Observation(client, (_task("sender", task),))


async def broker_answers(kwargs: dict[str, Any], timeout: float) -> bool:
    """Whether a broker answers a metadata request on a connection of its own within
    ``timeout`` seconds (``kwargs``: :meth:`KafkaOptions.client_kwargs`): the client under
    watch may hold a dead connection, so asking through it would prove nothing.

    Cancellation: the probe's connection is closed and the cancellation propagates."""
    probe = AIOKafkaClient(**kwargs)
    try:
        async with asyncio.timeout(timeout):
            await probe.bootstrap()
        return True
    except asyncio.CancelledError:
        raise
    except Exception:
        return False
    finally:
        await probe.close()
