"""A topic as the app knows it: a name, the serdes of its keys and values, its layout."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aiostreams.errors import ConfigError
from aiostreams.serde import Serde, serde_for


@dataclass(frozen=True)
class Topic:
    """A named topic with serdes. ``partitions``/``config`` are used when aiostreams has to
    create it (``None`` partitions: it must exist, or the app's default count is used)."""

    name: str
    key_serde: Serde[Any]
    value_serde: Serde[Any]
    partitions: int | None = None
    config: Mapping[str, str] = field(default_factory=dict)
    internal: bool = False

    def __post_init__(self) -> None:
        if not self.name or any(c.isspace() for c in self.name) or len(self.name) > 249:
            raise ConfigError(
                f"invalid topic name {self.name!r}: use 1-249 characters from "
                "[a-zA-Z0-9._-] with no spaces"
            )
        if self.partitions is not None and self.partitions < 1:
            raise ConfigError(
                f"topic {self.name!r}: partitions must be >= 1, got {self.partitions}"
            )

    @classmethod
    def of(
        cls,
        name: str,
        key: Any = None,
        value: Any = None,
        *,
        partitions: int | None = None,
        config: Mapping[str, str] | None = None,
        internal: bool = False,
    ) -> Topic:
        """Build from what users write: ``Topic.of("orders", key=str, value=Order)``."""
        return cls(name, serde_for(key), serde_for(value), partitions, dict(config or {}),
                   internal)
