"""The recording's reader: the last line of a key wins, answers come back as recorded, a
line cut short by a crash is dropped alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiostreams.replay.recording import RecordedAnswer, Recording, segment_name


def answer(offset: int, index: int, value: object = "ok", *, service: str = "risk",
           error: str | None = None) -> RecordedAnswer:
    import pickle

    return RecordedAnswer(service, "payments", 0, offset, index, None,
                          None if error else pickle.dumps(value), error, 0.01)


def write(directory: Path, number: int, answers: list[RecordedAnswer], tail: str = "") -> None:
    lines = "".join(a.to_line() + "\n" for a in answers)
    (directory / segment_name(number)).write_text(lines + tail)


def test_answers_are_found_by_source_record_and_index_and_unpickle_as_recorded(
        tmp_path: Path) -> None:
    write(tmp_path, 1, [answer(5, 0, {"score": 0.9}), answer(5, 1, ("a", 2)),
                        answer(6, 0, error="KeyError: 'c9'"),
                        answer(5, 0, 7, service="geo")])
    rec = Recording.open(tmp_path)
    found = rec.answer("risk", "payments", 0, 5, 1)
    assert found is not None and found.answer() == ("a", 2)
    assert [(a.service, a.index) for a in rec.answers_for("payments", 0, 5)] == [
        ("geo", 0), ("risk", 0), ("risk", 1)]
    failed = rec.answer("risk", "payments", 0, 6, 0)
    assert failed is not None and failed.error == "KeyError: 'c9'"
    with pytest.raises(ValueError, match="KeyError"):
        failed.answer()
    assert rec.answer("risk", "payments", 0, 7, 0) is None
    assert rec.answers_for("payments", 1, 5) == []


def test_the_last_line_of_a_key_wins_across_segments(tmp_path: Path) -> None:
    write(tmp_path, 1, [answer(5, 0, "first")])
    write(tmp_path, 2, [answer(5, 0, "again")])
    found = Recording.open(tmp_path).answer("risk", "payments", 0, 5, 0)
    assert found is not None and found.answer() == "again"


def test_a_line_cut_short_by_a_crash_is_dropped_alone(tmp_path: Path) -> None:
    write(tmp_path, 1, [answer(1, 0)], tail=answer(2, 0).to_line()[:20])
    rec = Recording.open(tmp_path)
    assert len(rec) == 1 and rec.answer("risk", "payments", 0, 1, 0) is not None


def test_opening_a_missing_directory_says_what_to_give(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="record_services_dir"):
        Recording.open(tmp_path / "nope")


def test_a_line_is_what_json_dumps_of_its_fields_gives_and_reads_back() -> None:
    import json
    import pickle

    for answer in (RecordedAnswer("risk", "pay\u00e9\"s", 3, 2**40, 7, "('c1', 2)",
                                  pickle.dumps({"x": 1}), None, 0.25),
                   RecordedAnswer("geo", "t", 0, 0, 0, None, None, "KeyError: 'a\nb'", 1e-7)):
        line = answer.to_line()
        assert json.loads(line) == {
            "service": answer.service, "topic": answer.topic, "partition": answer.partition,
            "offset": answer.offset, "index": answer.index, "request": answer.request,
            "value": None if answer.value is None else __import__("base64").b64encode(
                answer.value).decode(), "error": answer.error, "latency": answer.latency}
        assert RecordedAnswer.from_line(line) == answer
