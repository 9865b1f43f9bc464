"""``aiostreams tail TOPIC``: print a topic's records, decoded, as they arrive.

From the end (new records only) unless ``--from-beginning``; until ``--limit`` records,
Ctrl-C, or with ``--no-follow`` the end of the topic as it was at the start. One line per
record::

    orders[2]@41 2024-05-01T12:00:00.000Z key="c-17" value={"id": "o-9", "amount": 12.5}

or one JSON object per line with ``--json``. While following, a line on stderr says where it
started (``aiostreams: tailing 'orders' on kafka://... from the end``): records produced after
that line appears are printed.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from aiostreams.commands import UsageError
from aiostreams.commands.reader import Start, TopicReader
from aiostreams.commands.render import (
    Decoder,
    header_name,
    header_text,
    show,
    timestamp,
    to_json,
)
from aiostreams.transport.base import Transport
from aiostreams.types import RawRecord


async def tail(transport: Transport, topic: str, *, from_beginning: bool, limit: int | None,
               follow: bool, key: Decoder, value: Decoder, as_json: bool,
               headers: bool) -> int:
    if limit is not None and limit < 1:
        raise UsageError(f"--limit must be at least 1, got {limit}")
    async with TopicReader(transport, topic) as reader:
        await reader.seek(Start.BEGINNING if from_beginning else Start.END)
        if follow:
            where = "the beginning" if from_beginning else "the end"
            print(f"aiostreams: tailing {topic!r} on {transport.url} from {where} "
                  f"({len(reader.partitions)} partition(s)); Ctrl-C to stop",
                  file=sys.stderr, flush=True)
        async for record in reader.records(follow=follow, limit=limit):
            print(format_record(record, key, value, as_json=as_json, headers=headers),
                  flush=True)
    return 0


def format_record(record: RawRecord, key: Decoder, value: Decoder, *, as_json: bool,
                  headers: bool) -> str:
    k, v = key(record.key), value(record.value)
    if as_json:
        data: dict[str, Any] = {
            "topic": record.topic, "partition": record.partition, "offset": record.offset,
            "timestamp": record.timestamp, "key": to_json(k), "value": to_json(v),
        }
        if headers:
            data["headers"] = [[header_name(name), header_text(raw)]
                               for name, raw in record.headers]
        return json.dumps(data, ensure_ascii=False, default=str)
    line = (f"{record.topic}[{record.partition}]@{record.offset} {timestamp(record.timestamp)} "
            f"key={show(k)} value={show(v)}")
    if headers and record.headers:
        line += " headers={" + ", ".join(
            f"{header_name(name)}: {header_text(raw)!r}" for name, raw in record.headers) + "}"
    return line
