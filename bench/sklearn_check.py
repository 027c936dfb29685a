"""The convex readout's accuracy at the cells that decide the answer, against scikit-learn's LogisticRegression.

Usage: .venv/bin/python bench/sklearn_check.py [--cells gaussian-frozen:256,...] [--cache-dir DIR] [--seed 0]
       [--models same,standardised] [--rungs 1] [--Cs 0.01,0.1,1]

For each cell (arm and width; seed 0 by default; all 60,000 training images): the bank's features (from
``--cache-dir``'s feature store when it holds them, else computed), then scikit-learn's multinomial
``LogisticRegression`` (float64, intercept unpenalised as ours), fitted as one or both of two models:

- **same** (the default): our model, raw features and ``C = 1 / (n lambda)`` (its objective is ours times
  ``n``), solved by scikit-learn's ``newton-cg`` (Newton steps, each by conjugate gradients: unlike its
  L-BFGS, which has no preconditioner and stops 1.3 held-out points short on these raw features, it
  reaches the optimum's neighbourhood in 100 steps). ``lambda`` from the half-decade rungs ``--rungs`` either
  side of the shipped choice, each fitted on the first 50,000 images (largest penalty first, each
  warm-starting the next); the best held-out accuracy on the last 10,000 (the lambda choice's images)
  chooses it; refitted on all 60,000 and scored on the test set. Our held-out accuracy at each rung (the
  walk's and refinement's records) is printed beside scikit-learn's, and where scikit-learn chose the
  shipped lambda, the refit's objective minus the shipped record's.
- **standardised**: features standardised on the fitting images, ``C`` in ``--Cs`` chosen the same way,
  scikit-learn's default L-BFGS (a different model: the penalty then weighs every unit alike).

They stop at scikit-learn's ``tol`` (``newton-cg``: 1e-8 on the largest gradient entry, or 100 steps; L-BFGS:
1e-6, or 1,000 iterations; ours: 1e-4 on the whitened gradient's norm, or 1,000 iterations).

Prints per cell and model the shipped convex test accuracy (``--cache-dir``'s record at its chosen lambda),
scikit-learn's, their difference, the held-out accuracies that chose, iterations and seconds.
docs/convex.md holds the table.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
import warnings

import numpy as np

CELLS = "gaussian-frozen:256,gaussian-frozen:512,yat-frozen:1024,yat-frozen:2048,relu-frozen:1024"


def fit_choose(F, y, rows: int, Cs, standardise: bool, F_test, y_test) -> dict:
    """Fit on the first ``rows`` images for each C (largest penalty first, warm-started), choose C by held-out
    accuracy on the rest, refit on every image and score the test set. The same model (``standardise`` off) is
    solved by ``newton-cg`` and its refit keeps the chosen penalty per image (``C`` scaled by ``rows / n``:
    scikit-learn's loss is a sum, ours a mean); the standardised one by L-BFGS. Returns the per-C held-out
    accuracies and iterations, the chosen C, the refit's head, the test accuracy (%) and the seconds."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    t0 = time.perf_counter()
    F, F_test = np.asarray(F, np.float64), np.asarray(F_test, np.float64)
    fit_part, held = F[:rows], F[rows:]
    if standardise:
        scaler = StandardScaler().fit(fit_part)
        fit_part, held = scaler.transform(fit_part), scaler.transform(held)
    # newton-cg's tol bounds the largest gradient entry of the mean loss: 1e-6 leaves a warm start in place when
    # the penalty changes by lambda ~ 1e-9 (its gradient moves by lambda W, under 1e-6), so 1e-8
    solver = {"solver": "lbfgs", "max_iter": 1000, "tol": 1e-6} if standardise else \
        {"solver": "newton-cg", "max_iter": 100, "tol": 1e-8}
    model = LogisticRegression(warm_start=True, **solver)
    held_acc, iterations = {}, {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for C in sorted(Cs):  # smallest C = largest penalty first
            model.set_params(C=C).fit(fit_part, y[:rows])
            held_acc[C] = 100.0 * float((model.predict(held) == y[rows:]).mean())
            iterations[C] = int(model.n_iter_[0])
            # a long cell (an hour or more) keeps what it has measured in the log if it is stopped
            print(f"    C {C:.4g}: held-out {held_acc[C]:.2f} %, {iterations[C]} it., "
                  f"{time.perf_counter() - t0:.0f} s", flush=True)
        best = max(held_acc, key=lambda c: (held_acc[c], -c))
        every, test, refit_C = F, F_test, best * rows / len(y)
        if standardise:
            scaler = StandardScaler().fit(F)
            every, test, refit_C = scaler.transform(F), scaler.transform(F_test), best
        final = LogisticRegression(C=refit_C, **solver).fit(every, y)
    return {"held_out": held_acc, "iterations": iterations, "refit_iterations": int(final.n_iter_[0]), "C": best,
            "W": final.coef_.T, "b": final.intercept_,
            "test_acc": 100.0 * float((final.predict(test) == y_test).mean()), "seconds": time.perf_counter() - t0}


def objective(F, y, W, b, lam: float) -> float:
    """Our objective, mean cross-entropy + lam/2 ||W||^2 (nats), in float64 (``lazylab.experiments.convex_solve``)."""
    z = np.asarray(F, np.float64) @ W + b
    z -= z.max(axis=1, keepdims=True)
    return float((np.log(np.exp(z).sum(axis=1)) - z[np.arange(len(y)), y]).mean() + 0.5 * lam * np.sum(W * W))


def main(argv=None) -> int:
    from lazylab.arms import get_arm
    from lazylab.experiments import Workspace
    from lazylab.experiments.convex import convex_config, run_convex_ladder
    from lazylab.experiments.render import _plan
    from lazylab.model import build_model

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cells", default=CELLS, help=f"arm:width,... [default: {CELLS}]")
    ap.add_argument("--cache-dir", default=None, help="the memo holding the frontier (its choices and features)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--models", default="same", help="same, standardised or both, comma-separated [default: same]")
    ap.add_argument("--rungs", type=int, default=1, help="the same model's half-decade rungs either side [default: 1]")
    ap.add_argument("--Cs", default="0.01,0.1,1", help="the standardised fit's C grid [default: 0.01,0.1,1]")
    args = ap.parse_args(argv)
    models = args.models.split(",")
    if not set(models) <= {"same", "standardised"}:
        ap.error(f"--models: same or standardised, not {args.models!r}")
    ws = Workspace(None, args.cache_dir)
    ws.memo_only = True
    plan = _plan("paper")
    for item in args.cells.split(","):
        name, width = item.split(":")
        arm, width = get_arm(name), int(width)
        one = dataclasses.replace(plan, arms=(arm,), widths=(width,), seeds=(args.seed,))
        convex = run_convex_ladder(ws, one)
        lam = convex["arms"][name]["lambdas"][str(width)]
        shipped = convex["runs"][0]
        ours = {float(k): v for rec in (*convex["choices"], *convex["refinements"]) for k, v in rec["selection"].items()}
        cfg = convex_config(ws, arm, width, args.seed, lam or 1e-6)
        model = build_model(arm, width, args.seed, ws.data.x_train, cfg.fan_in)
        F, F_test = (np.asarray(f) for f in ws.bank_features(arm, cfg.bank_run(), model))
        y, y_test = np.asarray(ws.data.y_train), np.asarray(ws.data.y_test)
        rows = len(y) - len(y) // 6
        print(f"{item}: shipped lambda {lam:.3g}, test {shipped['test_acc']:.2f} %", flush=True)
        if "same" in models:
            # rungs of the refinement's half-decade grid (10^(k/2), 3 digits), so that they meet its records
            lams = [float(f"{10 ** ((round(2 * np.log10(lam)) + k) / 2):.3g}") for k in range(-args.rungs, args.rungs + 1)]
            same = fit_choose(F, y, rows, [1.0 / (rows * v) for v in lams], False, F_test, y_test)
            chosen = float(f"{1.0 / (rows * same['C']):.3g}")
            gap = (f"; refit objective minus the shipped record's {objective(F, y, same['W'], same['b'], lam) - shipped['objective']:+.1e}"
                   if chosen == lam else "")
            rungs = []
            for c, a in same["held_out"].items():
                rung = float(f"{1 / (rows * c):.3g}")
                mine = f"{ours[rung]:.2f}" if rung in ours else "-"
                rungs.append(f"{rung:.3g}: {a:.2f} / {mine} ({same['iterations'][c]} it.)")
            print(f"  same model: lambda {chosen:.3g} chosen, test {same['test_acc']:.2f} % "
                  f"({same['test_acc'] - shipped['test_acc']:+.2f}), {same['seconds']:.0f} s; held-out % "
                  f"scikit-learn / ours: {', '.join(rungs)}; refit {same['refit_iterations']} it.{gap}", flush=True)
        if "standardised" in models:
            std = fit_choose(F, y, rows, [float(c) for c in args.Cs.split(",")], True, F_test, y_test)
            print(f"  standardised: C {std['C']:g} chosen, test {std['test_acc']:.2f} % "
                  f"({std['test_acc'] - shipped['test_acc']:+.2f}), {std['seconds']:.0f} s; held-out "
                  + ", ".join(f"C {c:g}: {a:.2f} ({std['iterations'][c]} it.)" for c, a in std["held_out"].items())
                  + f"; refit {std['refit_iterations']} it.", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
