"""Take the status page's screenshot for the docs: docs/img/status-page.png.

    .venv/bin/python docs/status_screenshot.py [--out docs/img/status-page.png]

Runs the demo app of the browser test (tests/support/status_demo.py: an async scoring step
through a service, a repartition, a counting store, dead letters) on the memory broker with
its metrics server on a free port of 127.0.0.1, lets records flow for a few seconds, and
photographs ``/`` in headless Chromium (Debian's ``chromium``, as the browser tests use).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests" / "support")]

from browser import CHROMIUM, LoopThread  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402
from status_demo import start_demo  # noqa: E402

WARM_UP = 3.0
"""Seconds records flow before the picture (so offsets, counts and dead letters are not 0)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "img" / "status-page.png")
    parser.add_argument("--width", type=int, default=1400)
    args = parser.parse_args()
    with LoopThread() as loop:
        demo = loop.run(start_demo())
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
                page = browser.new_page(viewport={"width": args.width, "height": 700})
                page.goto(demo.page_url)
                time.sleep(WARM_UP)  # a picture of a busy app, not a wait for an event
                page.screenshot(path=str(args.out), full_page=True)
                browser.close()
        finally:
            loop.run(demo.stop())
    shrink(args.out)
    print(f"wrote {args.out} ({args.out.stat().st_size:,} bytes)")


def shrink(path: Path) -> None:
    """64 colours without dithering: a third of the bytes, the text as sharp (Pillow comes
    with matplotlib, the bench extra; without it the PNG stays as Chromium wrote it)."""
    try:
        from PIL import Image
    except ImportError:
        return
    with Image.open(path) as image:
        small = image.convert("RGB").quantize(colors=64, method=Image.Quantize.MEDIANCUT,
                                              dither=Image.Dither.NONE)
    small.save(path, optimize=True)


if __name__ == "__main__":
    main()
