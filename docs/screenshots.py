"""Screenshots of the docs site's home page at desktop and phone widths, for the docs.

    .venv/bin/python docs/screenshots.py            # builds the site into a temporary directory
    .venv/bin/python docs/screenshots.py --site .venv/site   # or shoots an existing build

writes ``docs/img/home-desktop.png`` (1280x800) and ``docs/img/home-phone.png`` (390x844),
shown on the "The docs site" page (``docs/contributing/docs.md``). Needs Chromium (Debian's
``/usr/bin/chromium``, or ``AIOSTREAMS_CHROMIUM=/path``) and playwright, as the browser test does
(``tests/docs/test_site_in_browser.py``, which uses :func:`build_site` and :func:`serve`
from here).

The pictures are reduced to a 64-colour palette when Pillow is installed, so each stays
under about 100 KB in the repository.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.server
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
IMG = ROOT / "docs" / "img"
VIEWPORTS = {"desktop": (1280, 800), "phone": (390, 844)}
"""The widths the site is checked at and shown at: a laptop, and a 6.1-inch phone."""


def chromium_path() -> str:
    """The Chromium binary: ``$AIOSTREAMS_CHROMIUM`` (the variable the status page's browser
    tests read, ``tests/support/browser.py``), else Debian's package."""
    return os.environ.get("AIOSTREAMS_CHROMIUM", "/usr/bin/chromium")


def build_site(dest: Path) -> Path:
    """``mkdocs build --strict`` into ``dest`` (as ``make docs`` does into ``.venv/site``);
    raises ``RuntimeError`` with mkdocs' output when the build fails."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT),
                                                       os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(dest)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"mkdocs build failed ({done.returncode}):\n{done.stdout}"
                           f"{done.stderr}")
    return dest


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # no request log on stderr
        pass


@contextlib.contextmanager
def serve(directory: Path) -> Iterator[str]:
    """Serve ``directory`` over HTTP on 127.0.0.1 (a port the OS picks) while the block
    runs; yields the base URL, ending in ``/``. The server is shut down on exit."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="docs-site", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def shrink(path: Path) -> None:
    """Re-save a PNG with a 64-colour palette when Pillow is there (text stays sharp)."""
    try:
        from PIL import Image
    except ImportError:
        return
    with Image.open(path) as image:
        small = image.convert("RGB").quantize(colors=64)
    small.save(path, optimize=True)


def shoot(site: Path, out: Path = IMG) -> list[Path]:
    """Screenshots of ``site``'s home page at each of :data:`VIEWPORTS` into ``out``."""
    from playwright.sync_api import sync_playwright

    written = []
    with serve(site) as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_path())
        try:
            for name, (width, height) in VIEWPORTS.items():
                page = browser.new_page(viewport={"width": width, "height": height})
                page.goto(base, wait_until="load")
                path = out / f"home-{name}.png"
                page.screenshot(path=str(path))
                page.close()
                shrink(path)
                written.append(path)
        finally:
            browser.close()
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--site", type=Path, help="a built site (default: build one now)")
    args = parser.parse_args(argv)
    if args.site is not None:
        paths = shoot(args.site)
    else:
        with tempfile.TemporaryDirectory(prefix="aiostreams-site-") as tmp:
            paths = shoot(build_site(Path(tmp) / "site"))
    for path in paths:
        print(f"{path.relative_to(ROOT)}: {path.stat().st_size // 1024} KB")


if __name__ == "__main__":
    main()
