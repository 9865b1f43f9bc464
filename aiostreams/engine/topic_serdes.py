"""The serdes of the topics a task may ``send()`` to (``ctx.send``), by topic name.

A declared topic (``app.topic(name, key=..., value=...)``) serializes with its serdes; an
undeclared one takes bytes (or None) only, so nothing reaches a topic in a format nobody
declared. Errors name the topic and what to declare.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiostreams.errors import SerializationError
from aiostreams.topic import Topic


class TopicSerdes:
    def __init__(self, topics: Mapping[str, Topic]) -> None:
        self._topics = dict(topics)

    def serialize_for(self, topic: str, key: Any,
                      value: Any) -> tuple[bytes | None, bytes | None]:
        """``(key bytes, value bytes)`` for a record sent to ``topic``."""
        t = self._topics.get(topic)
        if t is not None:
            return t.key_serde.serialize(topic, key), t.value_serde.serialize(topic, value)
        if (key is None or isinstance(key, bytes)) and (value is None or isinstance(value, bytes)):
            return key, value
        raise SerializationError(
            f"send() to {topic!r}: the topic is not declared, so key and value must be bytes; "
            "declare it with app.topic(name, key=..., value=...)",
            topic=topic,
        )
