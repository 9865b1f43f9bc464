"""Helpers for tests against the real broker: worker subprocesses and output checks."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from aiostreams.transport.base import Transport
from aiostreams.types import RawRecord, TopicPartition

WORKER = Path(__file__).with_name("kafka_worker.py")
COUNT_WORKER = Path(__file__).with_name("count_worker.py")


def worker_command(bootstrap: str, app: str, src: str, dst: str, *, script: Path = WORKER,
                   cli: bool = False, **env: str) -> tuple[list[str], dict[str, str]]:
    """The command and environment that run ``script``'s app: ``python script``
    (``App.run``), or with ``cli`` ``python -m aiostreams run script:app`` (its exit codes)."""
    environment = dict(os.environ)
    repo = str(Path(__file__).resolve().parents[2])
    environment["PYTHONPATH"] = os.pathsep.join(
        p for p in (repo, str(script.parent), environment.get("PYTHONPATH")) if p)
    environment.update({
        "WORKER_BROKER": f"kafka://{bootstrap}", "WORKER_APP": app,
        "WORKER_SRC": src, "WORKER_DST": dst, **env,
    })
    command = ([sys.executable, "-m", "aiostreams", "run", f"{script.stem}:app",
                "--no-progress"] if cli else [sys.executable, str(script)])
    return command, environment


def start_worker(bootstrap: str, app: str, src: str, dst: str, *, script: Path = WORKER,
                 stderr: int | None = None, cli: bool = False,
                 **env: str) -> subprocess.Popen[bytes]:
    """Start ``script``'s app in a process of its own (see :func:`worker_command`)."""
    command, environment = worker_command(bootstrap, app, src, dst, script=script, cli=cli,
                                          **env)
    return subprocess.Popen(command, env=environment, stderr=stderr)


async def stop_worker(proc: subprocess.Popen[bytes], *, kill: bool = False,
                      timeout: float = 60.0) -> int:
    """SIGTERM (graceful) or SIGKILL the worker and wait for it to exit."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
    loop = asyncio.get_running_loop()
    return await asyncio.wait_for(loop.run_in_executor(None, proc.wait), timeout)


async def wait_exit(proc: subprocess.Popen[bytes], timeout: float) -> int:
    """Wait up to ``timeout`` seconds for the worker to exit; its exit code."""
    loop = asyncio.get_running_loop()
    return await asyncio.wait_for(loop.run_in_executor(None, proc.wait), timeout)


async def until_logged(log: Path, text: str, timeout: float = 120.0) -> None:
    """Return once the worker writing ``log`` logged a line containing ``text`` (another
    process: only its log says so, so read it until it does, within ``timeout`` seconds)."""
    try:
        async with asyncio.timeout(timeout):
            while True:
                if text in await asyncio.to_thread(log.read_text, errors="replace"):
                    return
                await asyncio.sleep(0.1)
    except TimeoutError:
        tail = (await asyncio.to_thread(log.read_text, errors="replace"))[-6000:]
        raise AssertionError(f"{log} did not log {text!r} within {timeout} s; it ends:\n"
                             f"{tail}") from None


def keyed_inputs(n: int, keys: int) -> list[tuple[bytes, bytes]]:
    """Input i has key k<i % keys> and value '<key>:<sequence number within the key>'."""
    return [(f"k{i % keys}".encode(), f"k{i % keys}:{i // keys}".encode()) for i in range(n)]


def check_outputs(outputs: Iterable[RawRecord], inputs: list[tuple[bytes, bytes]], *,
                  exactly_once: bool) -> None:
    """Every input has an output (once, if ``exactly_once``), and within each output
    partition every key's sequence numbers never go back (per-key order)."""
    outs = list(outputs)
    values = [r.value for r in outs]
    expected = sorted(v for _, v in inputs)
    if exactly_once:
        assert sorted(values) == expected, _diff(values, expected)
    else:
        missing = set(expected) - set(values)
        assert not missing, f"{len(missing)} input(s) have no output, e.g. {sorted(missing)[:5]}"
    last: dict[bytes | None, int] = {}
    for r in sorted(outs, key=lambda r: (r.partition, r.offset)):
        assert r.value is not None
        seq = int(r.value.split(b":")[1])
        previous = last.get(r.key, -1)
        # after a crash, replays restart from the commit point: a key may go back only to
        # a value it already had (a duplicate), never skip ahead of an unseen one
        if exactly_once:
            assert seq == previous + 1, f"key {r.key!r}: {seq} after {previous}"
        else:
            assert seq <= previous + 1, f"key {r.key!r}: {seq} after {previous} (a gap)"
        last[r.key] = max(previous, seq)


def _diff(got: list[bytes | None], expected: list[bytes]) -> str:
    from collections import Counter

    g, e = Counter(got), Counter(expected)
    dupes = sum((g - e).values())
    lost = sum((e - g).values())
    return f"{lost} lost, {dupes} duplicated of {len(expected)}"


async def wait_committed(transport: Transport, group: str, topic: str, partitions: int,
                         total: int, *, timeout: float) -> float:
    """Poll ``group``'s committed offsets of ``topic`` (nothing announces a commit to an
    outsider) until they sum to ``total``; return the seconds that took. Raises
    AssertionError naming the last sum after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    consumer = transport.consumer(group)
    await consumer.start()
    try:
        while True:
            offsets = [await consumer.committed(TopicPartition(topic, p))
                       for p in range(partitions)]
            done = sum(o or 0 for o in offsets)
            if done >= total:
                return loop.time() - started
            if loop.time() - started > timeout:
                raise AssertionError(f"group {group!r} committed {done} of {total} records "
                                     f"of {topic!r} in {timeout:g} s (per partition: "
                                     f"{offsets})")
            await asyncio.sleep(0.1)  # a poll interval: the group coordinator tells no one
    finally:
        await consumer.stop()
