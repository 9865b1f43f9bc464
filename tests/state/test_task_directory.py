"""A task directory has one owner at a time: a second owner - another process, or another
worker of this one - never shares it, and works from a private copy instead."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from aiostreams.state.task_directory import PRIVATE_DIR, TaskDirectory, held_elsewhere


def test_the_first_owner_gets_the_shared_directory_and_holds_it(tmp_path: Path) -> None:
    first = TaskDirectory(tmp_path, "1_5")
    assert first.acquire() == tmp_path / "1_5"
    assert not first.private
    assert held_elsewhere(tmp_path, "1_5")
    first.release()
    assert not held_elsewhere(tmp_path, "1_5")


def test_a_second_owner_never_shares_it_and_its_private_copy_goes_at_release(
        tmp_path: Path) -> None:
    first, second = TaskDirectory(tmp_path, "1_5"), TaskDirectory(tmp_path, "1_5")
    first.acquire()
    (tmp_path / "1_5" / "agg.sqlite").write_bytes(b"first's")
    path = second.acquire()
    assert second.private
    assert path != tmp_path / "1_5" and path.parent.parent == tmp_path / PRIVATE_DIR
    assert list(path.iterdir()) == []  # empty: restored from the changelog, not copied
    second.release()
    assert not path.exists()
    assert (tmp_path / "1_5" / "agg.sqlite").read_bytes() == b"first's"
    first.release()


def test_a_directory_held_by_another_process_is_not_taken(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys; from aiostreams.state.task_directory import TaskDirectory; "
         f"d = TaskDirectory({str(tmp_path)!r}, '0_1'); d.acquire(); print('held', flush=True); "
         "sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == b"held\n"
        mine = TaskDirectory(tmp_path, "0_1")
        mine.acquire()
        assert mine.private
        mine.release()
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(30)
        assert holder.stdout is not None
        holder.stdout.close()
    # the kernel dropped the dead holder's lock: the directory is free again
    again = TaskDirectory(tmp_path, "0_1")
    again.acquire()
    assert not again.private
    again.release()


def test_private_copies_of_dead_processes_are_swept(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, check=True)
    leftover = tmp_path / PRIVATE_DIR / f"{int(dead.stdout)}-0" / "0_0"
    leftover.mkdir(parents=True)
    first, second = TaskDirectory(tmp_path, "0_0"), TaskDirectory(tmp_path, "0_0")
    first.acquire()
    second.acquire()
    assert not leftover.parent.exists()
    second.release()
    first.release()
