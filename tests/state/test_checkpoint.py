"""The checkpoint file: atomic writes, and unusable files read as absent, never a crash."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import orjson
import pytest

from aiostreams.state.checkpoint import CHECKPOINT_FILE, CHECKPOINT_VERSION, Checkpoint
from aiostreams.types import TopicPartition

A0 = TopicPartition("app-counts-changelog", 0)
A1 = TopicPartition("app-counts-changelog", 1)
B0 = TopicPartition("app-sums-changelog", 0)


@pytest.fixture
def checkpoint(tmp_path: Path) -> Checkpoint:
    return Checkpoint(tmp_path / "1_0" / CHECKPOINT_FILE)


def test_missing_file_reads_as_no_offsets(checkpoint: Checkpoint) -> None:
    assert checkpoint.read() == {}


def test_written_offsets_read_back(checkpoint: Checkpoint) -> None:
    checkpoint.write({A0: 42, B0: 0, A1: 7})
    assert checkpoint.read() == {A0: 42, A1: 7, B0: 0}
    assert all(isinstance(tp, TopicPartition) for tp in checkpoint.read())


def test_file_is_versioned_json(checkpoint: Checkpoint) -> None:
    checkpoint.write({B0: 3, A0: 1}, {A0: 7})
    assert orjson.loads(checkpoint.path.read_bytes()) == {
        "version": CHECKPOINT_VERSION,
        "offsets": [["app-counts-changelog", 0, 1], ["app-sums-changelog", 0, 3]],
        "epochs": [["app-counts-changelog", 0, 7]],
    }


def test_owner_epochs_are_read_back_with_their_offsets(checkpoint: Checkpoint) -> None:
    checkpoint.write({B0: 3, A0: 1}, {A0: 7, B0: -1})
    assert checkpoint.read_with_epochs() == ({A0: 1, B0: 3}, {A0: 7, B0: -1})


def test_a_checkpoint_of_version_1_is_not_trusted(checkpoint: Checkpoint,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    """Written before stale owners were fenced: its files may hold a stale owner's writes."""
    checkpoint.path.parent.mkdir(parents=True, exist_ok=True)
    checkpoint.path.write_bytes(b'{"version": 1, "offsets": [["t", 0, 5]]}')
    assert checkpoint.read_with_epochs() == ({}, {})
    assert "has version 1" in caplog.text


def test_write_replaces_the_previous_checkpoint_and_leaves_no_temp_file(
        checkpoint: Checkpoint) -> None:
    checkpoint.write({A0: 1, B0: 1})
    checkpoint.write({A0: 2})
    assert checkpoint.read() == {A0: 2}
    assert sorted(p.name for p in checkpoint.path.parent.iterdir()) == [CHECKPOINT_FILE]


def test_write_that_fails_before_the_rename_leaves_the_old_checkpoint(
        checkpoint: Checkpoint, monkeypatch: pytest.MonkeyPatch) -> None:
    checkpoint.write({A0: 1})

    def crash(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="No space"):
        checkpoint.write({A0: 999})
    monkeypatch.undo()
    assert checkpoint.read() == {A0: 1}
    assert sorted(p.name for p in checkpoint.path.parent.iterdir()) == [CHECKPOINT_FILE]


def test_write_durably_syncs_the_file_before_renaming(
        checkpoint: Checkpoint, monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append("fsync")
        real_fsync(fd)

    def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        events.append("rename")
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    checkpoint.write({A0: 5})
    assert events == ["fsync", "rename", "fsync"]  # the file, the rename, the directory


@pytest.mark.parametrize("content", [
    b"",
    b"\x00\xff garbage",
    b'{"version": 2, "offsets": [["t", 0, 5]',  # torn write
    b"[1, 2, 3]",
    b'{"offsets": []}',
    b'{"version": 2, "offsets": {"t": 5}}',
    b'{"version": 2, "offsets": [["t", 0]]}',
    b'{"version": 2, "offsets": [["t", 0, -1]]}',
    b'{"version": 2, "offsets": [["t", true, 1]]}',
    b'{"version": 2, "offsets": [["", 0, 1]]}',
    b'{"version": 2, "offsets": [["t", 0, 1], ["t", 0, 2]]}',
    b'{"version": 2, "offsets": [["t", 0, 1]], "epochs": [["t", 0]]}',
    b'{"version": 2, "offsets": [["t", 0, 1]], "epochs": [["t", 0, -2]]}',
])
def test_corrupt_file_reads_as_absent_with_a_warning(
        checkpoint: Checkpoint, content: bytes, caplog: pytest.LogCaptureFixture) -> None:
    checkpoint.path.parent.mkdir(parents=True)
    checkpoint.path.write_bytes(content)
    with caplog.at_level(logging.WARNING):
        assert checkpoint.read() == {}
    assert "restored from their changelogs' start" in caplog.text


def test_unknown_version_reads_as_absent_with_a_warning_naming_it(
        checkpoint: Checkpoint, caplog: pytest.LogCaptureFixture) -> None:
    checkpoint.path.parent.mkdir(parents=True)
    checkpoint.path.write_bytes(b'{"version": 3, "offsets": [["t", 0, 5]]}')
    with caplog.at_level(logging.WARNING):
        assert checkpoint.read() == {}
    assert "has version 3" in caplog.text


def test_unreadable_path_reads_as_absent(checkpoint: Checkpoint,
                                         caplog: pytest.LogCaptureFixture) -> None:
    checkpoint.path.mkdir(parents=True)  # a directory where the file should be
    with caplog.at_level(logging.WARNING):
        assert checkpoint.read() == {}
    assert "cannot be read" in caplog.text


def test_delete_removes_the_file_and_may_be_repeated(checkpoint: Checkpoint) -> None:
    checkpoint.write({A0: 1})
    checkpoint.delete()
    assert not checkpoint.path.exists()
    assert checkpoint.read() == {}
    checkpoint.delete()


@pytest.mark.parametrize("offsets", [{A0: -1}, {A0: 1.5}, {A0: True}, {("t", -2): 1}])
def test_invalid_offsets_are_refused_and_nothing_is_written(
        checkpoint: Checkpoint, offsets: dict[TopicPartition, int]) -> None:
    with pytest.raises(ValueError, match="offset >= 0"):
        checkpoint.write(offsets)
    assert not checkpoint.path.exists()


def test_writes_from_many_threads_never_race_on_the_temp_file(tmp_path: Path) -> None:
    """A cancelled save's thread keeps writing while the next save starts (asyncio cannot
    stop a thread): the writes of one checkpoint take turns, none fails, and the file holds
    one whole snapshot."""
    import threading

    checkpoint = Checkpoint(tmp_path / CHECKPOINT_FILE)
    tp = TopicPartition("t", 0)
    errors: list[BaseException] = []

    def write(start: int) -> None:
        try:
            for offset in range(start, start + 200):
                checkpoint.write({tp: offset})
        except BaseException as e:  # collected: the assertion below names it
            errors.append(e)

    threads = [threading.Thread(target=write, args=(i * 1000,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert checkpoint.read()[tp] in {i * 1000 + 199 for i in range(4)}
    assert not (tmp_path / (CHECKPOINT_FILE + ".tmp")).exists()
