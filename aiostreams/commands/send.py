"""``aiostreams send TOPIC``: produce records read from stdin, one per line.

Each line is a value (no key), or with ``--key-separator SEP`` a key, the separator and a
value; with ``--json`` each line is an object ``{"key": ..., "value": ..., "headers":
{...}, "timestamp": SECONDS, "partition": N}`` (only ``value`` is required). Blank lines
are skipped.

With ``--app`` the topic's serdes type the records: a key or value is checked by decoding
it with the topic's serde (a pydantic model validates the JSON, a number must parse), so a
bad line is refused with its line number before anything after it is sent; a topic the app
declares is created when missing, as the app would. Without ``--app`` keys and values are
sent as UTF-8 text, and the topic must exist.

Records are sent in input order and flushed at the end (and after each line when stdin is a
terminal); the count goes to stderr.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import IO, Any

from aiostreams.clients import AppProducer, HeadersLike
from aiostreams.commands import CommandError, UsageError
from aiostreams.errors import DeserializationError, SerializationError
from aiostreams.serde import BytesSerde, FloatSerde, IntSerde, LongSerde, Serde
from aiostreams.topic import Topic
from aiostreams.transport.base import Transport


async def send(transport: Transport, topic: Topic, *, declared: bool, as_json: bool,
               key_separator: str | None, stdin: IO[str] | None = None) -> int:
    if key_separator == "":
        raise UsageError("--key-separator must not be empty")
    source = stdin if stdin is not None else sys.stdin
    if not declared:
        await _require_topic(transport, topic.name)
    typed = not isinstance(topic.value_serde, BytesSerde) or not isinstance(
        topic.key_serde, BytesSerde)
    interactive = source.isatty()
    sent = 0
    number = 0
    async with AppProducer(transport, lambda t: topic, client_id="aiostreams-send") as out:
        while True:
            line = await asyncio.to_thread(source.readline)
            if not line:
                break
            number += 1
            text = line.rstrip("\r\n")
            if not text.strip():
                continue
            fields = _parse(text, number, as_json=as_json, key_separator=key_separator)
            key = _typed(topic, topic.key_serde, fields["key"], "key", number)
            value = _typed(topic, topic.value_serde, fields["value"], "value", number)
            try:
                await out.send(topic, key, value, headers=fields["headers"],
                               timestamp=fields["timestamp"], partition=fields["partition"])
            except (SerializationError, TypeError) as e:
                raise UsageError(f"line {number}: {e}") from None
            sent += 1
            if interactive:
                await out.flush()
    how = "typed by the app's serdes" if typed else "as UTF-8 text"
    print(f"aiostreams: sent {sent} record(s) to {topic.name!r} on {transport.url} ({how})",
          file=sys.stderr, flush=True)
    return 0


def _parse(text: str, number: int, *, as_json: bool,
           key_separator: str | None) -> dict[str, Any]:
    fields: dict[str, Any] = {"key": None, "value": text, "headers": None,
                              "timestamp": None, "partition": None}
    if as_json:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise UsageError(f"line {number}: not JSON ({e.msg} at column {e.colno}); with "
                             "--json each line is {\"key\": ..., \"value\": ...}") from None
        if not isinstance(data, dict) or "value" not in data:
            raise UsageError(f"line {number}: with --json each line is an object with a "
                             "\"value\" (and optional key, headers, timestamp, partition)")
        unknown = set(data) - set(fields)
        if unknown:
            raise UsageError(f"line {number}: unknown field(s) {sorted(unknown)}; known: "
                             "key, value, headers, timestamp, partition")
        fields.update(data)
        headers: HeadersLike = fields["headers"]
        if headers is not None and not isinstance(headers, dict):
            raise UsageError(f"line {number}: headers must be an object of strings")
    elif key_separator is not None:
        key, found, value = text.partition(key_separator)
        if not found:
            raise UsageError(f"line {number}: no key separator {key_separator!r} in "
                             f"{text[:60]!r}")
        fields["key"], fields["value"] = key, value
    return fields


def _typed(topic: Topic, serde: Serde[Any], given: Any, field: str, number: int) -> Any:
    """What the topic's serde makes of ``given`` (text, or a JSON value with --json):
    numbers for the binary number serdes, text for the others, checked by decoding."""
    if given is None:
        return None
    if isinstance(serde, IntSerde | LongSerde | FloatSerde):
        kind = float if isinstance(serde, FloatSerde) else int
        try:
            return kind(given)
        except (TypeError, ValueError):
            raise UsageError(f"line {number}: the {field} must be a number for topic "
                             f"{topic.name!r} ({serde!r}); got {given!r}") from None
    text = given if isinstance(given, str) else json.dumps(given)
    if isinstance(serde, BytesSerde):
        return text.encode()
    try:
        return serde.deserialize(topic.name, text.encode())
    except DeserializationError as e:
        raise UsageError(f"line {number}: the {field} is not what topic {topic.name!r} "
                         f"holds: {e.reason}") from None


async def _require_topic(transport: Transport, name: str) -> None:
    admin = transport.admin()
    await admin.start()
    try:
        exists = await admin.partitions_for(name) is not None
    finally:
        await admin.stop()
    if not exists:
        raise CommandError(f"topic {name!r} does not exist on {transport.url}: create it "
                           f"with 'aiostreams topics create {name} --partitions N', or give "
                           "--app of an app that declares it")
