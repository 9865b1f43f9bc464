"""The client watchdog's decisions (issue 33), without a broker: the verdict is a pure
function of what was seen of a client's tasks and fetch progress; the engine side counts
failures and stops only when they persist."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiostreams.engine.client_watchdog import ClientWatchdog
from aiostreams.errors import ClientFailedError, CorruptFetchError, InstanceIdConflictError
from aiostreams.transport.kafka_watchdog import (
    ALIVE,
    InternalTask,
    Liveness,
    Observation,
    TaskState,
    judge,
)
from aiostreams.types import TopicPartition

tasks = st.builds(InternalTask, st.sampled_from(["fetcher", "heartbeat", "sender"]),
                  st.sampled_from(list(TaskState)), st.none() | st.just("KeyError: x"),
                  st.booleans())
observations = st.builds(Observation, st.just("consumer 'c'"),
                         st.lists(tasks, max_size=4).map(tuple),
                         st.none() | st.floats(0, 1000), st.just(()))


@given(observations, st.none() | st.floats(0.1, 500), st.none() | st.booleans())
def test_a_verdict_is_dead_exactly_when_a_task_failed_or_a_required_one_is_not_running(
        seen: Observation, stall_after: float | None, answers: bool | None) -> None:
    verdict = judge(seen, stall_after=stall_after, answers=answers)
    dead = any(t.state is TaskState.FAILED
               or (t.required and t.state is not TaskState.RUNNING) for t in seen.tasks)
    assert verdict.dead == dead
    assert not (verdict.dead and verdict.stalled)
    assert (verdict.reason == "") == verdict.alive
    stalled = (not dead and stall_after is not None and seen.fetch_age is not None
               and seen.fetch_age > stall_after and answers is True)
    assert verdict.stalled == stalled


def test_a_failed_fetcher_is_named_with_its_error() -> None:
    seen = Observation("consumer 'c'", (
        InternalTask("fetcher", TaskState.FAILED, "KafkaError: x (from KeyError: tp)"),
        InternalTask("heartbeat", TaskState.ABSENT, required=False)))
    verdict = judge(seen, stall_after=60.0, answers=None)
    assert verdict.dead
    assert "its fetcher task failed with KafkaError: x (from KeyError: tp)" in verdict.reason


def test_no_fetch_response_is_a_stall_only_while_the_broker_answers() -> None:
    seen = Observation("consumer 'c'", (InternalTask("fetcher", TaskState.RUNNING),),
                       fetch_age=90.0, starved=("t[0]",))
    assert judge(seen, stall_after=60.0, answers=False) == ALIVE  # an outage: not ours
    assert judge(seen, stall_after=60.0, answers=None) == ALIVE
    assert judge(seen, stall_after=None, answers=True) == ALIVE
    stalled = judge(seen, stall_after=60.0, answers=True)
    assert stalled.stalled and "t[0]" in stalled.reason


@dataclass
class FakeClient:
    verdict: Liveness

    async def liveness(self, stall_after: float | None) -> Liveness:
        return self.verdict


@dataclass
class FakeChannel:
    producer: FakeClient
    error: BaseException | None = None
    name: str = "the producer"


DEAD = Liveness(dead=True, reason="consumer 'c': its fetcher task failed")


async def test_a_dead_consumer_is_reported_degraded_handed_over_once_and_rebuilt() -> None:
    watchdog = ClientWatchdog(interval=1.0, stall_after=None, failure_limit=2)
    consumer = FakeClient(DEAD)
    await watchdog.check(consumer, [])
    await watchdog.check(consumer, [])
    assert watchdog.degraded == DEAD.reason
    assert watchdog.detections == 1  # logged once, not at every look
    assert watchdog.take() == DEAD
    assert watchdog.take() is None
    consumer.verdict = ALIVE
    await watchdog.check(consumer, [])
    assert watchdog.degraded is None


async def test_rebuilds_without_a_fetched_record_in_between_stop_at_the_limit() -> None:
    watchdog = ClientWatchdog(interval=1.0, stall_after=None, failure_limit=2)
    tp = TopicPartition("t", 0)
    for _ in range(2):
        await watchdog.check(FakeClient(DEAD), [])
        assert watchdog.take([tp]) == DEAD
    watchdog.fetched({tp: [object()]})  # progress: the count starts again
    for _ in range(2):
        await watchdog.check(FakeClient(DEAD), [])
        assert watchdog.take([tp]) == DEAD
    await watchdog.check(FakeClient(DEAD), [])
    with pytest.raises(ClientFailedError, match=r"3 times in a row.*partition.* t-0"):
        watchdog.take([tp])


async def test_the_stop_names_every_partition_fetched_during_the_failing_rebuilds() -> None:
    """A consumer that dies while its assignment's tasks open (exactly-once fences a
    producer per task) leaves some unopened: the stop still names all it was fetching."""
    watchdog = ClientWatchdog(interval=1.0, stall_after=None, failure_limit=2)
    old, t0, t1 = TopicPartition("t", 9), TopicPartition("t", 0), TopicPartition("t", 1)
    await watchdog.check(FakeClient(DEAD), [])
    watchdog.take([old])
    watchdog.fetched({old: [object()]})  # progress: what came before is not named
    for fetching in ([t0, t1], [t0]):
        await watchdog.check(FakeClient(DEAD), [])
        assert watchdog.take(fetching) == DEAD
    await watchdog.check(FakeClient(DEAD), [])
    with pytest.raises(ClientFailedError, match=r"partition\(s\) t-0, t-1; last"):
        watchdog.take([t0])


async def test_a_consumer_whose_instance_id_another_process_took_is_not_rebuilt() -> None:
    watchdog = ClientWatchdog(interval=1.0, stall_after=None, failure_limit=5)
    taken = Liveness(dead=True, reason="consumer 'c': its heartbeat task failed",
                     conflict="another process joined group 'g' with ...")
    await watchdog.check(FakeClient(taken), [])
    with pytest.raises(InstanceIdConflictError, match="another process joined group 'g'"):
        watchdog.take()


async def test_a_dead_producer_fails_its_channel_for_a_rewind() -> None:
    watchdog = ClientWatchdog(interval=1.0, stall_after=None, failure_limit=2)
    channel = FakeChannel(FakeClient(Liveness(dead=True, reason="producer 'p': sender")))
    await watchdog.check(None, [channel])
    assert isinstance(channel.error, ClientFailedError)
    assert watchdog.degraded == "producer 'p': sender"
    assert watchdog.take() is None  # the consumer is fine: nothing to rebuild


def test_unparsable_fetches_of_one_partition_stop_the_worker_naming_it() -> None:
    watchdog = ClientWatchdog(interval=1.0, stall_after=None, failure_limit=3)
    bad, good = TopicPartition("t", 1), TopicPartition("t", 0)
    corrupt = CorruptFetchError("failed its CRC check", partitions=(bad,))
    watchdog.corrupt_fetch(corrupt)
    watchdog.corrupt_fetch(corrupt)
    watchdog.fetched({good: [object()], bad: []})  # another partition's progress: no reset
    with pytest.raises(ClientFailedError, match="3 fetches in a row of partition t-1"):
        watchdog.corrupt_fetch(corrupt)


def test_a_record_of_the_partition_resets_its_count() -> None:
    watchdog = ClientWatchdog(interval=1.0, stall_after=None, failure_limit=2)
    tp = TopicPartition("t", 0)
    corrupt = CorruptFetchError("failed its CRC check", partitions=(tp,))
    watchdog.corrupt_fetch(corrupt)
    watchdog.fetched({tp: [object()]})
    watchdog.corrupt_fetch(corrupt)  # one in a row again: no stop


async def test_a_fetch_waiting_on_a_dead_consumer_is_cancelled_when_it_is_judged_dead(
        ) -> None:
    watchdog = ClientWatchdog(interval=1.0, stall_after=None, failure_limit=2)
    forever = asyncio.get_running_loop().create_future()

    async def fetch() -> dict[TopicPartition, list[object]]:
        await forever
        return {}

    waiting = asyncio.ensure_future(watchdog.unless_dead(fetch()))
    await asyncio.sleep(0)
    await watchdog.check(FakeClient(DEAD), [])
    assert await waiting is None
