"""Feature-store policy: computing a frozen bank's features against loading them back from the memo.

Usage: .venv/bin/python bench/feature_cache.py [--widths 1024,8192] [--units yat,relu,gaussian] [--dir DIR]

For each unit and width, in one run (these machines are noisy, so only figures
measured together mean anything), on the real 60k training and 10k test images:
1. build the frozen bank (seed 0) and compute its train and test features the
   way ``Workspace.bank_features`` does, jit compilation included (a later
   process recomputing them pays it too);
2. write them to a fresh feature store (``Memo.put_features``: SHA-256, then
   the raw float32 bytes streamed to one file);
3. load them back the way ``bank_features`` does (``Memo.get_features``: read
   into 64-byte-aligned arrays, SHA-256 check, then ``jax.device_put``, which
   on CPU adopts the arrays without a copy), twice: warm, right
   after the write, and cold, after dropping the entry's file from the page
   cache with ``posix_fadvise(DONTNEED)`` (on a VM the host may still cache it);
   and check the loaded features equal the computed ones bit for bit.
Prints seconds, bytes, the compute/load ratios, the load rates (the figure
behind ``lazylab.cache.FEATURE_LOAD_BYTES_PER_S``) and what the policy
(``lazylab.cache.worth_storing``) decides for each bank.
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path

import jax
import numpy as np


def drop_page_cache(directory: Path) -> None:
    """Flush and drop every value file below ``directory`` from the page cache (no root needed)."""
    for path in directory.rglob("*.val"):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def same_bits(a, b, rows: int = 4096) -> bool:
    """Whether two ``(n, m)`` arrays hold the same bytes (compared in row blocks to keep memory flat)."""
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and all(
        a[i : i + rows].tobytes() == b[i : i + rows].tobytes() for i in range(0, len(a), rows))


def load(memo, key):
    """The stored features as jax arrays, as ``Workspace.bank_features`` loads them."""
    got = memo.get_features(key)
    return jax.block_until_ready((jax.device_put(got.pop("train"), may_alias=True),
                                  jax.device_put(got.pop("test"), may_alias=True)))


def main() -> None:
    from lazylab import data as fmnist
    from lazylab.arms import get_arm
    from lazylab.cache import DEFAULT_CACHE_LIMIT, FEATURE_LOAD_BYTES_PER_S, Memo, worth_storing
    from lazylab.model import build_model, features

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--widths", default="1024,8192")
    ap.add_argument("--units", default="yat,relu,gaussian")
    ap.add_argument("--dir", default=None, help="where to put the scratch feature store [default: a temporary folder]")
    args = ap.parse_args()
    widths = [int(w) for w in args.widths.split(",")]
    units = args.units.split(",")

    d = fmnist.load(None)
    print(f"{platform.node()}: {os.cpu_count()} CPUs, jax {jax.__version__} on {jax.devices()[0].platform}, "
          f"load average {os.getloadavg()[0]:.2f}; {len(d.x_train)}+{len(d.x_test)} images")
    header = (f"{'unit':<9} {'m':>5} {'MiB':>7} {'compute s':>9} {'write s':>8} {'warm s':>7} {'cold s':>7} "
              f"{'c/warm':>6} {'c/cold':>6} {'warm MB/s':>9} {'cold MB/s':>9} {'bits':>4}  policy")
    print(header)
    rates = []
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        memo = Memo(tmp, feature_limit=DEFAULT_CACHE_LIMIT)
        for m in widths:
            for unit in units:
                arm = get_arm(f"{unit}-frozen")
                feat = build_model(arm, m, 0, d.x_train).feat
                t = time.perf_counter()
                pair = jax.block_until_ready((features(feat, d.x_train), features(feat, d.x_test)))
                compute_s = time.perf_counter() - t
                nbytes = sum(f.nbytes for f in pair)
                key = f"bench-{unit}-{m}"
                t = time.perf_counter()
                stored = memo.put_features(key, {"train": pair[0], "test": pair[1]})
                write_s = time.perf_counter() - t
                assert stored, memo.problems
                t = time.perf_counter()
                warm = load(memo, key)
                warm_s = time.perf_counter() - t
                ok = same_bits(pair[0], warm[0]) and same_bits(pair[1], warm[1])
                del warm
                drop_page_cache(memo.feature_dir)
                t = time.perf_counter()
                cold = load(memo, key)
                cold_s = time.perf_counter() - t
                ok = ok and same_bits(pair[0], cold[0]) and same_bits(pair[1], cold[1])
                del cold, pair
                memo.clear()
                rates += [nbytes / warm_s, nbytes / cold_s]
                decision = "store" if worth_storing(compute_s, nbytes, DEFAULT_CACHE_LIMIT) else "recompute"
                print(f"{unit:<9} {m:>5} {nbytes / 2**20:>7.0f} {compute_s:>9.2f} {write_s:>8.2f} {warm_s:>7.2f} "
                      f"{cold_s:>7.2f} {compute_s / warm_s:>6.2f} {compute_s / cold_s:>6.2f} "
                      f"{nbytes / warm_s / 1e6:>9.0f} {nbytes / cold_s / 1e6:>9.0f} {'ok' if ok else 'DIFF':>4}  {decision}",
                      flush=True)
        memo.close()
    print(f"load rate over these loads: min {min(rates) / 1e6:.0f} MB/s, median {np.median(rates) / 1e6:.0f} MB/s; "
          f"the policy assumes FEATURE_LOAD_BYTES_PER_S = {FEATURE_LOAD_BYTES_PER_S / 1e6:.0f} MB/s")
    if memo.problems:
        print("problems:", *memo.problems, sep="\n  ")


if __name__ == "__main__":
    main()
