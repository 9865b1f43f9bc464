"""A new user's first contact with a Kafka broker that is not there: the wait follows the
settings, the message names settings that exist, the log says it once, and a broker URL
without a port is refused when the app is made."""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from typing import Any

import pytest

from aiostreams import App, ConfigError, Settings, Topic
from aiostreams.errors import BrokerUnavailableError
from aiostreams.transport import kafka_connection, kafka_producer


def closed_port() -> int:
    """A port of 127.0.0.1 nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_broker_timeout_bounds_the_connect_of_app_send_and_it_is_logged_once(
        caplog: pytest.LogCaptureFixture) -> None:
    address = f"127.0.0.1:{closed_port()}"
    app = App("unreachable", broker=f"kafka://{address}", broker_timeout=1.0)
    caplog.set_level(logging.DEBUG)
    began = time.monotonic()
    try:
        with pytest.raises(BrokerUnavailableError) as raised:
            await app.send(Topic.of("orders", key=str, value=str), "k", "v")
    finally:
        await app.stop()
    assert time.monotonic() - began < 5.0  # not the 30 s default connect_timeout
    message = str(raised.value)
    assert address in message and "within 1 s" in message
    assert "the connect_timeout setting (at most broker_timeout" in message
    assert {"connect_timeout", "broker_timeout"} <= set(Settings.model_fields)
    flood = [r for r in caplog.records if r.name.startswith("aiokafka")
             and r.getMessage().startswith("Unable connect")]
    assert flood == []
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [(r.name, r.getMessage().split(" (")[0]) for r in warnings] == [
        ("aiostreams.transport.kafka_connection",
         f"the producer 'unreachable-producer' reaches no Kafka broker at {address} yet")]


def test_connect_timeout_is_a_setting_capped_by_broker_timeout() -> None:
    assert App("c", broker="kafka://127.0.0.1:9092",
               connect_timeout=2.0)._transport_options()["connect_timeout"] == 2.0
    assert App("c", broker="kafka://127.0.0.1:9092", connect_timeout=60.0,
               broker_timeout=5.0)._transport_options()["connect_timeout"] == 5.0


@pytest.mark.parametrize(("url", "fixed"), [
    ("kafka://localhost", "kafka://localhost:9092"),
    ("kafka://b1:9093,b2", "kafka://b1:9093,b2:9092"),
])
def test_a_kafka_url_without_a_port_is_refused_naming_the_fix(url: str, fixed: str) -> None:
    with pytest.raises(ConfigError, match=f"has no port: write {fixed} "):
        App("no-port", broker=url)


async def test_a_running_clients_connection_errors_are_still_logged(
        caplog: pytest.LogCaptureFixture) -> None:
    """Only the task retrying a start is quieted; aiokafka's background tasks (made during
    a start, so a context variable would follow them) keep logging a lost broker."""
    address = f"127.0.0.1:{closed_port()}"
    app = App("unreachable-later", broker=f"kafka://{address}", broker_timeout=0.5)
    lines: list[str] = []

    async def background() -> None:  # made by the start, logs while it still retries
        await asyncio.sleep(0)  # a turn of the loop: not in the starting task's call
        logging.getLogger("aiokafka").error("Unable connect to node with id %s: %s", 1, "x")
        lines.append("logged")

    real_start = kafka_connection.start_or_unavailable

    async def start_spawning(start: Any, close: Any, **kwargs: Any) -> None:
        async def start_and_spawn() -> None:
            spawned.append(asyncio.get_running_loop().create_task(background()))
            await start()
        await real_start(start_and_spawn, close, **kwargs)

    spawned: list[asyncio.Task[None]] = []
    caplog.set_level(logging.ERROR, logger="aiokafka")
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(kafka_producer, "start_or_unavailable", start_spawning)
            with pytest.raises(BrokerUnavailableError):
                await app.send(Topic.of("orders", key=str, value=str), "k", "v")
        await asyncio.gather(*spawned)
    finally:
        await app.stop()
    assert lines and len(lines) == len(spawned)
    assert [r.getMessage() for r in caplog.records if r.name == "aiokafka"] == [
        "Unable connect to node with id 1: x"] * len(spawned)
