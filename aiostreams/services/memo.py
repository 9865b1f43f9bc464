"""Memoized lookups: a TTL cache of a step's results, kept in a changelogged store.

``map_values_async(fn, service=svc, coalesce_by=key_of, memoize=Memo(ttl=60.0))`` keeps, per
lookup key, the last answer and when it expires, in a key-value store of the step (logged to
a changelog topic like any store). A record whose key has a fresh entry is answered from it
without a call (``saved_by_memo``); a restart restores the store, so a replay after a crash
does not call the service again for what it already answered, and gives the outputs the
first run gave (exactly-once for side-effect-free lookups).

**The TTL's clock is stream time** (the task's event time as of the record's issue, what
``context.stream_time`` gives), not the wall clock: it is the same whenever the records are
processed, so a replay or a restart after downtime sees the entries as the first run did (a
wall-clock TTL would expire the whole cache during an outage, then call the service for
every key at once on restart), and it is non-decreasing in record order. Expiry is aligned
to TTL-long periods of it (an entry made at stream time ``t`` lasts until the end of the
period holding ``t``): every record of one period writes the same entry whichever of them
made the call, so outputs *and* the store equal the serial run's with any completion order,
and calls per key are at most one per period: ``calls <= distinct keys x ceil(span / ttl)``.

Values are stored as JSON (``[result, expires_at]``); a step's result must be JSON-shaped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from aiostreams.errors import ConfigError

__all__ = ["Memo"]


@dataclass(frozen=True)
class Memo:
    """Memoize a step's results for ``ttl`` seconds of stream time (see the module)."""

    ttl: float
    key_serde: Any = None  # what the lookup keys serialize with (None: JSON)

    def __post_init__(self) -> None:
        if not self.ttl > 0:
            raise ConfigError(f"Memo ttl is positive seconds of stream time; got {self.ttl}")

    def expires_at(self, stream_time: float) -> float:
        """The end of the TTL period holding ``stream_time``."""
        return (math.floor(stream_time / self.ttl) + 1) * self.ttl

    def fresh(self, entry: Any, stream_time: float) -> bool:
        """Does the stored ``entry`` answer a record at ``stream_time``?"""
        return isinstance(entry, list) and len(entry) == 2 and stream_time < entry[1]
