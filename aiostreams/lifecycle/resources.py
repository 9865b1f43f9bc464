"""Startup and shutdown hooks, and resources that live as long as a running app.

::

    http = app.resource("http", aiohttp.ClientSession)   # opened at start, closed at stop

    async def enrich(order: Order) -> Enriched:
        async with http.value.get(f"{URL}/customers/{order.customer_id}") as response: ...

    @app.on_startup
    async def warm_cache() -> None: ...

    @app.on_shutdown
    async def report() -> None: ...

Ordering (the contract :class:`Lifecycle` keeps):

1. ``app.start()``: resources are opened and startup hooks run, in the order they were
   declared, **before** the worker creates topics, restores its stores and its consumer
   joins the group: no record is processed before every startup step has returned.
2. ``app.stop()``: the worker stops first (stop fetching, drain in-flight work, retire,
   the last commit, close the stores, leave the group); **then** the shutdown hooks run in
   the order they were declared, then the resources are closed in reverse order (the
   last opened, first closed). A shutdown hook may still use the resources and
   ``app.send``.
3. A startup step that raises makes ``start()`` raise it: what was opened is closed (in
   reverse), shutdown hooks do not run, and the consumer never joins.
4. Every shutdown step runs even when an earlier one raised; the first error is raised
   after all have run.

A resource's factory returns either an async context manager (``aiohttp.ClientSession``,
an ``@asynccontextmanager`` function: entered at start, exited at stop) or an awaitable
(awaited at start; its value is not closed).
"""

from __future__ import annotations

import contextlib
import enum
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")
Hook = Callable[[], Awaitable[None]]


class ResourceClosedError(RuntimeError):
    """A resource was used while the app that owns it is not running."""


class Resource(Generic[T]):
    """A value made at app start and released at app stop; ``value`` is it."""

    def __init__(self, name: str, factory: Callable[[], Any]) -> None:
        self.name = name
        self._factory = factory
        self._value: T | None = None
        self._open = False

    @property
    def is_open(self) -> bool:
        return self._open

    @property
    def value(self) -> T:
        """The resource; raises :class:`ResourceClosedError` outside start..stop."""
        if not self._open:
            raise ResourceClosedError(
                f"resource {self.name!r} is not open: the app opens it in start() (before "
                "its consumer joins) and closes it in stop() (after the last commit); use it "
                "from the app's steps and hooks")
        return self._value  # type: ignore[return-value]  # set when opened

    async def _open_in(self, stack: contextlib.AsyncExitStack) -> None:
        made = self._factory()
        if hasattr(made, "__aenter__") and hasattr(made, "__aexit__"):
            self._value = await stack.enter_async_context(made)
        elif inspect.isawaitable(made):
            self._value = await made
        else:
            raise TypeError(
                f"resource {self.name!r}: its factory returned {type(made).__name__}, which "
                "is neither an async context manager nor an awaitable (pass e.g. "
                "aiohttp.ClientSession, an @asynccontextmanager function, or an async def)")
        self._open = True
        stack.callback(self._close)

    def _close(self) -> None:
        self._open = False
        self._value = None

    def __repr__(self) -> str:
        return f"<Resource {self.name!r} {'open' if self._open else 'closed'}>"


class LifecycleState(enum.Enum):
    """``IDLE → STARTING → STARTED → STOPPING → IDLE`` (an app may not restart, but the
    lifecycle itself can run again)."""

    IDLE = "idle"
    STARTING = "starting"
    STARTED = "started"
    STOPPING = "stopping"


class Lifecycle:
    """The hooks and resources of one app, run in the order the module docstring gives."""

    def __init__(self) -> None:
        self._startup: list[Hook | Resource[Any]] = []
        self._shutdown: list[Hook] = []
        self._names: dict[str, Resource[Any]] = {}
        self._stack: contextlib.AsyncExitStack | None = None
        self.state = LifecycleState.IDLE

    def add_startup(self, hook: Hook) -> Hook:
        self._startup.append(_checked(hook, "on_startup"))
        return hook

    def add_shutdown(self, hook: Hook) -> Hook:
        self._shutdown.append(_checked(hook, "on_shutdown"))
        return hook

    def add_resource(self, name: str, factory: Callable[[], Any]) -> Resource[Any]:
        if name in self._names:
            raise ValueError(f"a resource named {name!r} is declared already")
        if not callable(factory):
            raise TypeError(f"resource {name!r}: the factory must be callable, got "
                            f"{factory!r}")
        resource: Resource[Any] = Resource(name, factory)
        self._names[name] = resource
        self._startup.append(resource)
        return resource

    def resource(self, name: str) -> Resource[Any]:
        try:
            return self._names[name]
        except KeyError:
            known = ", ".join(sorted(self._names)) or "none"
            raise KeyError(f"no resource {name!r} (declared: {known})") from None

    async def start(self) -> None:
        """Open resources and run startup hooks in declaration order. On an error, undo
        what was opened and raise it. Cancellation: the same as an error."""
        assert self.state is LifecycleState.IDLE, self.state
        self.state = LifecycleState.STARTING
        stack = contextlib.AsyncExitStack()
        try:
            for step in self._startup:
                if isinstance(step, Resource):
                    await step._open_in(stack)
                else:
                    await step()
        except BaseException:
            self.state = LifecycleState.IDLE
            await stack.aclose()
            raise
        self._stack = stack
        self.state = LifecycleState.STARTED

    async def stop(self) -> None:
        """Run the shutdown hooks in order, then close the resources in reverse; every
        step runs, the first error is raised at the end. A no-op unless started."""
        if self.state is not LifecycleState.STARTED:
            return
        self.state = LifecycleState.STOPPING
        stack, self._stack = self._stack, None
        assert stack is not None
        first: BaseException | None = None
        try:
            for hook in self._shutdown:
                try:
                    await hook()
                except Exception as e:  # the others still run; CancelledError propagates
                    first = first or e
        finally:  # cancelled or not, the resources are closed
            try:
                await stack.aclose()
            except Exception as e:
                first = first or e
            self.state = LifecycleState.IDLE
        if first is not None:
            raise first


def _checked(hook: Hook, what: str) -> Hook:
    if not inspect.iscoroutinefunction(hook):
        raise TypeError(f"@app.{what} takes an async function with no arguments; got "
                        f"{hook!r}")
    return hook
