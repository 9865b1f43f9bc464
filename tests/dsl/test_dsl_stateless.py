"""Stateless stream operations, end to end on the memory broker."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from dslkit import In, make_app, produce, random_yields, run_app

from aiostreams import Retry, TopologyError
from aiostreams.dsl.builder import StreamsBuilder
from aiostreams.errors import TaskFailedError
from aiostreams.state.memory import InMemoryKeyValueStore
from aiostreams.topology.processor import Processor
from aiostreams.topology.topology import StoreSpec, Topology
from aiostreams.types import Record

WORDS = [In("a", "apple"), In("b", "banana"), In("c", "cherry"), In("a", "avocado")]


def topics(app: Any, partitions: int = 1) -> tuple[Any, Any]:
    return (app.topic("in", key=str, value=str, partitions=partitions),
            app.topic("out", key=str, value="json", partitions=partitions))


async def test_filter_keeps_and_filter_not_drops_by_key_and_value() -> None:
    app = make_app()
    src, out = topics(app)
    kept = app.topic("kept", key=str, value=str)
    stream = app.stream(src)
    stream.filter(lambda k, v: k == "a" and len(v) > 5).to(kept)
    stream.filter_not(lambda k, v: k == "a").to(out)
    produce(app, src, WORDS)
    result = await run_app(app, [kept, out])
    assert result.pairs("kept") == [("a", "avocado")]
    assert result.pairs("out") == [("b", "banana"), ("c", "cherry")]


async def test_map_map_values_and_select_key_transform_records() -> None:
    app = make_app()
    src, out = topics(app)
    upper = app.topic("upper", key=str, value=str)
    keyed = app.topic("keyed", key=str, value=str)
    s = app.stream(src)
    s.map(lambda k, v: (v[0].upper(), [k, len(v)])).to(out)
    s.map_values(str.upper).to(upper)
    s.select_key(lambda k, v: v[-1]).to(keyed)
    produce(app, src, WORDS[:2])
    result = await run_app(app, [out, upper, keyed])
    assert result.pairs("out") == [("A", ["a", 5]), ("B", ["b", 6])]
    assert result.pairs("upper") == [("a", "APPLE"), ("b", "BANANA")]
    assert result.pairs("keyed") == [("e", "apple"), ("a", "banana")]


async def test_flat_map_and_flat_map_values_emit_each_item_in_order() -> None:
    app = make_app()
    src, out = topics(app)
    letters = app.topic("letters", key=str, value=str)
    s = app.stream(src)
    s.flat_map(lambda k, v: [(k + str(i), i) for i in range(len(v) % 3)]).to(out)
    s.flat_map_values(lambda v: v[:2]).to(letters)
    produce(app, src, [In("x", "abcd"), In("y", "abc"), In("z", "abcde")])
    result = await run_app(app, [out, letters])
    assert result.pairs("out") == [("x0", 0), ("z0", 0), ("z1", 1)]
    assert result.pairs("letters") == [("x", "a"), ("x", "b"), ("y", "a"), ("y", "b"),
                                       ("z", "a"), ("z", "b")]


async def test_peek_passes_records_on_and_foreach_is_terminal() -> None:
    app = make_app()
    src, _ = topics(app)
    out = app.topic("copy", key=str, value=str)
    peeked: list[tuple[str, str]] = []
    seen: list[str] = []
    s = app.stream(src).peek(lambda k, v: peeked.append((k, v)))
    s.to(out)
    assert s.foreach(lambda k, v: seen.append(v)) is None
    produce(app, src, WORDS)
    result = await run_app(app, [out])
    assert peeked == [(r.key, r.value) for r in WORDS]
    assert seen == [r.value for r in WORDS]
    assert result.pairs("copy") == peeked


async def test_split_sends_each_record_to_the_first_matching_branch_or_default() -> None:
    app = make_app()
    src, _ = topics(app)
    outs = {n: app.topic(n, key=str, value=str) for n in ("s-a", "s-long", "s-rest")}
    branches = (app.stream(src).split(name="s-")
                .branch(lambda k, v: v.startswith("a"), name="a")
                .branch(lambda k, v: len(v) > 5, name="long")
                .default_branch(name="rest"))
    assert sorted(branches) == ["s-a", "s-long", "s-rest"]
    for name, stream in branches.items():
        stream.to(outs[name])
    produce(app, src, [*WORDS, In("d", "fig")])
    result = await run_app(app, list(outs.values()))
    assert result.values("s-a") == ["apple", "avocado"]  # "avocado" is long too: first wins
    assert result.values("s-long") == ["banana", "cherry"]
    assert result.values("s-rest") == ["fig"]


async def test_branch_without_default_drops_records_no_predicate_takes() -> None:
    app = make_app()
    src, _ = topics(app)
    a = app.topic("a", key=str, value=str)
    b = app.topic("b", key=str, value=str)
    first, second = app.stream(src).branch(lambda k, v: k == "a", lambda k, v: k == "b")
    first.to(a)
    second.to(b)
    produce(app, src, WORDS)
    result = await run_app(app, [a, b])
    assert result.values("a") == ["apple", "avocado"]
    assert result.values("b") == ["banana"]


async def test_merge_combines_both_streams() -> None:
    app = make_app()
    left = app.topic("left", key=str, value=str, partitions=2)
    right = app.topic("right", key=str, value=str, partitions=2)
    out = app.topic("merged", key=str, value=str, partitions=2)
    app.stream(left).merge(app.stream(right).map_values(str.upper)).to(out)
    produce(app, left, [In("a", "x", 1.0), In("b", "y", 3.0)])
    produce(app, right, [In("a", "z", 2.0)])
    result = await run_app(app, [out])
    assert sorted(result.pairs("merged")) == [("a", "Z"), ("a", "x"), ("b", "y")]
    by_key_a = [v for k, v in result.pairs("merged") if k == "a"]
    assert by_key_a == ["x", "Z"]  # smallest timestamp first within the task


def test_merge_of_topics_with_different_declared_partitions_is_refused() -> None:
    from aiostreams import CoPartitioningError

    app = make_app()
    left = app.topic("left", key=str, value=str, partitions=2)
    right = app.topic("right", key=str, value=str, partitions=3)
    with pytest.raises(CoPartitioningError, match=r"'left'.*'right'"):
        app.stream(left).merge(app.stream(right))


async def test_through_writes_the_topic_and_continues_from_it() -> None:
    app = make_app()
    src, _ = topics(app)
    mid = app.topic("mid", key=str, value=str, partitions=2)
    out = app.topic("final", key=str, value=str, partitions=2)
    app.stream(src).select_key(lambda k, v: v).through(mid).map_values(str.upper).to(out)
    produce(app, src, WORDS)
    result = await run_app(app, [mid, out])
    assert sorted(result.pairs("mid")) == sorted((r.value, r.value) for r in WORDS)
    assert sorted(result.values("final")) == sorted(r.value.upper() for r in WORDS)
    for p, recs in result.by_partition("final").items():  # partitioned by the new key
        assert {k for k, _, _ in recs} <= {k for q, k, _, _ in result.outputs["mid"] if q == p}


def test_through_needs_a_declared_topic() -> None:
    app = make_app()
    src, _ = topics(app)
    with pytest.raises(TopologyError, match="declared Topic"):
        app.stream(src).through("mid")  # type: ignore[arg-type]


class Tally(Processor[str, str]):
    async def process(self, record: Record[str, str]) -> None:
        store = self.context.store("tally")
        n = (await store.get(record.key) or 0) + 1
        store.put(record.key, n)
        self.context.forward(record.with_value(n))


async def test_process_adds_a_processor_with_its_stores() -> None:
    app = make_app()
    src, out = topics(app)
    spec = StoreSpec("tally", lambda: InMemoryKeyValueStore("tally"), logged=False)
    stream = app.stream(src).process(Tally, stores=[spec], name="tally-proc")
    assert stream.key_changed  # a processor may re-key
    stream.to(out)
    produce(app, src, WORDS)
    result = await run_app(app, [out])
    assert result.values("out") == [1, 1, 1, 2]
    assert result.stores["tally"] == {"a": 2, "b": 1, "c": 1}
    assert "Processor: tally-proc (stores: [tally])" in app.describe()


# -- async steps ------------------------------------------------------------------------


async def test_async_steps_keep_input_order_with_random_delays() -> None:
    app = make_app(max_in_flight=64)
    src, out = topics(app)
    delay = random_yields(7)

    async def upper(v: str) -> str:
        return str(await delay(v)).upper()

    async def not_c(k: str, v: str) -> bool:
        await delay(v)
        return k != "c"

    async def rekey(k: str, v: str) -> tuple[str, str]:
        await delay(v)
        return v, k

    async def twice(v: str) -> list[str]:
        await delay(v)
        return [v, v]

    (app.stream(src).filter_async(not_c).map_values_async(upper).map_async(rekey)
     .flat_map_values_async(twice).to(out))
    records = [In(k, f"{k}{i}") for i in range(30) for k in "abc"]
    produce(app, src, records)
    result = await run_app(app, [out])
    expected = [(f"{k}{i}".upper(), k) for i in range(30) for k in "ab"]
    assert result.pairs("out") == [p for p in expected for _ in range(2)]


async def test_foreach_async_sees_every_record() -> None:
    app = make_app(max_in_flight=16)
    src, _ = topics(app)
    seen: list[str] = []
    delay = random_yields(3)

    async def collect(k: str, v: str) -> None:
        await delay(v)
        seen.append(v)

    app.stream(src).foreach_async(collect)
    produce(app, src, WORDS)
    await run_app(app)
    assert sorted(seen) == sorted(r.value for r in WORDS)


async def test_concurrency_caps_how_many_calls_of_a_step_run_at_once() -> None:
    app = make_app(max_in_flight=256)
    src, out = topics(app)
    running = 0
    peak = 0

    async def slow(v: str) -> str:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        for _ in range(5):
            await asyncio.sleep(0)
        running -= 1
        return v

    app.stream(src).map_values_async(slow, concurrency=3).to(out)
    produce(app, src, [In(f"k{i}", f"v{i}") for i in range(100)])
    result = await run_app(app, [out])
    assert len(result.values("out")) == 100
    assert peak == 3


async def test_step_retry_reruns_a_failing_call_until_it_succeeds() -> None:
    app = make_app()
    src, out = topics(app)
    failures: dict[str, int] = {}

    async def flaky(v: str) -> str:
        if failures.get(v, 0) < 2:
            failures[v] = failures.get(v, 0) + 1
            raise ConnectionError("flaky dependency")
        return v.upper()

    app.stream(src).map_values_async(
        flaky, retry=Retry(attempts=3, backoff=0.0, jitter=0.0), name="flaky").to(out)
    produce(app, src, WORDS)
    result = await run_app(app, [out])
    assert result.values("out") == [r.value.upper() for r in WORDS]
    assert failures == {r.value: 2 for r in WORDS}


async def test_step_retry_timeout_bounds_each_attempt() -> None:
    app = make_app()
    src, out = topics(app)
    calls: list[str] = []
    never = asyncio.Event()

    async def hangs_once(v: str) -> str:
        calls.append(v)
        if calls.count(v) == 1:
            await never.wait()
        return v

    app.stream(src).map_values_async(
        hangs_once, retry=Retry(attempts=2, backoff=0.0, jitter=0.0, timeout=0.02)).to(out)
    produce(app, src, WORDS[:2])
    result = await run_app(app, [out])
    assert result.values("out") == ["apple", "banana"]
    assert sorted(calls) == ["apple", "apple", "banana", "banana"]


async def test_without_retry_a_failing_async_step_fails_the_app() -> None:
    app = make_app()
    src, out = topics(app)

    async def broken(v: str) -> str:
        raise ValueError("boom")

    app.stream(src).map_values_async(broken).to(out)
    produce(app, src, WORDS[:1])
    with pytest.raises(TaskFailedError, match="boom"):
        await run_app(app, [out], timeout=5)


# -- building -----------------------------------------------------------------------------


def test_sync_operations_refuse_coroutine_functions_and_name_the_async_variant() -> None:
    app = make_app()
    src, _ = topics(app)

    async def pred(k: str, v: str) -> bool:
        return True

    with pytest.raises(TopologyError, match="filter_async"):
        app.stream(src).filter(pred)


def test_nodes_get_kafka_like_generated_names_or_the_given_name() -> None:
    app = make_app()
    src, out = topics(app)
    s = app.stream(src).filter(lambda k, v: True).map_values(len, name="lengths")
    s.to(out)
    description = app.describe()
    assert "Source: KSTREAM-SOURCE-0000000000 (topics: [in])" in description
    assert "Processor: KSTREAM-FILTER-0000000001" in description
    assert "Processor: lengths" in description
    assert "Sink: KSTREAM-SINK-0000000003 (topic: out)" in description
    assert s.describe() == description
    with pytest.raises(TopologyError, match="lengths"):
        app.stream(app.topic("other")).map_values(len, name="lengths")


def test_builder_builds_a_topology_from_an_app_id_alone() -> None:
    async def slow(value: str) -> int:
        return len(value)

    topology = Topology()
    retry = Retry(attempts=2)
    builder = StreamsBuilder(topology, "shop")
    (builder.stream("in").map_values_async(slow, retry=retry, name="slow")
     .group_by(lambda _k, n: n, name="by-length").count())
    assert topology.node_retries == {"slow": retry}
    internal = sorted(name for name, t in topology.topics.items() if t.internal)
    assert internal == ["shop-by-length-repartition"]


def test_grouping_a_rekeyed_stream_declares_an_internal_repartition_topic() -> None:
    app = make_app("shop")
    src, _ = topics(app)
    app.stream(src).group_by(lambda k, v: v[0], name="by-letter").count()
    topic = app.topology.topic("shop-by-letter-repartition")
    assert topic is not None and topic.internal and topic.partitions is None
    subs = app.build()
    assert len(subs) == 2
    assert subs[1].source_topics == ("shop-by-letter-repartition",)


def test_grouping_an_unchanged_key_does_not_repartition() -> None:
    app = make_app("shop")
    src, _ = topics(app)
    app.stream(src).filter(lambda k, v: True).group_by_key().count()
    assert len(app.build()) == 1
