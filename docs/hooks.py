"""mkdocs hook: the configuration reference is generated from the settings model, so it
cannot drift from the code. A page containing ``<!-- settings-table -->`` gets the table."""

from __future__ import annotations

from typing import Any

MARKER = "<!-- settings-table -->"


def _type_name(annotation: Any) -> str:
    text = getattr(annotation, "__name__", None) or str(annotation)
    return (text.replace("typing.", "").replace("pydantic.types.", "")
            .replace("pathlib.", "").replace("NoneType", "None"))


def settings_table() -> str:
    from aiostreams.config import Settings

    rows = ["| setting | environment variable | type | default | meaning |",
            "| --- | --- | --- | --- | --- |"]
    for name, field in Settings.model_fields.items():
        default = field.default
        shown = "—" if default is None else f"`{default!r}`"
        description = (field.description or "").replace("|", "\\|")
        rows.append(f"| `{name}` | `AIOSTREAMS_{name.upper()}` | `{_type_name(field.annotation)}` "
                    f"| {shown} | {description} |")
    return "\n".join(rows)


def on_page_markdown(markdown: str, **_: Any) -> str:
    if MARKER in markdown:
        return markdown.replace(MARKER, settings_table())
    return markdown
