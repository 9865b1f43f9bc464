"""The format of a store's bytes, and the marker that carries it: the vocabulary, the
header of a changelog record, and the checks.

Every store says which format its values are in (:func:`format_for`: its kind and its value
serde's ``store_layout``). The format travels with the bytes:

* each changelog record carries one header, ``aiostreams.format`` (:data:`FORMAT_HEADER`),
  whose value is the format id (:func:`changelog_headers`);
* each persistent store file records the format in its metadata (the SQLite stores' ``meta``
  table).

The formats (an id is ``<layout>/<version>``; the version is the release of the layout):

======================== ========================================================= ========
format                   value bytes                                               unmarked
======================== ========================================================= ========
``kv/1``                 the value serde's bytes                                   accepted
``kv-timestamped/2``     8-byte big-endian milliseconds, then the value's bytes    refused
``window/1``             the value serde's bytes (join buffers, user stores)       accepted
``window-timed/1``       8-byte big-endian double seconds, then the value's bytes  accepted
``window-timestamped/2`` 8-byte big-endian milliseconds, then the value's bytes    refused
``versioned/1``          8-byte milliseconds, then a flagged cell                  accepted
======================== ========================================================= ========

*Unmarked* data (a changelog record with no ``aiostreams.format`` header, a file without
the metadata) was written before the marker existed. Whether it is accepted depends on
whether the format's bytes ever changed: key-value aggregations and tables became
``kv-timestamped/2`` on 2026-11-25 (before, ``kv/1``: the plain value) and time-window
aggregations ``window-timestamped/2`` (before, ``window-timed/1``), so unmarked data of
those two is of *unknown format* and refused: decoding it as the new layout gives wrong
values ("abcdefgh..." read as a timestamp and "ijkl..."). The other formats never changed,
so unmarked data of them can only be theirs: it is accepted (a user's own key-value store
keeps working across the upgrade). :attr:`StoreFormat.unmarked` names what unmarked data
of a format was written as, which is what ``aiostreams store upgrade`` converts from.

Invariant: a store never decodes bytes whose marker names another format, nor unmarked
bytes of a format that refuses them; the check raises :class:`StoreFormatError` first.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from aiostreams.errors import StoreFormatError
from aiostreams.state.base import StoreKind
from aiostreams.types import Headers, RawRecord

__all__ = [
    "FORMATS",
    "FORMAT_HEADER",
    "StoreFormat",
    "changelog_headers",
    "check_file_format",
    "check_records",
    "convert",
    "format_for",
    "format_in",
    "store_format_of",
    "upgrade_command",
]

FORMAT_HEADER: Final = "aiostreams.format"
"""The changelog record header that names the format of the record's value."""


@dataclass(frozen=True)
class StoreFormat:
    """A layout of a store's value bytes (see the module docstring). ``unmarked`` is the
    format of this store's data written before markers existed: ``id`` itself when the
    layout never changed (then unmarked data is accepted), an older format otherwise."""

    id: str
    unmarked: str

    @property
    def accepts_unmarked(self) -> bool:
        return self.unmarked == self.id


KV = StoreFormat("kv/1", "kv/1")
KV_TIMESTAMPED = StoreFormat("kv-timestamped/2", "kv/1")
WINDOW = StoreFormat("window/1", "window/1")
WINDOW_TIMED = StoreFormat("window-timed/1", "window-timed/1")
WINDOW_TIMESTAMPED = StoreFormat("window-timestamped/2", "window-timed/1")
VERSIONED = StoreFormat("versioned/1", "versioned/1")

FORMATS: Final = {f.id: f for f in (KV, KV_TIMESTAMPED, WINDOW, WINDOW_TIMED,
                                    WINDOW_TIMESTAMPED, VERSIONED)}

_BY_LAYOUT: Final = {
    (StoreKind.KEY_VALUE, "plain"): KV,
    (StoreKind.KEY_VALUE, "timestamped"): KV_TIMESTAMPED,
    (StoreKind.WINDOW, "plain"): WINDOW,
    (StoreKind.WINDOW, "timed"): WINDOW_TIMED,
    (StoreKind.WINDOW, "timestamped"): WINDOW_TIMESTAMPED,
}


def format_for(kind: StoreKind, value_serde: Any) -> StoreFormat:
    """The format of a store of ``kind`` whose values ``value_serde`` encodes: the serde's
    ``store_layout`` (``"timestamped"``, ``"timed"``; absent: ``"plain"``)."""
    if kind is StoreKind.VERSIONED:
        return VERSIONED
    layout = getattr(value_serde, "store_layout", "plain")
    found = _BY_LAYOUT.get((kind, layout))
    if found is None:
        raise ValueError(f"no store format for a {kind.value} store of layout {layout!r}")
    return found


def store_format_of(store: Any) -> StoreFormat:
    """``store``'s format; ``kv/1`` for a store of the user's own making that names none
    (its bytes are its own business, and unmarked records of it are accepted)."""
    fmt = getattr(store, "store_format", KV)
    assert isinstance(fmt, StoreFormat), fmt
    return fmt


def changelog_headers(fmt: StoreFormat) -> Headers:
    """The headers of a changelog record of a store in format ``fmt``."""
    return ((FORMAT_HEADER, fmt.id.encode()),)


def format_in(headers: Headers) -> str | None:
    """The format a record's ``headers`` name (the last ``aiostreams.format`` header, as
    Kafka's ``lastHeader``), or None when they name none."""
    found: str | None = None
    for name, value in headers:
        if name == FORMAT_HEADER:
            found = value.decode("utf-8", "replace") if value is not None else ""
    return found


def upgrade_command(store: str) -> str:
    return f"python -m aiostreams store upgrade MODULE:APP --store {store}"


def _describe(found: str | None, fmt: StoreFormat) -> str:
    if found is not None:
        return repr(found)
    return (f"unknown (no format marker: written before aiostreams marked formats; this "
            f"store's data was then {fmt.unmarked!r})")


def _advice(store: str) -> str:
    return (f"Nothing of it was read. Stop every instance of the app, then run "
            f"`{upgrade_command(store)}` (MODULE:APP as for `aiostreams run`; the "
            "'Upgrading stores' section of the state guide says what it does), and start "
            "the app again")


def check_records(fmt: StoreFormat, store: str, records: Sequence[RawRecord]) -> None:
    """Raise :class:`StoreFormatError` at the first of ``records`` (changelog records of
    ``store``) whose marker is not ``fmt``'s (an unmarked record: unless ``fmt`` accepts
    unmarked data)."""
    marker = changelog_headers(fmt)[0]
    accepts_unmarked = fmt.accepts_unmarked
    for record in records:
        headers = record.headers
        if headers and headers[0] == marker and (
                len(headers) == 1 or (len(headers) == 2 and headers[1][0] != FORMAT_HEADER)):
            continue  # the usual record: this format's header (and the owner's after it)
        found = format_in(headers)
        if found == fmt.id or (found is None and accepts_unmarked):
            continue
        raise StoreFormatError(
            f"store {store!r}: its changelog {record.topic}[{record.partition}] at offset "
            f"{record.offset} holds format {_describe(found, fmt)}, but this app's store "
            f"is {fmt.id!r}. {_advice(store)}",
            store=store, found=found, expected=fmt.id,
            where=f"{record.topic}[{record.partition}]")


def check_file_format(fmt: StoreFormat, store: str, path: Any, found: str | None) -> None:
    """Raise :class:`StoreFormatError` unless the format ``found`` in the metadata of the
    file at ``path`` (None: the file has none) is ``fmt`` (or unmarked, accepted)."""
    if found == fmt.id or (found is None and fmt.accepts_unmarked):
        return
    raise StoreFormatError(
        f"store {store!r}: its file {path} holds format {_describe(found, fmt)}, but this "
        f"app's store is {fmt.id!r}. {_advice(store)}",
        store=store, found=found, expected=fmt.id, where=str(path))


_MS: Final = struct.Struct(">q")
_SECONDS: Final = struct.Struct(">d")


def convert(value: bytes, source: str, target: str, *, timestamp: float) -> bytes:
    """``value`` (a changelog record's value in format ``source``) in format ``target``.

    * ``kv/1`` -> ``kv-timestamped/2``: the plain value gets ``timestamp`` (seconds; the
      changelog record's own, as Kafka Streams' ``rawValueToTimestampedValue`` does when it
      restores a plain changelog into a timestamped store), as 8-byte milliseconds;
    * ``window-timed/1`` -> ``window-timestamped/2``: exact, the stored timestamp was
      already there (double seconds, now milliseconds);
    * a format to itself: unchanged.

    Raises ``ValueError`` for any other pair, or a value too short to be ``source``'s."""
    if source == target:
        return value
    if (source, target) == (KV.id, KV_TIMESTAMPED.id):
        return _MS.pack(round(timestamp * 1000)) + value
    if (source, target) == (WINDOW_TIMED.id, WINDOW_TIMESTAMPED.id):
        if len(value) < _SECONDS.size:
            raise ValueError(f"{len(value)} byte(s) cannot be {source!r} (8-byte time first)")
        (seconds,) = _SECONDS.unpack_from(value, 0)
        return _MS.pack(round(seconds * 1000)) + value[_SECONDS.size:]
    raise ValueError(f"aiostreams has no conversion from format {source!r} to {target!r}")
