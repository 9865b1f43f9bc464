"""The docs site in a real headless browser (Debian's Chromium through playwright): the site
is built as ``make docs`` builds it, served on 127.0.0.1, and the home, configuration and
services pages are loaded at desktop (1280x800) and phone (390x844) widths. On each: the page
never scrolls sideways (nothing sticks out past the viewport unless it is inside a box that
scrolls, as code blocks and wide tables do), every image loads, and inline code such as a
setting's name wraps only at the ``<wbr>`` marks ``docs/hooks.py`` puts after ``_ . /``
(wall 9 of issue 36: "max_in_fli ght").

The browser is ``tests/support/browser.py``'s ``browser`` fixture (a sync playwright
Browser, module-scoped). The module holds no async test (playwright's sync API keeps an event
loop marked running while it is open). The site is built once for the module (about 4 s of
CPU)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = {"home": "", "configuration": "reference/configuration/",
         "services": "guides/services/"}


@pytest.fixture(scope="module")
def screenshots() -> ModuleType:
    sys.path.insert(0, str(DOCS))
    try:
        return importlib.import_module("screenshots")
    finally:
        sys.path.remove(str(DOCS))


@pytest.fixture(scope="module")
def site_url(screenshots: ModuleType,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    site = screenshots.build_site(tmp_path_factory.mktemp("docs") / "site")
    with screenshots.serve(site) as url:
        yield url


# Elements of the article whose right edge is past the viewport and that no scrolling box
# (overflow auto/scroll/hidden, itself inside the viewport) contains: what makes a page
# scroll sideways, or would be cut off if the theme hid the overflow.
STICKING_OUT = """() => {
  const width = window.innerWidth, out = [];
  for (const e of document.querySelectorAll('.md-content *')) {
    const r = e.getBoundingClientRect();
    if (r.width === 0 || r.right <= width + 1) continue;
    let box = e.parentElement, held = false;
    while (box && box !== document.body) {
      const s = getComputedStyle(box);
      if (['auto', 'scroll', 'hidden'].includes(s.overflowX)
          && box.getBoundingClientRect().right <= width + 1) { held = true; break; }
      box = box.parentElement;
    }
    if (!held) out.push(`<${e.tagName.toLowerCase()} class="${e.className}">`
                        + ` ends at ${Math.round(r.right)}px: ${e.textContent.slice(0, 40)}`);
  }
  return out;
}"""

BROKEN_IMAGES = """() => [...document.images]
  .filter(i => !i.complete || i.naturalWidth === 0).map(i => i.currentSrc || i.src)"""

# Inline code: each piece of a name between the places a line may sensibly end (the <wbr>
# marks, which split the text nodes; spaces; and just after a hyphen, as in Retry-After)
# must sit on one line; a piece over two lines was broken mid-name.
BROKEN_NAMES = """() => {
  const out = [];
  for (const code of document.querySelectorAll('.md-content code')) {
    if (code.closest('pre')) continue;
    for (const node of code.childNodes) {
      if (node.nodeType !== Node.TEXT_NODE) continue;
      for (const piece of node.textContent.matchAll(/[^\\s-]+-?/g)) {
        const range = document.createRange();
        range.setStart(node, piece.index);
        range.setEnd(node, piece.index + piece[0].length);
        const lines = new Set([...range.getClientRects()]
          .filter(r => r.width > 0).map(r => Math.round(r.top)));
        if (lines.size > 1) out.push(`${piece[0]} (in ${code.textContent})`);
      }
    }
  }
  return out;
}"""

PICTURE = """() => { const i = document.querySelector('figure picture img');
  return [i.currentSrc.split('/').pop(), i.getBoundingClientRect().width]; }"""
NARROW_PICTURE = {"desktop": "home-flow.svg", "phone": "home-flow-tall.svg"}


def test_pages_fit_the_screen_load_their_images_and_keep_names_whole(
        site_url: str, browser: Any, screenshots: ModuleType) -> None:
    # one test for both widths: `make test` hands each test to a worker of its own
    # (tests/support/suite_scheduling.py), and the site is built once per module per worker
    problems = []
    for viewport, (width, height) in screenshots.VIEWPORTS.items():
        page = browser.new_page(viewport={"width": width, "height": height})
        try:
            problems += [f"{width}x{height} {problem}"
                         for problem in page_problems(page, site_url, viewport, width)]
        finally:
            page.close()
    assert not problems, "\n".join(problems)


def page_problems(page: Any, site_url: str, viewport: str, width: int) -> list[str]:
    problems = []
    for name, path in PAGES.items():
        page.goto(site_url + path, wait_until="load")
        assert page.locator("article h1").count() == 1, f"{name}: no page there"
        scroll_width = page.evaluate("document.documentElement.scrollWidth")
        if scroll_width > width:
            problems.append(f"{name}: the page is {scroll_width}px wide, the screen {width}")
        problems += [f"{name}: sticks out: {e}" for e in page.evaluate(STICKING_OUT)]
        problems += [f"{name}: image did not load: {i}" for i in page.evaluate(BROKEN_IMAGES)]
        problems += [f"{name}: name broken mid-word: {c}" for c in page.evaluate(BROKEN_NAMES)]
        if name == "home":  # the picture drawn for the screen's width, at a readable size
            picture, shown_width = page.evaluate(PICTURE)
            if picture != NARROW_PICTURE[viewport] or shown_width < min(width - 40, 600):
                problems.append(f"home: shows {picture} {shown_width}px wide")
    return problems
