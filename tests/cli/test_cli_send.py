"""``aiostreams send``: records from stdin, typed by the app's serdes when given ``--app``.

Run in this process (:func:`aiostreams.cli.main`), where the test can read the memory
broker back with ``app.consumer``.
"""

from __future__ import annotations

import asyncio
import io
import subprocess
import sys
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from clikit import APPS, REPO, environment

from aiostreams import App, Topic
from aiostreams.cli import main


@pytest.fixture
def send_app(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.syspath_prepend(str(APPS))
    import cli_send

    return cli_send


def run_send(monkeypatch: pytest.MonkeyPatch, text: str, *args: str) -> int:
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))
    return main(["send", *args])


def read(app: App, topic: Topic | str) -> list[Any]:
    async def read_all() -> list[Any]:
        async with app.consumer(topic) as records:
            return await records.read_to_end()

    return sorted(asyncio.run(read_all()), key=lambda r: (r.partition, r.offset))


def test_send_json_lines_typed_by_the_apps_serdes(
        send_app: Any, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    lines = ('{"key": "o1", "value": {"id": "o1", "amount": 3}, "headers": {"src": "cli"}, '
             '"timestamp": 1700000000.5}\n\n'
             '{"key": "o2", "value": {"id": "o2", "amount": "4.5"}, "partition": 1}\n')
    code = run_send(monkeypatch, lines, "send-orders", "--json",
                            "--app", "cli_send:app")
    assert code == 0, capsys.readouterr().err
    assert "sent 2 record(s) to 'send-orders' on memory://cli-send (typed by the app's " \
        "serdes)" in capsys.readouterr().err
    got = {r.key: r for r in read(send_app.app, "send-orders")}
    assert got["o1"].value == send_app.Order(id="o1", amount=3.0)
    assert got["o1"].headers == (("src", b"cli"),)
    assert got["o1"].timestamp == pytest.approx(1_700_000_000.5, abs=0.001)
    assert got["o2"].value.amount == 4.5 and got["o2"].partition == 1


def test_send_refuses_a_line_the_topic_cannot_hold_naming_its_number(
        send_app: Any, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    code = run_send(monkeypatch, "a=1\nb=two\nc=3\n", "send-counts",
                            "--key-separator", "=", "--app", "cli_send:app")
    err = capsys.readouterr().err
    assert code == 2
    assert "line 2: the value must be a number for topic 'send-counts' (LongSerde()); got " \
        "'two'" in err
    values = [(r.key, r.value) for r in read(send_app.app, "send-counts")]
    assert values == [("a", 1)]  # nothing after the bad line was sent


def test_send_without_an_app_sends_text_to_an_existing_topic(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    broker = f"memory://send-{uuid.uuid4().hex[:8]}"
    missing = run_send(monkeypatch, "x\n", "lines", "--broker", broker)
    assert missing == 1
    assert "aiostreams topics create lines --partitions N" in capsys.readouterr().err
    app = App("reader", broker=broker)
    raw = app.topic("lines", key=bytes, value=bytes, partitions=1)

    async def first() -> None:
        await app.send(raw, None, b"first")
        await app.stop()

    asyncio.run(first())
    code = run_send(monkeypatch, "héllo\nk:v\n", "lines", "--broker", broker)
    assert code == 0, capsys.readouterr().err
    assert [(r.key, r.value) for r in read(app, raw)] == [
        (None, b"first"), (None, "héllo".encode()), (None, b"k:v")]


@pytest.mark.kafka
def test_send_on_kafka_from_a_pipe(kafka_bootstrap: str,
                                   topic_name: Callable[[str], str]) -> None:
    topic = topic_name("send")
    app = App("send-reader", broker=f"kafka://{kafka_bootstrap}")
    raw = app.topic(topic, key=bytes, value=bytes, partitions=2)

    async def create() -> None:
        await app.send(raw, b"k0", b"v0")
        await app.stop()

    asyncio.run(create())
    done = subprocess.run(
        [sys.executable, "-m", "aiostreams", "send", topic, "--key-separator", "=",
         "--broker", f"kafka://{kafka_bootstrap}"],
        input="k1=v1\nk2=v2\n", cwd=REPO, env=environment(), capture_output=True, text=True,
        timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert f"sent 2 record(s) to {topic!r}" in done.stderr
    assert sorted((r.key, r.value) for r in read(app, raw)) == [
        (b"k0", b"v0"), (b"k1", b"v1"), (b"k2", b"v2")]
