"""``async with`` on a :class:`StartStop` is ``start()``, the block, then ``stop()``."""

from __future__ import annotations

import pytest

from aiostreams.lifecycle.start_stop import StartStop


class Recorder(StartStop):
    def __init__(self, *, fail_start: bool = False) -> None:
        self.calls: list[str] = []
        self.fail_start = fail_start

    async def start(self) -> None:
        self.calls.append("start")
        if self.fail_start:
            raise OSError("port taken")

    async def stop(self) -> None:
        self.calls.append("stop")


async def test_the_block_runs_between_start_and_stop_on_the_object_itself() -> None:
    recorder = Recorder()
    async with recorder as entered:
        assert entered is recorder
        recorder.calls.append("block")
    assert recorder.calls == ["start", "block", "stop"]


async def test_stop_runs_when_the_block_raises_and_the_error_propagates() -> None:
    recorder = Recorder()
    with pytest.raises(KeyError):
        async with recorder:
            raise KeyError("boom")
    assert recorder.calls == ["start", "stop"]


async def test_a_failed_start_skips_the_block_and_stop() -> None:
    recorder = Recorder(fail_start=True)
    with pytest.raises(OSError, match="port taken"):
        async with recorder:
            recorder.calls.append("block")
    assert recorder.calls == ["start"]
