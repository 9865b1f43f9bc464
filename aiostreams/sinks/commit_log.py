"""The commit log of a Parquet dataset: which files hold committed data, and up to which
source offset, kept beside the data like Spark's ``_spark_metadata``.

Layout under the dataset path::

    _aiostreams_log/<batch>.json     one entry per written batch (0, 1, 2, ...)
    _aiostreams_log/.lock            held (flock) by the one process writing the dataset
    _staging/<batch>-<token>/        files being written; never read, wiped at start
    col=value/part-<batch>-<token>-<n>.<codec>.parquet    data files

Names starting with ``_`` or ``.`` are skipped by Spark's and pyarrow's readers, so readers
only ever see the data files, and each of those appears by an atomic rename once complete.

A batch is written in three steps (see :class:`~aiostreams.sinks.parquet_sink.FlushStep`):
files complete in staging → renamed into the dataset → log entry written (temp name, fsync,
linked into place, directory fsynced). The entry is the commit point. Invariants:

* an entry is never rewritten, and entries are numbered without gaps from 0;
* an entry with rows lists files, and every data file the log lists exists; after
  :meth:`CommitLog.recover`, every data file of ours (by name) in the dataset is listed
  by the log: files of a batch whose entry was never written (a crash after the rename)
  are deleted, so a replay writes them once;
* the durable offset of a source partition is the highest ``last`` offset any entry lists
  for it, and it never decreases.

One incarnation per source topic: each entry records the ids (Kafka topic ids) of its
source topics where the writing sink knew them, and a sink whose source topic now has
another id refuses to start (:mod:`aiostreams.sinks.incarnations`); entries without ids
(format 1 and 2, or no id known) check nothing.

One writer per dataset: :meth:`CommitLog.acquire` takes an exclusive ``flock``, released
by :meth:`CommitLog.release` or by the process's death. One app per dataset, over time:
each entry names the app that wrote it, and a sink of another app refuses to start
(:class:`DatasetOwnerError`) rather than drop its records as replays of offsets that
another app wrote.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from aiostreams.errors import AiostreamsError
from aiostreams.runtime.external_record import ExternalRecord
from aiostreams.sinks.incarnations import check_incarnations
from aiostreams.types import TopicPartition

try:
    import fcntl
except ImportError:  # pragma: no cover - not on Linux/macOS: no cross-process lock
    fcntl = None  # type: ignore[assignment]

__all__ = ["LOG_DIR", "STAGING_DIR", "CommitLog", "DataFile", "DatasetLockedError",
           "DatasetOwnerError", "LogEntry",
           "OffsetRange", "Recovery", "committed_files", "fsync_path", "is_data_file",
           "merge_ranges", "offset_ranges"]

log = logging.getLogger("aiostreams.sinks")

LOG_DIR = "_aiostreams_log"
STAGING_DIR = "_staging"
_ENTRY = re.compile(r"^(\d+)\.json$")
_DATA_FILE = re.compile(r"^part-\d{8,}-[0-9a-f]{8}-\d{5}(\.[a-z0-9]+)?\.parquet$")
FORMAT_VERSION = 3
"""2 adds ``app`` (the writing app's id, or null); entries of version 1 are read as null.
3 adds ``topic_ids`` (source topic → Kafka topic id, where known); read as {} before."""
_READABLE_VERSIONS = (1, 2, 3)


class DatasetLockedError(AiostreamsError):
    """Another process is writing the dataset."""


class DatasetOwnerError(AiostreamsError):
    """The dataset's commit log was written by another app: its durable offsets are not
    this app's, so dropping records at or below them would lose this app's rows."""


def is_data_file(name: str) -> bool:
    """Whether ``name`` is a data file this sink writes (others are never touched)."""
    return bool(_DATA_FILE.match(name))


@dataclass(frozen=True)
class DataFile:
    path: str  # relative to the dataset root, with "/" separators
    size: int


@dataclass(frozen=True)
class OffsetRange:
    """The source records ``first``..``last`` (inclusive) of one partition in a batch."""

    topic: str
    partition: int
    first: int
    last: int

    @property
    def source(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


Spans = dict[TopicPartition, tuple[int, int]]
"""Per source partition, the first and last offset (inclusive) of some rows."""


def offset_ranges(rows: Iterable[ExternalRecord]) -> Spans:
    """The spans of ``rows`` (per source, offsets never decrease: the sinks assert it)."""
    ranges: dict[TopicPartition, list[int]] = {}
    for r in rows:
        span = ranges.get(r.source)
        if span is None:
            ranges[r.source] = [r.offset, r.offset]
        else:
            span[1] = r.offset
    return {tp: (first, last) for tp, (first, last) in ranges.items()}


def merge_ranges(spans: Iterable[Spans]) -> tuple[OffsetRange, ...]:
    """The offset ranges of a batch made of consecutive chunks with ``spans``, sorted."""
    merged: Spans = {}
    for chunk in spans:  # in offset order per source
        for source, (first, last) in chunk.items():
            merged[source] = (merged.get(source, (first, last))[0], last)
    return tuple(OffsetRange(source.topic, source.partition, first, last)
                 for source, (first, last) in sorted(merged.items()))


@dataclass(frozen=True)
class LogEntry:
    batch: int
    files: tuple[DataFile, ...]
    offsets: tuple[OffsetRange, ...]
    rows: int
    engine: str
    written_at: float = field(default_factory=time.time)
    app: str | None = None  # the id of the app that wrote it (None: no app, or format 1)
    topic_ids: Mapping[str, str] = field(default_factory=dict)  # of its source topics

    def to_json(self) -> bytes:
        doc = {
            "version": FORMAT_VERSION,
            "batch": self.batch,
            "rows": self.rows,
            "engine": self.engine,
            "app": self.app,
            "topic_ids": dict(sorted(self.topic_ids.items())),
            "written_at": self.written_at,
            "files": [{"path": f.path, "size": f.size} for f in self.files],
            "offsets": [{"topic": o.topic, "partition": o.partition, "first": o.first,
                         "last": o.last} for o in self.offsets],
        }
        return json.dumps(doc, indent=1).encode()

    @classmethod
    def from_json(cls, data: bytes, where: Path) -> LogEntry:
        try:
            doc: dict[str, Any] = json.loads(data)
            if doc.get("version") not in _READABLE_VERSIONS:
                raise ValueError(f"format version {doc.get('version')!r}, expected one of "
                                 f"{_READABLE_VERSIONS}")
            app = doc.get("app")
            ids = doc.get("topic_ids", {})
            if not isinstance(ids, dict):
                raise TypeError(f"topic_ids is {type(ids).__name__}, not an object")
            return cls(
                batch=int(doc["batch"]),
                files=tuple(DataFile(str(f["path"]), int(f["size"])) for f in doc["files"]),
                offsets=tuple(OffsetRange(str(o["topic"]), int(o["partition"]),
                                          int(o["first"]), int(o["last"]))
                              for o in doc["offsets"]),
                rows=int(doc["rows"]),
                engine=str(doc["engine"]),
                app=None if app is None else str(app),
                topic_ids={str(t): str(i) for t, i in ids.items()},
                written_at=float(doc["written_at"]),
            )
        except (ValueError, KeyError, TypeError) as e:
            raise AiostreamsError(
                f"commit log entry {where} is unreadable ({e}); it was not written by this "
                "version of aiostreams, or was edited. Move the dataset aside or restore the "
                "entry") from None


@dataclass
class Recovery:
    """What :meth:`CommitLog.recover` found and cleaned."""

    entries: int = 0
    removed_files: list[str] = field(default_factory=list)
    removed_staging: bool = False


def fsync_path(path: Path) -> None:
    """fsync a file, or a directory (so a rename or a new entry in it is durable)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class CommitLog:
    """The log of one dataset. Not thread-safe: used from the Spark thread only."""

    def __init__(self, dataset: Path) -> None:
        self.dataset = dataset
        self.dir = dataset / LOG_DIR
        self.durable: dict[TopicPartition, int] = {}
        self.files: set[str] = set()
        self.last_files: tuple[DataFile, ...] = ()  # of the newest entry that has files
        self.app: str | None = None  # the app of the newest entry that names one
        self.app_entry = -1  # and that entry's number
        # per source topic, the id the newest entry recording one recorded, and that entry:
        self.topic_ids: dict[str, tuple[str, int]] = {}
        self.next_batch = 0
        self._lock_file: IO[bytes] | None = None

    # -- the writer lock ------------------------------------------------------------------

    def acquire(self) -> None:
        """Take the dataset's writer lock; raise :class:`DatasetLockedError` if another
        process (or another sink in this one) holds it."""
        self.dir.mkdir(parents=True, exist_ok=True)
        handle = open(self.dir / ".lock", "ab")  # noqa: SIM115 - held until release()
        if fcntl is not None:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                raise DatasetLockedError(
                    f"{self.dataset} is being written by another sink (this process or "
                    "another); one writer per dataset: give each app or worker process its "
                    "own path") from None
        self._lock_file = handle

    def release(self) -> None:
        if self._lock_file is not None:
            self._lock_file.close()  # closing the descriptor drops the flock
            self._lock_file = None

    def check_owner(self, app_id: str | None) -> None:
        """Raise :class:`DatasetOwnerError` if the newest entry naming an app names another
        one than ``app_id`` (None, a sink outside any app, counts as another app)."""
        if self.app is None or self.app == app_id:
            return
        me = f"app {app_id!r}" if app_id else "a sink outside any app"
        raise DatasetOwnerError(
            f"{self.dataset} was written by app {self.app!r} (commit log entry "
            f"{self.app_entry}); this is {me}. Its durable offsets are that app's: "
            "continuing would drop this app's records at or below them as replays. Give "
            "each app its own path (a renamed app is another app: give it a new path)")

    def check_incarnations(self, current: Mapping[str, str | None]) -> None:
        """Raise :class:`~aiostreams.sinks.delta_identity.TableIdentityError` if a source
        topic's id recorded by the log is not its ``current`` one."""
        for topic, (recorded, batch) in sorted(self.topic_ids.items()):
            check_incarnations({topic: recorded}, current, table=f"the dataset {self.dataset}",
                               recorded_in=f"commit log entry {batch}")

    # -- reading and recovering -----------------------------------------------------------

    def recover(self) -> Recovery:
        """Read every entry, then delete what no entry covers: the staging area, temp
        entries, and data files of batches whose entry was never written."""
        report = Recovery()
        staging = self.dataset / STAGING_DIR
        if staging.exists():
            shutil.rmtree(staging)
            report.removed_staging = True
        for tmp in self.dir.glob(".*.json.tmp"):
            tmp.unlink()
        numbers = sorted(int(m.group(1)) for p in self.dir.iterdir()
                         if (m := _ENTRY.match(p.name)))
        if numbers != list(range(len(numbers))):
            missing = sorted(set(range(max(numbers, default=-1) + 1)) - set(numbers))
            raise AiostreamsError(
                f"the commit log in {self.dir} has gaps (missing entries {missing[:10]}); "
                "entries are never deleted by aiostreams: restore them, or move the dataset "
                "aside")
        for n in numbers:
            where = self.dir / f"{n}.json"
            self._apply(LogEntry.from_json(where.read_bytes(), where))
        report.entries = len(numbers)
        for path in self._our_data_files():
            rel = path.relative_to(self.dataset).as_posix()
            if rel not in self.files:
                path.unlink()
                report.removed_files.append(rel)
        if report.removed_files:
            log.warning("%s: removed %d data file(s) of a batch that was never committed "
                        "(the writer stopped before its log entry): %s", self.dataset,
                        len(report.removed_files), ", ".join(report.removed_files[:5]))
        return report

    def _our_data_files(self) -> Iterable[Path]:
        for root, dirs, names in os.walk(self.dataset):
            dirs[:] = [d for d in dirs if not d.startswith(("_", "."))]
            for name in names:
                if is_data_file(name):
                    yield Path(root) / name

    def _apply(self, entry: LogEntry) -> None:
        assert entry.batch == self.next_batch, (entry.batch, self.next_batch)
        for f in entry.files:
            self.files.add(f.path)
        if entry.files:
            self.last_files = entry.files
        if entry.app is not None:
            self.app, self.app_entry = entry.app, entry.batch
        for topic, topic_id in entry.topic_ids.items():
            self.topic_ids[topic] = (topic_id, entry.batch)
        for o in entry.offsets:
            previous = self.durable.get(o.source, -1)
            # replays are dropped before writing, so ranges only move forward
            assert o.first > previous, f"{o.source}: batch {entry.batch} rewrites {o.first}"
            self.durable[o.source] = o.last
        self.next_batch = entry.batch + 1

    # -- appending ------------------------------------------------------------------------

    def append(self, entry: LogEntry) -> None:
        """Make ``entry`` durable: the batch it lists is committed once this returns."""
        if entry.batch != self.next_batch:
            raise AssertionError(f"log entry {entry.batch} out of turn; next is "
                                 f"{self.next_batch}")
        if entry.rows > 0 and not entry.files:  # never commit rows that are nowhere
            raise AssertionError(f"log entry {entry.batch} of {self.dataset} lists "
                                 f"{entry.rows} row(s) and no file")
        final = self.dir / f"{entry.batch}.json"
        tmp = self.dir / f".{entry.batch}.json.tmp"
        with open(tmp, "wb") as out:
            out.write(entry.to_json())
            out.flush()
            os.fsync(out.fileno())
        try:
            os.link(tmp, final)  # unlike rename, never replaces an existing entry
        except FileExistsError:
            raise AssertionError(f"{final} exists already: two writers on one dataset"
                                 ) from None
        finally:
            tmp.unlink()
        fsync_path(self.dir)
        self._apply(entry)


def committed_files(dataset: str | os.PathLike[str]) -> list[Path]:
    """The data files the commit log of ``dataset`` lists, in batch order: what a reader
    that must see whole batches only should read (``spark.read.parquet(*map(str, files))``
    or ``pyarrow.dataset.dataset(files, partitioning="hive")``)."""
    root = Path(dataset)
    directory = root / LOG_DIR
    if not directory.exists():
        return []
    numbers = sorted(int(m.group(1)) for p in directory.iterdir()
                     if (m := _ENTRY.match(p.name)))
    out: list[Path] = []
    for n in numbers:
        where = directory / f"{n}.json"
        entry = LogEntry.from_json(where.read_bytes(), where)
        out.extend(root / f.path for f in entry.files)
    return out
