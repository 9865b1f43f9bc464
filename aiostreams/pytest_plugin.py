"""The ``aiostreams`` pytest plugin (entry point ``pytest11``; ``-p aiostreams.pytest_plugin``
in a project's pytest config keeps working): the fixtures of
:mod:`aiostreams.testing.fixtures`. This module stays at the package root because its path
is the plugin's name in users' configs."""

from aiostreams.testing.fixtures import (
    MakeApp,
    MakeDriver,
    make_app,
    memory_broker,
    topology_driver,
)

__all__ = ["MakeApp", "MakeDriver", "make_app", "memory_broker", "topology_driver"]
