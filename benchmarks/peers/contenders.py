"""The contenders: how each is launched, and what it claims.

A :class:`Contender` turns :class:`~benchmarks.peers.options.ContenderOptions` into a
command line and an environment. aiostreams and the raw aiokafka loop run in this
interpreter; Faust and Quix Streams in the peers venv (:mod:`benchmarks.peers.venv`).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from benchmarks.peers.options import ContenderOptions

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Contender:
    """``label`` names it in tables; ``claims_key_order``: whether it promises per-key
    order (its violations are then a failure, otherwise only reported); ``workers``:
    aiostreams' ``--workers``."""

    label: str
    module: str
    claims_key_order: bool
    in_peers_venv: bool = False
    workers: int = 1
    overrides: dict[str, Any] = field(default_factory=dict)
    """Options this contender sets whatever the scenario says (e.g. Faust's concurrency)."""

    def options(self, scenario: ContenderOptions) -> ContenderOptions:
        return replace(scenario, **self.overrides)

    def command(self, peers_python: Path | None) -> list[str]:
        if self.in_peers_venv:
            if peers_python is None:
                raise ValueError(f"{self.label} runs in the peers venv; create it first "
                                 f"(benchmarks.peers.venv.ensure_peers_venv)")
            python = str(peers_python)
        else:
            python = sys.executable
        if self.module == "aiostreams":
            return [python, "-m", "aiostreams", "run", "benchmarks.peers.aiostreams_app:app",
                    "--no-progress", "--workers", str(self.workers)]
        return [python, "-m", self.module]

    def environment(self, options: ContenderOptions) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH"))
                                            if p)
        env.update(options.to_env())
        return env


def aiostreams(workers: int = 1, guarantee: str = "at_least_once") -> Contender:
    label = "aiostreams" if workers == 1 else f"aiostreams --workers {workers}"
    if guarantee != "at_least_once":
        label += f" {guarantee}"
    return Contender(label, "aiostreams", claims_key_order=True, workers=workers,
                     overrides={"guarantee": guarantee})


def raw_aiokafka(variant: str = "send") -> Contender:
    label = "raw aiokafka" + {"batch": " (batch API)", "autocommit": " (auto-commit)"}.get(
        variant, "")
    return Contender(label, "benchmarks.peers.raw_aiokafka", claims_key_order=True,
                     overrides={"variant": variant})


def faust(concurrency: int) -> Contender:
    label = "faust agent" + (f" concurrency={concurrency}" if concurrency > 1 else "")
    return Contender(label, "benchmarks.peers.faust_agent",
                     claims_key_order=concurrency == 1, in_peers_venv=True,
                     overrides={"concurrency": concurrency})


def quix() -> Contender:
    return Contender("quixstreams", "benchmarks.peers.quix_app", claims_key_order=True,
                     in_peers_venv=True)
