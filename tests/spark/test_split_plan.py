"""The split of a batch into Spark write tasks: the fewest tasks whose share of the bytes is
within the budget, and Arrow batches no larger than one task's rows."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from aiostreams.sinks.parquet_writer import split_plan, task_byte_budget


@given(rows=st.integers(0, 10**9), bytes_per_row=st.integers(1, 10**5),
       budget=st.integers(1, 2**31))
def test_tasks_cover_the_bytes_within_budget_with_the_fewest_tasks(
        rows: int, bytes_per_row: int, budget: int) -> None:
    nbytes = rows * bytes_per_row
    tasks, rows_per_batch = split_plan(rows, nbytes, budget)
    assert tasks >= 1 and rows_per_batch >= 1
    assert tasks * budget >= nbytes  # each task's even share is within the budget
    assert tasks == 1 or (tasks - 1) * budget < nbytes  # and no task more than needed
    assert rows_per_batch * tasks >= rows  # at most ``tasks`` Arrow batches
    # an Arrow batch is at most one task's share of the bytes (rounded up by one row)
    assert rows_per_batch * bytes_per_row <= budget + bytes_per_row or tasks == 1


def test_the_budget_is_a_quarter_of_the_rpc_message_limit() -> None:
    assert task_byte_budget(128 * 2**20) == 32 * 2**20
    assert task_byte_budget(1) == 1
