"""The peers venv: Faust and Quix Streams at pinned versions, apart from aiostreams' own
dependencies. Their pins would otherwise move ours: quixstreams 3.28 caps pydantic (< 2.14),
pydantic-settings (< 2.16) and rich (< 16), which aiostreams depends on too, and needs
orjson >= 3.9 (this machine's interpreter has 3.8.3); faust-streaming pins venusian and caps
click. Installing the peers must never change what aiostreams is measured with.

Created once at ``.cache/peers-venv`` with ``python -m venv`` and pip; a stamp file named
after a hash of :data:`PINS` makes it idempotent (a change of pins rebuilds it).
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from benchmarks.peers.contenders import REPO

VENV = REPO / ".cache" / "peers-venv"

PINS = (
    # the peers (checked with `pip install --dry-run` for CPython 3.11, Nov 2026)
    "faust-streaming==0.15.3",
    "mode-streaming==0.7.1",
    "quixstreams==3.28.1",
    "confluent-kafka==2.12.2",
    "rocksdict==0.3.29",
    # what the contenders themselves import, at the versions aiostreams is measured with
    "aiokafka==0.14.0",
    "aiohttp==3.14.5",
    "orjson==3.13.0",
)


def python() -> Path:
    return VENV / "bin" / "python"


def ensure_peers_venv(say: Callable[[str], None] = print) -> Path:
    """The peers venv's interpreter, creating or rebuilding the venv when its pins changed.
    Needs network access to PyPI the first time; raises with pip's output when that fails."""
    digest = hashlib.sha256("\n".join(PINS).encode()).hexdigest()[:12]
    stamp = VENV / f".installed-{digest}"
    if stamp.exists():
        return python()
    say(f"creating the peers venv at {VENV} (faust-streaming, quixstreams; once)")
    if VENV.exists():
        shutil.rmtree(VENV)
    _run([sys.executable, "-m", "venv", str(VENV)])
    _run([str(python()), "-m", "pip", "install", "-q", "--upgrade", "pip"])
    _run([str(python()), "-m", "pip", "install", "-q", *PINS])
    stamp.touch()
    return python()


def _run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed (exit code {done.returncode}); "
                           f"delete {VENV} and retry, or install the pins by hand:\n"
                           f"{done.stderr[-2000:]}")
