"""The deployment files (deploy/) ask only for what aiostreams has: the container's command
parses as ``aiostreams run`` takes it, the StatefulSet's probes are paths the metrics server
answers (not 404), its ``AIOSTREAMS_*`` variables are settings, its grace period covers the
drain, and the KEDA trigger's query names metrics a running app exports."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from status_demo import demo_app, orders
from test_grafana_dashboard import exported_names, metric_names

from aiostreams.cli import build_parser
from aiostreams.ops.metrics import MetricsServer
from aiostreams.settings.config import Settings
from aiostreams.transport.memory import MemoryBroker

DEPLOY = Path(__file__).parents[1] / "deploy"
CONTAINERFILE = (DEPLOY / "Containerfile").read_text()


def manifests(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def stateful_set() -> dict[str, Any]:
    (found,) = [m for m in manifests(DEPLOY / "kubernetes" / "aiostreams.yaml")
                if m["kind"] == "StatefulSet"]
    return found


def container() -> dict[str, Any]:
    (only,) = stateful_set()["spec"]["template"]["spec"]["containers"]
    return only


def run_arguments() -> list[str]:
    """The ``aiostreams run`` arguments of the image's entry point (APP as built)."""
    entry = re.search(r'^ENTRYPOINT (\[.*\])$', CONTAINERFILE, re.M)
    assert entry is not None
    script = yaml.safe_load(entry.group(1))[2]  # ["sh", "-c", script, "--"]
    app = re.search(r"^ARG APP=(\S+)$", CONTAINERFILE, re.M)
    assert app is not None
    words = shlex.split(script.replace('"$APP"', app.group(1)).replace('"$@"', ""))
    assert words[:4] == ["exec", "python", "-m", "aiostreams"], words
    return words[4:]


def test_the_image_runs_the_app_with_metrics_on_every_interface_of_the_pod() -> None:
    args = build_parser().parse_args(run_arguments())
    assert (args.metrics_port, args.metrics_host) == (9108, "0.0.0.0")
    assert "EXPOSE 9108" in CONTAINERFILE
    assert "STOPSIGNAL SIGTERM" in CONTAINERFILE
    state = re.search(r"AIOSTREAMS_STATE_DIR=(\S+)", CONTAINERFILE)
    assert state is not None and f"VOLUME {state.group(1)}" in CONTAINERFILE
    mounts = {m["mountPath"] for m in container()["volumeMounts"]}
    assert state.group(1) in mounts


def test_the_stateful_set_sets_only_real_settings_and_waits_out_the_drain() -> None:
    names = {e["name"] for e in container()["env"]}
    settings = {f"AIOSTREAMS_{name.upper()}" for name in Settings.model_fields}
    assert names <= settings, f"not settings: {sorted(names - settings)}"
    grace = stateful_set()["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace >= Settings().drain_timeout + 10.0  # the drain, then a commit
    (port,) = container()["ports"]
    assert port["containerPort"] == build_parser().parse_args(run_arguments()).metrics_port


@pytest.fixture
async def served() -> Any:
    broker = MemoryBroker()
    broker.create_topic("orders", 2)
    broker.append(list(orders(0, 60)))
    app = demo_app(broker)
    server = MetricsServer(app, port=0)
    await server.start()
    await app.start()
    try:
        await app.wait_until_caught_up(timeout=30)
        yield server
    finally:
        await app.stop()
        await server.stop()


async def test_the_probes_and_the_autoscaler_ask_for_what_a_running_app_serves(
        served: MetricsServer) -> None:
    base = served.url.removesuffix("/metrics")
    probes = [container()[kind]["httpGet"]["path"]
              for kind in ("livenessProbe", "readinessProbe")]
    assert probes == ["/health/live", "/health/ready"]
    async with aiohttp.ClientSession() as session:
        for path in probes:
            async with session.get(base + path) as response:
                assert response.status == 200, (path, await response.text())
        async with session.get(served.url) as response:
            exported = exported_names(await response.text())
    (scaler,) = manifests(DEPLOY / "keda" / "scaledobject.yaml")
    (trigger,) = scaler["spec"]["triggers"]
    wanted = metric_names(trigger["metadata"]["query"])
    assert wanted == {"aiostreams_drain_time_seconds"}
    assert wanted <= exported
    assert scaler["spec"]["scaleTargetRef"]["name"] == stateful_set()["metadata"]["name"]
