"""Is the convex readout's cost the solver's? Products over the feature matrix per solve, three ways, one run.

Usage: .venv/bin/python bench/convex_solvers.py [--arm relu-frozen] [--width 1024] [--seed 0]
       [--subsample 8192] [--cache-dir DIR]

A convex cell's cost is (products over its ``(60,000, m)`` feature matrix) x (time of one product);
bench/convex.py shows the second is within 1.4-2.7x of its floor. This script measures the first
for one real bank (the arm's chosen lambda from ``--cache-dir``'s memo, else 1e-6), every solver in
the same whitened coordinates (``convex_solve.preconditioner``/``whitener``) to the same
gradient rule (``||grad_V L|| < TOL``):

1. lazylab's solver (L-BFGS-B, ``convex_solve.solve``): two products per evaluation.
2. Newton-CG (Nocedal & Wright 2006, Algorithm 7.1; the solver of LIBLINEAR's logistic regression,
   Lin, Weng & Keerthi 2008) with exact Hessian-vector products: two products per gradient, two per
   Hessian-vector product (``F D`` and ``F^T R``), one per line search (logits are linear in the step).
3. The same with the Hessian of ``--subsample`` random images (Byrd, Chin, Neveitt & Nocedal 2011):
   its Hessian-vector products cost ``subsample / n`` of a product each; capped at 50 Newton steps.

Also, on the same matrix, the time of one ``F W`` and one ``F^T G`` (10 columns, OpenBLAS), both fused
in blocks of rows (one read of each block), and one streaming read: what a faster product could gain.
Prints, per solver: products (full-matrix equivalents), Newton steps, objective, gradient norm, seconds.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from convex import best_of  # bench/convex.py: a script's own directory is on sys.path


def newton_cg(F, y, lam, mu, P, tol, subsample=None, max_steps=50, max_cg=250, seed=0) -> dict:
    """Inexact Newton-CG (forcing term ``min(0.5, sqrt||g||)``, Armijo backtracking) on the objective of
    ``convex_solve.solve`` in its whitened coordinates. Returns counts in full-matrix products."""
    n, m = F.shape
    rows = np.sort(np.random.default_rng(seed).choice(n, subsample, replace=False)) if subsample else None
    FS = F[rows] if subsample else F
    share = len(FS) / n
    mu32 = mu.astype(np.float32)
    Y = np.zeros((n, 10))
    Y[np.arange(n), y] = 1.0
    W, c, Z = np.zeros((m, 10)), np.zeros(10), np.zeros((n, 10))
    products, steps = 0.0, 0

    def softmax(Z):
        e = np.exp(Z - Z.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def value(Z, W):
        z = Z - Z.max(axis=1, keepdims=True)
        return float(np.mean(np.log(np.exp(z).sum(axis=1)) - z[np.arange(n), y]) + 0.5 * lam * np.sum(W * W))

    def direction_logits(FF, d):  # logits of the step d = (D_V, d_c): (F - mu) P D_V + d_c
        DW = P @ d[: m * 10].reshape(m, 10).astype(np.float32)
        return (FF @ DW).astype(np.float64) - (mu32 @ DW).astype(np.float64) + d[m * 10 :], DW.astype(np.float64)

    t0 = time.perf_counter()
    while True:
        p = softmax(Z)
        G = (p - Y) / n
        gb = G.sum(axis=0)
        gW = (F.T @ G.astype(np.float32)).astype(np.float64) - np.outer(mu, gb) + lam * W
        products += 1  # F W is carried in Z; F^T G here
        g = np.concatenate([(P.T @ gW.astype(np.float32)).astype(np.float64).ravel(), gb])
        gnorm = float(np.linalg.norm(g))
        if gnorm < tol or steps >= max_steps:
            break
        pS = p[rows] if subsample else p

        def hessian(d, pS=pS):  # the probabilities of this step
            nonlocal products
            Zd, DW = direction_logits(FS, d)
            R = (pS * Zd - pS * (pS * Zd).sum(axis=1, keepdims=True)) / len(FS)
            hb = R.sum(axis=0)
            hW = (FS.T @ R.astype(np.float32)).astype(np.float64) - np.outer(mu, hb) + lam * DW
            products += 2 * share
            return np.concatenate([(P.T @ hW.astype(np.float32)).astype(np.float64).ravel(), hb])

        x, r = np.zeros_like(g), -g
        d, rr = r.copy(), r @ r
        for _ in range(max_cg):
            Hd = hessian(d)
            alpha = rr / (d @ Hd)
            x += alpha * d
            r = r - alpha * Hd
            if np.sqrt(r @ r) < min(0.5, np.sqrt(gnorm)) * gnorm:
                break
            d, rr = r + (r @ r) / rr * d, r @ r
        Zx, DW = direction_logits(F, x)
        products += 1
        f, step = value(Z, W), 1.0
        while value(Z + step * Zx, W + step * DW) > f + 1e-4 * step * (g @ x) and step > 1e-6:
            step /= 2
        Z, W, c = Z + step * Zx, W + step * DW, c + step * x[m * 10 :]
        steps += 1
    return {"products": products, "steps": steps, "objective": value(Z, W), "grad_norm": gnorm,
            "seconds": time.perf_counter() - t0}


def fused(F, W, block: int = 2048):
    """``F^T (F W)`` in blocks of rows: each block read once for both products."""
    out = np.zeros((F.shape[1], W.shape[1]), np.float32)
    for i in range(0, F.shape[0], block):
        Fb = F[i : i + block]
        out += Fb.T @ (Fb @ W)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arm", default="relu-frozen")
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--subsample", type=int, default=8192)
    ap.add_argument("--cache-dir", default=None, help="a memo holding the arm's lambda choice (the frontier's)")
    args = ap.parse_args()

    from lazylab.arms import get_arm
    from lazylab.experiments import Workspace
    from lazylab.experiments.convex import LAMBDAS, _features, convex_config, lambda_config
    from lazylab.experiments.convex_solve import TOL, preconditioner, solve, whitener

    ws = Workspace(cache_dir=args.cache_dir)
    arm = get_arm(args.arm)
    choice = ws.memo.get_record(lambda_config(ws, arm, args.width, 60000, "unit", LAMBDAS).key())
    lam = choice["lambda"] if isinstance(choice, dict) else 1e-6
    F = np.asarray(_features(ws, arm, convex_config(ws, arm, args.width, args.seed, lam))[0], np.float32)
    y = np.asarray(ws.data.y_train[:60000])
    rng = np.random.default_rng(1)
    W = rng.standard_normal((F.shape[1], 10)).astype(np.float32)
    G = rng.standard_normal((F.shape[0], 10)).astype(np.float32)
    fw, ftg = best_of(lambda: F @ W), best_of(lambda: F.T @ G)
    print(f"{args.arm} m={args.width} seed={args.seed} lambda={lam:g}; one product: F W {fw * 1e3:.0f} ms, "
          f"F^T G {ftg * 1e3:.0f} ms, both fused in row blocks {best_of(lambda: fused(F, W)) * 1e3:.0f} ms, "
          f"one streaming read {best_of(lambda: F.sum(axis=0)) * 1e3:.0f} ms")
    mu, cov = preconditioner(F, F.shape[0])
    P, _ = whitener(cov, lam)
    print("solver | products | Newton steps | objective | gradient norm | seconds")
    t = time.perf_counter()
    fit = solve(F, y, lam, precond=(mu, cov))
    print(f"L-BFGS (lazylab) | {2 * fit['evaluations']} | - | {fit['objective']:.7f} | {fit['grad_norm']:.1e} | "
          f"{time.perf_counter() - t:.1f}", flush=True)
    for label, sub in (("Newton-CG, exact Hessian", None), (f"Newton-CG, Hessian of {args.subsample} images", args.subsample)):
        r = newton_cg(F, y, lam, mu, P, TOL, subsample=sub)
        print(f"{label} | {r['products']:.0f} | {r['steps']} | {r['objective']:.7f} | {r['grad_norm']:.1e} | "
              f"{r['seconds']:.1f}", flush=True)


if __name__ == "__main__":
    main()
