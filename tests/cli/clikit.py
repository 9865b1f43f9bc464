"""Running ``python -m aiostreams`` in a subprocess, and reading its output without sleeps.

``cli(...)`` runs a command to completion. ``Running`` starts one in the background and
``expect(pattern)`` blocks on its output lines (a reader thread feeds a queue) until a line
matches, or fails after a deadline: an event, not a poll.
"""

from __future__ import annotations

import os
import queue
import random
import re
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO

from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

T0 = 1_700_000_000_000  # ms: record i of a partition has timestamp T0 + 1000 * i

REPO = Path(__file__).resolve().parent.parent.parent
APPS = Path(__file__).resolve().parent / "apps"


def environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIOSTREAMS_", "DEMO_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(APPS), str(REPO)])
    env.update(extra)
    return env


def cli(*args: str, timeout: float = 60, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "aiostreams", *args], cwd=REPO,
                          env=environment(**env), capture_output=True, text=True,
                          timeout=timeout, check=False)


def error_lines(done: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in done.stderr.splitlines() if line.strip()]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_port_run(count: int) -> int:
    """The first of ``count`` consecutive ports that are all free now (for ``--workers N
    --metrics-port P``, which serves on P..P+N-1).

    Chosen below the kernel's ephemeral range, so the many outbound connections a test
    opens (Kafka clients) cannot take P+1 between this check and the workers' bind, as
    happened when P came from the kernel and P+1 was not checked.
    """
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(20000, max(20001, low - count))
        sockets = [socket.socket() for _ in range(count)]
        try:
            for offset, sock in enumerate(sockets):
                sock.bind(("127.0.0.1", base + offset))
            return base
        except OSError:
            continue
        finally:
            for sock in sockets:
                sock.close()
    raise RuntimeError(f"no {count} consecutive free ports below {low}")


class Running:
    """A CLI process in the background; its stderr (and stdout) lines arrive in queues."""

    def __init__(self, *args: str, stderr: int | None = None, **env: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "aiostreams", *args], cwd=REPO, env=environment(**env),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE if stderr is None else stderr,
            text=True)
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        self.stdout: list[str] = []
        self._threads = [threading.Thread(target=self._pump, args=(self.proc.stdout,
                                                                   self.stdout), daemon=True)]
        if self.proc.stderr is not None:
            self._threads.append(threading.Thread(target=self._pump,
                                                  args=(self.proc.stderr, None), daemon=True))
        for t in self._threads:
            t.start()

    def _pump(self, stream: IO[str] | None, sink: list[str] | None) -> None:
        assert stream is not None
        for line in stream:
            if sink is not None:
                sink.append(line)
            else:
                self.lines.put(line)
        if sink is None:
            self.lines.put(None)

    def expect(self, pattern: str, timeout: float = 30) -> re.Match[str]:
        """Block until a stderr line matches ``pattern``; fail (with what was seen) if the
        process ends or ``timeout`` passes first."""
        compiled = re.compile(pattern)
        try:
            while True:
                line = self.lines.get(timeout=timeout)
                if line is None:
                    raise AssertionError(f"the process ended before {pattern!r}:\n"
                                         + "".join(self.seen))
                self.seen.append(line)
                match = compiled.search(line)
                if match:
                    return match
        except queue.Empty:
            raise AssertionError(f"no line matched {pattern!r} within {timeout}s:\n"
                                 + "".join(self.seen)) from None

    def signal(self, signum: int = signal.SIGINT) -> None:
        self.proc.send_signal(signum)

    def finish(self, timeout: float = 60) -> tuple[int, str]:
        """Wait for the exit; returns (exit code, all of stderr)."""
        code = self.proc.wait(timeout=timeout)
        self._close()
        while True:
            try:
                line = self.lines.get_nowait()
            except queue.Empty:
                break
            if line is not None:
                self.seen.append(line)
        return code, "".join(self.seen)

    def kill(self) -> None:
        """End the process if it still runs, and close its pipes (always call it)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._close()

    def _close(self) -> None:
        for t in self._threads:
            t.join(timeout=10)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None and not stream.closed:
                stream.close()


async def topic_with_records(bootstrap: str, topic: str, per_partition: int) -> None:
    """``topic`` created with 2 partitions, each holding ``per_partition`` records of key
    ``k`` (record i of a partition stamped ``T0 + 1000 * i``)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, 2, 1)])
    finally:
        await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for p in range(2):
            for i in range(per_partition):
                await producer.send_and_wait(topic, b"v", key=b"k", partition=p,
                                             timestamp_ms=T0 + 1000 * i)
    finally:
        await producer.stop()
