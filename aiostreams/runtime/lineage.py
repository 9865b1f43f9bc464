"""The lineage header: which input record an output record came from.

With ``lineage=True`` every record a task produces through a sink or ``ctx.send`` carries
one header, :data:`LINEAGE_HEADER`, naming the input record whose processing produced it.
A sink names the position the record it writes carries (its *record context*, as Kafka
Streams calls it): the input record for a stateless chain; for aggregates and joins the
record that triggered the output; for a window ``suppress`` emits, the record of the
window's last update (the buffer keeps its position); else the task's current input
record. ``ctx.send`` names the current input record. An output of a punctuation whose
record has no position carries none.

Through a repartition topic the chain continues: the repartition record names its source
record, and the downstream task's output names the repartition record, so ``aiostreams
explain`` can walk from any output back to the records that entered the app. Repartition
topics are purged once their records are committed (``repartition_purge_interval_ms``), so
a walk cannot count on reading them: when the input record named is the task's current one,
its own lineage is carried along. The value is the chain, nearest first::

    b"fraud-by-card-repartition:0:3,payments:1:1"

(the output came from repartition record 3 of partition 0, which came from payments record
1 of partition 1). A chain holds at most :data:`MAX_CHAIN` positions (longer ones lose
their far end); a suppressed window's output names its last update with no chain behind
(its buffer keeps no headers: see the last invariant).

Encoding: short text, readable in ``aiostreams tail --headers``: a Kafka topic name has no
``:`` or ``,`` (legal characters are ``[a-zA-Z0-9._-]``), so the last two ``:`` split a
position. For topic ``payments``, partition 3 and a 7-digit offset a position is 18 bytes;
a fixed-width binary form (partition int32, offset int64, then the topic) is 20, a varint
one about 13: not worth losing readability for (benchmarks/RESULTS.md, lineage).

Invariants: an output carries at most one lineage header, first among its headers (so
headers a processor checks by position at the end, as the FK join's, are untouched); the
other headers keep their order. A task strips the header from the records it reads
(:func:`without_lineage`), so processors, state stores and changelogs never hold one and
turning lineage on changes no state.
"""

from __future__ import annotations

from typing import NamedTuple

from aiostreams.types import Headers

__all__ = ["LINEAGE_HEADER", "MAX_CHAIN", "LineageError", "Origin", "chain_of",
           "lineage_of", "lineage_value", "origin_of", "with_lineage", "without_lineage"]

LINEAGE_HEADER = "aiostreams-lineage"
"""The header naming an output's input record (and that record's own lineage)."""
MAX_CHAIN = 16
"""At most this many positions in one header (a longer chain loses its far end)."""


class LineageError(ValueError):
    """A lineage header that is not ``<topic>:<partition>:<offset>[,...]``."""


class Origin(NamedTuple):
    """Where a record came from: one record of one partition."""

    topic: str
    partition: int
    offset: int

    def __str__(self) -> str:
        return f"{self.topic}[{self.partition}]@{self.offset}"


def lineage_value(topic: str, partition: int, offset: int,
                  upstream: bytes | None = None) -> bytes:
    """The header value naming record ``offset`` of ``topic``'s ``partition``, followed by
    ``upstream`` (that record's own lineage header value, if it had one)."""
    own = f"{topic}:{partition}:{offset}".encode()
    if not upstream:
        return own
    if upstream.count(b",") >= MAX_CHAIN - 1:
        upstream = b",".join(upstream.split(b",")[:MAX_CHAIN - 1])
    return own + b"," + upstream


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


def lineage_of(headers: Headers) -> bytes | None:
    """The value of the lineage header of ``headers`` (the first), or None."""
    for name, value in headers:
        if name == LINEAGE_HEADER:
            return value
    return None


def chain_of(headers: Headers) -> list[Origin]:
    """The positions the lineage header of ``headers`` names, nearest first ([] when it
    has none). Raises :class:`LineageError` when the header is there but malformed."""
    for name, value in headers:
        if name == LINEAGE_HEADER:
            if not value:
                raise LineageError(f"the {LINEAGE_HEADER} header has no value")
            return [_parse(part) for part in value.split(b",")]
    return []


def origin_of(headers: Headers) -> Origin | None:
    """The input record the lineage header of ``headers`` names first, or None."""
    chain = chain_of(headers)
    return chain[0] if chain else None


def _parse(value: bytes) -> Origin:
    text = value.decode("utf-8", "replace")
    topic, _, rest = text.rpartition(":")
    topic, _, partition = topic.rpartition(":")
    try:
        origin = Origin(topic, int(partition), int(rest))
    except ValueError:
        origin = None
    if origin is None or not topic or origin.partition < 0 or origin.offset < 0:
        raise LineageError(f"the {LINEAGE_HEADER} header names {text!r}, not "
                           "<topic>:<partition>:<offset>")
    return origin
