"""The home page's app runs as written: the two Python blocks of ``docs/index.md``'s "An app
in fifteen lines" are executed as the reader would run them (the app module, then its
``main``) on a memory broker of the test's own, and what the page promises holds: fifteen
lines, 945 orders enriched, each partition's results in the order its orders went in, the
picture it shows is in the repository."""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import pytest

import aiostreams as ais

DOCS = Path(__file__).resolve().parents[2] / "docs"
HOME = DOCS / "index.md"


def home_blocks() -> tuple[str, str]:
    section = HOME.read_text().split("## An app in fifteen lines", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 2, blocks
    return blocks[0], blocks[1]


def test_the_home_pages_app_is_fifteen_lines() -> None:
    app_source, _ = home_blocks()
    lines = [line for line in app_source.splitlines() if line.strip()]
    assert len(lines) == 15, "\n".join(lines)


def test_the_home_pages_app_enriches_in_input_order_per_partition(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("AIOSTREAMS_BROKER", f"memory://home-{uuid.uuid4().hex[:8]}")
    app_source, main_source = home_blocks()
    namespace: dict[str, Any] = {"__name__": "shop"}  # imported, as `aiostreams run` does
    exec(compile(app_source, str(HOME), "exec"), namespace)
    exec(compile(main_source, str(HOME), "exec"), namespace)  # sends, runs, prints
    assert capsys.readouterr().out.strip() == "945 enriched"

    app = namespace["app"]

    async def read(topic: str) -> list[ais.Record[Any, Any]]:
        async with app.consumer(topic) as records:
            return list(await records.read_to_end())

    sent = ais.run_event_loop(read("orders"))
    out = ais.run_event_loop(read("orders-enriched"))
    expected = [(r.partition, r.key, {"amount": r.value.amount, "gold": r.value.amount > 100})
                for r in sent if r.value.amount > 0]
    assert sorted((r.key, str(r.value)) for r in out) == sorted(
        (key, str(value)) for _, key, value in expected)
    came_from = {key: partition for partition, key, _ in expected}
    for q in {r.partition for r in out}:  # in each output partition, each input
        keys = [r.key for r in out if r.partition == q]  # partition's orders keep their order
        here = set(keys)
        for p in range(4):
            assert ([key for key in keys if came_from[key] == p]
                    == [key for partition, key, _ in expected
                        if partition == p and key in here]), (p, q)


def test_the_home_pages_pictures_are_committed_and_load_nothing_from_outside() -> None:
    images = re.findall(r'(?:src|srcset)="([^"]+)"', HOME.read_text())
    assert len(images) == 2, f"expected the wide and the narrow picture, found {images}"
    for image in images:
        svg = (DOCS / image).read_text()
        assert svg.lstrip().startswith("<svg"), image
        assert not re.search(r"(?:href|src)=\"(?:https?:)?//", svg), (
            f"{image} loads something from the internet; draw it in the file")
