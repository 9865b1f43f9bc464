"""A Maven build is done once per stamp: a failed or interrupted one is redone, one of other
inputs too, and one whose product was removed by hand; the marker is the last thing written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from aiostreams.localjvm.maven import (
    MARKER,
    CentralBuild,
    build_once,
    cache_dir,
    only_central_settings,
)


class Builds:
    def __init__(self, home: Path, fail: bool = False) -> None:
        self.home = home
        self.runs = 0
        self.fail = fail

    def __call__(self) -> None:
        self.runs += 1
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / "app.jar").write_text("jar")
        assert not (self.home / MARKER).exists(), "the marker comes after the build"
        if self.fail:
            raise RuntimeError("mvn failed")


def test_a_build_is_done_once_for_its_stamp(tmp_path: Path) -> None:
    home = tmp_path / "build"
    build = Builds(home)
    for _ in range(3):
        build_once(home, "digest-1", lock=tmp_path / ".lock", build=build)
    assert build.runs == 1
    assert (home / MARKER).read_text() == "digest-1\n"
    build_once(home, "digest-2", lock=tmp_path / ".lock", build=build)  # other inputs
    assert build.runs == 2


def test_a_failed_build_leaves_no_marker_and_is_redone(tmp_path: Path) -> None:
    home = tmp_path / "build"
    build = Builds(home, fail=True)
    with pytest.raises(RuntimeError, match="mvn failed"):
        build_once(home, "digest", lock=tmp_path / ".lock", build=build)
    assert not (home / MARKER).exists()
    build.fail = False
    build_once(home, "digest", lock=tmp_path / ".lock", build=build)
    assert build.runs == 2


def test_a_product_removed_by_hand_is_built_again(tmp_path: Path) -> None:
    home = tmp_path / "build"
    build = Builds(home)
    build_once(home, "ok", lock=tmp_path / ".lock", build=build, product=home / "app.jar")
    (home / "app.jar").unlink()
    build_once(home, "ok", lock=tmp_path / ".lock", build=build, product=home / "app.jar")
    assert build.runs == 2 and (home / "app.jar").exists()


def test_a_stamp_of_several_lines_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="one line"):
        build_once(tmp_path, "a\nb", lock=tmp_path / ".lock", build=lambda: None)


def test_only_central_settings_send_other_repositories_to_an_empty_folder(
        tmp_path: Path) -> None:
    settings = only_central_settings(tmp_path / "settings.xml", tmp_path / "empty")
    text = settings.read_text()
    assert "<mirrorOf>external:*,!central</mirrorOf>" in text
    assert (tmp_path / "empty").is_dir() and (tmp_path / "empty").as_uri() in text


def test_the_cache_is_the_env_setting_else_the_checkout(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AIOSTREAMS_CACHE_DIR", str(tmp_path))
    assert cache_dir() == tmp_path
    monkeypatch.delenv("AIOSTREAMS_CACHE_DIR")
    assert cache_dir() == Path(__file__).resolve().parents[2] / ".cache"


FAKE_MVN = """#!/bin/sh
echo "$@" >> "{calls}"
for arg in "$@"; do
  case "$arg" in -DoutputDirectory=*) out="${{arg#-DoutputDirectory=}}";; esac
done
mkdir -p "$out" && touch "$out/app.jar"
"""


def test_a_central_build_copies_the_project_and_runs_mvn_once_against_central_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls"
    bin_dir.mkdir()
    (bin_dir / "mvn").write_text(FAKE_MVN.format(calls=calls))
    (bin_dir / "mvn").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    pom = tmp_path / "pom.xml"
    pom.write_text("<project/>")
    build = CentralBuild(pom, ("dependency:copy-dependencies", "-DoutputDirectory={home}/jars"),
                         RuntimeError, "copies jars", "do without", "copying jars")
    javas: list[bool] = []
    root = tmp_path / "cache"
    for _ in range(2):
        home = build.ensure(root, "d1", require_java=lambda: javas.append(True),
                            product=root / "d1" / "jars" / "app.jar")
    assert home == root / "d1" and (home / "pom.xml").read_text() == "<project/>"
    assert javas == [True]  # Java is looked for before mvn runs, once: one run
    [args] = calls.read_text().splitlines()
    assert args.split() == ["-q", "-B", "-s", str(home / "settings.xml"), "-f",
                            str(home / "pom.xml"), "dependency:copy-dependencies",
                            f"-DoutputDirectory={home}/jars"]
    assert "!central" in (home / "settings.xml").read_text()
