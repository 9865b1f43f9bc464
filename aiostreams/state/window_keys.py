"""Window store keys and retention, shared by the in-memory and SQLite window stores.

Window starts are float seconds kept to the millisecond (Kafka's resolution): every start is
normalized to ``ms / 1000`` on the way in, so ``0.1 + 0.2`` and ``0.3`` name one window.
``fetch`` bounds are rounded the same way (both inclusive).

The composite key's bytes, used on disk, in the changelog and for ordering, are::

    serialized key + 8-byte big-endian unsigned (window_start_ms + 2**63)

The bias turns signed milliseconds into unsigned ones, so byte order is ``(key bytes,
start)`` order and one key's windows between two starts are one contiguous range. A key
whose bytes extend another's (``b"a"``, ``b"a\\x80"``: possible with ``BytesSerde`` or JSON
numbers, never with ``StrSerde``, ``LongSerde`` or JSON strings) may fall inside that range,
so ``fetch`` checks the key of every row.

Retention: a store tracks the greatest window start applied (or restored) in a
:class:`Retention`. Windows that start before ``retained_from = greatest start -
retention`` are expired: ``get``/``fetch``/``range`` never return them, writes to them are
ignored, and ``flush`` drops them from memory and disk. Retention spans keys, so whether a
window near the line is still visible depends on other keys' writes: give windows a grace
period and keep ``retention >= window size + grace``, so that a processor rejects late
records (by stream time) before the store would drop their windows.
"""

from __future__ import annotations

import math
import struct
from typing import Any, Final

from aiostreams.errors import ConfigError

__all__ = [
    "MAX_MS",
    "MIN_MS",
    "START_BIAS",
    "START_BYTES",
    "Retention",
    "bound_ms",
    "check_retention",
    "decode_window_key",
    "encode_window_key",
    "normalize_window_start",
    "split_window_key",
    "window_start_ms",
]

START_BIAS: Final = 1 << 63
START_BYTES: Final = struct.Struct(">Q")
MIN_MS: Final = -START_BIAS
MAX_MS: Final = START_BIAS - 1


def window_start_ms(window_start: float) -> int:
    """``window_start`` (float seconds) as integer milliseconds, rounded to the nearest."""
    try:
        ms = round(window_start * 1000)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(
            f"a window start must be finite float seconds, got {window_start!r}"
        ) from None
    if not MIN_MS <= ms <= MAX_MS:
        raise ValueError(f"window start {window_start!r} is out of range (64-bit milliseconds)")
    return ms


def normalize_window_start(window_start: float) -> float:
    """The canonical float of ``window_start``: ``window_start_ms(window_start) / 1000``."""
    return window_start_ms(window_start) / 1000


def bound_ms(t: float) -> int:
    """A ``fetch`` bound in milliseconds: rounded like a window start; infinities clamp to
    the ends of the range."""
    if t != t:
        raise ValueError("a time bound cannot be NaN")
    if math.isinf(t):
        return MAX_MS if t > 0 else MIN_MS
    return max(MIN_MS, min(MAX_MS, round(t * 1000)))


def encode_window_key(key_bytes: bytes, start_ms: int) -> bytes:
    """The composite key bytes of ``(key, start)``: see the module docstring."""
    return key_bytes + START_BYTES.pack(start_ms + START_BIAS)


def decode_window_key(data: bytes) -> tuple[bytes, int]:
    """``(key bytes, start ms)`` of composite key bytes."""
    if len(data) < START_BYTES.size:
        raise ValueError(
            f"{data!r} is not a window store key: it needs at least {START_BYTES.size} bytes"
        )
    size = START_BYTES.size
    return data[:-size], START_BYTES.unpack_from(data, len(data) - size)[0] - START_BIAS


def split_window_key(name: str, composite: Any) -> tuple[Any, int]:
    """``(key, start ms)`` of a window store key ``(key, window_start)`` of store ``name``."""
    try:
        key, start = composite
    except (TypeError, ValueError):
        raise ValueError(
            f"window store {name!r} takes (key, window_start) keys, got {composite!r}"
        ) from None
    return key, window_start_ms(start)


def check_retention(name: str, retention: float) -> float:
    """``retention`` as float seconds, checked positive and finite for store ``name``."""
    if (isinstance(retention, bool) or not isinstance(retention, int | float)
            or not 0 < retention < math.inf):
        raise ConfigError(
            f"window store {name!r}: retention must be positive float seconds (at least "
            f"window size + grace), got {retention!r}"
        )
    return float(retention)


class Retention:
    """The greatest window start seen and the line below which windows are expired
    (``max_ms`` never decreases; a wiped store starts a new one)."""

    __slots__ = ("max_ms", "retention_ms")

    def __init__(self, retention: float) -> None:
        self.retention_ms = round(retention * 1000)
        self.max_ms: int | None = None

    def observe(self, ms: int) -> None:
        """Note a write of the window starting at ``ms``."""
        if self.max_ms is None or ms > self.max_ms:
            self.max_ms = ms

    @property
    def cutoff_ms(self) -> int | None:
        if self.max_ms is None:
            return None
        return max(MIN_MS, self.max_ms - self.retention_ms)

    def expired(self, ms: int) -> bool:
        cutoff = self.cutoff_ms
        return cutoff is not None and ms < cutoff

    @property
    def retained_from(self) -> float:
        cutoff = self.cutoff_ms
        return -math.inf if cutoff is None else cutoff / 1000

