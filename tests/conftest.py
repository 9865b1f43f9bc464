"""Fixtures shared by the whole suite: a real Kafka broker, and unique topic names.

Tests that need the broker are marked ``@pytest.mark.kafka`` and take ``kafka_bootstrap``.
The broker is started once per session, on first use (a run without such tests starts
nothing), unless ``AIOSTREAMS_KAFKA=host:port`` names one that is already running:

    AIOSTREAMS_KAFKA=127.0.0.1:9092 python -m pytest -m kafka

Deselect them with ``-m "not kafka"`` on a machine without Java and Maven.

``make test`` runs the suite on several processes (pytest-xdist, ``-n N --dist loadgroup``):
each worker process starts its own broker on first use, as a single process does. Tests that
share a process-wide server or session are kept on one worker by the group named after their
marker (:data:`XDIST_GROUPS`), and so run one at a time, as they did before.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator

import pytest
from hypothesis import settings

from aiostreams.localkafka import LocalKafka

XDIST_GROUPS = ("spark", "oracle", "registry", "chaos")
"""Markers whose tests stay on one xdist worker, first match wins: ``spark`` (one
SparkSession per process; the cluster tests each start a master, a worker and an executor
JVM, one cluster at a time), ``oracle`` (one Kafka Streams JVM per session), ``registry``
(one Apicurio registry per session), ``chaos`` (SIGSTOPs, broker restarts and timing
bounds that assume no other fault-injection test runs at the same time)."""

# Hypothesis's default deadline (200 ms an example) measures the machine's load, not the
# behaviour: with the suite on parallel workers an example may be slowed by a neighbour and
# reported as flaky. pytest-timeout still bounds every test.
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Give each test with one of :data:`XDIST_GROUPS`' markers its ``xdist_group`` (before
    pytest-xdist reads the groups; without xdist the mark does nothing)."""
    for item in items:
        group = next((name for name in XDIST_GROUPS if item.get_closest_marker(name)), None)
        if group is not None and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(group))


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
