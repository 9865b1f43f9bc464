"""The "Coming from Faust, Quix Streams, Kafka Streams" page (``docs/coming-from.md``) names
only aiostreams API that exists: in its tables' aiostreams column, every ``ais.X``, every
method called (``.map_values(``), every ``Class.a/b`` list, every bare name (a setting, a
setting's value, a method) and every class name is checked against the package. The peers'
columns are checked by hand against their docs (the page says so)."""

from __future__ import annotations

import re
import typing
from pathlib import Path
from typing import Any

import aiostreams
from aiostreams.dsl.branched import BranchedStream
from aiostreams.dsl.cogrouped import CogroupedStream
from aiostreams.dsl.grouped_stream import GroupedStream
from aiostreams.dsl.grouped_table import GroupedTable
from aiostreams.dsl.windowed import SessionWindowedStream, SlidingWindowedStream, TimeWindowedStream
from aiostreams.state.overlay import KeyValueStoreView, WindowStoreView

PAGE = Path(__file__).resolve().parents[2] / "docs" / "coming-from.md"
USER_CLASSES: tuple[Any, ...] = (
    aiostreams.App, aiostreams.Stream, aiostreams.Table, aiostreams.GlobalTable,
    GroupedStream, GroupedTable, CogroupedStream, BranchedStream, TimeWindowedStream,
    SessionWindowedStream, SlidingWindowedStream, aiostreams.ProcessorContext,
    aiostreams.Topology, KeyValueStoreView, WindowStoreView)
NOT_OURS = {"model_copy"}  # pydantic's, used in a snippet


def aiostreams_spans() -> list[str]:
    """The code spans of the second column (aiostreams) of the page's tables."""
    rows = [line for line in PAGE.read_text().splitlines()
            if line.startswith("| ") and not line.startswith("| ---")]
    cells = [row.split(" | ")[1] for row in rows if row.count(" | ") >= 2]
    assert len(cells) > 40, "the page's tables are not where this test looks"
    return [span for cell in cells for span in re.findall(r"`([^`]+)`", cell)]


def known_names() -> set[str]:
    methods = {name for cls in USER_CLASSES for name in dir(cls) if not name.startswith("_")}
    settings = set(aiostreams.Settings.model_fields)
    values = {str(value) for field in aiostreams.Settings.model_fields.values()
              for arg in typing.get_args(field.annotation)
              for value in (typing.get_args(arg) or (arg,))}
    members = {member.name for member in aiostreams.PunctuationType}
    return methods | settings | values | members | set(aiostreams.__all__)


def test_the_aiostreams_column_names_only_api_that_exists() -> None:
    known = known_names()
    unknown = []
    for span in aiostreams_spans():
        for name in re.findall(r"\bais\.(\w+)", span):
            if not hasattr(aiostreams, name):
                unknown.append(f"ais.{name} in `{span}`")
        for name in re.findall(r"(?:^|\.)(\w+)\(", span):
            if name not in known | NOT_OURS:
                unknown.append(f"{name}() in `{span}`")
        for owner, names in re.findall(r"^(\w+)\.([\w/]+)$", span):
            cls = getattr(aiostreams, owner, None)
            unknown += [f"{owner}.{name}" for name in names.split("/")
                        if cls is None or not hasattr(cls, name)]
        if re.fullmatch(r"\w+", span) and span not in known:
            unknown.append(f"`{span}`")
    assert not unknown, f"docs/coming-from.md names what aiostreams does not have: {unknown}"
