"""The out-of-range decision (:mod:`aiostreams.transport.offset_reset`) alone: where each
policy resumes, what it counts, and the setting that chooses it."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiostreams.errors import ConfigError, OffsetOutOfRangeError
from aiostreams.settings.config import load_settings
from aiostreams.transport.base import ConsumerOptions
from aiostreams.transport.offset_reset import (
    OffsetReset,
    OffsetResets,
    ResetReason,
    plan_reset,
)
from aiostreams.types import TopicPartition

TP = TopicPartition("orders", 2)


@st.composite
def out_of_range(draw: st.DrawFn) -> tuple[int, int, int]:
    """(position, log start, log end) with the position outside the log."""
    start = draw(st.integers(0, 1000))
    end = draw(st.integers(start, start + 1000))
    below = st.integers(0, start - 1) if start else st.nothing()
    position = draw(below | st.integers(end + 1, end + 1000))
    return position, start, end


@given(out_of_range(), st.sampled_from(["earliest", "latest"]))
def test_a_reset_resumes_at_a_log_bound_and_counts_every_offset_it_passes(
    case: tuple[int, int, int], policy: str,
) -> None:
    position, start, end = case
    reset = plan_reset(TP, position, start, end, policy)
    assert reset is not None
    assert reset.to_offset == (start if policy == "earliest" else end)
    assert reset.reason is (ResetReason.DELETED if position < start else ResetReason.PAST_END)
    # every offset between the position and where reading resumes is either skipped
    # (never read) or read again, never both
    assert reset.skipped == max(0, reset.to_offset - position)
    assert reset.replayed == max(0, min(position, end) - reset.to_offset)
    assert reset.skipped * reset.replayed == 0
    assert reset.deleted == max(0, start - position) <= reset.skipped


@given(st.integers(0, 1000), st.integers(0, 1000), st.integers(0, 1000))
def test_a_position_inside_the_log_needs_no_reset(a: int, b: int, c: int) -> None:
    start, position, end = sorted((a, b, c))
    assert plan_reset(TP, position, start, end, "fail") is None


def test_apply_logs_one_warning_and_counts_by_topic_partition_and_reason(
    caplog: pytest.LogCaptureFixture,
) -> None:
    resets = OffsetResets()
    deleted = OffsetReset(TP, 3, 10, 15, "earliest")
    with caplog.at_level(logging.WARNING, "aiostreams.offset_reset"):
        assert resets.apply(deleted, "app") == 10
        assert resets.apply(OffsetReset(TP, 40, 10, 15, "latest"), "app") == 15
        assert resets.apply(deleted, "app") == 10

    assert resets.counts == {("orders", 2, ResetReason.DELETED): 2,
                             ("orders", 2, ResetReason.PAST_END): 1}
    assert resets.total == 3
    first = caplog.records[0].getMessage()
    assert first.startswith("group 'app': offset 3 of orders[2]")
    assert "7 records (offsets 3..9) were deleted" in first
    assert "reset 3 -> 10 per offset_out_of_range='earliest': 7 records skipped" in first


def test_fail_raises_with_the_figures_and_what_to_do_and_counts_nothing() -> None:
    resets = OffsetResets()
    with pytest.raises(OffsetOutOfRangeError) as raised:
        resets.apply(OffsetReset(TP, 3, 10, 15, "fail"), "app")
    message = str(raised.value)
    assert "offset 3 of orders[2] for group 'app' is out of range" in message
    assert "the log starts at 10 and ends at 15" in message
    assert "7 records (offsets 3..9) were deleted" in message
    assert "nothing past offset 3 is read or committed" in message
    assert "aiostreams groups reset app --topic orders --to-earliest" in message
    assert resets.total == 0 and resets.last is None


def test_past_end_failure_says_the_log_was_truncated_or_recreated() -> None:
    error = OffsetReset(TP, 20, 0, 4, "fail").error(None)
    assert "the offset is 16 past the log's end" in str(error)
    assert "deleted and created again" in str(error)
    assert "seek elsewhere" in str(error)


def test_consumer_options_follow_auto_offset_reset_unless_told_and_reject_bad_policies(
) -> None:
    assert ConsumerOptions(auto_offset_reset="latest").out_of_range_policy == "latest"
    assert ConsumerOptions(auto_offset_reset="latest",
                           offset_out_of_range="fail").out_of_range_policy == "fail"
    with pytest.raises(ConfigError, match="offset_out_of_range must be one of"):
        ConsumerOptions(offset_out_of_range="none")


def test_the_setting_defaults_to_earliest_and_rejects_other_values() -> None:
    assert load_settings().offset_out_of_range == "earliest"
    assert load_settings({"offset_out_of_range": "fail"}).offset_out_of_range == "fail"
    with pytest.raises(ConfigError, match="offset_out_of_range"):
        load_settings({"offset_out_of_range": "none"})
