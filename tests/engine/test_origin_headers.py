"""The origin header (aiostreams/runtime/origin.py): a record written to a topic the app
reads back names its source record and path while the app records or is replayed; every
output does in a replay; processors, stores and changelogs never see it; off, nothing is
added."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiostreams import App
from aiostreams.runtime.external_record import RECORDED_ANSWERS, ExternalRecord
from aiostreams.runtime.lineage import LINEAGE_HEADER
from aiostreams.runtime.origin import (
    ORIGIN_HEADER,
    OriginMarks,
    OriginMode,
    Place,
    origin_value,
    parse_origin,
    place_in,
    with_origin,
    without_origin,
)
from aiostreams.testing import TopologyTestDriver
from aiostreams.topology.processor import Processor
from aiostreams.types import OutgoingRecord, RawRecord, Record, TopicPartition

places = st.builds(Place, st.text("abcXYZ019._-", min_size=1, max_size=30),
                   st.integers(0, 2**31 - 1), st.integers(0, 2**63 - 1),
                   st.lists(st.integers(0, 999), max_size=5).map(
                       lambda steps: ".".join(map(str, steps))))


@settings(max_examples=50)
@given(place=places, ordinal=st.integers(0, 10_000),
       others=st.lists(st.tuples(st.sampled_from(["a", "b", ORIGIN_HEADER, LINEAGE_HEADER]),
                                 st.binary(max_size=8)), max_size=4))
def test_a_place_reads_back_as_written_after_the_lineage_header_keeping_the_others(
        place: Place, ordinal: int, others: list[tuple[str, bytes]]) -> None:
    assert parse_origin(origin_value(place)) == place
    assert place.child(ordinal).parent() == place
    stamped = with_origin(tuple(others), origin_value(place))
    assert [n for n, _ in stamped].count(ORIGIN_HEADER) == 1
    assert place_in(stamped) == place
    rest = [h for h in others if h[0] != ORIGIN_HEADER]
    at = 1 if rest and rest[0][0] == LINEAGE_HEADER else 0
    assert stamped[at] == (ORIGIN_HEADER, origin_value(place))
    assert list(without_origin(stamped)) == rest


@pytest.mark.parametrize("value", [b"in/0", b"/0/1", b"in/x/1", b"in/0/1/a.b", b"in/0/1/2/3",
                                   b"in/0/1/1..2"])
def test_a_malformed_origin_header_is_refused_naming_the_expected_form(value: bytes) -> None:
    with pytest.raises(ValueError, match="header"):
        parse_origin(value)


def outs(*topics: str) -> list[Any]:
    """Outputs as a dead letter makes them: with the input's headers (a stale origin)."""
    return [OutgoingRecord(t, b"k", b"v", 1.0, ((ORIGIN_HEADER, b"in/2/7/3"), ("user", b"u")))
            for t in topics]


@pytest.mark.parametrize("mode", list(OriginMode))
def test_only_outputs_to_topics_read_back_count_toward_the_path(mode: OriginMode) -> None:
    raw = RawRecord("rep-a", 1, 40, 1.0, b"k", b"v", ((ORIGIN_HEADER, b"in/2/7/3"),))
    answer = ExternalRecord(RECORDED_ANSWERS, TopicPartition("rep-a", 1), 40, "svc", None, 1.0)
    outputs = [*outs("out"), answer, *outs("rep-b", "out", "rep-c", "rep-b")]
    OriginMarks(mode, frozenset({"rep-a", "rep-b", "rep-c"})).stamp(raw, outputs, 0)
    named = [str(place_in(o.headers)) if isinstance(o, OutgoingRecord) else "answer"
             for o in outputs]
    own = "in[2]@7/3" if mode is OriginMode.REPLAY else "None"
    assert named == [own, "answer", "in[2]@7/3.0", own, "in[2]@7/3.1", "in[2]@7/3.2"]
    assert all(o.headers[-1] == ("user", b"u") for o in outputs if o is not answer)


def regroup(**settings: Any) -> tuple[App, list[Any]]:
    """in -> re-keyed by value -> (repartition) -> a processor noting the headers it sees ->
    per-key count (a logged store) -> out."""
    app = App(f"org-{uuid.uuid4().hex[:8]}", broker=f"memory://{uuid.uuid4().hex}",
              **settings)
    seen: list[Any] = []

    class Note(Processor[str, int]):
        async def init(self, ctx: Any) -> None:
            self.ctx = ctx

        def process(self, record: Record[str, int]) -> None:  # type: ignore[override]
            seen.append(record.headers)
            self.ctx.forward(record)

    src = app.topic("in", key=str, value=int, partitions=2)
    out = app.topic("out", key=str, value=int, partitions=1)
    (app.stream(src).select_key(lambda _k, v: f"r{v % 2}").repartitioned(name="by-r")
     .process(Note).group_by_key().count().to_stream().to(out))
    return app, seen


def origin_marks_by_topic(driver: TopologyTestDriver) -> dict[str, list[str]]:
    return {t: [v.decode() for r in driver.broker.records(t) for n, v in r.headers
                if n == ORIGIN_HEADER and v is not None]
            for t in driver.broker.topic_names()}


async def test_an_app_neither_recording_nor_replayed_adds_no_origin_header(tmp_path: Any) -> None:
    app, _ = regroup()
    async with TopologyTestDriver(app) as driver:
        for i in range(4):
            driver.pipe_input("in", f"k{i}", i, float(i), partition=i % 2)
        await driver.process_all()
        assert app.inspect().task_settings().origins is None
        assert not any(origin_marks_by_topic(driver).values())


@pytest.mark.parametrize("replayed", [False, True])
async def test_processors_and_changelogs_never_see_the_header_outputs_get_it_as_the_mode_says(
        tmp_path: Any, replayed: bool) -> None:
    settings: dict[str, Any] = ({"origin_headers": True} if replayed
                                else {"record_services_dir": str(tmp_path / "rec")})
    app, seen = regroup(**settings)
    async with TopologyTestDriver(app) as driver:
        for i in range(4):
            headers = ((ORIGIN_HEADER, f"in/{i % 2}/{100 + i}".encode()),) if replayed else ()
            driver.pipe_input("in", f"k{i}", i, float(i), partition=i % 2, headers=headers)
        await driver.process_all()
        marks = origin_marks_by_topic(driver)
    assert len(seen) == 4 and not any(place_in(h) for h in seen)
    base = [f"in/{p}/{100 + i if replayed else i // 2}" for i, p in
            enumerate([0, 1, 0, 1])]
    repartition = next(t for t in marks if t.endswith("by-r-repartition"))
    assert sorted(marks[repartition]) == sorted(f"{b}/0" for b in base)
    # Note may change the key: the count reads a second repartition topic, path ".0"
    assert sorted(marks["out"]) == (sorted(f"{b}/0.0" for b in base) if replayed else [])
    assert all(not v for t, v in marks.items() if t.endswith("-changelog"))


async def test_a_repartition_record_a_marking_run_left_loses_its_header_when_read(
        tmp_path: Any) -> None:
    """An app restarted without recording reads what the recording run left in its
    repartition topics: the header never reaches its processors (nor so its state)."""
    app, seen = regroup()
    async with TopologyTestDriver(app) as driver:
        repartition = next(t for t in driver.broker.topic_names()
                           if t.endswith("by-r-repartition"))
        driver.broker.append([(OutgoingRecord(
            repartition, b'"r1"', b"\x00" * 7 + b"\x01", 1.0,
            ((ORIGIN_HEADER, b"in/0/5/0"), ("user", b"u"))), 0)])
        await driver.process_all()
    assert seen == [(("user", b"u"),)]


def test_a_recording_task_touching_no_topic_read_back_stamps_nothing() -> None:
    record = OriginMarks(OriginMode.RECORD, frozenset({"rep"}))
    assert record.for_task(["in"], ["out"]) is None
    assert record.for_task(["in"], ["rep"]) is record
    assert record.for_task(["rep"], ["out"]) is record
    replay = OriginMarks(OriginMode.REPLAY, frozenset({"rep"}))
    assert replay.for_task(["in"], ["out"]) is replay
