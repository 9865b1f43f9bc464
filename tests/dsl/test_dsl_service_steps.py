"""Async steps calling through a declared service: timeouts measure the call, coalesced
records share a call and still retire in order, and outputs and state equal the serial
run's for any completion order."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest
from dslkit import In, make_app, produce, run_app
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiostreams import App, ConfigError, Retry, TopologyError
from aiostreams.services import Adaptive
from aiostreams.services.memo import Memo
from aiostreams.testing import TopologyTestDriver, settle


def topics(app: Any) -> tuple[Any, Any]:
    return (app.topic("in", key=str, value=str, partitions=1),
            app.topic("out", key=str, value=str, partitions=1))


async def test_time_queued_for_a_permit_never_times_a_call_out() -> None:
    # issue 20: a call that had answered was timed out and made again because its time in
    # the queue counted. Here 16 records queue behind one place for ~16 x 30 ms, far past
    # the 250 ms processing timeout and the step's 200 ms Retry timeout; each call takes
    # 30 ms (the margin to 200 ms absorbs an event loop starved on a loaded machine).
    app = make_app(processing_timeout=0.25)
    src, out = topics(app)
    lookups = app.service("lookups", concurrency=1)
    calls: list[str] = []

    async def lookup(v: str) -> str:
        calls.append(v)
        await asyncio.sleep(0.03)  # the service's latency
        return v.upper()

    app.stream(src).map_values_async(
        lookup, service=lookups,
        retry=Retry(attempts=2, backoff=0.0, jitter=0.0, timeout=0.2)).to(out)
    values = [f"v{i:02d}" for i in range(16)]
    produce(app, src, [In(f"k{i}", v) for i, v in enumerate(values)])
    result = await run_app(app, [out])
    assert result.values("out") == [v.upper() for v in values]
    assert sorted(calls) == values  # each called once: no attempt timed out
    service = lookups.current
    assert service is not None and service.stats.calls == 16 and service.in_flight == 0


async def test_records_with_the_same_lookup_key_share_one_call_and_retire_in_order() -> None:
    app = make_app()
    src, out = topics(app)
    customers = app.service("customers", concurrency=Adaptive(initial=50, min=4, max=200))
    values = [f"{c}:{i}" for i, c in enumerate("abacabcaab")]
    arrived: list[str] = []
    all_arrived, release = asyncio.Event(), asyncio.Event()
    calls: list[str] = []

    def customer_of(v: str) -> str:
        arrived.append(v)
        if len(arrived) == len(values):
            all_arrived.set()
        return v.split(":")[0]

    async def enrich(v: str) -> str:
        calls.append(customer_of_value(v))
        await release.wait()  # every call stays out until all records have asked
        return customer_of_value(v).upper()

    async def release_when_all_asked() -> None:
        await all_arrived.wait()
        await settle()
        release.set()

    app.stream(src).map_values_async(enrich, service=customers, coalesce_by=customer_of).to(
        out)
    produce(app, src, [In(f"r{i}", v) for i, v in enumerate(values)])
    releaser = asyncio.ensure_future(release_when_all_asked())
    result = await run_app(app, [out])
    await releaser
    assert result.values("out") == [v.split(":")[0].upper() for v in values]
    assert sorted(calls) == ["a", "b", "c"]
    service = customers.current
    assert service is not None
    assert (service.stats.calls, service.stats.saved_by_coalescing) == (3, len(values) - 3)


def customer_of_value(v: str) -> str:
    return v.split(":")[0]


def coalescing_app(seed: int, max_in_flight: int, combine: bool = False
                   ) -> tuple[App, list[str]]:
    """map_values_async through a service with coalescing and a memo, then a count per
    customer (state); each call answers after a seeded-random number of loop turns. With
    ``combine``, the step looks the customer up and each record's result is its own
    value joined with the shared answer."""
    app = App("coalesce", max_in_flight=max_in_flight)
    src = app.topic("in", key=str, value=str, partitions=1)
    app.topic("out", key=str, value=str, partitions=1)
    service = app.service("customers", concurrency=3)
    rng = random.Random(seed)
    calls: list[str] = []

    async def enrich(v: str) -> str:
        calls.append(customer_of_value(v))
        for _ in range(rng.randint(0, 12)):
            await asyncio.sleep(0)
        return f"{customer_of_value(v)}!"

    async def look_up(customer: str) -> str:
        calls.append(customer)
        for _ in range(rng.randint(0, 12)):
            await asyncio.sleep(0)
        return f"{customer}!"

    if combine:
        enriched = app.stream(src).map_values_async(
            look_up, service=service, coalesce_by=customer_of_value,
            combine=lambda v, found: f"{v}={found}", memoize=Memo(ttl=10.0), name="enrich")
    else:
        enriched = app.stream(src).map_values_async(enrich, service=service,
                                                    coalesce_by=customer_of_value,
                                                    memoize=Memo(ttl=10.0), name="enrich")
    enriched.to("out")
    enriched.group_by_key().count(materialized="counts")
    return app, calls


async def drive(records: list[tuple[str, str, float]], seed: int, max_in_flight: int,
                combine: bool = False
                ) -> tuple[list[tuple[str, str]], list[dict[Any, Any]], list[str]]:
    app, calls = coalescing_app(seed, max_in_flight, combine)
    async with TopologyTestDriver(app) as driver:
        driver.pipe_inputs("in", records)
        await driver.process_all()
        outputs = [(r.key, r.value) for r in driver.read_output("out")]
        return outputs, [driver.store("counts"), driver.store("enrich-memo")], calls


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=st.lists(st.tuples(st.sampled_from("pqrs"), st.sampled_from("abcd"),
                                  st.integers(-3, 6)), min_size=1, max_size=30),
       seed=st.integers(0, 2**16), max_in_flight=st.sampled_from([2, 8, 64]),
       combine=st.booleans())
async def test_with_coalescing_and_memo_outputs_and_state_equal_the_serial_runs(
        records: list[tuple[str, str, int]], seed: int, max_in_flight: int,
        combine: bool) -> None:
    # timestamps move by -3..6 s a record, so the 10 s memo periods turn over mid-run and
    # some records come out of timestamp order
    piped, ts = [], 1000.0
    for i, (key, customer, step) in enumerate(records):
        ts += step
        piped.append((key, f"{customer}:{i}", ts))
    serial_out, serial_state, serial_calls = await drive(piped, seed, 1, combine)
    out, state, calls = await drive(piped, seed, max_in_flight, combine)
    assert out == serial_out
    assert state == serial_state  # the counts and the memo store
    assert len(calls) <= len(serial_calls)


def test_a_service_is_declared_once_per_name() -> None:
    app = App("twice", broker="memory://twice")
    app.service("customers")
    with pytest.raises(ConfigError, match="declared twice"):
        app.service("customers", concurrency=4)


def test_coalescing_needs_a_service() -> None:
    app = App("nocoalesce", broker="memory://nocoalesce")
    src = app.topic("in", key=str, value=str)

    async def f(v: str) -> str:
        return v

    with pytest.raises(TopologyError, match="needs service="):
        app.stream(src).map_values_async(f, coalesce_by=lambda v: v)


async def test_a_memo_answers_within_its_ttl_period_and_survives_a_restart() -> None:
    broker = f"memory://memo-{random.randrange(10**9)}"
    calls: list[str] = []

    def build() -> tuple[App, Any]:
        app = App("memo-app", broker=broker, commit_interval_ms=5.0, poll_timeout=0.01,
                  max_in_flight=1)  # one record at a time: the memo alone saves calls
        src, out = topics(app)
        service = app.service("customers")

        async def enrich(v: str) -> str:
            calls.append(customer_of_value(v))
            return customer_of_value(v).upper()

        app.stream(src).map_values_async(enrich, service=service,
                                         coalesce_by=customer_of_value,
                                         memoize=Memo(ttl=60.0), name="enrich").to(out)
        return app, (src, out)

    first = [In("k1", "a:1", 0.0), In("k2", "b:2", 10.0), In("k3", "a:3", 59.0),
             In("k4", "a:4", 61.0)]  # a at 0 and 59: one period; a at 61: the next
    app, (src, out) = build()
    produce(app, src, first)
    result = await run_app(app, [out])
    assert result.values("out") == ["A", "B", "A", "A"]
    assert calls == ["a", "b", "a"]
    assert result.stores["enrich-memo"] == {"a": ["A", 120.0], "b": ["B", 60.0]}
    assert app.services["customers"].current.stats.saved_by_memo == 1  # type: ignore[union-attr]
    # a restart (a new instance of the app) restores the memo from its changelog: the same
    # lookups, replayed by upstream in the same period, make no call
    app, (src, out) = build()
    produce(app, src, [In("k5", "b:5", 45.0), In("k6", "a:6", 100.0)])
    result = await run_app(app, [out])
    assert result.values("out") == ["A", "B", "A", "A", "B", "A"]  # both runs' outputs
    assert calls == ["a", "b", "a"]  # none in the second run


async def test_combine_gives_each_record_its_own_result_from_one_shared_lookup() -> None:
    app = App("combine", max_in_flight=16)
    src = app.topic("in", key=str, value=str, partitions=1)
    app.topic("out", key=str, value=str, partitions=1)
    service = app.service("customers", concurrency=4)
    gate: asyncio.Future[None] | None = None
    looked_up: list[str] = []

    async def look_up(customer: str) -> dict[str, str]:
        looked_up.append(customer)
        assert gate is not None
        await gate
        return {"tier": f"gold-{customer}"}

    app.stream(src).map_values_async(
        look_up, service=service, coalesce_by=customer_of_value,
        combine=lambda v, profile: f"{v}/{profile['tier']}").to("out")
    values = ["a:1", "b:2", "a:3", "a:4", "b:5"]
    async with TopologyTestDriver(app) as driver:
        gate = asyncio.get_running_loop().create_future()
        driver.pipe_inputs("in", [(f"k{i}", v, 1000.0 + i) for i, v in enumerate(values)])
        processing = asyncio.ensure_future(driver.process_all())
        await settle(20)
        gate.set_result(None)  # every record is in flight: the lookups answer together
        await processing
        out = [r.value for r in driver.read_output("out")]
    assert out == ["a:1/gold-a", "b:2/gold-b", "a:3/gold-a", "a:4/gold-a", "b:5/gold-b"]
    assert sorted(looked_up) == ["a", "b"]  # called with the key, once per key


def test_combine_needs_a_lookup_key() -> None:
    app = App("nocombinekey", broker="memory://nocombinekey")
    src = app.topic("in", key=str, value=str)

    async def f(v: str) -> str:
        return v

    with pytest.raises(TopologyError, match=r"combine=.*needs coalesce_by="):
        app.stream(src).map_values_async(f, service=app.service("s"),
                                         combine=lambda v, x: v)


def test_memoize_needs_a_lookup_key() -> None:
    app = App("nomemokey", broker="memory://nomemokey")
    src = app.topic("in", key=str, value=str)

    async def f(v: str) -> str:
        return v

    with pytest.raises(TopologyError, match="needs coalesce_by="):
        app.stream(src).map_values_async(f, service=app.service("s"), memoize=Memo(ttl=1.0))


# -- micro-batching ---------------------------------------------------------------------


def batched_app(fn: Any, *, retry_per: str = "value", retry: Retry | None = None,
                max_batch: int = 4) -> tuple[App, Any, Any]:
    app = make_app()
    src, out = topics(app)
    service = app.service("batch", concurrency=8)
    app.stream(src).map_values_batched_async(fn, service=service, max_batch=max_batch,
                                             max_wait=0.005, retry_per=retry_per,  # type: ignore[arg-type]
                                             retry=retry).to(out)
    return app, src, out


async def test_one_call_takes_up_to_max_batch_values_and_each_record_gets_its_result() -> None:
    batches: list[list[str]] = []

    async def lookup_many(values: list[str]) -> list[str]:
        batches.append(values)
        for _ in range(random.randint(0, 5)):
            await asyncio.sleep(0)
        return [v.upper() for v in values]

    app, src, out = batched_app(lookup_many)
    values = [f"v{i}" for i in range(10)]
    produce(app, src, [In(f"k{i}", v) for i, v in enumerate(values)])
    result = await run_app(app, [out])
    assert result.values("out") == [v.upper() for v in values]  # in each record's order
    assert [len(b) for b in batches] == [4, 4, 2]  # the last one flushed by max_wait
    assert sorted(v for b in batches for v in b) == sorted(values)


@pytest.mark.parametrize("retry_per", ["value", "batch"])
async def test_a_failed_batch_is_retried_per_value_or_per_batch(retry_per: str) -> None:
    batches: list[list[str]] = []

    async def flaky(values: list[str]) -> list[str]:
        batches.append(values)
        if len(batches) == 1:
            raise ConnectionError("first call fails")
        return [v.upper() for v in values]

    app, src, out = batched_app(flaky, retry_per=retry_per,
                                retry=Retry(attempts=2, backoff=0.0, jitter=0.0))
    produce(app, src, [In(f"k{i}", f"v{i}") for i in range(4)])
    result = await run_app(app, [out])
    assert result.values("out") == ["V0", "V1", "V2", "V3"]
    if retry_per == "batch":
        assert batches == [["v0", "v1", "v2", "v3"]] * 2  # the same batch called again
    else:  # each record retried on its own: the values come again, in new batches
        assert sorted(v for b in batches[1:] for v in b) == ["v0", "v1", "v2", "v3"]


async def test_a_batch_function_must_return_one_result_per_value() -> None:
    async def short(values: list[str]) -> list[str]:
        return values[:1]

    app, src, out = batched_app(short)
    produce(app, src, [In("k0", "a"), In("k1", "b")])
    with pytest.raises(Exception, match="returned 1 results for 2 values"):
        await run_app(app, [out], timeout=5.0)
