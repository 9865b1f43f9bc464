"""An app's lifecycle: its states and their transitions (:mod:`~aiostreams.lifecycle.state`),
the resources it opens and closes around its worker (:mod:`~aiostreams.lifecycle.resources`),
the start/stop guard, and the event loop it runs on (uvloop when installed)."""

from aiostreams.lifecycle.resources import Resource, ResourceClosedError
from aiostreams.lifecycle.state import AppState

__all__ = ["AppState", "Resource", "ResourceClosedError"]
