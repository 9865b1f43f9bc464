"""``describe``, ``topics``, ``tail`` and ``dlq`` on a ``memory://`` broker.

A subprocess sees a memory broker only through ``--app MODULE:APP``, whose import preloads
it (``tests/cli/apps/cli_demo.py``). What ``dlq replay`` changes on a broker is checked by
calling :func:`aiostreams.cli.main` in this process, where the test can look at the broker.
"""

from __future__ import annotations

import json
import signal
import uuid

import pytest
from clikit import Running, cli, error_lines

from aiostreams import serde_for
from aiostreams.cli import main
from aiostreams.engine.failure import dead_letter_record
from aiostreams.transport.memory import MemoryBroker
from aiostreams.types import OutgoingRecord, RawRecord

APP = ("--app", "cli_demo:app")


def test_describe_prints_the_topology_and_the_settings_it_sets() -> None:
    done = cli("describe", "cli_demo:app", "--set", "max_in_flight=12")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("App: cli-demo\nBroker: memory://cli-demo\n")
    assert "Settings: commit_interval_ms=20.0, dead_letter_topic='demo-dlq', " \
           "max_in_flight=12, poll_timeout=0.01" in out
    assert "demo-orders: key StrSerde(), value PydanticSerde(Order), 2 partition(s)" in out
    assert "Source: orders (topics: [demo-orders])\n      --> upper" in out
    assert "Sink: to-upper (topic: demo-orders-upper)" in out


def test_describe_mermaid_prints_only_the_flowchart() -> None:
    done = cli("describe", "cli_demo:app", "--mermaid")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("flowchart LR\n")
    assert "n_orders --> n_upper" in done.stdout
    assert "App:" not in done.stdout


def test_topics_list_and_describe_show_partitions_and_offsets() -> None:
    listed = cli("topics", "list", *APP)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines() == ["demo-dlq     1 partition(s)",
                                          "demo-orders  2 partition(s)"]
    described = cli("topics", "describe", "demo-orders", *APP)
    assert described.returncode == 0, described.stderr
    lines = described.stdout.splitlines()
    assert lines[0] == "topic 'demo-orders' on memory://cli-demo: 2 partition(s), 20 record(s)"
    assert lines[2].split() == ["0", "0", "10", "10"]
    assert lines[3].split() == ["1", "0", "10", "10"]


def test_topics_describe_of_a_missing_topic_exits_1_naming_it() -> None:
    done = cli("topics", "describe", "nope", *APP)
    assert done.returncode == 1
    assert error_lines(done) == [
        "aiostreams: error: topic 'nope' does not exist on memory://cli-demo; `aiostreams "
        "topics list` shows the topics there (--debug shows the traceback)"]


def test_topics_create_refuses_an_existing_topic_unless_told() -> None:
    created = cli("topics", "create", "fresh", "--partitions", "3", *APP)
    assert created.returncode == 0, created.stderr
    assert created.stdout == "created topic 'fresh' with 3 partition(s)\n"
    exists = cli("topics", "create", "demo-orders", "--partitions", "2", *APP)
    assert exists.returncode == 1
    assert "topic 'demo-orders' exists already on memory://cli-demo with 2 partition(s)" \
        in exists.stderr
    fine = cli("topics", "create", "demo-orders", "--partitions", "2", "--if-not-exists", *APP)
    assert fine.returncode == 0
    bad = cli("topics", "create", "t", "--partitions", "0")
    assert bad.returncode == 2
    assert "--partitions must be at least 1, got 0" in bad.stderr


def test_tail_decodes_records_with_the_apps_serdes() -> None:
    done = cli("tail", "demo-orders", "--from-beginning", "--limit", "3", *APP)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        'demo-orders[0]@0 2023-11-14T22:13:20.000Z key="c0" '
        'value={"id":"o0","item":"item0","amount":0.0}',
        'demo-orders[0]@1 2023-11-14T22:13:22.000Z key="c2" '
        'value={"id":"o2","item":"item2","amount":2.0}',
        'demo-orders[0]@2 2023-11-14T22:13:24.000Z key="c4" '
        'value={"id":"o4","item":"item4","amount":4.0}',
    ]


def test_tail_json_lines_and_explicit_serdes() -> None:
    done = cli("tail", "demo-orders", "--from-beginning", "--no-follow", "--json",
               "--key-serde", "bytes", "--value-serde", "json", *APP)
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(records) == 20
    assert records[0]["key"] == {"base64": "YzA="}  # b"c0"
    assert records[0]["value"] == {"id": "o0", "item": "item0", "amount": 0.0}
    assert {(r["partition"], r["offset"]) for r in records} == {
        (p, o) for p in (0, 1) for o in range(10)}


def test_tail_from_the_end_without_follow_prints_nothing() -> None:
    done = cli("tail", "demo-orders", "--no-follow", *APP)
    assert (done.returncode, done.stdout) == (0, "")


def test_tail_shows_undecodable_bytes_instead_of_failing() -> None:
    done = cli("tail", "demo-dlq", "--from-beginning", "--no-follow", "--value-serde", "str",
               "--key-serde", "json", "--headers", *APP)
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]
    assert first.startswith("demo-dlq[0]@0 ")
    assert "key=<undecodable: not JSON:" in first  # b"c2" is not JSON
    assert "aiostreams.dlq.exception: 'ValueError'" in first


@pytest.mark.parametrize(("signum", "exit_code"), [(signal.SIGINT, 130), (signal.SIGTERM, 0)])
def test_tail_follows_until_ctrl_c_exiting_130_or_sigterm_exiting_0(
        signum: int, exit_code: int) -> None:
    tail = Running("tail", "demo-orders", "--from-beginning", *APP)
    try:
        tail.expect(r"aiostreams: tailing 'demo-orders' on memory://cli-demo from the "
                    r"beginning \(2 partition\(s\)\); Ctrl-C to stop")
        tail.signal(signum)
        code, stderr = tail.finish()
    finally:
        tail.kill()
    assert code == exit_code, stderr
    assert len(tail.stdout) == 20
    assert "Traceback" not in stderr


def test_tail_of_a_missing_topic_exits_1() -> None:
    done = cli("tail", "nope", "--no-follow", *APP)
    assert done.returncode == 1
    assert "topic 'nope' does not exist" in done.stderr


def test_dlq_show_prints_origin_error_attempts_and_decoded_record() -> None:
    done = cli("dlq", "show", *APP)  # the topic: the app's dead_letter_topic
    assert done.returncode == 0, done.stderr
    blocks = done.stdout.split("\n\n")
    assert blocks[0].splitlines() == [
        "dead letter demo-dlq[0]@0",
        "  origin     demo-orders[1]@107",
        "  processor  upper",
        "  exception  ValueError: order o107 is poison",
        "  attempts   3",
        "  failed at  2023-11-14T22:16:40.000Z",
        '  key        "c2"',
        '  value      {"id":"o107","item":"poison","amount":107.0}',
        "  headers    trace-id: 't-107'",
    ]
    assert "demo-orders[1]@117" in blocks[1]
    assert blocks[-1].strip() == "2 dead letter(s) shown; 2 record(s) in 'demo-dlq'"
    assert "Traceback" not in done.stdout


def test_dlq_show_traceback_and_limit() -> None:
    done = cli("dlq", "show", "demo-dlq", "--limit", "1", "--traceback", *APP)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("dead letter demo-dlq") == 1
    assert "  traceback\n    Traceback (most recent call last):" in done.stdout
    assert "raise ValueError(f\"order o{i} is poison\")" in done.stdout
    assert "1 dead letter(s) shown" in done.stdout


@pytest.mark.parametrize("action", ["show", "replay"])
def test_dlq_needs_a_topic_when_the_app_has_none_naming_the_command(action: str) -> None:
    done = cli("dlq", action)
    assert done.returncode == 2
    assert f"name the dead-letter topic (aiostreams dlq {action} TOPIC)" in done.stderr


def test_dlq_replay_dry_run_lists_and_changes_nothing() -> None:
    done = cli("dlq", "replay", "--dry-run", *APP)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "would replay demo-dlq[0]@0 -> demo-orders (ValueError: order o107 is poison)",
        "would replay demo-dlq[0]@1 -> demo-orders (ValueError: order o117 is poison)",
        "dry run: would replay 2 dead letter(s) (2 to 'demo-orders'); nothing was sent or "
        "committed",
    ]


# -- replay, in this process ------------------------------------------------------------


def dead_letters(broker: MemoryBroker, count: int, first: int = 0) -> None:
    strs = serde_for(str)
    letters = []
    for i in range(first, first + count):
        raw = RawRecord("payments", 0, i, 1_700_000_000.0 + i, strs.serialize("p", f"k{i}"),
                        strs.serialize("p", f"v{i}"), (("trace-id", b"t%d" % i),))
        letters.append((dead_letter_record(raw, KeyError("missing"), topic="dlq", attempts=2,
                                           processor="pay", now=1.0), 0))
    broker.append(letters)


@pytest.fixture
def named_broker() -> tuple[str, MemoryBroker]:
    name = f"replay-{uuid.uuid4().hex[:8]}"
    broker = MemoryBroker.named(name)
    broker.create_topic("dlq", 1)
    broker.create_topic("payments", 3)
    return f"memory://{name}", broker


def test_dlq_replay_republishes_original_records_once(
        named_broker: tuple[str, MemoryBroker], capsys: pytest.CaptureFixture[str]) -> None:
    url, broker = named_broker
    dead_letters(broker, 3)
    assert main(["dlq", "replay", "dlq", "--broker", url]) == 0
    assert "replayed 3 dead letter(s) from 'dlq' (3 to 'payments')" in capsys.readouterr().out
    replayed = sorted(broker.records("payments"), key=lambda r: r.timestamp)
    assert [(r.key, r.value, r.timestamp) for r in replayed] == [
        (b"k0", b"v0", 1_700_000_000.0), (b"k1", b"v1", 1_700_000_001.0),
        (b"k2", b"v2", 1_700_000_002.0)]
    assert dict(replayed[0].headers) == {"trace-id": b"t0",
                                         "aiostreams.replayed-from": b"dlq[0]@0"}

    assert main(["dlq", "replay", "dlq", "--broker", url]) == 0  # nothing new
    assert "replayed 0 dead letter(s)" in capsys.readouterr().out
    dead_letters(broker, 1, first=3)
    assert main(["dlq", "replay", "dlq", "--broker", url, "--limit", "5"]) == 0
    assert "replayed 1 dead letter(s)" in capsys.readouterr().out
    assert len(broker.records("payments")) == 4
    assert main(["dlq", "replay", "dlq", "--broker", url, "--from-beginning",
                 "--limit", "2"]) == 0
    assert "replayed 2 dead letter(s)" in capsys.readouterr().out
    assert len(broker.records("payments")) == 6


def test_dlq_replay_refuses_when_an_origin_topic_is_missing(
        named_broker: tuple[str, MemoryBroker], capsys: pytest.CaptureFixture[str]) -> None:
    url, broker = named_broker
    dead_letters(broker, 1)
    broker.delete_topics(["payments"])
    assert main(["dlq", "replay", "dlq", "--broker", url]) == 1
    err = capsys.readouterr().err
    assert "origin topic(s) ['payments'] do not exist" in err
    assert "nothing was replayed" in err
    assert main(["dlq", "replay", "dlq", "--broker", url, "--dry-run"]) == 0


def test_dlq_replay_skips_records_that_are_not_dead_letters(
        named_broker: tuple[str, MemoryBroker], capsys: pytest.CaptureFixture[str]) -> None:
    url, broker = named_broker
    broker.append([(OutgoingRecord("dlq", b"k", b"stray"), 0)])
    dead_letters(broker, 1)
    assert main(["dlq", "replay", "dlq", "--broker", url]) == 0
    out = capsys.readouterr().out
    assert "skipping 1 record(s) that are not dead letters (no aiostreams.dlq.topic " \
           "header): dlq[0]@0" in out
    assert "replayed 1 dead letter(s)" in out


def mixed_dead_letters(broker: MemoryBroker) -> None:
    """dlq[0]@0..3: KeyError from "pay", ValueError from "pay", KeyError from "ship",
    ConnectionError from "pay" (trace ids t0..t3)."""
    strs = serde_for(str)
    errors = [(KeyError("missing"), "pay"), (ValueError("bad"), "pay"),
              (KeyError("gone"), "ship"), (ConnectionError("503"), "pay")]
    letters = []
    for i, (error, processor) in enumerate(errors):
        raw = RawRecord("payments", 0, i, 1_700_000_000.0 + i, strs.serialize("p", f"k{i}"),
                        strs.serialize("p", f"v{i}"), (("trace-id", b"t%d" % i),))
        letters.append((dead_letter_record(raw, error, topic="dlq", attempts=1,
                                           processor=processor, now=1.0), 0))
    broker.append(letters)


def test_dlq_replay_by_exception_sends_only_those_and_keeps_its_own_position(
        named_broker: tuple[str, MemoryBroker], capsys: pytest.CaptureFixture[str]) -> None:
    url, broker = named_broker
    mixed_dead_letters(broker)
    fixable = ["dlq", "replay", "dlq", "--broker", url, "--exception", "ValueError",
               "--exception", "ConnectionError"]
    assert main([*fixable, "--dry-run"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "leaving 2 dead letter(s) that do not match --exception ConnectionError "
        "--exception ValueError (2 KeyError)",
        "would replay dlq[0]@1 -> payments (ValueError: bad)",
        "would replay dlq[0]@3 -> payments (ConnectionError: 503)",
        "dry run: would replay 2 dead letter(s) (2 to 'payments'); nothing was sent or "
        "committed"]
    assert broker.records("payments") == []
    assert main(fixable) == 0
    assert "replayed 2 dead letter(s) from 'dlq' (2 to 'payments')" in capsys.readouterr().out
    assert sorted(r.value for r in broker.records("payments")) == [b"v1", b"v3"]
    assert main([*fixable[:5], *fixable[7:], *fixable[5:7]]) == 0  # the same, reordered:
    assert "replayed 0 dead letter(s)" in capsys.readouterr().out  # its position is saved
    # another filter has its own position: it still finds the KeyErrors left behind
    assert main(["dlq", "replay", "dlq", "--broker", url, "--exception", "KeyError"]) == 0
    assert "replayed 2 dead letter(s)" in capsys.readouterr().out
    assert sorted(r.value for r in broker.records("payments")) == [b"v0", b"v1", b"v2", b"v3"]


def test_dlq_replay_by_header_needs_every_header_given(
        named_broker: tuple[str, MemoryBroker], capsys: pytest.CaptureFixture[str]) -> None:
    url, broker = named_broker
    mixed_dead_letters(broker)
    assert main(["dlq", "replay", "dlq", "--broker", url, "--dry-run",
                 "--header", "aiostreams.dlq.processor=pay", "--header", "trace-id=t0"]) == 0
    out = capsys.readouterr().out
    assert "would replay dlq[0]@0 -> payments (KeyError: 'missing')" in out
    assert "dry run: would replay 1 dead letter(s)" in out
    assert main(["dlq", "replay", "dlq", "--broker", url, "--dry-run",
                 "--header", "aiostreams.dlq.processor=ship"]) == 0
    assert "would replay dlq[0]@2 -> payments (KeyError: 'gone')" in capsys.readouterr().out
    assert main(["dlq", "replay", "dlq", "--broker", url, "--header", "=x"]) == 2
    assert "expected NAME=VALUE or NAME" in capsys.readouterr().err
