"""The configs of the topics an app creates for itself, as Kafka Streams sets them.

* **Repartition topics** (``<app>-<node>-repartition``): ``cleanup.policy=delete``,
  ``retention.ms=-1`` (never expire by time: a record stays until it is consumed and
  committed, then the app purges it with delete-records; see
  :mod:`aiostreams.engine.purge`), ``segment.bytes`` 50 MiB so purged segments are freed.
* **Changelog topics** of stores: see :mod:`aiostreams.state.store_spec` (a store's
  changelog belongs to the store).

One deliberate addition: every internal topic also sets ``message.timestamp.type=CreateTime``.
Kafka Streams inherits the broker's default there; on a broker configured for
``LogAppendTime`` a repartition topic would replace event time with append time, and every
window downstream would be computed on the wrong time. Stating it makes the topic
independent of the broker's defaults.
"""

from __future__ import annotations

from aiostreams.state.store_spec import CREATE_TIME

REPARTITION_TOPIC_CONFIG: dict[str, str] = dict([
    ("cleanup.policy", "delete"),
    ("retention.ms", "-1"),
    ("segment.bytes", str(50 * 1024 * 1024)),
    CREATE_TIME,
])
