"""TopologyTestDriver: real tasks on a private broker, time moved only by the test."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from aiostreams import App, Processor, PunctuationType, Record, TaskFailedError, Topic, Topology
from aiostreams.serde import StrSerde
from aiostreams.state import kv_store
from aiostreams.testing import ManualClock, Sequencer, TopologyTestDriver
from aiostreams.types import TopicPartition

START = 1_700_000_000.0
REPO = Path(__file__).resolve().parent.parent


class Counter(Processor[str, str]):
    """Counts records per key in the store "counts" and forwards ``(key, count)``.

    Every 10 s of stream time it sends ``("stream", <total count>)`` to "ticks", and every
    60 s of wall-clock time ``("wall", <number of keys>)``, each stamped with the time the
    punctuation fired for."""

    async def init(self, context: Any) -> None:
        await super().init(context)
        self.counts = context.store("counts")
        context.schedule(10.0, self.on_stream_time, PunctuationType.STREAM_TIME)
        context.schedule(60.0, self.on_wall_clock, "wall_clock")

    async def process(self, record: Record[str, str]) -> None:
        count = (await self.counts.get(record.key) or 0) + 1
        self.counts.put(record.key, count)
        self.context.forward(record.with_value(count))

    async def on_stream_time(self, at: float) -> None:
        total = sum([v async for _, v in self.counts.range()])
        self.context.send("ticks", "stream", total, timestamp=at)

    async def on_wall_clock(self, at: float) -> None:
        keys = len([k async for k, _ in self.counts.range()])
        self.context.send("ticks", "wall", keys, timestamp=at)


def counting_app(**settings: Any) -> App:
    app = App("counting", **settings)
    app.topic("words", key=str, value=str)
    app.topic("counts", key=str, value=int)
    app.topic("ticks", key=str, value=int)
    app.topology.add_source("src", "words").add_processor(
        "count", Counter, "src").add_sink("out", "counts", "count")
    app.topology.add_store(kv_store("counts", key_serde=str, value_serde=int), "count")
    return app


def pairs(records: list[Record[Any, Any]]) -> list[tuple[Any, Any]]:
    return [(r.key, r.value) for r in records]


async def test_outputs_and_store_follow_the_piped_input() -> None:
    async with TopologyTestDriver(counting_app()) as driver:
        driver.pipe_inputs("words", [("a", "x", 1.0), ("b", "y", 2.0), ("a", "z", 3.0)])
        await driver.process_all()
        assert pairs(driver.read_output("counts")) == [("a", 1), ("b", 1), ("a", 2)]
        assert driver.read_output("counts") == []  # read_output consumes what it returns
        assert driver.store("counts") == {"a": 2, "b": 1}
        driver.pipe_input("words", "b", "w", timestamp=4.0)
        await driver.process_all()
        assert pairs(driver.read_output("counts")) == [("b", 2)]
        assert driver.store("counts") == {"a": 2, "b": 2}


async def test_a_driver_commit_reaches_the_apps_commit_listeners_and_log() -> None:
    """``app.on_commit`` listeners and ``app.commit_log`` see a driver's commits as they
    see a run's."""
    app = counting_app()
    heard: list[dict[TopicPartition, int]] = []
    app.on_commit(lambda entry: heard.append(dict(entry.offsets)))
    async with TopologyTestDriver(app) as driver:
        driver.pipe_inputs("words", [("a", "x", 1.0), ("b", "y", 2.0)])
        await driver.process_all()
        committed = await driver.commit()
    assert committed == {TopicPartition("words", 0): 2}
    assert heard == [committed]
    assert [dict(entry.offsets) for entry in app.commit_log] == [committed]


async def test_stream_time_punctuation_fires_as_input_timestamps_pass_its_interval() -> None:
    async with TopologyTestDriver(counting_app()) as driver:
        driver.pipe_inputs("words", [("a", "x", 100.0), ("b", "y", 105.0)])
        await driver.process_all()
        assert driver.read_output("ticks") == []  # stream time 105 < first due 110
        driver.pipe_input("words", "a", "z", timestamp=110.0)
        await driver.process_all()
        ticks = driver.read_output("ticks")
        # fired at stream time 110, after the record that moved stream time there
        assert [(r.key, r.value, r.timestamp) for r in ticks] == [("stream", 3, 110.0)]
        driver.pipe_input("words", "c", "late", timestamp=50.0)  # late: stream time stays
        await driver.process_all()
        assert driver.read_output("ticks") == []


async def test_wall_clock_punctuation_fires_only_when_the_test_advances_the_clock() -> None:
    async with TopologyTestDriver(counting_app(), start_time=START) as driver:
        driver.pipe_inputs("words", [("a", "x", 1.0), ("b", "y", 2.0)])
        await driver.process_all()
        await driver.advance_wall_clock(59.0)
        assert driver.read_output("ticks") == []
        await driver.advance_wall_clock(1.0)
        assert [(r.key, r.value, r.timestamp) for r in driver.read_output("ticks")] == [
            ("wall", 2, START + 60)]
        driver.pipe_input("words", "c", "z", timestamp=3.0)
        await driver.process_all()
        driver.read_output("counts")
        await driver.advance_wall_clock(125.0)  # two due times on the way, each its own
        assert [(r.value, r.timestamp) for r in driver.read_output("ticks")] == [
            (3, START + 120), (3, START + 180)]


async def test_retry_backoff_waits_for_the_wall_clock() -> None:
    attempts: list[str] = []

    class Flaky(Processor[str, str]):
        def process(self, record: Record[str, str]) -> None:
            attempts.append(record.value)
            if len(attempts) < 3:
                raise ConnectionError("the service is down")
            self.context.forward(record)

    app = App("flaky", retry_attempts=3, retry_backoff=5.0, retry_max_backoff=5.0)
    app.topic("in", key=str, value=str)
    app.topic("out", key=str, value=str)
    app.topology.add_source("src", "in").add_processor("flaky", Flaky, "src").add_sink(
        "sink", "out", "flaky")
    async with TopologyTestDriver(app) as driver:
        driver.pipe_input("in", "k", "v")
        await driver.process_all()
        assert attempts == ["v"]
        assert driver.read_output("out") == []
        assert sum(t.in_flight for t in driver.tasks.values()) == 1
        await driver.advance_wall_clock(30.0)  # backoff <= 7.5 s (5 s, jitter 50%), twice
        assert attempts == ["v", "v", "v"]
        assert pairs(driver.read_output("out")) == [("k", "v")]
        assert sum(t.metrics.retries for t in driver.tasks.values()) == 2


async def test_failed_records_go_to_the_dead_letter_topic_with_their_origin() -> None:
    class Picky(Processor[str, str]):
        def process(self, record: Record[str, str]) -> None:
            if record.value == "bad":
                raise ValueError("bad value")
            self.context.forward(record)

    topology = Topology()
    topology.add_source("src", "in", key_serde=str, value_serde=str).add_processor(
        "picky", Picky, "src").add_sink("sink", "out", "picky", key_serde=str,
                                        value_serde=str)
    async with TopologyTestDriver(topology, {"dead_letter_topic": "dlq"},
                                  app_id="picky") as driver:
        driver.pipe_inputs("in", [("k1", "good"), ("k2", "bad"), ("k3", "good")])
        driver.pipe_raw_input("in", b"k4", b"\xff\xfe not utf-8")
        await driver.process_all()
        assert pairs(driver.read_output("out")) == [("k1", "good"), ("k3", "good")]
        letters = driver.read_raw_output("dlq")
        assert [(r.key, r.value) for r in letters] == [(b"k2", b"bad"),
                                                       (b"k4", b"\xff\xfe not utf-8")]
        headers = dict(letters[0].headers)
        assert headers["aiostreams.dlq.exception"] == b"ValueError"
        assert headers["aiostreams.dlq.topic"] == b"in"
        assert headers["aiostreams.dlq.offset"] == b"1"
        assert headers["aiostreams.dlq.processor"] == b"picky"
        assert await driver.commit() == {TopicPartition("in", 0): 4}
        assert driver.committed("in", 0) == 4


async def test_pipe_input_through_a_raw_topic_view_dead_letters_undecodable_bytes() -> None:
    """``Topic.of(name, key=str, value=bytes)`` is the raw view the guide gives for
    ``app.send``: the driver serializes with the view's serdes, not the source's."""
    app = App("raw-view", broker="memory://", dead_letter_topic="dlq")
    words = app.topic("words", key=str, value=str)
    app.stream(words).map_values(str.upper).to(app.topic("upper", key=str, value=str))
    raw = Topic.of("words", key=str, value=bytes)
    async with TopologyTestDriver(app) as driver:
        driver.pipe_input(raw, "bad", b"\xff\xfe not utf-8")
        driver.pipe_input(words, "good", "hello")
        driver.pipe_inputs(raw, [("raw", b"bytes")])
        await driver.process_all()
        assert pairs(driver.read_output(Topic.of("upper", key=str, value=bytes))) == [
            ("good", b"HELLO"), ("raw", b"BYTES")]
        assert [(r.key, r.value) for r in driver.read_raw_output(Topic.of("dlq"))] == [
            (b"bad", b"\xff\xfe not utf-8")]


async def test_a_value_the_sinks_serde_cannot_write_is_dead_lettered_naming_the_sink() -> None:
    class Mistyped(Processor[str, str]):
        def process(self, record: Record[str, str]) -> None:
            # an int for a str topic, or text UTF-8 cannot encode: both the sink's to refuse
            value: Any = {"int": 5, "surrogate": "a\ud800"}.get(record.value, record.value)
            self.context.forward(record.with_value(value))

    topology = Topology()
    topology.add_source("src", "in", key_serde=str, value_serde=str).add_processor(
        "mistyped", Mistyped, "src").add_sink("sink", "out", "mistyped", key_serde=str,
                                              value_serde=str)
    async with TopologyTestDriver(topology, {"dead_letter_topic": "dlq"},
                                  app_id="mistyped") as driver:
        driver.pipe_inputs("in", [("k1", "ok"), ("k2", "int"), ("k3", "surrogate"),
                                  ("k4", "fine")])
        await driver.process_all()
        assert pairs(driver.read_output("out")) == [("k1", "ok"), ("k4", "fine")]
        letters = driver.read_raw_output("dlq")
        assert [(r.key, r.value) for r in letters] == [(b"k2", b"int"), (b"k3", b"surrogate")]
        for letter in letters:
            headers = dict(letter.headers)
            assert headers["aiostreams.dlq.exception"] == b"aiostreams.errors.SerializationError"
            assert headers["aiostreams.dlq.processor"] == b"sink"
        assert b"StrSerde takes a str, got int" in dict(letters[0].headers)[
            "aiostreams.dlq.message"]
        assert b"cannot encode 'a\\ud800' as UTF-8" in dict(letters[1].headers)[
            "aiostreams.dlq.message"]


async def test_a_serde_subclass_overriding_deserialize_is_called_not_bypassed() -> None:
    class Shouting(StrSerde):
        def deserialize(self, topic: str, data: bytes | None) -> str | None:
            text = super().deserialize(topic, data)
            return None if text is None else text.upper()

    topology = Topology()
    topology.add_source("src", "in", key_serde=str, value_serde=Shouting()).add_sink(
        "sink", "out", "src", key_serde=str, value_serde=str)
    async with TopologyTestDriver(topology) as driver:
        driver.pipe_inputs("in", [("k1", "quiet"), ("k2", "words")])
        await driver.process_all()
        assert pairs(driver.read_output("out")) == [("k1", "QUIET"), ("k2", "WORDS")]


async def test_a_task_failure_is_raised_by_process_all_and_nothing_past_it_commits() -> None:
    class Boom(Processor[str, str]):
        def process(self, record: Record[str, str]) -> None:
            if record.value == "boom":
                raise RuntimeError("boom")
            self.context.forward(record)

    topology = Topology()
    topology.add_source("src", "in", key_serde=str, value_serde=str).add_processor(
        "boom", Boom, "src").add_sink("sink", "out", "boom", key_serde=str, value_serde=str)
    driver = TopologyTestDriver(topology)
    await driver.start()
    try:
        driver.pipe_inputs("in", [("a", "ok"), ("b", "boom"), ("c", "ok")])
        with pytest.raises(TaskFailedError, match=r"processor 'boom' failed on in\[0\]@1"):
            await driver.process_all()
        with pytest.raises(RuntimeError, match="the driver failed"):
            driver.pipe_input("in", "d", "ok")
    finally:
        await driver.close()
    assert pairs(driver.read_output("out")) == [("a", "ok")]


async def test_out_of_order_completion_still_retires_in_order() -> None:
    sequencer = Sequencer()

    class Slow(Processor[str, str]):
        async def process(self, record: Record[str, str]) -> None:
            await sequencer.wait(record.key)
            self.context.forward(record.with_value(record.value.upper()))

    topology = Topology()
    topology.add_source("src", "in", key_serde=str, value_serde=str).add_processor(
        "slow", Slow, "src").add_sink("sink", "out", "slow", key_serde=str, value_serde=str)
    async with TopologyTestDriver(topology) as driver:
        driver.pipe_inputs("in", [("a", "first"), ("b", "second")])
        processing = asyncio.create_task(driver.process_all())
        await sequencer.wait_started("a")
        await sequencer.wait_started("b")
        sequencer.release("b")  # the later record finishes first ...
        sequencer.release("a")
        await processing
        # ... and still comes out second
        assert pairs(driver.read_output("out")) == [("a", "FIRST"), ("b", "SECOND")]


async def test_keys_land_on_the_partition_kafka_would_choose() -> None:
    from aiostreams.transport.partitioner import default_partition

    app = App("spread")
    app.topic("in", key=str, value=str, partitions=3)
    app.topic("out", key=str, value=str, partitions=3)
    app.topology.add_source("src", "in").add_sink("sink", "out", "src")
    async with TopologyTestDriver(app) as driver:
        assert sorted(driver.tasks) == ["0_0", "0_1", "0_2"]
        driver.pipe_inputs("in", [(f"k{i}", f"v{i}") for i in range(12)])
        await driver.process_all()
        out = driver.read_output("out")
        assert sorted(r.value for r in out) == sorted(f"v{i}" for i in range(12))
        for r in out:
            assert r.partition == default_partition(r.key.encode(), 3, counter=iter(()))


async def test_dsl_aggregation_through_a_repartition_topic() -> None:
    app = App("words")
    lines = app.topic("lines", key=str, value=str, partitions=2)
    counts = app.topic("word-counts", key=str, value=int, partitions=2)
    (app.stream(lines).flat_map_values(str.split).group_by(lambda _, word: word)
     .count(materialized="counts").to_stream().to(counts))
    async with TopologyTestDriver(app) as driver:
        driver.pipe_inputs("lines", [("1", "the cat"), ("2", "the dog")])
        await driver.process_all()
        assert sorted(pairs(driver.read_output("word-counts"))) == [
            ("cat", 1), ("dog", 1), ("the", 1), ("the", 2)]
        assert driver.store("counts") == {"the": 2, "cat": 1, "dog": 1}


async def test_read_output_says_when_input_was_not_processed_yet() -> None:
    async with TopologyTestDriver(counting_app()) as driver:
        driver.pipe_input("words", "a", "x")
        with pytest.raises(RuntimeError, match=r"await driver.process_all\(\)"):
            driver.read_output("counts")
        with pytest.raises(Exception, match="not read by the topology"):
            driver.pipe_input("counts", "a", 1)
        with pytest.raises(KeyError, match="the topology's stores: \\['counts'\\]"):
            driver.store("nope")


def test_testing_module_exports_the_driver_and_the_clock() -> None:
    import aiostreams.testing as testing

    assert set(testing.__all__) >= {"TopologyTestDriver", "ManualClock", "Sequencer",
                                    "settle"}
    assert ManualClock is testing.ManualClock


def test_pytest_plugin_is_registered_as_an_entry_point() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert project["project"]["entry-points"]["pytest11"] == {
        "aiostreams": "aiostreams.pytest_plugin"}


PLUGIN_USER = '''
from aiostreams import App, Topology

async def test_fixtures(memory_broker, make_app, topology_driver):
    app = make_app("plugin-user", commit_interval_ms=10)
    assert app.transport.broker is memory_broker
    app.topic("in", key=str, value=str, partitions=1)
    app.topic("out", key=str, value=str)
    app.topology.add_source("src", "in").add_sink("sink", "out", "src")
    driver = await topology_driver(app)
    driver.pipe_input("in", "k", "v")
    await driver.process_all()
    assert [(r.key, r.value) for r in driver.read_output("out")] == [("k", "v")]

    topology = Topology()
    topology.add_source("src", "in", key_serde=str, value_serde=str)
    topology.add_sink("sink", "out", "src", key_serde=str, value_serde=str)
    other = await topology_driver(topology, {"default_partitions": 2})
    assert len(other.tasks) == 2
'''


def test_pytest_plugin_fixtures_work_in_a_project_that_uses_them(tmp_path: Path) -> None:
    from importlib.metadata import entry_points

    (tmp_path / "test_user.py").write_text(PLUGIN_USER)
    installed = any(ep.value == "aiostreams.pytest_plugin"
                    for ep in entry_points(group="pytest11"))
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               "-o", "asyncio_mode=auto", "-o", "asyncio_default_fixture_loop_scope=function",
               str(tmp_path / "test_user.py")]
    if not installed:  # a source checkout: load the plugin as the entry point would
        command[3:3] = ["-p", "aiostreams.pytest_plugin"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
