"""The jar cache: downloaded once, and redone when a download did not finish.

A fake ``mvn`` on PATH stands in for Maven, so these tests need no network and no Java.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from aiostreams.localkafka import LocalKafkaError, kafka_release
from aiostreams.localkafka.jars import ensure_jars

KAFKA_VERSION = kafka_release().version  # what ensure_jars() fetches in this environment

FAKE_MVN = """#!/bin/sh
echo run >> "{calls}"
if [ -e "{fail}" ]; then echo "Could not resolve dependencies: network unreachable"; exit 1; fi
for arg in "$@"; do
  case "$arg" in -DoutputDirectory=*) out="${{arg#-DoutputDirectory=}}";; esac
done
mkdir -p "$out" && touch "$out/kafka_2.13-{version}.jar"
"""


@pytest.fixture
def fake_mvn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Install a fake ``mvn``; returns the file it appends a line to per run. Creating
    ``<tmp>/fail`` makes it fail."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    mvn = bin_dir / "mvn"
    mvn.write_text(FAKE_MVN.format(calls=calls, fail=tmp_path / "fail", version=KAFKA_VERSION))
    mvn.chmod(mvn.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return calls


def runs(calls: Path) -> int:
    return len(calls.read_text().splitlines()) if calls.exists() else 0


def test_jars_are_downloaded_once_and_then_reused(fake_mvn: Path, tmp_path: Path) -> None:
    libs = ensure_jars(tmp_path / "cache")
    again = ensure_jars(tmp_path / "cache")

    assert libs == again == tmp_path / "cache" / f"kafka-{KAFKA_VERSION}" / "libs"
    assert (libs / f"kafka_2.13-{KAFKA_VERSION}.jar").exists()
    assert runs(fake_mvn) == 1


def test_a_failed_download_says_why_and_is_redone_next_time(
    fake_mvn: Path, tmp_path: Path
) -> None:
    (tmp_path / "fail").touch()
    with pytest.raises(LocalKafkaError, match="network unreachable") as raised:
        ensure_jars(tmp_path / "cache")
    assert "Maven Central" in str(raised.value)  # says what to check

    (tmp_path / "fail").unlink()
    libs = ensure_jars(tmp_path / "cache")

    assert (libs / f"kafka_2.13-{KAFKA_VERSION}.jar").exists()
    assert runs(fake_mvn) == 2


def test_an_interrupted_download_is_redone(fake_mvn: Path, tmp_path: Path) -> None:
    partial = tmp_path / "cache" / f"kafka-{KAFKA_VERSION}" / "libs"
    partial.mkdir(parents=True)
    (partial / "half-written.jar").touch()  # no marker: the download never finished

    libs = ensure_jars(tmp_path / "cache")

    assert not (libs / "half-written.jar").exists()
    assert runs(fake_mvn) == 1


def test_missing_maven_is_reported_with_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no mvn there
    with pytest.raises(LocalKafkaError, match="Install Maven"):
        ensure_jars(tmp_path / "cache")
