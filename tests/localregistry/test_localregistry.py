"""``python -m aiostreams.localregistry``: the Maven project shipped as package data, the
variable ``run`` prints, and a real ``run`` (build cached, start, answer, Ctrl-C). What a
user meets without Maven or Java, or on a taken port: tests/localjvm/test_servers.py."""

from __future__ import annotations

import fnmatch
import json
import os
import signal
import socket
import subprocess
import sys
import tomllib
import urllib.request
from pathlib import Path

import pytest

from aiostreams import App
from aiostreams.localregistry import build as build_module

REPO = Path(__file__).resolve().parents[2]


def test_an_app_starts_where_the_registry_variable_run_prints_is_exported(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIOSTREAMS_SCHEMA_REGISTRY", "http://127.0.0.1:8081/apis/ccompat/v7")
    assert App("with-registry-variable", broker="memory://").settings.broker == "memory://"


def test_the_maven_project_is_package_data_of_the_wheel() -> None:
    """Every file of the project matches a pattern of pyproject's package-data, so an
    installed wheel can build the registry (a checkout would hide a missing pattern)."""
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["package-data"]["aiostreams.localregistry"]
    package = build_module.PROJECT.parent
    files = [str(p.relative_to(package)) for p in build_module.PROJECT.rglob("*")
             if p.is_file()]
    assert "apicurio/pom.xml" in files
    unshipped = [f for f in files if not any(fnmatch.fnmatch(f, p) for p in patterns)]
    assert unshipped == []


@pytest.mark.registry
def test_run_prints_a_url_that_answers_and_ctrl_c_stops_it() -> None:
    """Builds first when the cache has no build (minutes), as a user's first run does."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k != "AIOSTREAMS_SCHEMA_REGISTRY"}
    with subprocess.Popen(
            [sys.executable, "-m", "aiostreams.localregistry", "run", "--port", str(port)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
            cwd=REPO) as proc:
        try:
            check_running_registry(proc, port)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def check_running_registry(proc: subprocess.Popen[str], port: int) -> None:
    assert proc.stdout is not None and proc.stderr is not None
    url = proc.stdout.readline().strip()  # printed once it answers
    assert url == f"http://127.0.0.1:{port}/apis/ccompat/v7", \
        proc.stderr.read() if proc.poll() is not None else url
    schema = json.dumps({"schema": json.dumps({"type": "string"}), "schemaType": "AVRO"})
    request = urllib.request.Request(
        f"{url}/subjects/greeting-value/versions", data=schema.encode(), method="POST",
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        assert "id" in json.loads(response.read())
    with urllib.request.urlopen(f"{url}/subjects", timeout=10) as response:
        assert json.loads(response.read()) == ["greeting-value"]
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 0
    assert f"export AIOSTREAMS_SCHEMA_REGISTRY={url}" in proc.stderr.read()
    with socket.socket() as s:  # released: nothing listens (TIME_WAIT may linger)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen()
