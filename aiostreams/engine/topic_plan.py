"""The topics an app needs, and how wide each is: a pure plan, no broker.

The worker (against a real broker) and the test driver (against a fresh private one) both
size their topics here:

* a topic that exists keeps its partition count;
* a declared topic with ``partitions`` is created that wide;
* an *internal* (repartition) topic without ``partitions`` is as wide as the widest
  external topic the tasks read or write (existing, or to be created);
* a sink or dead-letter topic the app does not declare is created ``default_partitions``
  wide; a missing source topic is an error (unless ``create_sources``, as the test driver
  asks);
* a sub-topology's topics must be equally wide (co-partitioned); its logged stores get one
  changelog topic each (:func:`changelog_topic`), as wide as the sub-topology.

Invariant: every function here is pure - same arguments, same plan - so the plan can be
tested without a broker and the two callers cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from aiostreams.errors import CoPartitioningError, UnknownTopicError
from aiostreams.state.store_spec import changelog_topic
from aiostreams.topic import Topic
from aiostreams.topology.topology import SubTopology
from aiostreams.transport.base import TopicSpec


def wanted_topics(subs: Sequence[SubTopology], dead_letter_topic: str | None) -> set[str]:
    """Every topic the tasks of ``subs`` read or write (and the dead-letter topic)."""
    wanted = {t for sub in subs for t in (*sub.source_topics, *sub.sink_topics)}
    if dead_letter_topic:
        wanted.add(dead_letter_topic)
    return wanted


def plan_topics(
    wanted: Collection[str],
    declared: Mapping[str, Topic],
    existing: Mapping[str, int | None],
    *,
    writers: Collection[str],
    default_partitions: int,
    create_sources: bool = False,
    where: str = "the broker",
) -> dict[str, TopicSpec]:
    """The topics of ``wanted`` to create (by name), given the partition counts of those
    that ``existing`` (None or absent: missing). ``writers``: the topics the app only
    writes (sinks, dead letters), created ``default_partitions`` wide when undeclared.

    Raises :class:`UnknownTopicError` for a missing source topic the app does not declare
    with a partition count (unless ``create_sources``)."""
    assert default_partitions >= 1, default_partitions

    def external_width(name: str) -> int | None:
        have = existing.get(name)
        if have is not None:
            return have
        topic = declared.get(name)
        if topic is not None and topic.partitions:
            return topic.partitions
        return default_partitions if create_sources or name in writers else None

    widths = [w for name in wanted
              if not (name in declared and declared[name].internal)
              and (w := external_width(name)) is not None]
    internal_width = max(widths, default=default_partitions)
    specs: dict[str, TopicSpec] = {}
    for name in sorted(wanted):
        if existing.get(name) is not None:
            continue
        topic = declared.get(name)
        config = dict(topic.config) if topic is not None else {}
        if topic is not None and topic.internal and not topic.partitions:
            specs[name] = TopicSpec(name, internal_width, config=config)
            continue
        width = external_width(name)
        if width is None:
            raise UnknownTopicError(
                f"source topic {name!r} does not exist on {where}: create it, or declare "
                f"it with app.topic({name!r}, partitions=N) so aiostreams creates it")
        specs[name] = TopicSpec(name, width, config=config)
    return specs


def sub_widths(subs: Sequence[SubTopology],
               counts: Mapping[str, int | None]) -> dict[int, int]:
    """Each sub-topology's width (its tasks' count) from its source topics' partition
    counts. Raises :class:`CoPartitioningError` when a sub-topology's sources differ."""
    widths: dict[int, int] = {}
    for sub in subs:
        sizes = {t: counts.get(t) for t in sub.source_topics}
        if len(set(sizes.values())) > 1:
            raise CoPartitioningError(
                f"sub-topology {sub.id} reads {sorted(sizes)} together, but their partition "
                f"counts differ: {sizes}; repartition one of them so they match")
        widths[sub.id] = max((c for c in sizes.values() if c is not None), default=1)
    return widths


def changelog_names(app_id: str, sub: SubTopology) -> dict[str, str]:
    """Store name -> changelog topic, for the logged stores of ``sub``."""
    return {s.name: changelog_topic(app_id, s.name) for s in sub.stores if s.logged}


def plan_changelogs(app_id: str, subs: Sequence[SubTopology], widths: Mapping[int, int],
                    existing: Mapping[str, int | None]) -> list[TopicSpec]:
    """The changelog topics to create, each as wide as its sub-topology. Raises
    :class:`CoPartitioningError` for an existing changelog of another width (its store's
    partitions would no longer match the input's)."""
    specs: list[TopicSpec] = []
    for sub in subs:
        width = widths[sub.id]
        for store in sub.stores:
            if not store.logged:
                continue
            name = changelog_topic(app_id, store.name)
            have = existing.get(name)
            if have is None:
                specs.append(TopicSpec(name, width, config=dict(store.changelog_config)))
            elif have != width:
                raise CoPartitioningError(
                    f"changelog topic {name!r} has {have} partitions but its input has "
                    f"{width}; delete the changelog (and the app's local state) or restore "
                    "the input's partition count")
    return specs
