"""A child started through ``die_with_parent`` is killed when the process that started it dies,
even by a signal that runs no finalizer (how a broker used to outlive a killed test run)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from aiostreams.localjvm.child_life import die_with_parent

_PARENT = """
import subprocess, sys
from aiostreams.localjvm.child_life import die_with_parent
child = subprocess.Popen(["sleep", "300"], preexec_fn=die_with_parent(){extra})
print(child.pid, flush=True)
sys.stdin.read()
"""


def _alive(pid: int) -> bool:
    status = Path(f"/proc/{pid}/status")
    try:
        state = next(line for line in status.read_text().splitlines() if line.startswith("State:"))
    except FileNotFoundError:
        return False
    return "Z" not in state.split()[1]  # a zombie has died; only its exit status is left


def _orphan_after_parent_killed(extra: str = "") -> int:
    with subprocess.Popen(
        [sys.executable, "-c", _PARENT.format(extra=extra)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    ) as parent:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert _alive(child)
        parent.send_signal(signal.SIGTERM)  # Python's default: die at once, no finalizers
        parent.wait(timeout=30)
    return child


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:  # nothing announces another process's death: poll
        if not _alive(pid):
            return True
        time.sleep(0.02)
    return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_child_dies_when_its_parent_is_killed() -> None:
    child = _orphan_after_parent_killed()
    assert _gone_within(child, 10.0), f"process {child} outlived its parent"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_without_the_tie_a_child_outlives_its_parent() -> None:
    """The control: the same parent without the tie leaves its child running (so the test
    above proves the tie, not something else killing the child)."""
    child = _orphan_after_parent_killed(extra=" and None")
    try:
        assert not _gone_within(child, 0.5)
    finally:
        os.kill(child, signal.SIGKILL)


async def test_no_tie_from_a_worker_thread() -> None:
    """Linux kills the child when the forking *thread* exits: from a worker thread the tie
    would kill a broker started through ``asyncio.to_thread`` when that thread ended."""
    assert await asyncio.to_thread(die_with_parent) is None
    seen: list[object] = []
    thread = threading.Thread(target=lambda: seen.append(die_with_parent()))
    thread.start()
    thread.join()
    assert seen == [None]
