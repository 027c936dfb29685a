"""The test suite's wall time and peak temporary disk, measured in one run.

Usage: .venv/bin/python bench/suite.py [pytest arguments ...]

Runs the README's test command (``python -m pytest -q`` and any arguments given) with ``TMPDIR`` set to a new
empty folder, samples that folder's size every 2 s, and prints one row of docs/performance.md's test-suite
table: pytest's summary line, wall time, peak disk under ``TMPDIR`` (every test's memo, the session's
compilation cache and throwaway folders; the virtual environment and the dataset are not counted) and what
is left there when pytest ends. A CI machine may have only a few GB free: the suite must not hold more.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path


def folder_bytes(root: Path) -> int:
    """Bytes of the regular files under ``root`` (files removed while it walks are skipped)."""
    total = 0
    for dirpath, _, names in os.walk(root):
        for name in names:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            total += st.st_blocks * 512
    return total


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="lazylab-suite-") as tmp:
        root = Path(tmp)
        peak, done = [0], threading.Event()

        def sample():
            while not done.wait(2.0):
                peak[0] = max(peak[0], folder_bytes(root))

        watcher = threading.Thread(target=sample, daemon=True)
        watcher.start()
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", *sys.argv[1:]], env={**os.environ, "TMPDIR": tmp},
                              capture_output=True, text=True)
        wall = time.perf_counter() - start
        done.set()
        watcher.join()
        left = folder_bytes(root)
    summary = next((line.strip("= ") for line in reversed(proc.stdout.splitlines()) if " in " in line), "no summary")
    print("| tests | wall | peak temporary disk | left after |")
    print("|---|---|---|---|")
    print(f"| {summary} | {wall / 60:.0f} min {wall % 60:.0f} s | {peak[0] / 2**20:,.0f} MiB | {left / 2**20:,.0f} MiB |")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
