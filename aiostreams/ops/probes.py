"""What an orchestrator asks a worker: is it alive, and is it ready.

Kubernetes (and any orchestrator like it) asks two different questions, and a stream
processor must answer them apart:

* **live** (``/health/live``): should the process be killed and started again? Only when it
  cannot get better by itself: the app ``failed``. A worker that is starting, restoring a
  store, rebalancing, stopping, or waiting on a slow service is alive; killing it would only
  start the same restore again (a restore of a large store answered "not alive" is a crash
  loop). A process whose event loop is blocked answers nothing, and the probe's own timeout
  says so.
* **ready** (``/health/ready``): has this worker finished starting? ``running`` and no task
  restoring its stores. A rollout that waits for readiness before it stops the next host
  never has two hosts restoring at once.

``/health`` stays what it was: ``ready`` and not ``degraded`` (no stalled record, no dead
Kafka client): the question a human or an alert asks.

Invariant: ``liveness(app)`` is 200 exactly when the app's state is not FAILED;
``readiness(app)`` is 200 exactly when the app is RUNNING and none of its tasks is RESTORING.
"""

from __future__ import annotations

from typing import Any

from aiostreams.engine.task_state import TaskState
from aiostreams.lifecycle.state import AppState
from aiostreams.ops.inspection import OperatedApp as App

__all__ = ["health", "liveness", "readiness"]


def liveness(app: App) -> tuple[int, dict[str, Any]]:
    """``(200, body)`` unless the app failed; the body names the state (and the failure)."""
    body: dict[str, Any] = {"app": app.name, "state": app.state.value}
    worker = app.inspect().worker
    if app.state is AppState.FAILED:
        if worker is not None and worker.failure is not None:
            body["error"] = f"{type(worker.failure).__name__}: {worker.failure}"
        body["status"] = "dead"
        return 503, body
    body["status"] = "alive"
    return 200, body


def readiness(app: App) -> tuple[int, dict[str, Any]]:
    """``(200, body)`` when the app runs and no task restores; else 503 naming the tasks
    still restoring (or the state)."""
    restoring = sorted(str(task_id) for task_id, task in app.inspect().tasks.items()
                       if task.state is TaskState.RESTORING)
    body: dict[str, Any] = {"app": app.name, "state": app.state.value}
    if app.state is not AppState.RUNNING:
        body["status"] = "not ready"
        return 503, body
    if restoring:
        body["status"] = "restoring"
        body["restoring"] = restoring
        return 503, body
    body["status"] = "ready"
    return 200, body


def health(app: App) -> tuple[int, dict[str, Any]]:
    """``(200, body)`` when the app is RUNNING and no partition is stuck, else
    ``(503, body)``; the body names the state, the task count and, when the app failed, the
    failure. A RUNNING app with a stalled task (its oldest record unretired for
    ``stuck_record_warning`` seconds, see :mod:`aiostreams.engine.stall_watch`) is
    ``"status": "degraded"``, with ``stalled`` naming each task, record and how long; so
    is one whose Kafka client died under it, until it is rebuilt (``client`` says what
    died, see :mod:`aiostreams.engine.client_watchdog`); otherwise ``status`` is ``"ok"``
    (running) or ``"down"``."""
    body: dict[str, Any] = {"app": app.name, "state": app.state.value,
                            "tasks": len(app.inspect().tasks)}
    worker = app.inspect().worker
    if worker is not None and worker.failure is not None:
        body["error"] = f"{type(worker.failure).__name__}: {worker.failure}"
    stalls = worker.stall_watch.stalls if worker is not None else []
    client_trouble = worker.client_watchdog.degraded if worker is not None else None
    if app.state is not AppState.RUNNING:
        body["status"] = "down"
    elif stalls or client_trouble:
        body["status"] = "degraded"
        if stalls:
            body["stalled"] = [{"task": s.task_id, "record": s.where,
                                "seconds": round(s.seconds, 3)} for s in stalls]
        if client_trouble:
            body["client"] = client_trouble
    else:
        body["status"] = "ok"
    return (200 if body["status"] == "ok" else 503), body
