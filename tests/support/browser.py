"""A real headless browser for tests: Chromium from the OS packages, driven by playwright.

Fixtures (registered for the whole suite by tests/conftest.py's ``pytest_plugins``):

- ``browser`` (module): one headless Chromium for a test module's tests, closed after
  them. Not session-wide: while playwright's sync API is open it holds an event loop as
  *running* on the main thread, and every async test after it in the process would fail
  ("coroutine ... was never awaited"). A module of browser tests must hold no async test;
- ``new_page``: a factory, ``new_page(width=1280, height=800)`` -> a fresh page (in a
  context of its own, so no cookie or cache is shared) of that viewport size, closed after
  the test.

Playwright's *sync* API: a test using it is a plain (not async) test; an app it looks at
runs on an event loop of its own (:class:`LoopThread`), as a real app runs apart from the
browser looking at it.

Chromium is the Debian package's (``/usr/bin/chromium``; ``make unit`` and ``make test``
install it when missing, as root: ``make chromium``). Without it the fixture *fails* with
the command to run: a browser test that skipped silently would let the page break unseen.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import threading
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

CHROMIUM = os.environ.get("AIOSTREAMS_CHROMIUM", "/usr/bin/chromium")
"""The browser binary: Debian's ``chromium`` package, unless ``AIOSTREAMS_CHROMIUM`` names
another Chromium."""

T = TypeVar("T")


def chromium_path() -> str:
    """The Chromium to launch; fails the test, saying how to install it, when absent."""
    if Path(CHROMIUM).exists():
        return CHROMIUM
    found = None if "AIOSTREAMS_CHROMIUM" in os.environ else shutil.which("chromium")
    if found is None:
        pytest.fail(f"no Chromium at {CHROMIUM}: the browser tests need Debian's package "
                    "(`sudo apt-get install -y --no-install-recommends chromium`, which "
                    "`make chromium` runs when it is root), or AIOSTREAMS_CHROMIUM=<path of a "
                    "chromium binary>", pytrace=False)
    return found


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is not installed: `pip install -e '.[dev]'` (`make install` "
                    "does)", pytrace=False)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium_path(), headless=True)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def new_page(browser: Any) -> Iterator[Callable[..., Any]]:
    contexts: list[Any] = []

    def make(width: int = 1280, height: int = 800) -> Any:
        context = browser.new_context(viewport={"width": width, "height": height})
        contexts.append(context)
        return context.new_page()

    try:
        yield make
    finally:
        for context in contexts:
            context.close()


class LoopThread:
    """An asyncio event loop running in a thread of its own, for the app a browser test
    looks at: ``run(coro)`` runs a coroutine there and returns its result (raising what
    it raised). Leaving the ``with`` block stops the loop and joins the thread; cancel or
    stop what you started on it first (``run(app.stop())``)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="app-loop",
                                        daemon=True)

    def __enter__(self) -> LoopThread:
        self._thread.start()
        return self

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def __exit__(self, *exc: object) -> None:
        self.run(self.loop.shutdown_asyncgens())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()
