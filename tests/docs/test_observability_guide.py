"""The observability guide's snippet runs as written and prints what the guide says it
prints: the span names of a traced record, its trace continuing the upstream
``traceparent``, the output carrying the record span, the link to its commit."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "observability.md"


def test_the_guides_tracing_snippet_prints_what_the_guide_shows() -> None:
    text = GUIDE.read_text()
    (snippet,) = re.findall(r"```python\n(.*?)```", text, re.S)
    shown = text.split("It prints:\n\n```\n", 1)[1].split("```", 1)[0]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(snippet, str(GUIDE), "exec"), {"__name__": "guide"})
    assert printed.getvalue() == shown


def test_the_guide_names_the_dropped_records_metric_the_server_exports() -> None:
    """The exported name is checked in ``tests/test_metrics.py``; here, that the guide
    gives it with its labels and reason."""
    text = GUIDE.read_text()
    assert 'aiostreams_task_dropped_records_total{app, task, node, reason="late"}' in text
