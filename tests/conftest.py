"""Fixtures shared by the whole suite: a real Kafka broker, and unique topic names.

Tests that need the broker are marked ``@pytest.mark.kafka`` and take ``kafka_bootstrap``.
The broker is started once per session, on first use (a run without such tests starts
nothing), unless ``AIOSTREAMS_KAFKA=host:port`` names one that is already running:

    AIOSTREAMS_KAFKA=127.0.0.1:9092 python -m pytest -m kafka

Deselect them with ``-m "not kafka"`` on a machine without Java and Maven.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator

import pytest

from aiostreams.localkafka import LocalKafka


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """``host:port`` of a Kafka broker: ``$AIOSTREAMS_KAFKA``, else one started (and, at the
    end of the session, stopped) here. The first start downloads the jars with Maven."""
    configured = os.environ.get("AIOSTREAMS_KAFKA")
    if configured:
        yield configured
        return
    with LocalKafka() as kafka:
        yield kafka.bootstrap


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """Makes topic (or group, or transactional id) names unique to this test run and
    readable in broker logs: ``topic_name("orders")`` → ``orders-<test>-<8 hex>``."""
    test = request.node.originalname.removeprefix("test_")[:40].replace("_", "-")
    return lambda prefix: f"{prefix}-{test}-{uuid.uuid4().hex[:8]}"
