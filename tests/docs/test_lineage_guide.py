"""The lineage guide's app, fed the payments it describes, writes the header the guide shows,
and ``explain`` of the output it names prints what the guide says it prints."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from aiostreams.commands.explain import explain, render_text
from aiostreams.runtime.lineage import LINEAGE_HEADER, Origin
from aiostreams.testing import TopologyTestDriver
from aiostreams.transport.memory import MemoryTransport

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "lineage.md"


async def test_the_guides_app_explains_its_output_as_the_guide_shows() -> None:
    text = GUIDE.read_text()
    snippet = re.findall(r"```python\n(.*?)```", text, re.S)[0]
    names: dict[str, Any] = {"__name__": "guide"}
    exec(compile(snippet, str(GUIDE), "exec"), names)
    app, payments, counts = names["app"], names["payments"], names["counts"]
    command = re.search(r"`aiostreams explain card-counts (\d+) (\d+) --app fraud:app`", text)
    assert command is not None
    shown = text.split(f"`{command.group(0)[1:-1]}` prints:\n\n```\n", 1)[1].split("```")[0]
    header = re.search(rf"{LINEAGE_HEADER}: (\S+)\n", text)
    assert header is not None
    async with TopologyTestDriver(app) as driver:
        for i, card in enumerate(["c1", "c2", "c1", "c1"]):
            driver.pipe_input(payments, f"p{i}", {"card": card, "amount": 10 * i},
                              1_700_000_000.0 + i)
        await driver.process_all()
        at = Origin(counts.name, int(command.group(1)), int(command.group(2)))
        [output] = [r for r in driver.read_raw_output(counts)
                    if (r.partition, r.offset) == at[1:]]
        steps = await explain(MemoryTransport(driver.broker), at, app=app)
    assert output.headers == ((LINEAGE_HEADER, header.group(1).encode()),)
    assert render_text(steps) + "\n" == shown
