"""A fleet of hosts on one machine (``tests/support/fleet.py``): hosts cut from the broker and
hosts lost whole, with the stateful app of ``tests/support/stateful_worker.py`` (an async
step, a per-key count and sum, a count re-keyed through a repartition topic, persistent
SQLite stores, each host its own state directory) under exactly-once.

* Of two hosts, one cut from the broker for longer than its session drops out of the group
  (the broker says so), keeps running while the other takes its tasks over, and rejoins
  when the link heals: nothing lost or counted twice, state exact.
* Three hosts, one lost whole (every process SIGKILLed): the other two take its partitions
  over and finish its work, state exact.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from appkit import create_topic, produce
from fleet import Fleet, HostState, fleet_unavailable
from kafkakit import stop_worker, wait_committed
from stateful_check import expected, keyed_inputs, until_exact

from aiostreams.transport.kafka import KafkaTransport
from aiostreams.transport.kafka_groups import describe_group

pytestmark = [pytest.mark.kafka, pytest.mark.chaos, pytest.mark.timeout(420)]

SCRIPT = Path(__file__).parents[1] / "support" / "stateful_worker.py"
KEYS = 24
SESSION = "4"


@pytest.fixture(autouse=True)
def _namespaces() -> None:
    why = fleet_unavailable()
    if why is not None:
        pytest.skip(why)


def worker_env(**more: str) -> dict[str, Any]:
    return dict(script=SCRIPT, WORKER_GUARANTEE="exactly_once", WORKER_SESSION_TIMEOUT=SESSION,
                WORKER_MAX_DELAY_MS="10", WORKER_COMMIT_MS="100", WORKER_LOG="INFO", **more)


async def members(bootstrap: str, group: str) -> int:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        return len((await describe_group(admin, group, bootstrap=bootstrap)).members)
    finally:
        await admin.close()


async def until_members(bootstrap: str, group: str, count: int, *, timeout: float) -> float:
    """Poll the coordinator (it tells no outsider) until ``group`` has ``count`` members;
    the seconds that took."""
    began = time.monotonic()
    while (seen := await members(bootstrap, group)) != count:
        assert time.monotonic() - began < timeout, \
            f"group {group!r} has {seen} member(s), not {count}, after {timeout:g} s"
        await asyncio.sleep(0.25)
    return time.monotonic() - began


async def paced(transport: KafkaTransport, topic: str,
                records: list[tuple[bytes, bytes]], per_second: float = 150.0) -> None:
    """Produce ``records`` at about ``per_second``: traffic that goes on through a fault."""
    chunk = 15
    for start in range(0, len(records), chunk):
        await produce(transport, topic, records[start:start + chunk])
        await asyncio.sleep(chunk / per_second)  # the workload's pace, not a wait


async def app_topics(bootstrap: str, topic_name: Any, label: str, partitions: int
                     ) -> tuple[KafkaTransport, str, str, str]:
    """A transport, the app's input and output topics (made), and the app's name."""
    transport = KafkaTransport(bootstrap)
    src, dst = topic_name("in"), topic_name("out")
    await create_topic(transport, src, partitions)
    await create_topic(transport, dst, partitions)
    return transport, src, dst, topic_name(label)


def netns_listed(name: str) -> bool:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return any(line.split()[0] == name for line in listed.splitlines() if line.strip())


async def test_a_host_cut_past_its_session_drops_out_and_rejoins_with_state_exact(
        kafka_bootstrap: str, topic_name: Any, tmp_path: Path) -> None:
    """Two hosts; one is cut from the broker past its session while records keep coming: the
    other takes its tasks over, and when the link heals the cut host (its worker never
    stopped, its requests held by the cut and delivered late) rejoins. Nothing is lost or
    counted twice: its late answers must not make it trust its files past what it wrote."""
    partitions = 4
    transport, src, dst, app = await app_topics(kafka_bootstrap, topic_name, "cut", partitions)
    records = keyed_inputs(4_000, KEYS)
    async with Fleet(kafka_bootstrap, hosts=2, root=tmp_path) as fleet:
        cut, other = fleet.hosts
        workers = [host.start(app, src, dst, **worker_env()) for host in fleet.hosts]
        await until_members(kafka_bootstrap, app, 2, timeout=120)
        await produce(transport, src, records[:2_000])
        await wait_committed(transport, app, src, partitions, 2_000, timeout=180)
        # records keep coming, and the link is cut while the hosts commit them
        feeding = asyncio.ensure_future(paced(transport, src, records[2_000:3_000]))
        await wait_committed(transport, app, src, partitions, 2_200, timeout=180)
        cut.cut()
        # the broker hears nothing from the cut host: past its session it is out of the
        # group, and the other host holds every partition
        await until_members(kafka_bootstrap, app, 1, timeout=60)
        await feeding
        await wait_committed(transport, app, src, partitions, 3_000, timeout=180)
        assert workers[0].poll() is None, "the cut host's worker exited"
        cut.heal()
        await until_members(kafka_bootstrap, app, 2, timeout=120)
        await produce(transport, src, records[3_000:])
        await wait_committed(transport, app, src, partitions, len(records), timeout=180)
        await until_exact(transport, dst, partitions, expected(records), timeout=120)
        for worker in workers:
            assert worker.poll() is None, fleet.logs()
            assert await stop_worker(worker, timeout=60) == 0
        name = cut.namespace.name
        assert netns_listed(name)
        assert other.state is HostState.UP
    assert not netns_listed(name), "the fleet left its namespace behind"


async def test_three_hosts_lose_one_whole_and_the_others_finish_its_work_exactly(
        kafka_bootstrap: str, topic_name: Any, tmp_path: Path) -> None:
    partitions = 6
    transport, src, dst, app = await app_topics(kafka_bootstrap, topic_name, "lost", partitions)
    records = keyed_inputs(6_000, KEYS)
    async with Fleet(kafka_bootstrap, hosts=3, root=tmp_path) as fleet:
        workers = [host.start(app, src, dst, **worker_env()) for host in fleet.hosts]
        await until_members(kafka_bootstrap, app, 3, timeout=120)
        await produce(transport, src, records[:3_000])
        await wait_committed(transport, app, src, partitions, 3_000, timeout=180)
        lost = fleet.hosts[1]
        feeding = asyncio.ensure_future(produce(transport, src, records[3_000:]))
        lost.kill()  # mid-stream: its transactions open, its stores' writes unflushed
        assert workers[1].poll() is not None
        await feeding
        await until_members(kafka_bootstrap, app, 2, timeout=60)
        await wait_committed(transport, app, src, partitions, len(records), timeout=180)
        await until_exact(transport, dst, partitions, expected(records), timeout=120)
        for worker in (workers[0], workers[2]):
            assert worker.poll() is None, fleet.logs()
            assert await stop_worker(worker, timeout=60) == 0
