"""The one error of :mod:`aiostreams.localregistry`."""

from __future__ import annotations


class LocalRegistryError(RuntimeError):
    """The local schema registry could not be built or started; the message says why and
    what to do."""
