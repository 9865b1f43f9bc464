"""What a user reads in the logs names records as they know them, not engine internals."""

from __future__ import annotations

import logging
import uuid

import pytest

from aiostreams import App


def refuse(value: str) -> str:
    raise ValueError(f"cannot handle {value}")


async def test_a_dead_letter_log_line_names_the_record_by_topic_partition_offset(
        caplog: pytest.LogCaptureFixture) -> None:
    app = App("logs", broker=f"memory://logs-{uuid.uuid4().hex[:8]}",
              dead_letter_topic="logs-dlq", commit_interval_ms=20)
    orders = app.topic("orders", key=str, value=str, partitions=1)
    app.stream(orders).map_values(refuse).to(app.topic("out", key=str, value=str))
    await app.send(orders, "k", "first")
    await app.send(orders, "k", "second")
    with caplog.at_level(logging.WARNING, logger="aiostreams"):
        async with app:
            await app.wait_until_caught_up(timeout=30)
    lines = [r.getMessage() for r in caplog.records if "dead-lettered" in r.getMessage()]
    assert len(lines) == 2
    assert "record orders[0]@1 dead-lettered to logs-dlq" in lines[1]
    assert not any("<" in line.split(":")[1] for line in lines)  # no <Slot #n ...> repr
