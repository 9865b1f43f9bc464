"""Which keys of a store are the same key: the same serialized bytes, as in Kafka.

Kafka Streams keys its stores by the key serde's bytes. Python's ``==`` is coarser: under a
JSON key serde ``1``, ``1.0`` and ``True`` are three Kafka keys (``1``, ``1.0``, ``true``)
but one dict key, and lists or dicts cannot be dict keys at all. A store or overlay that
indexed decoded keys directly merged the counts of ``1`` and ``True`` without a word.

:func:`key_identity` gives the hashable stand-in a store indexes by: the key itself for
``str``, ``bytes`` and ``int`` (exact types: equal values of these types have equal bytes
under any deterministic serde, and hashing them is what the hot path already does), and an
:class:`EncodedKey` holding the serde's bytes for anything else (bool, float, tuple, list,
dict, models). An ``EncodedKey`` never equals a plain key.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

__all__ = ["EncodedKey", "key_identity"]

_EXACT_TYPES = frozenset({str, bytes, int})


@dataclass(frozen=True, slots=True)
class EncodedKey:
    """A key that is indexed by its serialized bytes."""

    data: bytes


def key_identity(key: Any, encode: Callable[[Any], bytes]) -> Hashable:
    """``key`` itself when its type is exactly str, bytes or int, else its bytes."""
    if type(key) in _EXACT_TYPES:
        return key  # type: ignore[no-any-return]
    return EncodedKey(encode(key))
