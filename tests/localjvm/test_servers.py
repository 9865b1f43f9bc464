"""What a user meets from either local Java server (the schema registry, the Iceberg REST
catalog) before one runs: no Maven, no Java, a taken port. Both go through
:mod:`aiostreams.localjvm`; each case runs against both, with each package's own error type
and CLI."""

from __future__ import annotations

import shutil
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from aiostreams.localcatalog import LocalCatalogError, LocalRestCatalog, ensure_classpath
from aiostreams.localcatalog.__main__ import main as catalog_main
from aiostreams.localjvm.server import LocalJvmServer, ServerState
from aiostreams.localregistry import LocalRegistry, LocalRegistryError, ensure_runner
from aiostreams.localregistry.__main__ import main as registry_main


@dataclass(frozen=True)
class Server:
    make: Callable[[int | None], LocalJvmServer]
    error: type[Exception]
    fetch: Callable[[Path], Path]
    main: Callable[[list[str]], int]
    address: Callable[[LocalJvmServer], str]


SERVERS = {
    "registry": Server(lambda port: LocalRegistry(port=port), LocalRegistryError, ensure_runner,
                       registry_main, lambda s: s.url),  # type: ignore[attr-defined]
    "catalog": Server(lambda port: LocalRestCatalog(port=port), LocalCatalogError,
                      ensure_classpath, catalog_main, lambda s: s.uri),  # type: ignore[attr-defined]
}


@pytest.fixture(params=sorted(SERVERS))
def server(request: pytest.FixtureRequest) -> Server:
    return SERVERS[request.param]


def without(monkeypatch: pytest.MonkeyPatch, *programs: str) -> None:
    real = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name, *args, **kwargs: None
                        if name in programs else real(name, *args, **kwargs))


def test_without_maven_the_fetch_says_what_to_install(
        server: Server, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    without(monkeypatch, "mvn")
    with pytest.raises(server.error, match=r"Apache Maven \('mvn'\) is not on PATH.*"
                                           r"Install Maven 3\.8\+"):
        server.fetch(tmp_path)


def test_without_java_run_says_what_to_install_and_exits_1(
        server: Server, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    without(monkeypatch, "java")
    assert server.main(["run"]) == 1
    err = capsys.readouterr().err
    assert "error: Java ('java') is not on PATH" in err and "JDK 17+" in err


def test_a_taken_port_is_refused_before_anything_starts(server: Server) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        instance = server.make(port)
        with pytest.raises(server.error, match=f"port {port} on 127.0.0.1 is taken"):
            instance.start()
    assert instance.state is ServerState.CREATED
    with pytest.raises(server.error, match="start\\(\\) it first"):
        server.address(instance)
