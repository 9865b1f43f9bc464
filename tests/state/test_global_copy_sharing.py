"""Workers of one host sharing a ``state_dir`` never write one global table's files together:
the first holds ``global-<topic>/``, the others keep private copies."""

from __future__ import annotations

from pathlib import Path

from aiostreams.serde import StrSerde
from aiostreams.state.global_copy import LocalCopy
from aiostreams.types import TopicPartition


async def test_a_second_worker_keeps_its_global_copy_apart_and_drops_it_at_close(
        tmp_path: Path) -> None:
    offsets = {TopicPartition("rates", 0): 0}
    first, second = LocalCopy("rates", StrSerde(), tmp_path), LocalCopy("rates", StrSerde(),
                                                                         tmp_path)
    await first.open(offsets, offsets)
    await second.open(offsets, offsets)
    try:
        assert not first.directory.private and second.directory.private
        assert first.rows.path is not None and second.rows.path is not None
        assert first.rows.path.parent == tmp_path / "global-rates"
        assert second.rows.path.parent != first.rows.path.parent
        await first.save({0: 0})
        await second.save({0: 0})
        assert second.checkpoint.path.parent == second.rows.path.parent
    finally:
        await second.close()
        await first.close()
    assert not second.directory.path.exists()
    reopened = LocalCopy("rates", StrSerde(), tmp_path)  # the shared copy is free again
    await reopened.open(offsets, offsets)
    assert not reopened.directory.private
    await reopened.close()
