"""``tail --headers`` and ``dlq show`` print a null header value (Kafka allows one) and a
header name that is not UTF-8 (as the Kafka consumer reads it: ``surrogateescape``)."""

from __future__ import annotations

import json

from aiostreams.commands.dlq import DeadLetter, format_dead_letter
from aiostreams.commands.render import decoder
from aiostreams.commands.tail import format_record
from aiostreams.engine.failure import dead_letter_record
from aiostreams.types import RawRecord

RECORD = RawRecord("orders", 0, 7, 1.0, b"k", b"v", (("trace-id", None), ("tag", b"x")))
ODD_NAME = RawRecord("orders", 0, 8, 1.0, b"k", b"v",
                     ((b"\xffid".decode("utf-8", "surrogateescape"), b"1"),))
TEXT = decoder("str", None, "key")


def test_tail_headers_shows_a_null_header_value_as_none_and_json_null() -> None:
    line = format_record(RECORD, TEXT, TEXT, as_json=False, headers=True)
    assert line.endswith("headers={trace-id: None, tag: 'x'}")
    data = json.loads(format_record(RECORD, TEXT, TEXT, as_json=True, headers=True))
    assert data["headers"] == [["trace-id", None], ["tag", "x"]]


def test_dlq_show_prints_a_dead_letter_whose_record_has_a_null_header_value() -> None:
    letter_record = dead_letter_record(RECORD, ValueError("bad"), topic="dlq", attempts=1,
                                       processor="p", now=0.0)
    stored = RawRecord("dlq", 0, 0, 1.0, letter_record.key, letter_record.value,
                       (*letter_record.headers, ("aiostreams.dlq.note", None)))
    letter = DeadLetter.parse(stored)
    assert letter is not None
    shown = format_dead_letter(letter, {"": (TEXT, TEXT)}, with_traceback=False)
    assert "  headers    trace-id: None, tag: 'x'" in shown.splitlines()


def test_a_header_name_that_is_not_utf8_prints_its_bytes_escaped() -> None:
    line = format_record(ODD_NAME, TEXT, TEXT, as_json=False, headers=True)
    assert line.endswith("headers={\\xffid: '1'}")
    line.encode("utf-8")  # printable: no lone surrogate left
    data = json.loads(format_record(ODD_NAME, TEXT, TEXT, as_json=True, headers=True))
    assert data["headers"] == [["\\xffid", "1"]]
    letter_record = dead_letter_record(ODD_NAME, ValueError("bad"), topic="dlq", attempts=1,
                                       processor="p", now=0.0)
    letter = DeadLetter.parse(RawRecord("dlq", 0, 0, 1.0, letter_record.key,
                                        letter_record.value, letter_record.headers))
    assert letter is not None
    shown = format_dead_letter(letter, {"": (TEXT, TEXT)}, with_traceback=False)
    assert "  headers    \\xffid: '1'" in shown.splitlines()
