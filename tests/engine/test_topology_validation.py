from __future__ import annotations

import pytest

from aiostreams.errors import TopologyError
from aiostreams.state.memory import InMemoryKeyValueStore
from aiostreams.topology.processor import Processor
from aiostreams.topology.topology import StoreSpec, Topology
from aiostreams.types import Record


class Passthrough(Processor[str, str]):
    def process(self, record: Record[str, str]) -> None:
        self.context.forward(record)


def test_unknown_parent_is_named() -> None:
    t = Topology().add_source("src", "in").add_processor("p", Passthrough, "nope")
    with pytest.raises(TopologyError, match="'p' names parent 'nope', which does not exist"):
        t.build()


def test_cycle_is_reported_with_its_path() -> None:
    t = (Topology().add_source("src", "in")
         .add_processor("a", Passthrough, "src", "c")
         .add_processor("b", Passthrough, "a")
         .add_processor("c", Passthrough, "b"))
    with pytest.raises(TopologyError, match="cycle: a -> b -> c -> a"):
        t.build()


def test_duplicate_node_name_is_rejected_at_once() -> None:
    t = Topology().add_source("src", "in")
    with pytest.raises(TopologyError, match="'src' already exists"):
        t.add_processor("src", Passthrough, "src")


def test_source_topic_claimed_twice_is_rejected() -> None:
    t = Topology().add_source("one", "in")
    with pytest.raises(TopologyError, match="topic 'in' is read by source 'one' already"):
        t.add_source("two", "other", "in")


def test_sink_cannot_be_a_parent() -> None:
    t = (Topology().add_source("src", "in").add_sink("out", "out-topic", "src")
         .add_processor("p", Passthrough, "out"))
    with pytest.raises(TopologyError, match="sink 'out' as its parent"):
        t.build()


def test_undeclared_store_is_named() -> None:
    t = Topology().add_source("src", "in").add_processor("p", Passthrough, "src",
                                                         stores=["counts"])
    with pytest.raises(TopologyError, match="store 'counts', which is not declared"):
        t.build()


def test_topology_without_source_is_rejected() -> None:
    with pytest.raises(TopologyError, match="no source"):
        Topology().build()


def test_disconnected_parts_become_separate_subtopologies() -> None:
    t = (Topology()
         .add_source("s1", "a").add_sink("k1", "a-out", "s1")
         .add_source("s2", "b").add_processor("p", Passthrough, "s2").add_sink("k2", "b-out", "p"))
    subs = t.build()
    assert [sub.source_topics for sub in subs] == [("a",), ("b",)]


def test_a_shared_store_joins_subtopologies() -> None:
    t = (Topology()
         .add_source("s1", "a").add_processor("p1", Passthrough, "s1")
         .add_source("s2", "b").add_processor("p2", Passthrough, "s2")
         .add_store(StoreSpec("st", lambda: InMemoryKeyValueStore("st")), "p1", "p2"))
    subs = t.build()
    assert len(subs) == 1
    assert set(subs[0].source_topics) == {"a", "b"}


def test_describe_prints_the_dag() -> None:
    t = (Topology().add_source("src", "in").add_processor("upper", Passthrough, "src")
         .add_sink("sink", "out", "upper"))
    text = t.describe()
    assert "Source: src (topics: [in])" in text
    assert "Processor: upper (stores: [])\n      --> sink\n      <-- src" in text
    assert "Sink: sink (topic: out)" in text
    assert "n_src --> n_upper" in t.describe_mermaid()
