"""What a stop whose last commit did not land reports (issue 33: it exited 0 and said
nothing precise): each partition with the offsets processed but not committed, and exit
code 4 from ``aiostreams run`` - not 0 (all committed), not 1 (a crash)."""

from __future__ import annotations

from aiostreams.cli import exit_code_for
from aiostreams.commands import ExitCode
from aiostreams.engine.stop_budget import not_committed, uncommitted_stop
from aiostreams.types import TopicPartition

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def test_only_partitions_processed_past_their_commit_are_left_undone() -> None:
    processed = {A0: 150, A1: 40, B0: 7}
    committed = {A0: 100, A1: 40}  # b[0]: never committed
    assert not_committed(processed, committed) == {A0: (100, 150), B0: (0, 7)}


def test_the_error_names_each_partition_and_its_offsets_and_exits_4() -> None:
    error = uncommitted_stop({A0: (100, 150), B0: (0, 7)}, "the broker did not answer")
    message = str(error)
    assert "the last 57 record(s)" in message
    assert f"{A0} offsets 100..149" in message and f"{B0} offsets 0..6" in message
    assert "the broker did not answer" in message
    assert error.uncommitted == {("a", 0): (100, 150), ("b", 0): (0, 7)}
    assert exit_code_for(error) == ExitCode.UNCOMMITTED == 4
    assert ExitCode.UNCOMMITTED not in (ExitCode.OK, ExitCode.FAILURE)
