"""The lineage header (``lineage=True``): every output names the input record it came from,
first among its headers, replacing any stale one and keeping the user's; off, none is
added; state and changelogs are the same either way (aiostreams/runtime/lineage.py)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiostreams import App
from aiostreams.runtime.lineage import (
    LINEAGE_HEADER,
    MAX_CHAIN,
    LineageError,
    Origin,
    chain_of,
    lineage_of,
    lineage_value,
    origin_of,
    with_lineage,
    without_lineage,
)
from aiostreams.testing import TopologyTestDriver
from aiostreams.topology.processor import Processor
from aiostreams.types import Record
from aiostreams.windows import (
    JoinWindows,
    TimeWindowedSerde,
    TumblingWindows,
    until_window_closes,
)


def new_app(**settings: Any) -> App:
    return App(f"lin-{uuid.uuid4().hex[:8]}", broker=f"memory://{uuid.uuid4().hex}",
               **settings)


def lineage_headers(headers: Any) -> list[bytes | None]:
    return [v for n, v in headers if n == LINEAGE_HEADER]


# -- the header itself ----------------------------------------------------------------


TOPIC_CHARS = "abcXYZ019._-"  # of Kafka's legal topic characters [a-zA-Z0-9._-]


origins = st.builds(Origin, st.text(TOPIC_CHARS, min_size=1, max_size=40),
                    st.integers(0, 2**31 - 1), st.integers(0, 2**63 - 1))


@settings(max_examples=50)
@given(origin=origins, upstream=st.lists(origins, max_size=2 * MAX_CHAIN),
       others=st.lists(st.tuples(st.sampled_from(["a", "b", LINEAGE_HEADER]),
                                 st.binary(max_size=8)), max_size=4))
def test_a_stamped_header_names_its_chain_once_first_keeping_the_others_in_order(
        origin: Origin, upstream: list[Origin], others: list[tuple[str, bytes]]) -> None:
    before = with_lineage((), lineage_value(*upstream[0], b",".join(
        lineage_value(*o) for o in upstream[1:]))) if upstream else ()
    stamped = with_lineage(tuple(others), lineage_value(*origin, lineage_of(before)))
    assert stamped[0][0] == LINEAGE_HEADER
    assert len(lineage_headers(stamped)) == 1
    assert origin_of(stamped) == origin
    assert chain_of(stamped) == [origin, *upstream][:MAX_CHAIN]
    rest = [h for h in others if h[0] != LINEAGE_HEADER]
    assert list(stamped[1:]) == rest
    assert list(without_lineage(stamped)) == rest


@pytest.mark.parametrize("value", [b"orders:x:1", b"orders:1", b":0:1", b"t:-1:3", None,
                                   b"t:0:1,", b"t:0:1,,u:0:2"])
def test_a_malformed_lineage_header_is_refused_naming_the_expected_form(
        value: bytes | None) -> None:
    with pytest.raises(LineageError, match="header"):
        origin_of(((LINEAGE_HEADER, value),))


# -- what the engine stamps -----------------------------------------------------------


@pytest.mark.parametrize("max_in_flight", [1, 64])
async def test_a_stateless_chain_names_the_input_of_each_output(max_in_flight: int) -> None:
    app = new_app(lineage=True, max_in_flight=max_in_flight)
    lines = app.topic("lines", key=str, value=str, partitions=2)
    out = app.topic("words", key=str, value=str, partitions=1)

    async def shout(word: str) -> str:
        return word.upper()

    (app.stream(lines).filter(lambda _k, line: not line.startswith("#"))
     .flat_map_values(str.split).map_values_async(shout).to(out))
    async with TopologyTestDriver(app) as driver:
        for i, line in enumerate(["a b", "# skipped", "c", "d e f"]):
            driver.pipe_input(lines, f"k{i}", line, float(i), partition=0)
        await driver.process_all()
        got = [(r.value, origin_of(r.headers)) for r in driver.read_output(out)]
    assert got == [("A", Origin("lines", 0, 0)), ("B", Origin("lines", 0, 0)),
                   ("C", Origin("lines", 0, 2)), ("D", Origin("lines", 0, 3)),
                   ("E", Origin("lines", 0, 3)), ("F", Origin("lines", 0, 3))]


async def test_with_lineage_off_no_header_is_added_and_the_users_are_kept() -> None:
    app = new_app()
    src = app.topic("in", key=str, value=str)
    out = app.topic("out", key=str, value=str)
    app.stream(src).map_values(str.upper).to(out)
    async with TopologyTestDriver(app) as driver:
        driver.pipe_input(src, "k", "v", headers=(("trace", b"1"),))
        await driver.process_all()
        [record] = driver.read_output(out)
    assert record.headers == (("trace", b"1"),)


async def test_the_header_is_replaced_once_extending_the_inputs_chain_keeping_users_headers(
        ) -> None:
    app = new_app(lineage=True)
    src = app.topic("in", key=str, value=str)
    out = app.topic("out", key=str, value=str)
    app.stream(src).map_values(str.upper).to(out)
    async with TopologyTestDriver(app) as driver:
        # as written by an upstream app with lineage on
        driver.pipe_input(src, "k", "v", headers=(
            ("trace", b"1"), (LINEAGE_HEADER, b"elsewhere:0:9,first:1:2"), ("tenant", b"t")))
        await driver.process_all()
        [record] = driver.read_output(out)
    assert record.headers == ((LINEAGE_HEADER, b"in:0:0,elsewhere:0:9,first:1:2"),
                              ("trace", b"1"), ("tenant", b"t"))
    assert chain_of(record.headers) == [Origin("in", 0, 0), Origin("elsewhere", 0, 9),
                                        Origin("first", 1, 2)]


async def test_processors_never_see_the_header_they_read() -> None:
    seen: list[Any] = []

    class Look(Processor[str, str]):
        def process(self, record: Record[str, str]) -> None:
            seen.append((record.headers, self.context.headers))
            self.context.forward(record)

    app = new_app(lineage=True)
    app.topic("in", key=str, value=str)
    app.topic("out", key=str, value=str)
    app.topology.add_source("src", "in").add_processor("look", Look, "src").add_sink(
        "sink", "out", "look")
    async with TopologyTestDriver(app) as driver:
        driver.pipe_input("in", "k", "v", headers=((LINEAGE_HEADER, b"up:0:1"), ("u", b"")))
        await driver.process_all()
    assert seen == [((("u", b""),), (("u", b""),))]


async def test_ctx_send_names_the_current_input_and_a_punctuations_send_names_none() -> None:
    class Sender(Processor[str, str]):
        async def init(self, context: Any) -> None:
            await super().init(context)
            context.schedule(10.0, self.tick, "stream_time")

        def process(self, record: Record[str, str]) -> None:
            self.context.send("side", record.key, record.value,
                              headers=((LINEAGE_HEADER, b"stale:0:0"),))

        def tick(self, at: float) -> None:
            self.context.send("side", "tick", str(at), headers=((LINEAGE_HEADER, b"x:0:0"),))

    app = new_app(lineage=True)
    app.topic("in", key=str, value=str)
    app.topic("side", key=str, value=str)
    app.topology.add_source("src", "in").add_processor("send", Sender, "src")
    async with TopologyTestDriver(app) as driver:
        driver.pipe_input("in", "a", "1", 1.0)
        driver.pipe_input("in", "b", "2", 12.0)
        await driver.process_all()
        got = [(r.key, r.headers) for r in driver.read_output("side")]
    # the tick is due once b (at 12) moved stream time past 10
    assert got == [("a", ((LINEAGE_HEADER, b"in:0:0"),)),
                   ("b", ((LINEAGE_HEADER, b"in:0:1"),)), ("tick", ())]


async def test_a_stream_stream_joins_output_names_the_record_that_triggered_it() -> None:
    app = new_app(lineage=True)
    views = app.topic("views", key=str, value=str)
    clicks = app.topic("clicks", key=str, value=str)
    out = app.topic("joined", key=str, value="json")
    (app.stream(views).join(app.stream(clicks), lambda v, c: [v, c], JoinWindows(10.0))
     .to(out))
    async with TopologyTestDriver(app) as driver:
        driver.pipe_input(views, "a", "v1", 1.0)   # views[0]@0: nothing to join yet
        driver.pipe_input(clicks, "a", "c1", 2.0)  # clicks[0]@0 triggers [v1, c1]
        driver.pipe_input(views, "a", "v2", 3.0)   # views[0]@1 triggers [v2, c1]
        await driver.process_all()
        got = [(r.value, origin_of(r.headers)) for r in driver.read_output(out)]
    assert got == [(["v1", "c1"], Origin("clicks", 0, 0)),
                   (["v2", "c1"], Origin("views", 0, 1))]


async def test_a_suppressed_window_names_the_record_of_its_last_update() -> None:
    app = new_app(lineage=True)
    clicks = app.topic("clicks", key=str, value=int)
    out = app.topic("out", key=TimeWindowedSerde(str, size=10.0), value=int)
    (app.stream(clicks).group_by_key().windowed_by(TumblingWindows(10.0, grace=0.0))
     .count().suppress(until_window_closes()).to_stream().to(out))
    async with TopologyTestDriver(app) as driver:
        for key, ts in [("a", 1.0), ("a", 5.0), ("b", 6.0), ("c", 12.0)]:
            driver.pipe_input(clicks, key, 1, ts)
        await driver.process_all()
        got = [(r.key.key, r.value, origin_of(r.headers)) for r in driver.read_output(out)]
    # emitted while clicks@3 (c at 12) was processed, each names its own last update
    assert got == [("a", 2, Origin("clicks", 0, 1)), ("b", 1, Origin("clicks", 0, 2))]


async def run_suppressed_counts(lineage: bool) -> tuple[Any, Any, Any]:
    """A repartition (whose records carry the header with lineage on) into a store that
    keeps its records' headers (suppress's buffer): the stores, changelogs and outputs."""
    app = App("same-state", broker=f"memory://{uuid.uuid4().hex}", lineage=lineage)
    clicks = app.topic("clicks", key=str, value=int)
    out = app.topic("out", key=TimeWindowedSerde(str, size=10.0), value=int)
    (app.stream(clicks).group_by(lambda _k, v: f"g{v % 3}", name="by-group")
     .windowed_by(TumblingWindows(10.0, grace=0.0)).count(materialized="counts")
     .suppress(until_window_closes(), name="final").to_stream().to(out))
    async with TopologyTestDriver(app) as driver:
        for i in range(30):
            driver.pipe_input(clicks, f"k{i % 4}", i, float(i), headers=(("u", b"1"),))
        await driver.process_all()
        changelogs = {name: [(r.key, r.value, r.headers)
                             for r in driver.broker.records(driver.changelog_topic(name))]
                      for name in ("counts", "final-store")}
        stores = {name: driver.store(name) for name in ("counts",)}
        outputs = [(r.key, r.value, without_lineage(r.headers))
                   for r in driver.read_raw_output(out)]
    return stores, changelogs, outputs


async def test_turning_lineage_on_changes_no_store_changelog_or_output_value() -> None:
    on = await run_suppressed_counts(True)
    off = await run_suppressed_counts(False)
    assert on[1]["final-store"], "the suppress buffer wrote its changelog"
    assert on == off
