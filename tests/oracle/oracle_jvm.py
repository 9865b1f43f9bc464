"""The Kafka Streams oracle's JVM: jars fetched once, ``Oracle.java`` compiled once, one
process per test session answering cases over stdin/stdout.

Cache layout (under the project's cache dir, see :func:`aiostreams.localjvm.maven.cache_dir`):
``oracle-jars/<pom digest>/`` holds the jars of ``java/pom.xml`` and is complete exactly when
its marker holds the pom's SHA-256 (written only after ``mvn`` succeeded);
``oracle-classes/<digest>/`` holds ``Oracle.class`` compiled from the source against those
jars (the digest covers both). Keyed by the pom, checkouts that pin different Kafka Streams
releases share one cache without refetching each other's jars. Both are built as
:mod:`aiostreams.localjvm.maven` builds the servers' jars (``build_once``: the marker
written last, a file lock against concurrent builds; Maven run, and its errors worded, by
``run_maven``).

Protocol: one JSON object per line in, one per line out, in order; :meth:`OracleJVM.ask`
writes a batch from a thread while reading the answers, so a large batch cannot deadlock on
full pipes.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

from aiostreams.localjvm.maven import build_once, cache_dir, require_mvn, run_maven

JAVA_DIR = Path(__file__).with_name("java")
POM = JAVA_DIR / "pom.xml"
SOURCE = JAVA_DIR / "Oracle.java"
KAFKA_STREAMS_VERSION = re.search(r"<artifactId>kafka-streams</artifactId>\s*<version>([^<]+)<",
                                  POM.read_text()).group(1)  # type: ignore[union-attr]
"""The Kafka Streams release the oracle runs (what ``java/pom.xml`` pins)."""


class OracleSetupError(RuntimeError):
    """The oracle's jars could not be fetched or its source compiled; the message says why."""


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _javac(command: list[str], what: str, timeout: float) -> None:
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                                check=False)
    except subprocess.TimeoutExpired as exc:
        raise OracleSetupError(f"{what} did not finish within {timeout:.0f} s") from exc
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-30:])
        raise OracleSetupError(f"{what} failed (exit {result.returncode}):\n{tail}")


def jars_dir(cache: Path | None = None) -> Path:
    """Where the jars of ``java/pom.xml`` are (or go): complete once :func:`ensure_classpath`
    returned."""
    return (cache if cache is not None else cache_dir()) / "oracle-jars" / _digest(POM)[:16]


def ensure_classpath(cache: Path | None = None) -> str:
    """The oracle's classpath (jars + compiled class), fetching and compiling when needed."""
    root = cache if cache is not None else cache_dir()
    digest = _digest(POM)
    jars = jars_dir(root)
    compiled = hashlib.sha256((_digest(SOURCE) + digest).encode()).hexdigest()
    classes = root / "oracle-classes" / compiled[:16]
    jars.mkdir(parents=True, exist_ok=True)
    lock = jars.parent / ".lock"

    def fetch() -> None:
        mvn = require_mvn(OracleSetupError, "fetches Kafka Streams' jars for the oracle tests "
                          "(tests/oracle)", "deselect them with -m 'not oracle'")
        for old in jars.glob("*.jar"):
            old.unlink()
        run_maven(mvn, ["-f", str(POM), "dependency:copy-dependencies",
                        "-DincludeScope=runtime", f"-DoutputDirectory={jars}"],
                  error=OracleSetupError, doing=f"fetching Kafka Streams' jars into {jars}")

    def compile_source() -> None:
        if (classes / "Oracle.class").is_file():
            return  # compiled by a version that wrote no marker (the rename below is atomic)
        javac = shutil.which("javac")
        if javac is None:
            raise OracleSetupError("'javac' (a JDK 17+) is not on PATH; the oracle tests "
                                   "compile tests/oracle/java/Oracle.java with it")
        partial = classes.with_name(classes.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        _javac([javac, "-nowarn", "-d", str(partial), "-cp", f"{jars}/*", str(SOURCE)],
               f"javac {SOURCE}", 300.0)
        shutil.rmtree(classes, ignore_errors=True)
        partial.rename(classes)

    build_once(jars, digest, lock=lock, build=fetch)
    build_once(classes, compiled, lock=lock, build=compile_source,
               product=classes / "Oracle.class")
    return f"{classes}:{jars}/*"


class OracleJVM:
    """One ``java Oracle`` process; :meth:`ask` sends cases and returns the answers in order.
    Not thread-safe (one pytest session asks from one thread)."""

    def __init__(self, classpath: str) -> None:
        self._process = subprocess.Popen(
            ["java", "-Xss8m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp",
             classpath, "Oracle"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, encoding="utf-8", bufsize=1)
        self.cases = 0
        self._serial = 0

    def ask(self, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Each request's answer (see ``Oracle.java``), in order. Raises when the JVM died."""
        process = self._process
        assert process.stdin is not None and process.stdout is not None
        tagged = []
        for request in requests:
            self._serial += 1
            tagged.append({**request, "id": f"{request.get('id')}#{self._serial}"})
        lines = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in tagged)
        writer = threading.Thread(target=self._write, args=(lines,), daemon=True)
        writer.start()
        answers = []
        for request in tagged:
            while True:  # answers to an ask interrupted earlier (a timeout) are stale
                line = process.stdout.readline()
                if not line:
                    raise OracleSetupError(
                        f"the oracle JVM exited (code {process.poll()}) before answering "
                        f"case {request['id']!r}")
                answer = json.loads(line)
                if answer.get("id") == request["id"]:
                    break
            answers.append(answer)
        writer.join()
        self.cases += len(requests)
        return answers

    def _write(self, lines: str) -> None:
        assert self._process.stdin is not None
        self._process.stdin.write(lines)
        self._process.stdin.flush()

    def close(self) -> None:
        """Close stdin (the JVM exits at end of input) and wait for it."""
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()
