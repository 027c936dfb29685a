"""The convex readout's cost per cell against its floor, measured in one run.

Usage: .venv/bin/python bench/convex.py [--widths 1024,4096] [--arms yat-frozen,relu-frozen] [--cache-dir DIR]

For each arm and width (seed 0, all 60,000 training images): one convex cell computed the way
``lazylab ladder --readout convex`` computes it (``experiments.convex.convex_cells``: the bank's
features, the preconditioner, one L-BFGS solve at the arm's chosen lambda, the scores), on a
memo that stores no features (so the features are computed, as on a fresh machine). Lambda is
the arm's choice at that width from ``--cache-dir``'s memo when it holds one (the frontier's), else 1e-6.

The floor of that cell is the work it cannot avoid, at this machine's rates measured in the same
run (these machines are noisy: only ratios measured together mean anything):

- features: ``2 * 70,000 * 784 * m`` FLOPs of the bank's product ``x W^T`` at the square
  float32 matmul rate (OpenBLAS, 2048 x 2048);
- preconditioner: the covariance ``rows * m^2`` FLOPs (``ssyrk``) at the float32 rate, the
  Cholesky factor and its inverse ``2 m^3 / 3`` at the float64 rate;
- solve: the evaluations the solve made (its count) x the time of the two products one
  evaluation needs, ``F W`` and ``F^T G``, measured on this cell's feature matrix with OpenBLAS
  (the products' rate; one streaming read of the matrix is printed beside it as the bandwidth bound).

Prints per cell: seconds, evaluations, the floor and its parts, and the ratio.
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np

N_ALL = 70000  # training plus test images, whose features a cell computes
D = 784


def best_of(fn, repeat: int = 3) -> float:
    """The fastest of ``repeat`` timed calls of ``fn`` (seconds)."""
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def rates() -> dict:
    """float32 and float64 square-matmul rates (FLOP/s) of this machine's BLAS."""
    rng = np.random.default_rng(0)
    out = {}
    for name, dtype in (("f32", np.float32), ("f64", np.float64)):
        a = rng.standard_normal((2048, 2048)).astype(dtype)
        out[name] = 2 * 2048**3 / best_of(lambda a=a: a @ a)
    return out


def products(F: np.ndarray) -> dict:
    """Seconds of one evaluation's two products on ``F`` (OpenBLAS) and of one streaming read of ``F``."""
    rng = np.random.default_rng(1)
    W = rng.standard_normal((F.shape[1], 10)).astype(np.float32)
    G = rng.standard_normal((F.shape[0], 10)).astype(np.float32)
    return {"products": best_of(lambda: F @ W) + best_of(lambda: F.T @ G), "read": best_of(lambda: F.sum(axis=0))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--widths", default="1024,4096")
    ap.add_argument("--arms", default="yat-frozen,relu-frozen")
    ap.add_argument("--cache-dir", default=None, help="a memo holding the arms' lambda choices (the frontier's)")
    args = ap.parse_args()

    from lazylab.arms import get_arm
    from lazylab.experiments import Workspace
    from lazylab.experiments.convex import LAMBDAS, _features, convex_cells, convex_config, lambda_config
    from lazylab.experiments.convex_solve import PRECOND_ROWS

    r = rates()
    print(f"this machine: float32 matmul {r['f32'] / 1e9:.0f} GFLOP/s, float64 {r['f64'] / 1e9:.0f} GFLOP/s (2048^2)")
    chosen = Workspace(cache_dir=args.cache_dir) if args.cache_dir else None
    with tempfile.TemporaryDirectory() as memo:
        ws = Workspace(cache_dir=memo, cache_limit=0)  # no feature store: every cell computes its features
        header = ("arm", "m", "lambda", "cell s", "evals", "features", "precond", "per eval", "read", "floor s", "ratio")
        print(" | ".join(header))
        for name in args.arms.split(","):
            arm = get_arm(name)
            for m in (int(w) for w in args.widths.split(",")):
                lam = 1e-6
                if chosen is not None:
                    rec = chosen.memo.get_record(lambda_config(chosen, arm, m, 60000, "unit", LAMBDAS).key())
                    lam = rec["lambda"] if isinstance(rec, dict) else lam
                cfg = convex_config(ws, arm, m, 0, lam)
                record = convex_cells(ws, arm, [cfg])[0]
                F = np.asarray(_features(ws, arm, cfg)[0])  # the same bank (kept in memory by the workspace)
                p = products(F)
                rows = max(PRECOND_ROWS, 2 * m)
                features = 2 * N_ALL * D * m / r["f32"]
                precond = rows * m**2 / r["f32"] + (2 * m**3 / 3) / r["f64"]
                floor = features + precond + record["evaluations"] * p["products"]
                print(" | ".join([name, str(m), f"{lam:g}", f"{record['seconds']:.1f}", str(record["evaluations"]),
                                  f"{features:.2f}", f"{precond:.2f}", f"{p['products'] * 1e3:.0f} ms",
                                  f"{p['read'] * 1e3:.0f} ms", f"{floor:.1f}", f"{record['seconds'] / floor:.2f}"]),
                      flush=True)
                del F


if __name__ == "__main__":
    main()
