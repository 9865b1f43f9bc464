"""pytest fixtures for testing aiostreams apps, registered as the ``aiostreams`` pytest plugin
(entry point ``pytest11``), so they are available wherever aiostreams is installed::

    async def test_totals(make_app, topology_driver):
        app = make_app("totals")
        ...declare topics and the topology...
        driver = await topology_driver(app)
        driver.pipe_input("orders", "c1", 5.0)
        await driver.process_all()

* ``memory_broker``: a :class:`~aiostreams.transport.memory.MemoryBroker` private to the test;
* ``make_app(name=None, **settings)``: an :class:`~aiostreams.App` on that broker (apps made
  in one test share it, so two apps form one consumer group); stopped after the test;
* ``topology_driver(app_or_topology, settings=None, **options)``: a started
  :class:`~aiostreams.testing.driver.TopologyTestDriver`; closed after the test.

The async fixtures need pytest-asyncio (as any async test does); without it they fail
with a message saying so, and the plugin stays harmless to projects that do not use them.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import pytest

from aiostreams.app import App
from aiostreams.settings.config import Settings
from aiostreams.testing.driver import TopologyTestDriver
from aiostreams.topology.topology import Topology
from aiostreams.transport.memory import MemoryBroker, MemoryTransport

MakeApp = Callable[..., App]
MakeDriver = Callable[..., Awaitable[TopologyTestDriver]]

_names = itertools.count()

try:
    import pytest_asyncio

    HAVE_PYTEST_ASYNCIO = True
except ImportError:  # pragma: no cover - depends on the environment
    HAVE_PYTEST_ASYNCIO = False


@pytest.fixture
def memory_broker() -> MemoryBroker:
    """An in-process broker private to this test."""
    return MemoryBroker()


async def _make_app(broker: MemoryBroker) -> AsyncIterator[MakeApp]:
    made: list[App] = []

    def make(name: str | None = None, **settings: Any) -> App:
        app = App(name or f"test-app-{next(_names)}", transport=MemoryTransport(broker),
                  **settings)
        made.append(app)
        return app

    try:
        yield make
    finally:
        for app in reversed(made):
            await app.stop()


async def _topology_driver() -> AsyncIterator[MakeDriver]:
    drivers: list[TopologyTestDriver] = []

    async def make(source: App | Topology,
                   settings: Mapping[str, Any] | Settings | None = None,
                   **options: Any) -> TopologyTestDriver:
        driver = TopologyTestDriver(source, settings, **options)
        drivers.append(driver)
        await driver.start()
        return driver

    try:
        yield make
    finally:
        for driver in reversed(drivers):
            await driver.close()


if HAVE_PYTEST_ASYNCIO:

    @pytest_asyncio.fixture
    async def make_app(memory_broker: MemoryBroker) -> AsyncIterator[MakeApp]:
        """``make_app(name=None, **settings)``: an App on this test's memory broker."""
        async for make in _make_app(memory_broker):
            yield make

    @pytest_asyncio.fixture
    async def topology_driver() -> AsyncIterator[MakeDriver]:
        """``await topology_driver(app_or_topology, settings=None, **options)``: a started
        TopologyTestDriver, closed after the test."""
        async for make in _topology_driver():
            yield make

else:  # pragma: no cover - depends on the environment

    @pytest.fixture
    def make_app() -> MakeApp:
        pytest.fail("the make_app fixture needs pytest-asyncio: pip install pytest-asyncio")

    @pytest.fixture
    def topology_driver() -> MakeDriver:
        pytest.fail("the topology_driver fixture needs pytest-asyncio: pip install "
                    "pytest-asyncio")


__all__ = ["MakeApp", "MakeDriver", "make_app", "memory_broker", "topology_driver"]
