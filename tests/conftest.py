"""Fixtures shared by the whole suite: a real Kafka broker, and unique topic names.

Tests that need the broker are marked ``@pytest.mark.kafka`` and take ``kafka_bootstrap``.
The broker is started once per session, on first use (a run without such tests starts
nothing), unless ``AIOSTREAMS_KAFKA=host:port`` names one that is already running:

    AIOSTREAMS_KAFKA=127.0.0.1:9092 python -m pytest -m kafka

A broker started here runs the Kafka release ``AIOSTREAMS_KAFKA_VERSION`` names (4.4.0 or
3.9.1; ``aiostreams.localkafka.releases``), the default one otherwise.

Deselect them with ``-m "not kafka"`` on a machine without Java and Maven.

``make test`` runs the suite on several processes (pytest-xdist, ``-n N --dist loadgroup``):
each worker process starts its own broker on first use, as a single process does; the tests
that share a process-wide server (Spark and its clusters, the schema registry) stay on one
worker (tests/support/suite_scheduling.py).
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError
from hypothesis import settings

from aiostreams.localkafka import LocalKafka

pytest_plugins = ["browser"]  # the headless-browser fixtures (tests/support/browser.py)

# Hypothesis's default deadline (200 ms an example) measures the machine's load, not the
# behaviour: with the suite on parallel workers an example may be slowed by a neighbour and
# reported as flaky. pytest-timeout still bounds every test.
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist, when installed
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """With ``--dist loadgroup``: :class:`suite_scheduling.SuiteScheduling` (the servers a
    directory shares stay on one worker); other ``--dist`` modes are pytest-xdist's own."""
    if config.getoption("dist") != "loadgroup":
        return None
    from suite_scheduling import SuiteScheduling

    return SuiteScheduling(config, log)


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """``host:port`` of a Kafka broker: ``$AIOSTREAMS_KAFKA``, else one started (and, at the
    end of the session, stopped) here. The first start downloads the jars with Maven."""
    configured = os.environ.get("AIOSTREAMS_KAFKA")
    if configured:
        yield configured
        return
    with LocalKafka() as kafka:
        # a thread of its own: this fixture may be set up while a test's loop runs
        with ThreadPoolExecutor(1) as thread:
            thread.submit(asyncio.run, _until_groups_are_coordinated(kafka.bootstrap)).result()
        yield kafka.bootstrap


async def _until_groups_are_coordinated(bootstrap: str, timeout: float = 60.0) -> None:
    """Return once the broker names a coordinator for groups. A new broker creates its
    offsets topic on the first such request and answers "not available" until it has; in
    one process the first tests made that request long before a test needed it, on several
    workers each has a new broker (``aiostreams store-upgrade`` then fails on its group
    check: it does not retry)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        async with asyncio.timeout(timeout):
            while True:
                try:
                    await admin.find_coordinator("aiostreams-tests-probe")
                    return
                except KafkaError as error:
                    if not error.retriable:
                        raise
                await asyncio.sleep(0.2)  # polling the broker: nothing announces it
    finally:
        await admin.close()


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """Makes topic (or group, or transactional id) names unique to this test run and
    readable in broker logs: ``topic_name("orders")`` → ``orders-<test>-<8 hex>``."""
    test = request.node.originalname.removeprefix("test_")[:40].replace("_", "-")
    return lambda prefix: f"{prefix}-{test}-{uuid.uuid4().hex[:8]}"
