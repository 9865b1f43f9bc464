"""Subject name strategies: under which registry subject a topic's schema is registered.

The three strategies of Confluent's serializers, with the same names and results, so an
aiostreams app and a Java or Python Confluent client agree on subjects:

- :func:`topic_name` (default): ``<topic>-key`` / ``<topic>-value``; one schema lineage per
  topic, the usual choice.
- :func:`record_name`: the record's fully-qualified name (``com.acme.Order``); one lineage per
  record type, shared by every topic that carries it.
- :func:`topic_record_name`: ``<topic>-<record name>``; several record types in one topic,
  each with its own lineage.

A strategy is any callable ``(topic, is_key, record_name) -> subject``.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["SubjectNameStrategy", "record_name", "topic_name", "topic_record_name"]

SubjectNameStrategy = Callable[[str, bool, str], str]


def topic_name(topic: str, is_key: bool, record: str) -> str:
    """``<topic>-key`` or ``<topic>-value``."""
    return f"{topic}-{'key' if is_key else 'value'}"


def record_name(topic: str, is_key: bool, record: str) -> str:
    """The record's fully-qualified name, whatever the topic."""
    if not record:
        raise ValueError("record_name needs a named record type (an Avro record, a JSON "
                         "Schema with a title, a Protobuf message); this schema has no name")
    return record


def topic_record_name(topic: str, is_key: bool, record: str) -> str:
    """``<topic>-<fully-qualified record name>``."""
    return f"{topic}-{record_name(topic, is_key, record)}"
