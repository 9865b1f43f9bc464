"""Network faults between one worker and the broker, through the project's own TCP proxy
(``tests/support/faultproxy.py``): the worker reaches the broker only through the proxy;
the test's own clients reach it directly, so only the worker is cut off.

A partition longer than the session timeout makes the group drop the worker; when the
network heals, the worker's commit is refused (or its transactions were aborted), it closes
those tasks without committing, rejoins and processes everything: nothing lost (nothing
duplicated under exactly-once), and it never exits on its own. A storm of connection resets
is ridden out the same way.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from appkit import create_topic, produce, read_exactly, read_until_all_seen
from faultproxy import FaultProxy, proxied_broker
from kafkakit import check_outputs, keyed_inputs, start_worker, stop_worker

from aiostreams.localkafka import LocalKafka
from aiostreams.transport.kafka import KafkaTransport

pytestmark = [pytest.mark.kafka, pytest.mark.chaos, pytest.mark.timeout(420),
              pytest.mark.asyncio(loop_scope="module")]

SESSION_TIMEOUT = 6.0


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def module_broker() -> AsyncIterator[tuple[LocalKafka, FaultProxy, str]]:
    """A broker of the module's own (each test has its own topics and group) whose PROXIED
    listener is reached through a FaultProxy."""
    async with proxied_broker() as started:
        yield started


@pytest.fixture
def proxied_kafka(module_broker: tuple[LocalKafka, FaultProxy, str]
                  ) -> tuple[LocalKafka, FaultProxy, str]:
    """The module's broker, the proxy (healed: forwarding) and the address the worker
    bootstraps at."""
    module_broker[1].forward()
    return module_broker


@pytest.mark.parametrize(("fault", "guarantee"), [
    ("partition", "at_least_once"), ("partition", "exactly_once"),
    # Resets under exactly-once (an in-doubt commit_transaction included) and with a
    # growing backlog: tests/chaos/test_connection_resets.py.
    ("reset_storm", "at_least_once"),
])
async def test_a_worker_cut_off_from_the_broker_recovers_and_loses_nothing(
        proxied_kafka: tuple[LocalKafka, FaultProxy, str], topic_name: Any, guarantee: str,
        fault: str) -> None:
    kafka, proxy, through_proxy = proxied_kafka
    transport = KafkaTransport(kafka.bootstrap)  # the test's clients: not through the proxy
    src, dst, group = topic_name("in"), topic_name("out"), topic_name("app")
    await create_topic(transport, src, 4)
    await create_topic(transport, dst, 4)
    inputs = keyed_inputs(20_000, keys=200)
    exactly_once = guarantee == "exactly_once"
    worker = start_worker(through_proxy, group, src, dst, WORKER_GUARANTEE=guarantee,
                          WORKER_MAX_DELAY_MS="20", WORKER_INSTANCE=f"{group}-0",
                          WORKER_SESSION_TIMEOUT=str(SESSION_TIMEOUT))
    try:
        await produce(transport, src, inputs)
        await read_exactly(transport, dst, 1_000, timeout=120, read_committed=exactly_once)
        if fault == "partition":
            proxy.blackhole()
            await asyncio.sleep(SESSION_TIMEOUT * 2.5)  # the fault's duration
        else:
            for _ in range(8):
                proxy.reset()
                await asyncio.sleep(0.5)  # the fault's duration
                proxy.forward()
                await asyncio.sleep(0.5)
        proxy.forward()
        assert worker.poll() is None, "the worker exited during the fault"
        outputs = await read_until_all_seen(transport, dst, {v for _, v in inputs},
                                            timeout=240, read_committed=exactly_once)
        check_outputs(outputs, inputs, exactly_once=exactly_once)
        assert worker.poll() is None, "the worker exited after the fault"
    finally:
        code = await stop_worker(worker, timeout=60)
    assert code == 0
