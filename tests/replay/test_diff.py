"""How two runs' outputs are compared: matched by topic, key and source record, so order
across keys does not matter, order within a key's group does; added, removed and changed
counted per topic."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from aiostreams.replay.diff import diff_runs
from aiostreams.replay.outputs import OutputRecord


def out(key: str, value: str, source: int | None, *, topic: str = "alerts",
        offset: int = 0) -> OutputRecord:
    return OutputRecord(topic, 0, offset, 0.0, key.encode(), value.encode(), (),
                        None if source is None else ("payments", 0, source), key, value)


def test_equal_runs_in_another_order_across_keys_diff_empty() -> None:
    a = {"alerts": [out("c1", "x", 1), out("c2", "y", 2), out("c1", "z", 3)]}
    b = {"alerts": [out("c2", "y", 2), out("c1", "x", 1), out("c1", "z", 3)]}
    result = diff_runs(a, b)
    assert result.equal and result.topics["alerts"].unchanged == 3


def test_added_removed_and_changed_records_name_their_source() -> None:
    a = {"alerts": [out("c1", "x", 1), out("c2", "y", 2)], "gone": [out("k", "v", 9)]}
    b = {"alerts": [out("c1", "x!", 1), out("c3", "w", 4)], "gone": []}
    result = diff_runs(a, b)
    kinds = sorted((d.kind, d.topic, d.source) for d in result.differences)
    assert kinds == [("added", "alerts", ("payments", 0, 4)),
                     ("changed", "alerts", ("payments", 0, 1)),
                     ("removed", "alerts", ("payments", 0, 2)),
                     ("removed", "gone", ("payments", 0, 9))]
    counts = result.topics["alerts"]
    assert (counts.changed, counts.added, counts.removed, counts.unchanged) == (1, 1, 1, 0)
    assert "changed  alerts key=c1 from payments[0]@1: x -> x!" in result.summary(10)
    assert result.to_json()["equal"] is False


def test_records_of_one_key_and_source_are_matched_in_order() -> None:
    a = {"t": [out("k", "1", 5), out("k", "2", 5)]}
    b = {"t": [out("k", "2", 5), out("k", "1", 5)]}
    assert [d.kind for d in diff_runs(a, b).differences] == ["changed", "changed"]


def test_records_without_a_source_are_matched_per_key_in_order() -> None:
    a = {"t": [out("k", "1", None), out("j", "9", None), out("k", "2", None)]}
    b = {"t": [out("j", "9", None), out("k", "1", None), out("k", "2", None),
               out("k", "3", None)]}
    result = diff_runs(a, b)
    assert [(d.kind, d.b.value_text if d.b else None) for d in result.differences] == [
        ("added", "3")]


def test_headers_are_compared_only_when_asked() -> None:
    x = out("k", "v", 1)
    y = OutputRecord(x.topic, 0, 0, 0.0, x.key, x.value, (("why", b"other"),), x.source)
    assert diff_runs({"t": [x]}, {"t": [y]}).equal
    assert not diff_runs({"t": [x]}, {"t": [y]}, headers=True).equal


@given(st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 3), st.integers(0, 5)),
                max_size=30), st.randoms())
def test_a_run_diffs_empty_with_itself_shuffled_across_keys(
        rows: list[tuple[str, int, int]], rnd: object) -> None:
    records = [out(k, str(v), s, offset=i) for i, (k, v, s) in enumerate(rows)]
    by_key: dict[str, list[OutputRecord]] = {}
    for r in records:
        by_key.setdefault(r.key_text, []).append(r)
    keys = list(by_key)
    rnd.shuffle(keys)  # type: ignore[attr-defined]
    shuffled = [r for k in keys for r in by_key[k]]  # per key order kept
    assert diff_runs({"t": records}, {"t": shuffled}).equal
