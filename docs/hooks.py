"""mkdocs hooks.

- The configuration reference is generated from the settings model, so it cannot drift
  from the code: a page with a line ``<!-- settings-table -->`` gets it there, grouped by
  concern (``CONCERNS``).
- Docstrings use Sphinx cross-reference roles (``:class:`~aiostreams.App```), which
  Markdown leaves as raw text; the rendered pages show the name as code instead.
- Inline code may wrap only after ``_``, ``.`` and ``/`` (a ``<wbr>`` there; the theme's
  ``word-break: break-word`` is undone in ``docs/css/aiostreams.css``), so a table never
  shows ``max_in_fli ght``; code blocks are left alone (they scroll)."""

from __future__ import annotations

import html
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


CONCERNS: list[tuple[str, str, list[str]]] = [
    ("Where the app runs",
     "The broker, how the app's clients name themselves, and where local state lives.",
     ["broker", "client_id", "group_instance_id", "static_membership", "default_partitions",
      "state_dir"]),
    ("Records in flight: the reorder buffer",
     "How much work a task holds at once, and which earlier records a record waits for "
     "([the engine](../concepts/engine.md), [ordering modes](../guides/ordering.md)).",
     ["max_in_flight", "max_concurrency", "max_task_buffer_bytes", "ordering"]),
    ("Fetching input",
     "How records come in from the input partitions, and where reading resumes.",
     ["max_buffered_per_partition", "max_poll_records", "poll_timeout", "max_task_idle_ms",
      "offset_out_of_range", "repartition_purge_interval_ms"]),
    ("Commits and guarantees",
     "When results become durable and visible ([exactly-once](../guides/exactly-once.md)).",
     ["processing_guarantee", "commit_interval_ms", "drain_timeout", "max_record_bytes"]),
    ("State: the record cache",
     "How many intermediate updates of an aggregate reach its store and downstream "
     "([record cache](../guides/state.md#record-cache)).",
     ["cache_max_bytes"]),
    ("Failures: retries and dead letters",
     "What happens to a record whose processing raises or hangs "
     "([retries and dead letters](../guides/failures.md)).",
     ["on_error", "dead_letter_topic", "retry_attempts", "retry_backoff",
      "retry_max_backoff", "processing_timeout"]),
    ("Standby replicas and placement",
     "Copies of task state on other hosts, and a group assignment that knows where state is "
     "([standby replicas](../guides/deployment.md#standby-replicas)).",
     ["num_standby_replicas", "host_id", "acceptable_recovery_lag", "max_warmup_replicas",
      "probing_rebalance_interval"]),
    ("Health and watchdogs",
     "How long trouble is ridden out before it is reported or stops the app "
     "([tracing records](../guides/observability.md) shows where it is reported).",
     ["broker_timeout", "connect_timeout", "stuck_record_warning", "client_watchdog_interval",
      "client_stall_timeout", "corrupt_fetch_limit"]),
    ("Observability and runtime",
     "Spans per record, lineage headers ([lineage](../guides/lineage.md)), and the Python "
     "runtime.",
     ["tracing", "lineage", "gc_tuning"]),
    ("Recording service answers",
     "What the app records for a later replay ([replay and diff](../guides/replay.md)).",
     ["record_services_dir", "record_services_max_bytes", "origin_headers"]),
    ("Security",
     "TLS and SASL to the brokers ([security](../guides/security.md)); secrets are never "
     "printed.",
     ["security_protocol", "sasl_mechanism", "sasl_username", "sasl_password", "ssl_cafile",
      "ssl_certfile", "ssl_keyfile", "ssl_key_password"]),
]
"""The configuration reference's sections, in reading order: (title, one sentence, the
settings). Every setting is in exactly one (``tests/docs/test_configuration_reference.py``);
one missing from here is shown under "Not yet grouped" so the site still builds."""

UNGROUPED = "Not yet grouped"


def grouped_settings(names: list[str]) -> list[tuple[str, str, list[str]]]:
    """``CONCERNS`` restricted to ``names``, plus a last section for names no concern lists
    (named settings that no longer exist are dropped)."""
    known = set(names)
    groups = [(title, intro, [n for n in members if n in known])
              for title, intro, members in CONCERNS]
    listed = {n for _, _, members in CONCERNS for n in members}
    rest = [n for n in names if n not in listed]
    if rest:
        groups.append((UNGROUPED, "Settings docs/hooks.py does not place yet.", rest))
    return [group for group in groups if group[2]]


def default_text(name: str, default: Any) -> str:
    """A default as code a user could paste: big integers with ``_`` separators, byte
    sizes with their MiB."""
    if default is None:
        return "None"
    if isinstance(default, int) and not isinstance(default, bool) and default >= 10_000:
        shown = f"{default:_}"
        if name.endswith("_bytes") and default % (1024 * 1024) == 0:
            return f"{shown} ({default // (1024 * 1024)} MiB)"
        return shown
    return repr(default)


def code_html(text: str) -> str:
    """Markdown's ``a`` and `` \\| `` spellings of :func:`type_text` as HTML."""
    escaped = html.escape(text.replace("\\|", "|"), quote=False)
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)


def link_settings(description: str, names: set[str], own: str) -> str:
    """The description as HTML, each mention of another setting a link to its entry."""
    pattern = r"\b(" + "|".join(sorted(map(re.escape, names - {own}), key=len,
                                        reverse=True)) + r")\b"
    return re.sub(pattern, r'<a href="#\1"><code>\1</code></a>', html.escape(description))


def setting_entry(name: str, field: Any, names: set[str]) -> str:
    kind = type_text(field.annotation)
    bounds = bounds_text(field.metadata)
    if bounds:
        kind += f", {bounds}"
    facts = (f"{code_html(kind)} · default <code>"
             f"{html.escape(default_text(name, field.default))}</code> · "
             f"<code>AIOSTREAMS_{name.upper()}</code>")
    description = link_settings(field.description or "", names, name)
    if description and not description.endswith("."):
        description += "."
    return (f'<dt id="{name}"><a class="headerlink-setting" href="#{name}">'
            f"<code>{name}</code></a></dt>\n"
            f'<dd><p class="setting-facts">{facts}</p><p>{description}</p></dd>')


def settings_reference() -> str:
    """The settings of ``aiostreams.settings.config.Settings`` by concern: per section a
    heading, its sentence, and per setting its name (an anchor), type, default, environment
    variable and description."""
    from aiostreams.settings.config import Settings

    fields = Settings.model_fields
    names = set(fields)
    out = []
    for title, intro, members in grouped_settings(list(fields)):
        entries = "\n".join(setting_entry(name, fields[name], names) for name in members)
        out.append(f"## {title}\n\n{intro}\n\n<dl class=\"settings\">\n{entries}\n</dl>\n")
    return "\n".join(out)


def on_page_markdown(markdown: str, **_: Any) -> str:
    """The marker on a line of its own becomes the reference (quoted in a sentence, as on
    the page about the docs, it stays as written)."""
    marker = re.compile(rf"^{re.escape(MARKER)}[ \t]*$", re.M)
    if marker.search(markdown):
        return marker.sub(lambda _: settings_reference(), markdown, count=1)
    return markdown


_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|attr|mod|data|exc|obj|const):"
                   r"<code>(~?)([^<]+)</code>")


def strip_roles(html: str) -> str:
    """``:class:<code>~a.b.C</code>`` (a Sphinx role Markdown left alone) as ``<code>C</code>``
    (``~`` keeps the last component, as Sphinx shows it), else the full name."""
    return _ROLE.sub(lambda m: f"<code>{m[2].rsplit('.', 1)[-1] if m[1] else m[2]}</code>",
                     html)


_PRE = re.compile(r"(<pre\b.*?</pre>)", re.S)
_INLINE_CODE = re.compile(r"<code>([^<]+)</code>")
_BREAK_AFTER = re.compile(r"([_./])(?=[^_./])")


def break_points(html: str) -> str:
    """``<wbr>`` after each ``_``, ``.`` and ``/`` inside inline ``<code>`` (not inside
    ``<pre>``, whose lines scroll): the only places a long name may wrap."""
    def mark(match: re.Match[str]) -> str:
        return "<code>" + _BREAK_AFTER.sub(r"\1<wbr>", match[1]) + "</code>"

    parts = _PRE.split(html)  # odd indexes are the <pre> blocks
    return "".join(part if i % 2 else _INLINE_CODE.sub(mark, part)
                   for i, part in enumerate(parts))


def on_page_content(html: str, **_: Any) -> str:
    return break_points(strip_roles(html))
