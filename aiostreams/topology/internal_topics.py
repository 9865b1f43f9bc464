"""The configs of the topics an app creates for itself, as Kafka Streams sets them.

* **Repartition topics** (``<app>-<node>-repartition``): ``cleanup.policy=delete``,
  ``retention.ms=-1`` (never expire by time: a record stays until it is consumed and
  committed, then the app purges it with delete-records; see
  :mod:`aiostreams.engine.purge`), ``segment.bytes`` 50 MiB so purged segments are freed.
* **Changelog topics of key-value stores**: ``cleanup.policy=compact``.
* **Changelog topics of window stores**: ``cleanup.policy=compact,delete`` with
  ``retention.ms`` = the store's retention + one day (Kafka Streams'
  ``windowstore.changelog.additional.retention.ms``).

One deliberate addition: every internal topic also sets ``message.timestamp.type=CreateTime``.
Kafka Streams inherits the broker's default there; on a broker configured for
``LogAppendTime`` a repartition topic would replace event time with append time, and every
window downstream would be computed on the wrong time. Stating it makes the topic
independent of the broker's defaults.
"""

from __future__ import annotations

WINDOW_CHANGELOG_EXTRA_RETENTION = 24 * 3600.0
"""Seconds a window store's changelog keeps records beyond the store's retention."""

_CREATE_TIME = ("message.timestamp.type", "CreateTime")

REPARTITION_TOPIC_CONFIG: dict[str, str] = dict([
    ("cleanup.policy", "delete"),
    ("retention.ms", "-1"),
    ("segment.bytes", str(50 * 1024 * 1024)),
    _CREATE_TIME,
])

KV_CHANGELOG_CONFIG: tuple[tuple[str, str], ...] = (("cleanup.policy", "compact"), _CREATE_TIME)


def window_changelog_config(retention_ms: int) -> tuple[tuple[str, str], ...]:
    """The changelog config of a window store keeping ``retention_ms`` milliseconds."""
    return (("cleanup.policy", "compact,delete"),
            ("retention.ms", str(retention_ms + round(WINDOW_CHANGELOG_EXTRA_RETENTION * 1000))),
            _CREATE_TIME)
