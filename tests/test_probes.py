"""An orchestrator's two questions, answered apart: ``/health/live`` (kill and restart me?)
is 503 only for a failed app - never while it starts or restores, which would make a crash
loop of a long restore - and ``/health/ready`` (done starting?) is 200 only while the app
runs with no task restoring."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest
from test_metrics import choosy_app, failed_choosy_probe, produce

from aiostreams.engine.task_state import TaskState
from aiostreams.lifecycle.state import AppState
from aiostreams.ops.metrics import MetricsServer
from aiostreams.ops.probes import liveness, readiness
from aiostreams.transport.memory import MemoryBroker


async def probe(server: MetricsServer, path: str) -> tuple[int, dict[str, Any]]:
    url = server.url.removesuffix("/metrics") + path
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.json()


async def test_live_through_start_run_and_stop_ready_only_while_running() -> None:
    broker = MemoryBroker()
    app = choosy_app(broker)
    produce(broker, "in", ["ok-1"])
    async with MetricsServer(app) as server:
        assert (await probe(server, "/health/live"))[0] == 200  # created: not yet started
        assert await probe(server, "/health/ready") == (
            503, {"app": "choosy", "state": "created", "status": "not ready"})
        await app.start()
        assert await probe(server, "/health/live") == (
            200, {"app": "choosy", "state": "running", "status": "alive"})
        assert await probe(server, "/health/ready") == (
            200, {"app": "choosy", "state": "running", "status": "ready"})
        await app.stop()
        assert (await probe(server, "/health/live"))[0] == 200
        assert (await probe(server, "/health/ready"))[0] == 503


async def test_a_failed_app_is_not_live_and_says_why() -> None:
    status, body = await failed_choosy_probe("/health/live")
    assert (status, body["state"], body["status"]) == (503, "failed", "dead")
    assert "processor 'choosy' failed on in[0]@0" in body["error"]


def _app(state: AppState, **tasks: TaskState) -> Any:
    inspection = SimpleNamespace(
        worker=None, tasks={name: SimpleNamespace(state=s) for name, s in tasks.items()})
    return SimpleNamespace(name="a", state=state, inspect=lambda: inspection)


def test_a_task_restoring_keeps_the_app_unready_but_alive() -> None:
    app = _app(AppState.RUNNING, **{"0_1": TaskState.RUNNING, "0_0": TaskState.RESTORING})
    assert readiness(app) == (503, {"app": "a", "state": "running", "status": "restoring",
                                    "restoring": ["0_0"]})
    assert liveness(app)[0] == 200
    assert readiness(_app(AppState.RUNNING, **{"0_0": TaskState.RUNNING}))[0] == 200


@pytest.mark.parametrize("state", [s for s in AppState if s is not AppState.FAILED])
def test_every_state_but_failed_is_live(state: AppState) -> None:
    assert liveness(_app(state, **{"0_0": TaskState.RESTORING}))[0] == 200
    assert liveness(_app(AppState.FAILED))[0] == 503
