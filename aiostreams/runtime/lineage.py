"""The lineage header: which input record an output record came from.

With ``lineage=True`` every record a task produces through a sink or ``ctx.send`` carries
one header, :data:`LINEAGE_HEADER`, naming the input record whose processing produced it:
``b"<topic>:<partition>:<offset>"``. A sink names the position the record it writes
carries (its *record context*, as Kafka Streams calls it): the input record for a stateless
chain; for aggregates and joins the record that triggered the output; for a window
``suppress`` emits, the record of the window's last update (the buffer keeps its
position); else the task's current input record. ``ctx.send`` names the current input
record. An output of a punctuation whose record has no position carries none. Through a
repartition topic the chain continues: the repartition record names its source record, and
the downstream task's output names the repartition record, so ``aiostreams explain`` can
walk from any output back to the records that entered the app.

Encoding: short text, readable in ``aiostreams tail --headers``: a Kafka topic name has no
``:`` (legal characters are ``[a-zA-Z0-9._-]``), so the last two ``:`` split it. For topic
``orders`` and a 7-digit offset the value is 16 bytes, the header 35 bytes on the wire with
its name and lengths; a fixed-width binary form (partition int32, offset int64) would save
about 3 bytes there and cost readability (measured in benchmarks/RESULTS.md).

Invariants: an output carries at most one lineage header, first among its headers (so
headers a processor checks by position at the end, as the FK join's, are untouched); the
other headers keep their order. A task strips the header from the records it reads
(:func:`without_lineage`), so processors, state stores and changelogs never hold one and
turning lineage on changes no state.
"""

from __future__ import annotations

from typing import NamedTuple

from aiostreams.types import Headers

__all__ = ["LINEAGE_HEADER", "LineageError", "Origin", "lineage_value", "origin_of",
           "with_lineage", "without_lineage"]

LINEAGE_HEADER = "aiostreams-lineage"
"""The header naming an output's input record."""


class LineageError(ValueError):
    """A lineage header that is not ``<topic>:<partition>:<offset>``."""


class Origin(NamedTuple):
    """Where a record came from: one record of one partition."""

    topic: str
    partition: int
    offset: int

    def __str__(self) -> str:
        return f"{self.topic}[{self.partition}]@{self.offset}"


def lineage_value(topic: str, partition: int, offset: int) -> bytes:
    """The header value naming record ``offset`` of ``topic``'s ``partition``."""
    return f"{topic}:{partition}:{offset}".encode()


def with_lineage(headers: Headers, value: bytes) -> Headers:
    """``headers`` with the lineage header ``value`` first and any other one dropped."""
    if not headers:
        return ((LINEAGE_HEADER, value),)
    return ((LINEAGE_HEADER, value), *(h for h in headers if h[0] != LINEAGE_HEADER))


def without_lineage(headers: Headers) -> Headers:
    """``headers`` without lineage headers (the same tuple when it has none)."""
    for name, _ in headers:
        if name == LINEAGE_HEADER:
            return tuple(h for h in headers if h[0] != LINEAGE_HEADER)
    return headers


def origin_of(headers: Headers) -> Origin | None:
    """The origin the lineage header of ``headers`` names; None when there is none.
    Raises :class:`LineageError` when the header is there but malformed."""
    for name, value in headers:
        if name == LINEAGE_HEADER:
            return _parse(value)
    return None


def _parse(value: bytes | None) -> Origin:
    if value is None:
        raise LineageError(f"the {LINEAGE_HEADER} header has no value")
    text = value.decode("utf-8", "replace")
    topic, _, rest = text.rpartition(":")
    topic, _, partition = topic.rpartition(":")
    try:
        origin = Origin(topic, int(partition), int(rest))
    except ValueError:
        origin = None
    if origin is None or not topic or origin.partition < 0 or origin.offset < 0:
        raise LineageError(f"the {LINEAGE_HEADER} header {text!r} is not "
                           "<topic>:<partition>:<offset>")
    return origin
