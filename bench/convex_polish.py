"""How far the shipped convex readouts stop from their optimum: each decisive cell solved again, then polished.

Usage: .venv/bin/python bench/convex_polish.py [--cells gaussian-frozen:256,...] [--cache-dir DIR] [--seed 0]

For each cell (arm and width, seed 0 by default, all 60,000 training images) at the lambda the memo's
frontier chose (``--cache-dir``): the cell's solve exactly as ``lazylab ladder --readout convex`` runs it
(``convex_solve.solve``, float32 products, its stopping rules), then a polish from that point: L-BFGS-B in
float64 throughout (products included) with the gradient tolerance 100 times tighter and up to 2,000 more
iterations. Printed per cell: the solve's stop rule and gradient norm, the objective it reached and how much the
polish lowered it (an estimate of the distance to the optimum in the objective), the polished gradient norm,
and the test accuracy before and after (how much the stop costs where it matters). docs/convex.md holds the
table.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

CELLS = "gaussian-frozen:256,gaussian-frozen:512,yat-frozen:1024,yat-frozen:2048,relu-frozen:1024"


def polish(F, y, lam: float, W, b, max_iter: int = 2000, gtol: float = 1e-6) -> dict:
    """Minimise the same objective from ``(W, b)`` in float64 (scipy L-BFGS-B on raw coordinates, products in
    float64): ``{"W", "b", "objective", "grad_norm", "iterations"}``."""
    import scipy.optimize

    F = np.asarray(F, np.float64)
    n, m = F.shape
    idx = np.arange(n)

    def f(x):
        Wx, bx = x[: m * 10].reshape(m, 10), x[m * 10:]
        z = F @ Wx + bx
        z -= z.max(axis=1, keepdims=True)
        e = np.exp(z)
        s = e.sum(axis=1)
        value = np.mean(np.log(s) - z[idx, y]) + 0.5 * lam * np.sum(Wx * Wx)
        G = e / s[:, None]
        G[idx, y] -= 1.0
        G /= n
        return value, np.concatenate([(F.T @ G + lam * Wx).ravel(), G.sum(axis=0)])

    x0 = np.concatenate([np.asarray(W, np.float64).ravel(), np.asarray(b, np.float64)])
    res = scipy.optimize.minimize(f, x0, jac=True, method="L-BFGS-B",
                                  options={"maxiter": max_iter, "gtol": gtol, "ftol": 1e-15, "maxcor": 20})
    value, grad = f(res.x)
    return {"W": res.x[: m * 10].reshape(m, 10), "b": res.x[m * 10:], "objective": float(value),
            "grad_norm": float(np.linalg.norm(grad)), "iterations": int(res.nit)}


def main(argv=None) -> int:
    import dataclasses

    from lazylab.arms import get_arm
    from lazylab.experiments import Workspace
    from lazylab.experiments.convex import convex_config, run_convex_ladder
    from lazylab.experiments.convex_solve import scores, solve
    from lazylab.experiments.render import _plan
    from lazylab.model import build_model

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cells", default=CELLS, help=f"arm:width,... [default: {CELLS}]")
    ap.add_argument("--cache-dir", default=None, help="the memo holding the frontier (its lambda choices)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    ws = Workspace(None, args.cache_dir)
    plan = _plan("paper")
    y, y_test = np.asarray(ws.data.y_train), np.asarray(ws.data.y_test)
    print(f"{'cell':>22} {'lambda':>9} {'stop':>11} {'|g|':>8} {'objective':>12} {'polish gain':>11} {'|g| after':>9} "
          f"{'test %':>7} {'after':>7}  seconds")
    for item in args.cells.split(","):
        name, width = item.split(":")
        arm, width = get_arm(name), int(width)
        ws.memo_only = True
        convex = run_convex_ladder(ws, dataclasses.replace(plan, arms=(arm,), widths=(width,), seeds=(args.seed,)))
        ws.memo_only = False
        lam = convex["arms"][name]["lambdas"][str(width)]
        cfg = convex_config(ws, arm, width, args.seed, lam)
        model = build_model(arm, width, args.seed, ws.data.x_train, cfg.fan_in)
        F, F_test = (np.asarray(f) for f in ws.bank_features(arm, cfg.bank_run(), model))
        t0 = time.perf_counter()
        fit = solve(F, y, lam, None, cfg.tol, cfg.max_iter)
        t1 = time.perf_counter()
        before = 100.0 * float(scores(F_test, y_test, fit["W"], fit["b"])[1].mean())
        better = polish(F, y, lam, fit["W"], fit["b"])
        after = 100.0 * float(scores(F_test, y_test, better["W"], better["b"])[1].mean())
        print(f"{item:>22} {lam:>9.3g} {fit['stop']:>11} {fit['grad_norm']:>8.1e} {fit['objective']:>12.8f} "
              f"{fit['objective'] - better['objective']:>11.2e} {better['grad_norm']:>9.1e} {before:>7.2f} {after:>7.2f}"
              f"  {t1 - t0:.0f} + {time.perf_counter() - t1:.0f} ({better['iterations']} polish iterations)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
