"""Topic incarnations in a table's identity: the rule both table sinks apply.

A topic deleted and created again under its name (or a broker whose data was reset) is a
new *incarnation*: Kafka gives it a new topic id (KIP-516) and its offsets start again at
0. A sink keeps, per source partition, the highest offset it has written, and drops
records at or below it as replays; on the new incarnation that would drop new records
silently. So a table records the id of each source topic it holds (the Delta sink in the
table's description, the Parquet sink in each commit-log entry), and a sink whose source
topic now has another id refuses to write, before writing anything.

Ids are what the worker reads from the broker when the app starts
(:func:`~aiostreams.transport.base.read_topic_ids`); a topic with no id (a broker before
Kafka 2.8, or a sink used outside an app) is not checked. A table written before ids were
recorded has none: it is accepted, and the ids are recorded from then on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from aiostreams.sinks.delta_identity import TableIdentityError

__all__ = ["check_incarnations", "known_ids"]


def known_ids(ids: Mapping[str, str | None], topics: Iterable[str] | None = None
              ) -> dict[str, str]:
    """The ids of ``topics`` (default: all) that are known, sorted by topic."""
    wanted = set(ids) if topics is None else set(topics)
    return {t: i for t, i in sorted(ids.items()) if i is not None and t in wanted}


def check_incarnations(recorded: Mapping[str, str], current: Mapping[str, str | None], *,
                       table: str, recorded_in: str) -> None:
    """Raise :class:`TableIdentityError` if a topic ``recorded`` (topic → id, as the table
    at ``table`` records it in ``recorded_in``) has another id in ``current``."""
    for topic, was in sorted(recorded.items()):
        now = current.get(topic)
        if now is not None and now != was:
            raise TableIdentityError(
                f"{table} holds rows of topic {topic!r} with topic id {was} (recorded in "
                f"{recorded_in}), but {topic!r} now has topic id {now}: it was deleted and "
                "created again, or the broker's data was reset, so its offsets started "
                "again at 0 and this sink would drop its new records as replays of the "
                "offsets the table holds. Nothing was written. Write the new topic to a "
                "new table path (or move this table aside); `kafka-topics.sh --describe "
                f"--topic {topic}` shows the current id")
