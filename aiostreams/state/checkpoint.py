"""The checkpoint file: how far each changelog partition is already in a task's store files.

One file per task, ``<state_dir>/<task_id>/.checkpoint`` (:data:`CHECKPOINT_FILE`), JSON::

    {"version": 2, "offsets": [["app-counts-changelog", 3, 1042], ...],
     "epochs": [["app-counts-changelog", 3, 7], ...]}

An offset is the *next* changelog offset to restore from (the stores hold every record
before it). An epoch is the highest owner epoch of the records before it (see
:mod:`~aiostreams.state.owner_epoch`): a replay from the offset skips records of a lower
epoch, a stale owner's. Version 1 files (no epochs, written before stale owners were fenced)
are not trusted: their stores are restored from the changelog's start once.

``write`` is atomic: the bytes go to ``.checkpoint.tmp``, are fsynced, and the
temp file is renamed over the old one (then the directory is fsynced), so a reader sees the
old checkpoint or the new one, never a mix. A file that is unreadable, not valid JSON, of
another ``version`` or of the wrong shape is treated as absent, with a warning: the stores
are then restored from the changelog's start. Reading a checkpoint never raises.

The methods block on file I/O (``write`` on an fsync, a few milliseconds on a disk): call
them off the event loop (``asyncio.to_thread``) where that matters.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import orjson

from aiostreams.types import TopicPartition

log = logging.getLogger(__name__)

__all__ = ["CHECKPOINT_FILE", "CHECKPOINT_VERSION", "Checkpoint"]

CHECKPOINT_FILE: Final = ".checkpoint"
CHECKPOINT_VERSION: Final = 2


class Checkpoint:
    """The checkpoint file at ``path``. Writes (and deletes) of one instance are serialized:
    a write still running in a thread when its caller was cancelled (``asyncio.to_thread``
    cannot stop it) finishes before the next one starts, so two never share the temp file."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._tmp = self.path.with_name(self.path.name + ".tmp")
        self._writing = threading.Lock()

    def read(self) -> dict[TopicPartition, int]:
        """The saved offsets; ``{}`` when the file is missing or unusable (logged)."""
        return self.read_with_epochs()[0]

    def read_with_epochs(self) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        """The saved offsets and owner epochs (a partition with no epoch saved has none
        here); ``({}, {})`` when the file is missing or unusable (logged)."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return {}, {}
        except OSError as exc:
            return self._unusable(f"cannot be read ({exc})")
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            return self._unusable(f"is not valid JSON ({exc})")
        if not isinstance(doc, dict) or "version" not in doc:
            return self._unusable("has no version")
        if doc["version"] != CHECKPOINT_VERSION:
            return self._unusable(
                f"has version {doc['version']!r}; this aiostreams reads version "
                f"{CHECKPOINT_VERSION}"
            )
        offsets = _parse_offsets(doc.get("offsets"))
        if offsets is None:
            return self._unusable("has a malformed 'offsets' list")
        epochs = _parse_epochs(doc.get("epochs", []))
        if epochs is None:
            return self._unusable("has a malformed 'epochs' list")
        return offsets, {tp: e for tp, e in epochs.items() if tp in offsets}

    def _unusable(self, why: str
                  ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        log.warning("checkpoint %s %s; ignoring it: the stores will be restored from their "
                    "changelogs' start", self.path, why)
        return {}, {}

    def write(self, offsets: Mapping[TopicPartition, int],
              epochs: Mapping[TopicPartition, int] | None = None) -> None:
        """Replace the file with ``offsets``, atomically and durably (see the module doc).

        Raises ``ValueError`` for an offset that is not an int >= 0, ``OSError`` when the
        file cannot be written (the old file, if any, is left as it was)."""
        entries = []
        for tp, offset in offsets.items():
            topic, partition = tp
            if (not isinstance(offset, int) or isinstance(offset, bool) or offset < 0
                    or not isinstance(topic, str) or not isinstance(partition, int)
                    or partition < 0):
                raise ValueError(
                    f"checkpoint {self.path}: {tp!r} -> {offset!r} is not a topic partition "
                    "and an offset >= 0"
                )
            entries.append([topic, partition, offset])
        entries.sort()
        epoch_entries = sorted([tp.topic, tp.partition, int(epoch)]
                               for tp, epoch in (epochs or {}).items() if tp in offsets)
        data = orjson.dumps({"version": CHECKPOINT_VERSION, "offsets": entries,
                             "epochs": epoch_entries})
        with self._writing:
            self._replace_with(data)

    def _replace_with(self, data: bytes) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(self._tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(self._tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                self._tmp.unlink(missing_ok=True)
            raise
        _fsync_dir(self.path.parent)

    def delete(self) -> None:
        """Remove the file (and a leftover temp file); nothing happens when there is none."""
        with self._writing:
            self.path.unlink(missing_ok=True)
            self._tmp.unlink(missing_ok=True)
        _fsync_dir(self.path.parent)

    def __repr__(self) -> str:
        return f"Checkpoint({str(self.path)!r})"


def _parse_offsets(raw: Any) -> dict[TopicPartition, int] | None:
    if not isinstance(raw, list):
        return None
    offsets: dict[TopicPartition, int] = {}
    for entry in raw:
        if not (isinstance(entry, list) and len(entry) == 3):
            return None
        topic, partition, offset = entry
        if not (isinstance(topic, str) and topic
                and _is_count(partition) and _is_count(offset)):
            return None
        tp = TopicPartition(topic, partition)
        if tp in offsets:
            return None
        offsets[tp] = offset
    return offsets


def _parse_epochs(raw: Any) -> dict[TopicPartition, int] | None:
    if not isinstance(raw, list):
        return None
    epochs: dict[TopicPartition, int] = {}
    for entry in raw:
        if not (isinstance(entry, list) and len(entry) == 3):
            return None
        topic, partition, epoch = entry
        if not (isinstance(topic, str) and topic and _is_count(partition)
                and isinstance(epoch, int) and not isinstance(epoch, bool) and epoch >= -1):
            return None
        epochs[TopicPartition(topic, partition)] = epoch
    return epochs


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _fsync_dir(path: Path) -> None:
    # Makes the rename itself durable on POSIX; not possible (nor needed) on Windows.
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
