"""What state a host holds on disk, task by task: the changelog offsets a state-aware
assignor is told about when a worker (re)starts (Kafka Streams' task offset sums read from
the state directory).

Per task directory ``<state_dir>/<task_id>``, the sum over its stores of the offset their
files hold the changelog up to, read as the restore would trust it: under at-least-once
the task's checkpoint; under exactly-once each SQLite file's mark (read-only, without
opening the store). A task with neither holds nothing usable and is left out; so are
private copies (``.private``) and anything that is not a task directory.

Blocking (file and SQLite reads): call it on a thread from async code. Never raises for a
file it cannot read: it just does not count it (the restore will say more if the task
comes here).
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from aiostreams.state.changelog_mark import MARK_ROW, ChangelogMark
from aiostreams.state.checkpoint import CHECKPOINT_FILE, Checkpoint

__all__ = ["local_changelog_offsets"]


def local_changelog_offsets(state_dir: Path | str, *, exactly_once: bool,
                            task_ids: set[str] | None = None) -> dict[str, int]:
    """Task id -> summed local changelog offset (see the module doc); only ``task_ids``
    when given."""
    root = Path(state_dir)
    found: dict[str, int] = {}
    if not root.is_dir():
        return found
    for task_dir in sorted(root.iterdir()):
        task_id = task_dir.name
        if not task_dir.is_dir() or task_id.startswith(".") or (
                task_ids is not None and task_id not in task_ids):
            continue
        offset = (_marked(task_dir) if exactly_once
                  else sum(Checkpoint(task_dir / CHECKPOINT_FILE).read().values()))
        if offset > 0:
            found[task_id] = offset
    return found


def _marked(task_dir: Path) -> int:
    total = 0
    for path in sorted(task_dir.glob("*.sqlite")):
        with contextlib.suppress(sqlite3.Error):
            db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                rows = db.execute("SELECT value FROM meta WHERE name = ?",
                                  (MARK_ROW,)).fetchall()
            finally:
                db.close()
            for (text,) in rows:
                mark = ChangelogMark.decode(text)
                if mark is not None:
                    total += mark.offset
    return total
