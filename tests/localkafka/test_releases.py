"""Which Kafka release LocalKafka runs, and what differs between 3.9 and 4.x.

The pure checks need nothing; the ones marked ``kafka`` fetch each release's jars (Maven
Central, once). test_broker.py starts the release the session's broker is not.
"""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
import zipfile
from pathlib import Path

import pytest

from aiostreams.localkafka import (
    DEFAULT_KAFKA_VERSION,
    RELEASES,
    VERSION_VARIABLE,
    LocalKafka,
    LocalKafkaError,
    kafka_release,
)
from aiostreams.localkafka.releases import Logging

_POM = "{http://maven.apache.org/POM/4.0.0}"


def test_the_version_argument_beats_the_variable_which_beats_the_default(
        monkeypatch: pytest.MonkeyPatch) -> None:
    other = next(v for v in RELEASES if v != DEFAULT_KAFKA_VERSION)
    monkeypatch.delenv(VERSION_VARIABLE, raising=False)
    assert LocalKafka().release.version == DEFAULT_KAFKA_VERSION

    monkeypatch.setenv(VERSION_VARIABLE, other)
    assert LocalKafka().release.version == other
    assert LocalKafka(version=DEFAULT_KAFKA_VERSION).release.version == DEFAULT_KAFKA_VERSION


def test_the_suite_runs_the_newest_release_and_make_compat_the_other() -> None:
    newest = max(RELEASES, key=lambda v: tuple(int(p) for p in v.split(".")))
    assert newest == DEFAULT_KAFKA_VERSION
    makefile = (Path(__file__).parents[2] / "Makefile").read_text()
    compat = next(line.split("?=")[1].strip() for line in makefile.splitlines()
                  if line.startswith("COMPAT_KAFKA"))
    assert compat in RELEASES and compat != DEFAULT_KAFKA_VERSION


@pytest.mark.parametrize("where", ["argument", "variable"])
def test_an_unknown_version_is_refused_naming_the_known_ones(
        where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(VERSION_VARIABLE, "2.8.0")
    version = "3.8.0" if where == "argument" else None
    with pytest.raises(LocalKafkaError, match=r"choose one of 3\.9\.1, 4\.4\.0") as raised:
        LocalKafka(version=version)
    assert ("version=3.8.0" if where == "argument" else f"${VERSION_VARIABLE}=2.8.0") \
        in str(raised.value)


@pytest.mark.parametrize("version", sorted(RELEASES))
def test_each_pom_pins_its_own_release_and_the_logging_its_broker_needs(version: str) -> None:
    release = kafka_release(version)
    project = ElementTree.parse(release.pom).getroot()
    pinned = {d.findtext(f"{_POM}artifactId"): d.findtext(f"{_POM}version")
              for d in project.iter(f"{_POM}dependency")}

    assert pinned["kafka_2.13"] == version
    binding = "slf4j-reload4j" if release.logging is Logging.LOG4J1 else "log4j-slf4j-impl"
    assert binding in pinned  # without it the broker logs nothing and never looks started
    assert release.broker_log_config.is_file() and release.tools_log_config.is_file()
    assert (release.major >= 4) == (release.logging is Logging.LOG4J2)


def _classes(libs: Path) -> set[str]:
    names: set[str] = set()
    for jar in libs.glob("*.jar"):
        with zipfile.ZipFile(jar) as archive:
            names.update(n.removesuffix(".class").replace("/", ".")
                         for n in archive.namelist() if n.endswith(".class"))
    return names


@pytest.mark.kafka
@pytest.mark.parametrize("version", sorted(RELEASES))
def test_each_release_ships_the_console_tools_it_names(version: str) -> None:
    kafka = LocalKafka(version=version)
    classes = _classes(kafka.ensure_jars())
    assert kafka.release.console_producer in classes
    assert kafka.release.console_consumer in {*classes, None}
    assert "kafka.Kafka" in classes and "kafka.tools.StorageTool" in classes
