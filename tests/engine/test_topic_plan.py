"""The topic plan: which topics an app creates, how wide, and its changelog names - pure,
so tested without a broker."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from taskkit import str_topic

from aiostreams.engine.topic_plan import (
    changelog_names,
    plan_changelogs,
    plan_topics,
    sub_widths,
)
from aiostreams.errors import CoPartitioningError, UnknownTopicError
from aiostreams.serde import StrSerde
from aiostreams.state.memory import InMemoryKeyValueStore
from aiostreams.state.store_spec import changelog_topic
from aiostreams.topic import Topic
from aiostreams.topology.topology import StoreSpec, SubTopology, Topology


def counting_subs() -> list[SubTopology]:
    topology = (Topology().add_source("src", str_topic("in"))
                .add_store(StoreSpec("counts", InMemoryKeyValueStore))
                .add_processor("count", lambda: None, "src", stores=["counts"])
                .add_sink("sink", str_topic("out"), "count"))
    return topology.build()


def test_the_changelog_topic_of_a_store_is_app_store_changelog() -> None:
    assert changelog_topic("shop", "counts") == "shop-counts-changelog"
    assert changelog_names("shop", counting_subs()[0]) == {"counts": "shop-counts-changelog"}


def test_a_missing_undeclared_source_is_an_error_that_says_how_to_fix_it() -> None:
    with pytest.raises(UnknownTopicError, match=r"app.topic\('in', partitions=N\)"):
        plan_topics({"in", "out"}, {}, {}, writers={"out"}, default_partitions=3)


def test_a_missing_sink_is_created_default_wide_and_an_existing_topic_is_left_alone() -> None:
    specs = plan_topics({"in", "out"}, {}, {"in": 6}, writers={"out"}, default_partitions=3)
    assert {n: s.partitions for n, s in specs.items()} == {"out": 3}


def test_a_declared_topic_is_created_with_its_partitions_and_config() -> None:
    declared = {"in": Topic("in", StrSerde(), StrSerde(), partitions=5,
                            config={"retention.ms": "1000"})}
    specs = plan_topics({"in"}, declared, {}, writers=(), default_partitions=1)
    assert specs["in"].partitions == 5
    assert dict(specs["in"].config) == {"retention.ms": "1000"}


@given(existing=st.dictionaries(st.sampled_from(["a", "b", "c"]), st.integers(1, 64),
                                min_size=1),
       default=st.integers(1, 8))
def test_a_repartition_topic_is_as_wide_as_the_widest_external_topic(
        existing: dict[str, int], default: int) -> None:
    declared = {"rep": Topic("rep", StrSerde(), StrSerde(), internal=True)}
    wanted = {*existing, "rep", "sink"}
    specs = plan_topics(wanted, declared, existing, writers={"sink"},
                        default_partitions=default)
    assert specs["rep"].partitions == max([*existing.values(), default])
    assert set(specs) == {"rep", "sink"}


def test_the_test_driver_plan_creates_every_source_default_wide() -> None:
    specs = plan_topics({"in", "out"}, {}, {}, writers=(), default_partitions=2,
                        create_sources=True)
    assert {n: s.partitions for n, s in specs.items()} == {"in": 2, "out": 2}


def test_sources_read_together_must_be_equally_wide() -> None:
    topology = (Topology().add_source("left", str_topic("l"))
                .add_source("right", str_topic("r"))
                .add_processor("join", lambda: None, "left", "right"))
    subs = topology.build()
    assert sub_widths(subs, {"l": 4, "r": 4}) == {subs[0].id: 4}
    with pytest.raises(CoPartitioningError, match="partition counts differ"):
        sub_widths(subs, {"l": 4, "r": 2})


def test_changelogs_are_as_wide_as_their_sub_topology_and_a_mismatch_is_refused() -> None:
    subs = counting_subs()
    widths = {subs[0].id: 4}
    [spec] = plan_changelogs("shop", subs, widths, {})
    assert (spec.name, spec.partitions) == ("shop-counts-changelog", 4)
    assert plan_changelogs("shop", subs, widths, {"shop-counts-changelog": 4}) == []
    with pytest.raises(CoPartitioningError, match="delete the changelog"):
        plan_changelogs("shop", subs, widths, {"shop-counts-changelog": 2})
