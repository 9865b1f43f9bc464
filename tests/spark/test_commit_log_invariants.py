"""The commit log's own guard: an entry that claims rows must list the files holding them."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiostreams.sinks.commit_log import CommitLog, DataFile, LogEntry, OffsetRange


def test_an_entry_with_rows_and_no_files_is_never_appended(tmp_path: Path) -> None:
    log = CommitLog(tmp_path)
    log.acquire()
    try:
        log.recover()
        offsets = (OffsetRange("t", 0, 0, 2999),)
        with pytest.raises(AssertionError, match="3000 row\\(s\\) and no file"):
            log.append(LogEntry(0, (), offsets, 3000, "spark"))
        assert not list(log.dir.glob("*.json"))
        log.append(LogEntry(0, (DataFile("part-00000000-0000abcd-00000.parquet", 1),),
                            offsets, 3000, "spark", app="a"))
        assert log.durable == {offsets[0].source: 2999} and log.app == "a"
    finally:
        log.release()
