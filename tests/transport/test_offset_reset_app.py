"""An app whose committed offset was deleted from under it, on ``memory://`` and on a real
Kafka broker: the restart resets loudly (WARNING, Prometheus counter) or, under
``offset_out_of_range="fail"``, stops with the error and leaves the commit where it was."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import pytest
from appkit import create_topic, produce, read_exactly

import aiostreams as ais
from aiostreams.errors import OffsetOutOfRangeError
from aiostreams.lifecycle.state import AppState
from aiostreams.ops.metrics import metrics_registry
from aiostreams.transport import transport_for_url
from aiostreams.transport.base import Transport
from aiostreams.types import TopicPartition

COMMITTED = 5  # N: what the first run commits
DELETED_BELOW = 12  # records N..11 are deleted before the app reads them
PRODUCED = 15


@pytest.fixture(params=["memory", pytest.param("kafka", marks=pytest.mark.kafka)])
def broker(request: pytest.FixtureRequest, topic_name: Callable[[str], str]) -> str:
    if request.param == "memory":
        return f"memory://{topic_name('broker')}"
    return f"kafka://{request.getfixturevalue('kafka_bootstrap')}"


def forward_app(name: str, broker: str, src: str, dst: str, **settings: Any) -> ais.App:
    app = ais.App(name, broker=broker, commit_interval_ms=200, **settings)
    app.stream(app.topic(src, key=str, value=str)).to(app.topic(dst, key=str, value=str))
    return app


async def committed(transport: Transport, group: str, tp: TopicPartition) -> int | None:
    consumer = transport.consumer(group)
    await consumer.start()
    try:
        return await consumer.committed(tp)
    finally:
        await consumer.stop()


async def commit_then_delete(broker: str, topic_name: Callable[[str], str]
                             ) -> tuple[Transport, str, str, str]:
    """A group that committed at N on ``src``, then records N..11 deleted (12..14 left)."""
    transport = transport_for_url(broker)
    src, dst, group = topic_name("in"), topic_name("out"), topic_name("app")
    await create_topic(transport, src, 1)
    await create_topic(transport, dst, 1)
    await produce(transport, src, [(b"k", b"v%d" % i) for i in range(COMMITTED)])
    async with forward_app(group, broker, src, dst) as first:
        await first.wait_until_caught_up(60)
    tp = TopicPartition(src, 0)
    assert await committed(transport, group, tp) == COMMITTED
    await produce(transport, src, [(b"k", b"v%d" % i) for i in range(COMMITTED, PRODUCED)])
    admin = transport.admin()
    await admin.start()
    try:
        await admin.delete_records({tp: DELETED_BELOW})
    finally:
        await admin.stop()
    return transport, src, dst, group


async def test_restart_after_deleted_records_resets_with_a_warning_and_a_counter(
        broker: str, topic_name: Callable[[str], str],
        caplog: pytest.LogCaptureFixture) -> None:
    transport, src, dst, group = await commit_then_delete(broker, topic_name)
    caplog.set_level(logging.WARNING, "aiostreams.offset_reset")

    app = forward_app(group, broker, src, dst)
    registry, _ = metrics_registry(app)
    async with app:
        await app.wait_until_caught_up(60)
        resets = registry.get_sample_value("aiostreams_source_offset_resets_total", {
            "app": group, "topic": src, "partition": "0", "reason": "deleted"})
        status = app.status().worker

    outputs = await read_exactly(transport, dst, COMMITTED + PRODUCED - DELETED_BELOW)
    assert [r.value for r in outputs[COMMITTED:]] == [b"v12", b"v13", b"v14"]
    [line] = [r.getMessage() for r in caplog.records if r.name == "aiostreams.offset_reset"]
    assert f"offset {COMMITTED} of {src}[0] is out of range" in line
    assert f"7 records (offsets {COMMITTED}..11) were deleted" in line
    assert f"reset {COMMITTED} -> {DELETED_BELOW}" in line
    assert resets == 1.0
    assert status is not None and status.offset_resets == 1
    assert await committed(transport, group, TopicPartition(src, 0)) == PRODUCED


async def test_fail_policy_stops_the_app_with_the_gap_and_commits_nothing_past_it(
        broker: str, topic_name: Callable[[str], str]) -> None:
    transport, src, dst, group = await commit_then_delete(broker, topic_name)

    app = forward_app(group, broker, src, dst, offset_out_of_range="fail")
    await app.start()
    with pytest.raises(OffsetOutOfRangeError) as raised:
        await asyncio.wait_for(app.wait(), 60)

    assert app.state is AppState.FAILED
    error = raised.value
    assert (error.topic, error.offset, error.log_start, error.log_end) == (
        src, COMMITTED, DELETED_BELOW, PRODUCED)
    assert f"7 records (offsets {COMMITTED}..11) were deleted" in str(error)
    assert f"aiostreams groups reset {group} --topic {src}" in str(error)
    assert await committed(transport, group, TopicPartition(src, 0)) == COMMITTED
    assert len(await read_exactly(transport, dst, COMMITTED)) == COMMITTED  # nothing more
