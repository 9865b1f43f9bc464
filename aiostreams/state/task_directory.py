"""A task's directory of persistent files, held by one owner at a time.

The stores and the checkpoint of a task live in ``<state_dir>/<task_id>``. Several workers
may share one ``state_dir`` (``aiostreams run --workers N`` on one host), and the group can
hand a task to one of them while another still holds it - a worker frozen past its session
timeout, which resumes believing it owns the task. Two owners writing one SQLite file and one
checkpoint is how state goes silently wrong, so a task directory is taken with an exclusive
lock (``flock`` on ``<task_id>/.lock``: two processes, or two workers of one process, can
never both hold it, and the kernel drops it when its holder dies).

A worker that finds the lock held does not wait for its holder (which may be frozen for
good) and never shares: it works from a **private copy**, an empty directory of its own
under ``<state_dir>/.private/``, which its restore fills from the changelog's start and
which is deleted when the task closes. Private copies left by a process that died are
swept when another one is made.

Lifecycle: ``CREATED -> HELD -> RELEASED`` (:class:`DirectoryState`), and ``RELEASED -> HELD``
again for an owner that takes it anew (a global table's copy, reopened). Invariant: while
``HELD``, this object holds the lock of :attr:`path`'s task directory (``private`` false) or
:attr:`path` is a directory no other owner knows (``private`` true).

The methods block on file I/O (open, flock, rmtree): call them on a thread from async code.
"""

from __future__ import annotations

import contextlib
import enum
import fcntl
import itertools
import logging
import os
import shutil
from pathlib import Path

log = logging.getLogger("aiostreams.state")

LOCK_FILE = ".lock"
PRIVATE_DIR = ".private"

_private_ids = itertools.count()


class DirectoryState(enum.Enum):
    CREATED = "created"
    HELD = "held"
    RELEASED = "released"


class TaskDirectory:
    """The directory one task's persistent files live in, held exclusively (see the module
    doc). :attr:`root` is the state directory the task's stores should use (``root /
    task_id`` is :attr:`path`)."""

    def __init__(self, state_dir: Path | str, task_id: str) -> None:
        self.state_dir = Path(state_dir)
        self.task_id = task_id
        self.state = DirectoryState.CREATED
        self.private = False
        self.root = self.state_dir
        self._lock_fd: int | None = None

    @property
    def path(self) -> Path:
        return self.root / self.task_id

    def acquire(self) -> Path:
        """Take the task directory (or, when another owner holds it, a private copy) and
        return its path."""
        assert self.state is not DirectoryState.HELD, f"task directory {self.task_id} held twice"
        self.private = False
        self.root = self.state_dir
        shared = self.state_dir / self.task_id
        shared.mkdir(parents=True, exist_ok=True)
        fd = os.open(shared / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            self._take_private_copy()
        except BaseException:
            os.close(fd)
            raise
        else:
            self._lock_fd = fd
        self.state = DirectoryState.HELD
        return self.path

    def release(self) -> None:
        """Give the directory up: unlock it, or delete the private copy. Idempotent."""
        if self.state is not DirectoryState.HELD:
            self.state = DirectoryState.RELEASED
            return
        self.state = DirectoryState.RELEASED
        if self._lock_fd is not None:
            fd, self._lock_fd = self._lock_fd, None
            os.close(fd)  # closing the only descriptor drops the flock
        if self.private:
            shutil.rmtree(self.root, ignore_errors=True)

    def _take_private_copy(self) -> None:
        base = self.state_dir / PRIVATE_DIR
        base.mkdir(parents=True, exist_ok=True)
        _sweep_dead_copies(base)
        self.root = base / f"{os.getpid()}-{next(_private_ids)}"
        shutil.rmtree(self.root, ignore_errors=True)  # a dead process's leftover
        self.path.mkdir(parents=True)
        self.private = True
        log.warning(
            "task %s: its state directory %s is held by another owner (a worker of this "
            "host that has not given the task up yet, e.g. one frozen past its session "
            "timeout); working from a private copy in %s restored from the changelog, "
            "never sharing the files", self.task_id, self.state_dir / self.task_id, self.path)


def _sweep_dead_copies(base: Path) -> None:
    """Delete the private copies of processes that no longer run."""
    for entry in base.iterdir():
        pid_text = entry.name.partition("-")[0]
        if not pid_text.isdigit() or int(pid_text) == os.getpid():
            continue
        if not _alive(int(pid_text)):
            shutil.rmtree(entry, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def held_elsewhere(state_dir: Path | str, task_id: str) -> bool:
    """Whether some owner holds ``task_id``'s directory now (for tests and tools)."""
    lock = Path(state_dir) / task_id / LOCK_FILE
    if not lock.exists():
        return False
    fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)
