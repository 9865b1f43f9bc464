"""A state store as a topology declares it, and its changelog topic: the name (built only
here, Kafka Streams' ``<application.id>-<store>-changelog``) and the topic config.

* **Changelog topics of key-value stores**: ``cleanup.policy=compact``.
* **Changelog topics of window stores**: ``cleanup.policy=compact,delete`` with
  ``retention.ms`` = the store's retention + one day (Kafka Streams'
  ``windowstore.changelog.additional.retention.ms``).

Every changelog also sets ``message.timestamp.type=CreateTime`` (see
:mod:`aiostreams.topology.internal_topics` for why every internal topic does).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["KV_CHANGELOG_CONFIG", "WINDOW_CHANGELOG_EXTRA_RETENTION", "StoreSpec",
           "changelog_topic", "window_changelog_config"]

WINDOW_CHANGELOG_EXTRA_RETENTION = 24 * 3600.0
"""Seconds a window store's changelog keeps records beyond the store's retention."""

CREATE_TIME = ("message.timestamp.type", "CreateTime")

KV_CHANGELOG_CONFIG: tuple[tuple[str, str], ...] = (("cleanup.policy", "compact"), CREATE_TIME)


def window_changelog_config(retention_ms: int) -> tuple[tuple[str, str], ...]:
    """The changelog config of a window store keeping ``retention_ms`` milliseconds."""
    return (("cleanup.policy", "compact,delete"),
            ("retention.ms", str(retention_ms + round(WINDOW_CHANGELOG_EXTRA_RETENTION * 1000))),
            CREATE_TIME)


def changelog_topic(app_id: str, store: str) -> str:
    """The changelog topic of store ``store`` of app (group) ``app_id``: the one place
    this name is built (Kafka Streams' ``<application.id>-<store>-changelog``)."""
    return f"{app_id}-{store}-changelog"


@dataclass(frozen=True)
class StoreSpec:
    """A state store declared on the topology; ``factory`` makes one instance per task."""

    name: str
    factory: Callable[[], Any]
    logged: bool = True
    changelog_config: tuple[tuple[str, str], ...] = KV_CHANGELOG_CONFIG
