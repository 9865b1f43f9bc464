"""The testing guide's app-factory example runs as written: its code blocks are taken from
``docs/guides/testing.md``, the app module written to a package, the test run twice in one
process (a fresh app per run), and a module-level app driven twice fails as the guide says."""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aiostreams.testing import TopologyTestDriver

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "testing.md"


def factory_blocks() -> tuple[str, str]:
    """The two Python blocks of the guide's "One app per run" section."""
    section = GUIDE.read_text().split("## One app per run", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 2, blocks
    return blocks[0], blocks[1]


@pytest.fixture
def myproject(tmp_path: Path) -> Iterator[Any]:
    app_source, _ = factory_blocks()
    package = tmp_path / "src" / "myproject"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "app.py").write_text(app_source)
    sys.path.insert(0, str(tmp_path / "src"))
    try:
        yield importlib.import_module("myproject.app")
    finally:
        sys.path.remove(str(tmp_path / "src"))
        for name in [n for n in sys.modules if n.split(".")[0] == "myproject"]:
            del sys.modules[name]


async def test_the_guides_factory_example_passes_run_after_run(myproject: Any,
                                                               tmp_path: Path) -> None:
    _, test_source = factory_blocks()
    namespace: dict[str, Any] = {}
    exec(compile(test_source, str(GUIDE), "exec"), namespace)
    for run in range(2):  # one process, two fresh apps
        await namespace["test_positive_orders_land_in_parquet"](tmp_path / f"run{run}")


async def test_a_module_level_app_drives_once_as_the_guide_says(myproject: Any,
                                                                 tmp_path: Path) -> None:
    app, order = myproject.create_app(tmp_path / "orders"), myproject.Order
    for attempt in range(2):
        if attempt:
            with pytest.raises(RuntimeError, match=r"sink '[^']+' starts once; it is stopped"):
                await drive(app, order)
        else:
            await drive(app, order, commit=False)


async def drive(app: Any, order: Any, *, commit: bool = True) -> None:
    async with TopologyTestDriver(app) as driver:
        driver.pipe_input("orders", "o1", order(id="o1", amount=0.0))  # filtered: no file
        await driver.process_all()
        if commit:
            await driver.commit()


def test_the_guide_names_every_way_to_pipe_and_read_records() -> None:
    guide = GUIDE.read_text()
    calls = sorted(name for name in vars(TopologyTestDriver)
                   if name.startswith(("pipe_", "read_")))
    assert "pipe_raw_input" in calls
    missing = [name for name in calls if f"`{name}(" not in guide]
    assert missing == [], f"the testing guide's table lacks {missing}"
