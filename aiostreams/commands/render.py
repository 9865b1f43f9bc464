"""Turning records' bytes into something a person (or ``jq``) can read.

A decoder is chosen per key and value: ``str`` (UTF-8), ``json``, ``bytes`` (shown as a
Python bytes literal), or ``auto``: the serde the app declares for the topic when an app is
given, else UTF-8 text when the bytes are valid UTF-8, else bytes. A value that its decoder
cannot decode is shown as ``<undecodable: reason>``, never an error: a tool for looking at
bad data must not stop at the first bad record.
"""

from __future__ import annotations

import base64
import datetime
import json
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from aiostreams.serde import Serde
from aiostreams.topic import Topic

DECODERS = ("auto", "str", "json", "bytes")

Decoder = Callable[[bytes | None], Any]


class Undecodable:
    """What a decoder returns for bytes it cannot decode (shown, never raised)."""

    def __init__(self, reason: str, data: bytes) -> None:
        self.reason = reason
        self.data = data

    def __repr__(self) -> str:
        return f"<undecodable: {self.reason}>"


def decoder(name: str, topic: Topic | None, which: str) -> Decoder:
    """The decoder ``name`` (one of :data:`DECODERS`) for a topic's keys or values
    (``which``: ``"key"`` or ``"value"``); ``topic`` is the app's declaration, if any."""
    if name == "auto" and topic is not None:
        serde: Serde[Any] = topic.key_serde if which == "key" else topic.value_serde
        return _with_serde(serde, topic.name)
    return {"auto": _auto, "str": _utf8, "json": _json, "bytes": _raw}[name]


def _with_serde(serde: Serde[Any], topic: str) -> Decoder:
    def decode(data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            return serde.deserialize(topic, data)
        except Exception as e:
            return Undecodable(f"{type(serde).__name__}: {e}", data)
    return decode


def _raw(data: bytes | None) -> Any:
    return data


def _utf8(data: bytes | None) -> Any:
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        return Undecodable(f"not UTF-8 ({e.reason} at byte {e.start})", data)


def _json(data: bytes | None) -> Any:
    if data is None:
        return None
    try:
        return json.loads(data)
    except ValueError as e:
        return Undecodable(f"not JSON: {e}", data)


def _auto(data: bytes | None) -> Any:
    """UTF-8 text when the bytes are valid UTF-8, else the bytes themselves."""
    text = _utf8(data)
    return data if isinstance(text, Undecodable) else text


def show(value: Any) -> str:
    """One-line text for a decoded key or value: JSON for data (strings quoted, so ``"1"``
    and ``1`` differ), a bytes literal for bytes."""
    if isinstance(value, Undecodable):
        return f"{value!r} {value.data!r}"
    if isinstance(value, bytes):
        return repr(value)
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return json.dumps(value, ensure_ascii=False, default=str)


def to_json(value: Any) -> Any:
    """A JSON-ready form of a decoded key or value (for ``--json`` output)."""
    if isinstance(value, Undecodable):
        return {"undecodable": value.reason, "base64": base64.b64encode(value.data).decode()}
    if isinstance(value, bytes):
        return {"base64": base64.b64encode(value).decode()}
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return value


def timestamp(seconds: float) -> str:
    """ISO 8601 UTC with milliseconds, e.g. ``2024-05-01T12:00:00.000Z``."""
    try:
        moment = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    except (OverflowError, OSError, ValueError):
        return repr(seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def header_name(name: str) -> str:
    """A header name as printable text: a name read from bytes that are not UTF-8 (kept
    with ``surrogateescape`` by the Kafka consumer) shows those bytes as ``\\xNN``."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return name


def header_text(value: bytes | None) -> str | None:
    """A header value as text: UTF-8 when it is, else a bytes literal; None (Kafka allows
    a null header value) stays None, shown as ``None`` and written as JSON ``null``."""
    if value is None:
        return None
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return repr(value)
