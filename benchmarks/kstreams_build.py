"""Kafka Streams apps of the benchmarks (``benchmarks/kstreams/*.java``), compiled against the
jars the oracle tests fetch (one place knows how: ``tests/oracle/oracle_jvm.py``), once per
source and jars digest, under the project's cache dir."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

from aiostreams.localkafka.jars import cache_dir

KSTREAMS_DIR = Path(__file__).with_name("kstreams")
ORACLE_JVM = Path(__file__).parents[1] / "tests" / "oracle" / "oracle_jvm.py"


def compiled_classpath(source: Path, benchmark: str) -> str:
    """The classpath of the class in ``source`` (``benchmark`` names what needs it in the
    error when there is no JDK), fetching the jars and compiling it when needed."""
    spec = importlib.util.spec_from_file_location("oracle_jvm", ORACLE_JVM)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {ORACLE_JVM}: it fetches Kafka Streams' jars")
    oracle_jvm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(oracle_jvm)
    oracle_jvm.ensure_classpath()
    jars: Path = oracle_jvm.jars_dir()
    digest = hashlib.sha256(source.read_bytes() + jars.name.encode()).hexdigest()[:16]
    classes = cache_dir() / f"{source.stem.lower()}-classes" / digest
    if not (classes / f"{source.stem}.class").is_file():
        javac = shutil.which("javac")
        if javac is None:
            raise RuntimeError(f"'javac' (a JDK 17+) is not on PATH; the {benchmark} "
                               f"compiles {source} with it (or pass --no-kafka-streams)")
        partial = classes.with_name(classes.name + f".partial-{os.getpid()}")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        subprocess.run([javac, "-nowarn", "-d", str(partial), "-cp", f"{jars}/*",
                        str(source)], check=True, timeout=300)
        if not classes.exists():
            partial.rename(classes)
        else:
            shutil.rmtree(partial, ignore_errors=True)
    return f"{classes}:{jars}/*"
