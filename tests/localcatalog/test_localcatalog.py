"""``python -m aiostreams.localcatalog``: the files shipped as package data, and a real
``run`` that binds 127.0.0.1 only and stops on Ctrl-C. (What a user meets without Maven or
Java, or on a taken port: tests/localjvm/test_servers.py; the sink through it:
tests/iceberg/test_iceberg_rest_catalog.py.)"""

from __future__ import annotations

import fnmatch
import json
import signal
import subprocess
import sys
import tomllib
import urllib.request
from pathlib import Path

from aiostreams.localcatalog import classpath as classpath_module

REPO = Path(__file__).resolve().parents[2]


def test_the_pom_and_the_server_source_are_package_data_of_the_wheel() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["package-data"]["aiostreams.localcatalog"]
    package = classpath_module.POM.parent
    data = [p.name for p in package.iterdir() if p.is_file() and p.suffix != ".py"]
    assert sorted(data) == ["RestCatalogServer.java", "pom.xml"]
    assert [f for f in data if not any(fnmatch.fnmatch(f, p) for p in patterns)] == []


def test_run_prints_a_uri_on_127_0_0_1_that_answers_and_ctrl_c_stops_it(
        tmp_path: Path) -> None:
    """Copies the jars first when the cache has none (a minute), as a user's first run."""
    with subprocess.Popen(
            [sys.executable, "-m", "aiostreams.localcatalog", "run", "--warehouse",
             str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            cwd=REPO) as proc:
        try:
            assert proc.stdout is not None and proc.stderr is not None
            uri = proc.stdout.readline().strip()  # printed once it listens
            assert uri.startswith("http://127.0.0.1:"), (
                proc.stderr.read() if proc.poll() is not None else uri)
            with urllib.request.urlopen(f"{uri}v1/config", timeout=10) as response:
                assert "defaults" in json.loads(response.read())
            port = int(uri.rstrip("/").rsplit(":", 1)[1])
            listening = subprocess.run(["ss", "-ltnH", f"sport = :{port}"],
                                       capture_output=True, text=True, check=False).stdout
            assert [line.split()[3] for line in listening.splitlines()] == [
                f"127.0.0.1:{port}"], listening  # loopback only
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=60) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert (tmp_path / "rest-catalog.db").is_file()  # the warehouse given is kept
