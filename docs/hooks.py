"""mkdocs hooks.

- The configuration reference is generated from the settings model, so it cannot drift
  from the code: a page containing ``<!-- settings-table -->`` gets the table.
- Docstrings use Sphinx cross-reference roles (``:class:`~aiostreams.App```), which
  Markdown leaves as raw text; the rendered pages show the name as code instead."""

from __future__ import annotations

import re
import types
import typing
from typing import Any

MARKER = "<!-- settings-table -->"


def type_text(annotation: Any) -> str:
    """A setting's type as a reader wants it: allowed values of a ``Literal`` listed,
    ``X | None`` spelled out, no ``typing.`` prefixes."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return " \\| ".join(f"`{a!r}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        parts = [type_text(a) for a in args if a is not type(None)]
        return " \\| ".join(parts) + (" \\| `None`" if type(None) in args else "")
    name = getattr(annotation, "__name__", None) or str(annotation)
    return f"`{name}`"


def bounds_text(metadata: list[Any]) -> str:
    """The numeric bounds of a field (``≥ 1``, ``> 0``), from its annotated-types metadata."""
    marks = []
    for item in metadata:
        for attr, sign in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<")):
            value = getattr(item, attr, None)
            if value is not None:
                marks.append(f"{sign} {value:g}" if isinstance(value, float) else
                             f"{sign} {value}")
    return ", ".join(marks)


def settings_table() -> str:
    from aiostreams.settings.config import Settings

    rows = ["| setting | environment variable | type and allowed values | default | meaning |",
            "| --- | --- | --- | --- | --- |"]
    for name, field in Settings.model_fields.items():
        default = field.default
        shown = "`None`" if default is None else f"`{default!r}`"
        kind = type_text(field.annotation)
        bounds = bounds_text(field.metadata)
        if bounds:
            kind += f", {bounds}"
        description = field.description or ""
        description = description.replace("|", "\\|")
        rows.append(f"| `{name}` | `AIOSTREAMS_{name.upper()}` | {kind} | {shown} "
                    f"| {description} |")
    return "\n".join(rows)


def on_page_markdown(markdown: str, **_: Any) -> str:
    if MARKER in markdown:
        return markdown.replace(MARKER, settings_table())
    return markdown


_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|attr|mod|data|exc|obj|const):"
                   r"<code>(~?)([^<]+)</code>")


def strip_roles(html: str) -> str:
    """``:class:<code>~a.b.C</code>`` (a Sphinx role Markdown left alone) as ``<code>C</code>``
    (``~`` keeps the last component, as Sphinx shows it), else the full name."""
    return _ROLE.sub(lambda m: f"<code>{m[2].rsplit('.', 1)[-1] if m[1] else m[2]}</code>",
                     html)


def on_page_content(html: str, **_: Any) -> str:
    return strip_roles(html)
