#!/usr/bin/env python
"""Screenshots of report.html in headless Chromium at 1400 px and 400 px wide (docs/img/ by default).

    .venv/bin/python scripts/screenshots.py [REPORT] [--out docs/img] [--widths 1400,400] [--height 1100] [--full]

REPORT defaults to $LAZYLAB_OUT/render/report.html (else out/render/report.html). Writes
``report_<width>.png`` per width: the first screen (``--height`` px tall), or with ``--full`` the
whole page (capped at 16,000 px). Needs Debian's chromium and chromium-driver and selenium
(``bash scripts/setup.sh``), as tests/test_render.py does. Prints each file with its size, the
page's height in screens of ``--height`` px, and whether the page scrolled sideways at that width
(it must not: wide tables scroll inside their box; exit 1 if it did).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--hide-scrollbars", "--force-device-scale-factor=1")


def driver(profile: str):
    """A headless Chromium driven by chromedriver; SystemExit (one line) if either is missing."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    path = shutil.which("chromedriver")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        webdriver = None
    if not (chromium and path and webdriver):
        raise SystemExit("error: needs chromium, chromium-driver (apt) and selenium (pip): bash scripts/setup.sh")
    os.environ.setdefault("SE_AVOID_STATS", "true")
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for flag in FLAGS + (f"--user-data-dir={profile}",):
        opts.add_argument(flag)
    return webdriver.Chrome(service=Service(path), options=opts)


def load(browser, page: Path, width: int, height: int) -> None:
    """Open ``page`` in a ``width`` x ``height`` viewport and wait for every image."""
    browser.set_window_size(width, height)
    # the window includes no chrome in headless mode, but make the viewport exact anyway
    inner = browser.execute_script("return [window.innerWidth, window.innerHeight]")
    browser.set_window_size(2 * width - inner[0], 2 * height - inner[1])
    browser.get(page.resolve().as_uri())
    deadline = time.time() + 60
    while time.time() < deadline and not browser.execute_script(
            "return document.readyState === 'complete' && Array.from(document.images).every(i => i.complete)"):
        time.sleep(0.2)


def main(argv=None) -> int:
    default = Path(os.environ.get("LAZYLAB_OUT") or "out") / "render" / "report.html"
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("report", nargs="?", type=Path, default=default)
    ap.add_argument("--out", type=Path, default=Path("docs/img"))
    ap.add_argument("--widths", default="1400,400")
    ap.add_argument("--height", type=int, default=1100, help="viewport height in px [default: 1100]")
    ap.add_argument("--full", action="store_true", help="the whole page, not only the first screen")
    args = ap.parse_args(argv)
    if not args.report.is_file():
        print(f"error: {args.report} is not a file (lazylab render report writes it)", file=sys.stderr)
        return 2
    try:
        widths = [int(w) for w in args.widths.split(",")]
    except ValueError:
        print(f"error: --widths: {args.widths!r} is not a comma-separated list of integers", file=sys.stderr)
        return 2
    scrolled = []
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as profile:
        browser = driver(profile)
        try:
            for w in widths:
                load(browser, args.report, w, args.height)
                sideways = browser.execute_script("return document.documentElement.scrollWidth > window.innerWidth")
                scrolled += [w] if sideways else []
                page = browser.execute_script("return document.documentElement.scrollHeight")
                if args.full:
                    load(browser, args.report, w, min(16000, page))
                target = args.out / f"report_{w}.png"
                browser.save_screenshot(str(target))
                from PIL import Image

                with Image.open(target) as im:
                    size = im.size
                print(f"wrote {target} ({size[0]}x{size[1]} px, {target.stat().st_size / 1024:.0f} KB); "
                      f"page scrolls sideways at {w} px: {'YES' if sideways else 'no'}; the page is {page:,} px tall, "
                      f"{page / args.height:.1f} screens of {args.height} px")
        finally:
            browser.quit()
    if scrolled:
        print(f"error: the page scrolls sideways at {', '.join(map(str, scrolled))} px", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
