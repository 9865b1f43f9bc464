"""A standby task's lag is what a promotion would restore: the records of its changelog
partitions between what it applied and their ends."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from aiostreams.engine.standby import StandbyTask
from aiostreams.types import TopicPartition

spans = st.dictionaries(st.integers(0, 5), st.tuples(st.integers(0, 1000), st.integers(0, 50)),
                        max_size=4)


@given(spans)
def test_a_standbys_lag_is_its_changelogs_unapplied_records(span: dict[int, Any]) -> None:
    applied = {TopicPartition("c", p): at for p, (at, _) in span.items()}
    end = {TopicPartition("c", p): at + ahead for p, (at, ahead) in span.items()}
    standby = StandbyTask(task=None, applied=applied, end=end)  # type: ignore[arg-type]
    assert standby.lag == sum(ahead for _, ahead in span.values())
    assert standby.offset == sum(applied.values())
