"""Creating the topics :mod:`~aiostreams.engine.topic_plan` says are missing, on a broker.

Two rounds: the input, output and repartition topics first; then, from the source
topics' partition counts as they now are, the changelog topics (as wide as their
sub-topology). Raises what the plan raises (a missing source topic, topics that are not
co-partitioned) before creating anything of that round.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aiostreams.engine.topic_plan import (
    changelog_names,
    plan_changelogs,
    plan_topics,
    sub_widths,
    wanted_topics,
)
from aiostreams.topic import Topic
from aiostreams.topology.topology import SubTopology
from aiostreams.transport.base import Transport


async def ensure_topics(transport: Transport, subs: Sequence[SubTopology],
                        declared: Mapping[str, Topic], *, app_id: str,
                        dead_letter_topic: str | None, default_partitions: int) -> None:
    """Create the missing topics of an app (group ``app_id``) running ``subs``.

    Cancellation: stops the admin client; topics created so far stay."""
    admin = transport.admin()
    await admin.start()
    try:
        wanted = wanted_topics(subs, dead_letter_topic)
        existing = {name: await admin.partitions_for(name) for name in sorted(wanted)}
        writers = {t for sub in subs for t in sub.sink_topics}
        if dead_letter_topic:
            writers.add(dead_letter_topic)
        specs = plan_topics(wanted, declared, existing, writers=writers,
                            default_partitions=default_partitions, where=transport.url)
        if specs:
            await admin.create_topics(list(specs.values()))
        sources = sorted({t for sub in subs for t in sub.source_topics})
        widths = sub_widths(subs, {t: await admin.partitions_for(t) for t in sources})
        names = [n for sub in subs for n in changelog_names(app_id, sub).values()]
        changelogs = plan_changelogs(app_id, subs, widths,
                                     {n: await admin.partitions_for(n) for n in names})
        if changelogs:
            await admin.create_topics(changelogs)
    finally:
        await admin.stop()
