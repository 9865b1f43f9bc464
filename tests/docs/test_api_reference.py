"""Every public name has an entry in the API reference (``docs/reference/api.md``), so the
mkdocstrings page renders it: each name of ``aiostreams.__all__`` and
``aiostreams.sinks.__all__`` must be the object one of the page's ``::: path`` entries
names (``__version__``, a plain string, is mentioned in prose). The conversion of Sphinx
roles that docstrings use is checked on the hook that does it."""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path
from typing import Any

import aiostreams
import aiostreams.sinks

DOCS = Path(__file__).resolve().parents[2] / "docs"
API = DOCS / "reference" / "api.md"


def resolve(path: str) -> Any:
    """The object a dotted ``path`` names: the longest importable module, then attributes."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise AssertionError(f"{path} names nothing importable")


def documented() -> list[Any]:
    entries = re.findall(r"^::: ([\w.]+)\s*$", API.read_text(), re.M)
    assert entries, f"no ::: entries in {API}"
    return [resolve(entry) for entry in entries]


def test_every_public_name_has_an_api_reference_entry() -> None:
    objects = documented()
    missing = [f"{module.__name__}.{name}"
               for module in (aiostreams, aiostreams.sinks)
               for name in module.__all__
               if not name.startswith("__")
               and not any(obj is getattr(module, name) for obj in objects)]
    assert not missing, (f"public names without an entry in {API.relative_to(DOCS.parent)}: "
                         f"{missing}; add '::: <module>.<name>' lines for them")
    assert "`aiostreams.__version__`" in API.read_text()


def test_sphinx_roles_render_as_code_names() -> None:
    sys.path.insert(0, str(DOCS))
    try:
        hooks = importlib.import_module("hooks")
    finally:
        sys.path.remove(str(DOCS))
    html = ("see :class:<code>~aiostreams.dsl.builder.Stream</code> and "
            ":meth:<code>App.start</code>, not :ref:<code>x</code>")
    assert hooks.strip_roles(html) == ("see <code>Stream</code> and <code>App.start</code>, "
                                       "not :ref:<code>x</code>")


def test_the_metrics_server_users_start_has_an_entry() -> None:
    """Not in ``aiostreams.__all__`` but started by users for metrics and queries."""
    from aiostreams.ops.metrics import MetricsServer
    assert any(obj is MetricsServer for obj in documented())
