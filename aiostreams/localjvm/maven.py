"""Jars from Maven Central: where they are cached, and a Maven run done once per input.

Where the cache lives (:func:`cache_dir`, first that applies):

1. ``$AIOSTREAMS_CACHE_DIR``;
2. ``<repo>/.cache`` when this package sits in a source checkout (the directory holding the
   ``aiostreams`` package also holds ``pyproject.toml``); the repo's ``.gitignore`` ignores it;
3. ``~/.cache/aiostreams``.

Invariant of :func:`build_once`: a directory is complete exactly when its ``.complete``
marker holds the stamp of the inputs it was made from, and the marker is written only after
the build succeeded, so an interrupted or failed build (or one of other inputs) is redone
from scratch. A file lock serializes concurrent builds (several pytest workers at once); a
build done while one waited for the lock is not done again.

Blocking: a first build runs ``mvn`` (minutes, most of it downloading); later calls read the
marker only.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["MARKER", "MVN_TIMEOUT", "CentralBuild", "build_once", "cache_dir", "is_complete",
           "only_central_settings", "require_mvn", "run_maven"]

MARKER = ".complete"
MVN_TIMEOUT = 900.0
_OUTPUT_TAIL_LINES = 30


def cache_dir() -> Path:
    """The directory that holds downloaded jars and builds (see the module docstring)."""
    configured = os.environ.get("AIOSTREAMS_CACHE_DIR")
    if configured:
        return Path(configured).expanduser()
    checkout = Path(__file__).resolve().parent.parent.parent
    if (checkout / "pyproject.toml").is_file():
        return checkout / ".cache"
    return Path.home() / ".cache" / "aiostreams"


def is_complete(home: Path, stamp: str, product: Path | None = None) -> bool:
    """Whether ``home``'s marker says it was completed from the inputs ``stamp`` names (and
    ``product``, when given, is there: a file removed by hand is built again)."""
    try:
        marked = (home / MARKER).read_text().strip() == stamp
    except FileNotFoundError:
        return False
    return marked and (product is None or product.exists())


def build_once(home: Path, stamp: str, *, lock: Path, build: Callable[[], None],
               product: Path | None = None) -> None:
    """Make ``home`` complete for ``stamp``: return at once if it is; else, holding the file
    lock ``lock``, run ``build`` (which fills ``home`` from scratch, ``product`` among what
    it makes, and raises if it cannot) and then write the marker. ``stamp`` is one line
    naming the inputs (a digest)."""
    if "\n" in stamp.strip():
        raise ValueError(f"a build's stamp is one line (a digest), got {stamp!r}")
    if is_complete(home, stamp, product):
        return
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        if is_complete(home, stamp, product):  # built by another process while we waited
            return
        (home / MARKER).unlink(missing_ok=True)
        build()
        home.mkdir(parents=True, exist_ok=True)
        (home / MARKER).write_text(stamp.strip() + "\n")
    assert is_complete(home, stamp, product), "a finished build is complete"


def require_mvn(error: Callable[[str], Exception], task: str, instead: str) -> str:
    """The path of ``mvn``; else raise ``error`` saying that it ``task`` (e.g. "downloads the
    Kafka broker's jars"), what to install, or ``instead`` what to do without it."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise error(f"Apache Maven ('mvn') is not on PATH; it {task}. Install Maven 3.8+ "
                    f"(e.g. apt install maven), or {instead}")
    return mvn


def only_central_settings(settings: Path, empty: Path) -> Path:
    """Write Maven settings to ``settings`` that send every repository other than Maven
    Central to the empty folder ``empty``, so that a parent POM's unreachable repository
    cannot stall a build; return ``settings``."""
    empty.mkdir(parents=True, exist_ok=True)
    settings.write_text(
        "<settings><mirrors><mirror><id>only-central</id>"
        "<mirrorOf>external:*,!central</mirrorOf>"
        f"<url>{empty.as_uri()}</url></mirror></mirrors></settings>\n")
    return settings


def run_maven(mvn: str, args: Sequence[str], *, error: Callable[[str], Exception],
              doing: str, produced: Callable[[], bool] = lambda: True) -> None:
    """Run ``mvn -q -B ARGS``; raise ``error`` with the end of its output unless it exits 0
    within :data:`MVN_TIMEOUT` and ``produced()`` then holds. ``doing`` says what it was
    for in the message ("copying the REST catalog's jars into DIR")."""
    try:
        result = subprocess.run([mvn, "-q", "-B", *args], capture_output=True, text=True,
                                timeout=MVN_TIMEOUT, check=False)
    except subprocess.TimeoutExpired as exc:
        raise error(f"mvn {doing} did not finish within {MVN_TIMEOUT:.0f} s; check the "
                    "network access to Maven Central (or the mirror in "
                    "~/.m2/settings.xml)") from exc
    if result.returncode != 0 or not produced():
        tail = "\n".join((result.stdout + result.stderr).strip()
                         .splitlines()[-_OUTPUT_TAIL_LINES:])
        raise error(f"mvn {doing} failed (exit {result.returncode}); check the network "
                    "access to Maven Central (or the mirror in ~/.m2/settings.xml). Its "
                    f"last output:\n{tail}")


@dataclass(frozen=True)
class CentralBuild:
    """A Maven project shipped as package data (``project``: a pom, or the directory that
    holds one), built by ``mvn GOALS`` from Maven Central only, once per digest of its inputs,
    in ``<root>/<digest>/`` (the marker holds "ok": the directory's name is the digest).

    ``goals`` may name the build directory as ``{home}``. ``task`` and ``instead`` end the
    message of a missing ``mvn`` (:func:`require_mvn`); ``doing`` says what the run is for in
    the message of a failed one ("building Apicurio Registry")."""

    project: Path
    goals: tuple[str, ...]
    error: Callable[[str], Exception]
    task: str
    instead: str
    doing: str

    def ensure(self, root: Path, digest: str, *, require_java: Callable[[], object],
               product: Path, produced: Callable[[], bool] | None = None) -> Path:
        """``<root>/<digest>/``, built first unless complete with its ``product``.
        ``require_java`` runs before ``mvn``, which needs Java too and says so less clearly;
        ``produced`` (default: ``product`` exists) checks what a run made."""
        home = root / digest

        def build() -> None:
            require_java()
            mvn = require_mvn(self.error, self.task, self.instead)
            shutil.rmtree(home, ignore_errors=True)
            if self.project.is_dir():
                shutil.copytree(self.project, home)
            else:
                home.mkdir(parents=True)
                shutil.copy(self.project, home / "pom.xml")
            settings = only_central_settings(home / "settings.xml",
                                             root / "no-other-repositories")
            run_maven(mvn, ["-s", str(settings), "-f", str(home / "pom.xml"),
                            *(goal.format(home=home) for goal in self.goals)],
                      error=self.error, doing=f"{self.doing} in {home}",
                      produced=produced if produced is not None else product.exists)

        build_once(home, "ok", lock=root / ".lock", build=build, product=product)
        return home
