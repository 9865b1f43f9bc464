"""The aiokafka consumer under :class:`~aiostreams.transport.kafka_consumer.KafkaConsumer`:
how it is configured, and how it is stopped.

Configured: commits manual only (``enable_auto_commit=False``); the rebalance timeout is
``max_poll_interval`` (as in Java; aiokafka defaults it to the session timeout); timeouts
come in float seconds from :class:`~aiostreams.transport.kafka_connection.KafkaOptions`;
positions never reset by aiokafka itself (``auto_offset_reset="none"``, see
:mod:`~aiostreams.transport.kafka_positions`); partitions assigned by aiostreams' one group
protocol (:mod:`~aiostreams.transport.kafka_assignor`).
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaError

from aiostreams.transport.base import ConsumerOptions
from aiostreams.transport.kafka_connection import KafkaOptions, to_ms
from aiostreams.transport.kafka_positions import AIOKAFKA_OFFSET_RESET

__all__ = ["new_aiokafka_consumer", "stop_aiokafka"]


def new_aiokafka_consumer(bootstrap: str, kafka: KafkaOptions, options: ConsumerOptions,
                          assignors: tuple[Any, ...]) -> AIOKafkaConsumer:
    """An aiokafka consumer of ``bootstrap`` for ``options`` (not started); ``assignors``:
    its ``partition_assignment_strategy`` (one: see
    :func:`~aiostreams.transport.kafka_assignor.assignment_strategy`)."""
    assert len(assignors) == 1, "aiokafka 0.14 makes each listed assignor a join of its own"
    return AIOKafkaConsumer(
        partition_assignment_strategy=assignors,
        **kafka.client_kwargs(bootstrap, options.client_id),
        group_id=options.group_id,
        group_instance_id=options.group_instance_id,
        enable_auto_commit=False,
        auto_offset_reset=AIOKAFKA_OFFSET_RESET,
        isolation_level=options.isolation_level.value,
        max_poll_records=options.max_poll_records,
        session_timeout_ms=to_ms(kafka.session_timeout),
        heartbeat_interval_ms=to_ms(kafka.heartbeat_interval),
        max_poll_interval_ms=to_ms(kafka.max_poll_interval),
        rebalance_timeout_ms=to_ms(kafka.max_poll_interval),
        fetch_max_wait_ms=to_ms(kafka.fetch_max_wait),
    )


async def stop_aiokafka(consumer: Any) -> None:
    """``AIOKafkaConsumer.stop()``, minus a leak of aiokafka 0.14: a consumer without a group
    stopped before its internal reset routine first ran re-raises that routine's
    cancellation. Ours is re-raised only when this task itself is being cancelled. And a
    consumer whose fetcher task died (see :mod:`~aiostreams.transport.kafka_watchdog`)
    re-raises that death from ``stop()`` before closing its connections: they are closed
    here, and the death (reported already by the watchdog) is not raised again."""
    try:
        await consumer.stop()
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
    except KafkaError:
        if not _fetcher_died(consumer):
            raise
        await consumer._client.close()


def _fetcher_died(consumer: Any) -> bool:
    task = getattr(getattr(consumer, "_fetcher", None), "_fetch_task", None)
    return task is not None and task.done() and not task.cancelled() \
        and task.exception() is not None
