"""jax's persistent compilation cache (``lazylab/xla_cache.py``): a ladder with it off, cold and warm.

Usage: .venv/bin/python bench/compile_cache.py [LADDER OPTIONS ...]   (default: --preset quick)

In one run (these machines are noisy, so only figures measured together mean
anything), the same ``lazylab ladder`` three times, each in a fresh process
with a fresh memo, so that every run is trained again:
1. off   ``LAZYLAB_XLA_CACHE=0``: every program compiled;
2. cold  a fresh cache folder: every program compiled and written;
3. warm  the same folder: every program loaded.
Prints each wall time (imports and data loading included), the warm/off and
cold/off ratios, the programs and bytes the cache holds, and whether the three
ladders' run records (timing dropped) are identical.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def ladder(args: list[str], work: Path, name: str, xla_setting: str) -> tuple[float, str]:
    """Wall seconds of one ladder in a fresh process and memo, and its runs as canonical JSON (timing dropped)."""
    out = work / f"{name}.json"
    env = {**os.environ, "LAZYLAB_CACHE": str(work / f"memo-{name}"), "LAZYLAB_OUT": str(work / f"out-{name}"),
           "LAZYLAB_XLA_CACHE": xla_setting}
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "lazylab.cli", "ladder", *args, "--json", str(out)], env=env,
                          capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"ladder {name} failed: {proc.stderr.strip()}")
    runs = sorted((r["key"], {k: v for k, v in r.items() if k != "seconds"}) for r in json.loads(out.read_text())["runs"])
    return wall, json.dumps(runs, sort_keys=True)


def main() -> None:
    args = sys.argv[1:] or ["--preset", "quick"]
    with tempfile.TemporaryDirectory(prefix="lazylab-bench-xla-") as tmp:
        work = Path(tmp)
        cache = work / "xla"
        print(f"ladder {' '.join(args)}: 3 times, each in a fresh process with a fresh memo")
        results = {name: ladder(args, work, name, setting)
                   for name, setting in (("off", "0"), ("cold", str(cache)), ("warm", str(cache)))}
        files = list(cache.rglob("*-cache"))
        for name, (wall, _) in results.items():
            print(f"  {name:5s} {wall:7.1f} s")
        off = results["off"][0]
        print(f"  cold/off {results['cold'][0] / off:.2f}   warm/off {results['warm'][0] / off:.2f}")
        print(f"  cache: {len(files)} compiled programs, {sum(f.stat().st_size for f in files) / 2**20:.1f} MiB")
        same = len({runs for _, runs in results.values()}) == 1
        print(f"  run records identical (timing dropped): {same}")
        if not same:
            sys.exit(1)


if __name__ == "__main__":
    main()
