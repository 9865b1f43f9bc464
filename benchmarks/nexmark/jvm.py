"""Kafka Streams' side: ``benchmarks/kstreams/Nexmark.java`` compiled against the jars the
oracle tests fetch (``tests/oracle/oracle_jvm.py`` knows how), once per source and jars
digest under the project's cache dir, and run as a process of its own."""

from __future__ import annotations

import asyncio
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from benchmarks.kstreams_build import KSTREAMS_DIR, compiled_classpath

JAVA_SOURCE = KSTREAMS_DIR / "Nexmark.java"
JAVA_OPTIONS = ("-Xms512m", "-Xmx1g")


def classpath() -> str:
    """``Nexmark``'s classpath, fetching the jars and compiling the class when needed."""
    return compiled_classpath(JAVA_SOURCE, "Nexmark benchmark")


@dataclass(frozen=True)
class Timed:
    """One side's run of one query: input records read, output records written, seconds
    from the first input read to the last output written, and the process's CPU seconds
    (every thread) over the same span."""

    inputs: int
    outputs: int
    seconds: float
    cpu_seconds: float

    @classmethod
    def from_json(cls, line: str) -> Timed:
        d = json.loads(line)
        return cls(int(d["inputs"]), int(d["outputs"]), float(d["seconds"]),
                   float(d["cpu_seconds"]))


async def run_query(bootstrap: str, app: str, query: str, prefix: str, output: str,
                    expected: int, state_dir: Path, timeout: float,
                    cache_bytes: int | None = None) -> Timed:
    """Run ``query`` in Kafka Streams on the broker (see ``Nexmark.java``'s ``run``), its
    record cache ``cache_bytes`` (None: Kafka Streams' default, 10 MB)."""
    cp = await asyncio.to_thread(classpath)
    cache = () if cache_bytes is None else (str(cache_bytes),)
    process = await asyncio.create_subprocess_exec(
        "java", *JAVA_OPTIONS, "-cp", cp, "Nexmark", "run", bootstrap, app, query, prefix,
        output, str(expected), str(state_dir), str(int(timeout)), *cache,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await process.communicate()
    if process.returncode != 0:
        tail = "\n".join(err.decode(errors="replace").strip().splitlines()[-20:])
        raise RuntimeError(f"Nexmark.java {query} exited with {process.returncode}:\n{tail}")
    return Timed.from_json(out.decode().strip().splitlines()[-1])


def drive(queries: list[str], lines: str, timeout: float = 300.0
          ) -> dict[str, list[tuple[bytes | None, bytes | None]]]:
    """Each query's output records from Kafka Streams' TopologyTestDriver over the input
    ``lines`` (``Nexmark.java``'s ``drive`` format), in one JVM."""
    result = subprocess.run(["java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp",
                             classpath(), "Nexmark", "drive", *queries],
                            input=lines, capture_output=True, text=True, timeout=timeout,
                            check=False)
    if result.returncode != 0:
        tail = "\n".join(result.stderr.strip().splitlines()[-20:])
        raise RuntimeError(f"Nexmark.java drive exited with {result.returncode}:\n{tail}")
    outputs: dict[str, list[tuple[bytes | None, bytes | None]]] = {}
    current: list[tuple[bytes | None, bytes | None]] = []
    for line in result.stdout.splitlines():
        first, second = line.split(" ")
        if first == "query":
            current = outputs.setdefault(second, [])
        else:
            current.append((None if first == "-" else bytes.fromhex(first),
                            None if second == "-" else bytes.fromhex(second)))
    return outputs
