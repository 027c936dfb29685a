"""What subnormal softmax probabilities cost the convex readout's ``F^T G`` product, measured in one run.

Usage: .venv/bin/python bench/subnormal_products.py [--rows 60000] [--width 4096] [--fractions 0.001,0.006,0.05]

One evaluation of the convex readout's gradient multiplies the ``(rows, m)`` float32 feature matrix by
``G`` ``(rows, 10)``, the softmax probabilities minus the one-hot labels. A probability 87-103 nats under
its row's top logit is a subnormal float32 (below 1.18e-38). For each fraction of ``G``'s entries made
subnormal, the script times ``F^T G`` (OpenBLAS through numpy, best of 3) with ``G`` cast plainly and
with ``convex_solve.normal_float32`` (those entries set to 0), against ``G`` with no subnormals.
``F`` is random (only its shape matters to the product's speed). Prints milliseconds and ratios.
"""

from __future__ import annotations

import argparse

import numpy as np
from convex import best_of  # bench/convex.py: a script's own directory is on sys.path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=60000)
    ap.add_argument("--width", type=int, default=4096)
    ap.add_argument("--fractions", default="0.001,0.006,0.05")
    args = ap.parse_args()

    from lazylab.experiments.convex_solve import normal_float32

    rng = np.random.default_rng(0)
    F = rng.standard_normal((args.rows, args.width), dtype=np.float32)
    G = rng.random((args.rows, 10)) * 1e-3  # float64, as the objective computes it
    base = best_of(lambda: F.T @ G.astype(np.float32))
    print(f"F ({args.rows}, {args.width}) float32; F^T G with no subnormal entries: {base * 1e3:.0f} ms")
    print("subnormal fraction | plain cast ms | ratio | flushed ms | ratio")
    for fraction in (float(f) for f in args.fractions.split(",")):
        Gs = G.copy()
        Gs[rng.random(G.shape) < fraction] = 1e-40  # subnormal once cast to float32
        plain = best_of(lambda Gs=Gs: F.T @ Gs.astype(np.float32))
        flushed = best_of(lambda Gs=Gs: F.T @ normal_float32(Gs))
        print(f"{fraction:g} | {plain * 1e3:.0f} | {plain / base:.2f}x | {flushed * 1e3:.0f} | {flushed / base:.2f}x",
              flush=True)


if __name__ == "__main__":
    main()
