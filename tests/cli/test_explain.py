"""``aiostreams explain``: from an output back through repartition topics to the source
record, on the memory broker (the test driver's, and a named one for the command line).
The real broker's run is tests/cli/test_explain_kafka.py."""

from __future__ import annotations

import json
import pickle
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiostreams import App
from aiostreams.cli import main
from aiostreams.commands.explain import (
    ExplainError,
    Made,
    explain,
    recorded_answers,
    render_text,
)
from aiostreams.replay.recording import RecordedAnswer, segment_name
from aiostreams.runtime.lineage import LINEAGE_HEADER, Origin, chain_of
from aiostreams.testing import TopologyTestDriver
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import OutgoingRecord, TopicPartition
from aiostreams.windows import TimeWindowedSerde, TumblingWindows

WINDOW = 10.0


def card_counts(name: str = "fraud", **settings: Any) -> tuple[App, Any, Any]:
    """Payments keyed by id, regrouped by card (a repartition topic), counted per card in
    tumbling windows: the output of a windowed aggregate behind a repartition topic."""
    app = App(name, broker=f"memory://{uuid.uuid4().hex}", lineage=True, **settings)
    payments = app.topic("payments", key=str, value="json", partitions=2)
    out = app.topic("card-counts", key=TimeWindowedSerde(str, size=WINDOW), value=int,
                    partitions=2)
    (app.stream(payments).group_by(lambda _k, p: p["card"], name="by-card")
     .windowed_by(TumblingWindows(WINDOW, grace=100.0)).count(materialized="per-card")
     .to_stream().to(out))
    return app, payments, out


async def test_explain_walks_a_windowed_count_behind_a_repartition_topic_to_its_source(
        ) -> None:
    app, payments, out = card_counts()
    async with TopologyTestDriver(app) as driver:
        for i, card in enumerate(["c1", "c2", "c1", "c1"]):
            driver.pipe_input(payments, f"p{i}", {"card": card, "amount": i}, float(i),
                              partition=i % 2)
        await driver.process_all()
        outputs = driver.read_raw_output(out)
        third = next(r for r in outputs
                     if out.value_serde.deserialize(out.name, r.value) == 3)
        steps = await explain(MemoryTransport(driver.broker),
                              Origin(third.topic, third.partition, third.offset), app=app)
    output, repartitioned, source = steps
    assert source.at == Origin("payments", 1, 1)  # p3: the third payment of card c1
    assert (source.key, source.came_from, source.made) == ("p3", None, None)
    assert repartitioned.at.topic == "fraud-by-card-repartition"
    assert repartitioned.came_from == source.at and repartitioned.key == "c1"
    assert output.came_from == repartitioned.at and output.key.key == "c1"
    assert chain_of(third.headers) == [repartitioned.at, source.at]  # the whole chain
    # the processors: which sub-topology read each input, from its source to the sink
    assert output.made is not None and repartitioned.made is not None
    assert output.made == Made(1, ["by-card-source", "KSTREAM-AGGREGATE-0000000005",
                                   "KSTREAM-SINK-0000000006"])
    assert repartitioned.made == Made(0, ["KSTREAM-SOURCE-0000000000",
                                          "KSTREAM-KEY-SELECT-0000000001", "by-card-sink"])
    assert repartitioned.made.subtopology != output.made.subtopology
    text = render_text(steps)
    assert f"<- payments[1]@1 through sub-topology {repartitioned.made.subtopology}: " in text
    assert text.splitlines()[-1].endswith("(source: no lineage header)")


@settings(max_examples=20, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(payments=st.lists(st.tuples(st.sampled_from(["c1", "c2", "c3", "c4"]),
                                   st.integers(0, 3), st.integers(0, 40)),
                         min_size=1, max_size=25),
       max_in_flight=st.sampled_from([1, 8, 1000]))
async def test_every_output_chain_ends_at_a_real_source_record_of_its_group(
        payments: list[tuple[str, int, int]], max_in_flight: int) -> None:
    app, topic, out = card_counts(max_in_flight=max_in_flight)
    async with TopologyTestDriver(app) as driver:
        for i, (card, partition, ts) in enumerate(payments):
            driver.pipe_input(topic, f"p{i}", {"card": card, "n": i}, float(ts),
                              partition=partition % 2)
        await driver.process_all()
        outputs = driver.read_raw_output(out)
        sources = {(r.partition, r.offset): r for r in driver.broker.records("payments")}
        transport = MemoryTransport(driver.broker)
        assert len(outputs) == len(payments)  # one update per payment (none is late)
        named = set()
        for record in outputs:
            steps = await explain(transport, Origin(out.name, record.partition,
                                                    record.offset), app=app)
            source = steps[-1]
            assert [s.at.topic for s in steps] == [
                out.name, "fraud-by-card-repartition", "payments"]
            raw = sources[(source.at.partition, source.at.offset)]
            value = topic.value_serde.deserialize("payments", raw.value)
            window = out.key_serde.deserialize(out.name, record.key)
            assert value["card"] == window.key
            assert window.start <= raw.timestamp < window.start + WINDOW
            named.add(source.at)
    assert len(named) == len(payments)  # each payment made exactly one of the updates


async def test_explain_without_a_lineage_header_asks_whether_lineage_was_on() -> None:
    app, payments, out = card_counts()
    app.settings = app.settings.model_copy(update={"lineage": False})
    async with TopologyTestDriver(app) as driver:
        driver.pipe_input(payments, "p0", {"card": "c1"}, 1.0)
        await driver.process_all()
        [record] = driver.read_raw_output(out)
        assert record.headers == ()
        with pytest.raises(ExplainError, match="no aiostreams-lineage header: was lineage "
                                               "on when it was written"):
            await explain(MemoryTransport(driver.broker),
                          Origin(out.name, record.partition, record.offset))


async def test_explain_says_an_output_past_the_end_or_in_no_partition_is_not_found() -> None:
    app, payments, out = card_counts()
    async with TopologyTestDriver(app) as driver:
        driver.pipe_input(payments, "p0", {"card": "c1"}, 1.0)
        await driver.process_all()
        [record] = driver.read_raw_output(out)
        transport = MemoryTransport(driver.broker)
        with pytest.raises(ExplainError, match=r"offset 7 is past the end of card-counts-"):
            await explain(transport, Origin(out.name, record.partition, 7))
        with pytest.raises(ExplainError, match="no partition 5"):
            await explain(transport, Origin(out.name, 5, 0))


async def test_explain_goes_past_a_purged_repartition_record_on_the_outputs_chain() -> None:
    app, payments, out = card_counts()
    async with TopologyTestDriver(app) as driver:
        driver.pipe_input(payments, "p0", {"card": "c1"}, 1.0, partition=1)
        await driver.process_all()
        [record] = driver.read_raw_output(out)
        transport = MemoryTransport(driver.broker)
        admin = transport.admin()
        await admin.delete_records({TopicPartition("fraud-by-card-repartition", 0): 1})
        steps = await explain(transport, Origin(out.name, record.partition, record.offset),
                              app=app)
    _, purged, source = steps
    assert purged.at == Origin("fraud-by-card-repartition", 0, 0)
    assert purged.missing is not None and "deleted" in purged.missing
    assert purged.came_from == source.at == Origin("payments", 1, 0)
    assert purged.made == Made(0, ["KSTREAM-SOURCE-0000000000",
                                   "KSTREAM-KEY-SELECT-0000000001", "by-card-sink"])
    assert (source.key, source.came_from) == ("p0", None)
    assert "fraud-by-card-repartition[0]@0  (not readable: " in render_text(steps)


def write_recording(directory: Path, answers: list[RecordedAnswer]) -> None:
    directory.mkdir()
    (directory / segment_name(1)).write_text("".join(a.to_line() + "\n" for a in answers))


async def test_explain_shows_the_service_answers_recorded_for_each_input_record(
        tmp_path: Path) -> None:
    app, payments, out = card_counts()
    async with TopologyTestDriver(app) as driver:
        driver.pipe_input(payments, "p0", {"card": "c1"}, 1.0, partition=0)
        await driver.process_all()
        [record] = driver.read_raw_output(out)
        write_recording(tmp_path / "rec", [
            RecordedAnswer("risk", "payments", 0, 0, 0, None, pickle.dumps({"score": 0.9}),
                           None, 0.012),
            RecordedAnswer("risk", "payments", 0, 0, 1, "k", None, "TimeoutError: slow",
                           2.0),
            RecordedAnswer("risk", "payments", 0, 1, 0, None, pickle.dumps(1), None, 0.1)])
        steps = await explain(MemoryTransport(driver.broker),
                              Origin(out.name, record.partition, record.offset), app=app,
                              answers=recorded_answers(str(tmp_path / "rec")))
    assert [len(s.answers) for s in steps] == [0, 0, 2]
    text = render_text(steps)
    assert "  answer: service 'risk' call #0: value={\"score\": 0.9} (12.0 ms)" in text
    assert "  answer: service 'risk' call #1 request='k': error=TimeoutError: slow " \
           "(2000.0 ms)" in text


def test_the_command_prints_the_chain_as_text_and_json(capsys: pytest.CaptureFixture[str],
                                                       tmp_path: Path) -> None:
    broker = f"lineage-cli-{uuid.uuid4().hex[:8]}"
    memory = MemoryBroker.named(broker)
    memory.create_topic("in", 1)
    memory.create_topic("out", 1)
    memory.append([(OutgoingRecord("in", b"k", b"v", 1.0), 0),
                   (OutgoingRecord("out", b"K", b"V", 2.0, ((LINEAGE_HEADER, b"in:0:0"),)),
                    0)])
    where = ("--broker", f"memory://{broker}")
    assert main(["explain", "out", "0", "0", *where]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith('out[0]@0  key="K"  ')
    assert lines[1] == "  <- in[0]@0"
    assert lines[2].startswith('in[0]@0  key="k"  ') and lines[2].endswith(
        "(source: no lineage header)")
    assert main(["explain", "out", "0", "0", "--json", *where]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [(s["topic"], s["offset"], s["came_from"]) for s in data["steps"]] == [
        ("out", 0, {"topic": "in", "partition": 0, "offset": 0}), ("in", 0, None)]
    assert main(["explain", "in", "0", "0", *where]) == 1
    assert "was lineage on when it was written?" in capsys.readouterr().err
    assert main(["explain", "out", "0", "0", "--recording", str(tmp_path / "x"),
                 *where]) == 1
    assert "no recording at" in capsys.readouterr().err


async def test_explain_shows_the_answers_an_app_recorded_for_the_payment_behind_a_count(
        tmp_path: Path) -> None:
    app = App("scored", broker=f"memory://{uuid.uuid4().hex}", lineage=True,
              record_services_dir=str(tmp_path / "rec"))
    payments = app.topic("payments", key=str, value="json")
    out = app.topic("risky", key=str, value=int)
    risk = app.service("risk")

    async def score(payment: dict[str, Any]) -> dict[str, Any]:
        return {**payment, "risk": payment["amount"] / 100}

    (app.stream(payments).map_values_async(score, service=risk)
     .filter(lambda _k, p: p["risk"] > 0.5)
     .group_by(lambda _k, p: p["card"], name="by-card").count().to_stream().to(out))
    async with TopologyTestDriver(app) as driver:
        for i, amount in enumerate([20, 70, 90]):
            driver.pipe_input(payments, f"p{i}", {"card": "c1", "amount": amount}, float(i))
        await driver.process_all()
        await driver.commit()  # the recording is written as the records' outputs are
        outputs = driver.read_raw_output(out)
        last = outputs[-1]
        steps = await explain(MemoryTransport(driver.broker),
                              Origin(out.name, last.partition, last.offset), app=app,
                              answers=recorded_answers(str(tmp_path / "rec")))
    assert len(outputs) == 2  # p1 and p2 are risky
    source = steps[-1]
    assert (source.at, source.key) == (Origin("payments", 0, 2), "p2")
    [answer] = source.answers
    assert (answer.service, answer.index) == ("risk", 0)
    assert answer.answer() == {"card": "c1", "amount": 90, "risk": 0.9}
    assert "  answer: service 'risk' call #0: value={\"card\": \"c1\", \"amount\": 90, " \
           "\"risk\": 0.9} (" in render_text(steps)


@pytest.mark.parametrize("purged", [False, True])
async def test_explain_finds_the_answers_of_a_call_behind_a_repartition_by_origin(
        tmp_path: Path, purged: bool) -> None:
    """A call after a group_by is recorded under the payment it came from and a path
    (runtime.origin); explain shows it at the repartition record's step, read or purged."""
    app = App("scored", broker=f"memory://{uuid.uuid4().hex}", lineage=True,
              record_services_dir=str(tmp_path / "rec"))
    payments = app.topic("payments", key=str, value="json", partitions=2)
    out = app.topic("card-risk", key=str, value="json")
    risk = app.service("risk")

    async def score(count: int | None) -> dict[str, Any]:
        return {"count": count, "risk": (count or 0) / 10}

    (app.stream(payments).group_by(lambda _k, p: p["card"], name="by-card").count()
     .to_stream().map_values_async(score, service=risk).to(out))
    async with TopologyTestDriver(app) as driver:
        for i, card in enumerate(["c1", "c2", "c1"]):
            driver.pipe_input(payments, f"p{i}", {"card": card}, float(i), partition=i % 2)
        await driver.process_all()
        await driver.commit()  # the recording is written as the records' outputs are
        [last] = [r for r in driver.read_raw_output(out)
                  if r.key == b"c1" and json.loads(r.value or b"")["count"] == 2]
        transport = MemoryTransport(driver.broker)
        if purged:
            ends = {}
            for r in driver.broker.records("scored-by-card-repartition"):
                ends[TopicPartition(r.topic, r.partition)] = r.offset + 1
            await transport.admin().delete_records(ends)
        steps = await explain(transport, Origin(out.name, last.partition, last.offset),
                              app=app, answers=recorded_answers(str(tmp_path / "rec")))
    output, behind, source = steps
    assert (behind.missing is not None) == purged
    assert behind.at.topic == "scored-by-card-repartition"
    assert (source.at, source.key) == (Origin("payments", 0, 1), "p2")
    [answer] = behind.answers
    assert (answer.service, answer.topic, answer.offset, answer.path) == (
        "risk", "payments", 1, "0")
    assert answer.answer() == {"count": 2, "risk": 0.2}
    assert output.answers == [] and source.answers == []


async def test_a_purged_record_of_a_fan_out_finds_its_answers_through_the_next_ones_header(
        tmp_path: Path) -> None:
    """A payment fanned out to two records, each read back and scored, then re-keyed
    through a second repartition: with the first repartition purged, the scored record's
    place is the parent of the second one's (its depth alone names two paths)."""
    app = App("fanned", broker=f"memory://{uuid.uuid4().hex}", lineage=True,
              record_services_dir=str(tmp_path / "rec"))
    payments = app.topic("payments", key=str, value=int, partitions=1)
    out = app.topic("scores", key=str, value=int)
    risk = app.service("risk")

    async def score(value: int) -> int:
        return value * 10

    (app.stream(payments).flat_map(lambda k, v: [(f"{k}-a", v), (f"{k}-b", v + 1)])
     .repartitioned(name="fan").map_values_async(score, service=risk)
     .select_key(lambda k, v: f"s{v}").repartitioned(name="rekey").to(out))
    async with TopologyTestDriver(app) as driver:
        driver.pipe_input(payments, "p0", 4, 1.0)
        await driver.process_all()
        await driver.commit()
        [b] = [r for r in driver.read_raw_output(out) if r.key == b"s50"]
        transport = MemoryTransport(driver.broker)
        ends = {TopicPartition(r.topic, r.partition): r.offset + 1
                for r in driver.broker.records("fanned-fan-repartition")}
        await transport.admin().delete_records(ends)
        steps = await explain(transport, Origin(out.name, b.partition, b.offset), app=app,
                              answers=recorded_answers(str(tmp_path / "rec")))
    _, rekeyed, fanned, source = steps
    assert fanned.missing is not None and rekeyed.missing is None
    assert source.at == Origin("payments", 0, 0)
    [answer] = fanned.answers
    assert (answer.path, answer.answer()) == ("1", 50)
