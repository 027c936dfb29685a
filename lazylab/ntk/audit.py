"""``ntk audit``: the checks SPEC section 7 asks of the 1-D lab, each with its measured value.

Checks (thresholds in float64):
  1. parameter sanity — ``theta0`` is ``(3, m)``, finite, reproducible from
     its seed, and its ``3m`` entries look standard normal
     (``|mean| <= 5/sqrt(3m)``, ``|std - 1| <= 5/sqrt(6m)``: five standard errors);
  2. tangent-feature dimensions — ``J`` is ``(n, 3m)`` on train and test inputs;
  3. finite-difference gradient test — the analytic loss gradient and tangent
     features against central differences (``eps = 1e-6``) along 8 random unit
     directions, at ``theta0`` and at the trained ``theta``: relative error <= 1e-6;
  4. loss improvement under both dynamics — final < initial half-MSE, network and linearization;
  5. the same start — ``max |f(theta0) - f_lin(theta0)|`` is exactly 0;
  6. kernel symmetry — ``max|K - K^T| / max|K| <= 1e-12`` for ``K_0`` and ``K_T``;
  7. kernel PSD — smallest eigenvalue ``>= -1e-10 * largest`` for ``K_0`` and ``K_T``;
  8. finite outputs on a grid of 72 settings — widths (4, 32, 256, 1024) x
     rates (0.01, 0.1, 1) x bumps (0, 1, 3) x noise (0, 0.3), 50 steps each:
     every loss, prediction, kernel and drift finite;
  9. complete traces — ``T + 1`` losses for both models, snapshots from step 0
     to ``T`` strictly increasing, one prediction row and one drift per snapshot,
     drift 0 at step 0.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from typing import Callable

import numpy as np

from lazylab.ntk.checks import Check
from lazylab.ntk.lab import Diverged, LabConfig, forward_jacobian, half_mse, init_params, make_data, run_lab

GRID = {"width": (4, 32, 256, 1024), "lr": (0.01, 0.1, 1.0), "bump": (0.0, 1.0, 3.0), "noise": (0.0, 0.3)}
GRID_STEPS = 50
FD_EPS = 1e-6
FD_TOL = 1e-6
FD_DIRECTIONS = 8


def fd_errors(theta: np.ndarray, x: np.ndarray, y: np.ndarray, jacobian: Callable, seed: int = 0) -> dict:
    """Relative errors of the loss gradient ``J^T r / n`` and of ``J v`` against central differences.

    Returns ``{"grad": max_v |g.v - fd_v| / ||g||, "jvp": max_v ||J v - fd_v|| / ||J||_F}`` over unit
    directions ``v`` (normalised by the whole gradient / Jacobian, so a direction
    nearly orthogonal to ``g`` cannot inflate the ratio).
    """
    rng = np.random.default_rng(seed)
    n = len(x)
    f, J = jacobian(theta, x)
    g = J.T @ (f - y) / n
    eg, ej = 0.0, 0.0
    for _ in range(FD_DIRECTIONS):
        v = rng.standard_normal(theta.size)
        v /= np.linalg.norm(v)
        tp, tm = theta + FD_EPS * v.reshape(theta.shape), theta - FD_EPS * v.reshape(theta.shape)
        fp, fm = jacobian(tp, x)[0], jacobian(tm, x)[0]
        fd_loss = (half_mse(fp, y) - half_mse(fm, y)) / (2 * FD_EPS)
        fd_f = (fp - fm) / (2 * FD_EPS)
        eg = max(eg, abs(g @ v - fd_loss) / max(np.linalg.norm(g), 1e-300))
        ej = max(ej, float(np.linalg.norm(J @ v - fd_f) / max(np.linalg.norm(J), 1e-300)))
    return {"grad": float(eg), "jvp": float(ej)}


def _le(name, value, tol, note=""):
    return Check(name, float(value), float(tol), bool(value <= tol), True, note or f"pass if <= {tol:g}")


def run_audit(cfg: LabConfig = LabConfig(), jacobian: Callable = forward_jacobian) -> list[Check]:
    """Run every check on the lab with ``cfg`` (the forward pass and the
    finite differences always use the true model; ``jacobian`` is what is
    audited — a broken one must fail check 3)."""
    cfg.validate()
    checks: list[Check] = []
    m = cfg.width
    d = make_data(cfg)
    x, y = d["x_train"], d["y_train"]

    # 1. parameter sanity
    th = init_params(m, cfg.seed)
    same = np.array_equal(th, init_params(m, cfg.seed))
    mean, std = float(th.mean()), float(th.std())
    ok = th.shape == (3, m) and bool(np.all(np.isfinite(th))) and same
    ok = ok and abs(mean) <= 5 / math.sqrt(3 * m) and abs(std - 1) <= 5 / math.sqrt(6 * m)
    checks.append(Check("parameter sanity (shape (3,m), finite, seeded, N(0,1))", std, 1.0, ok, True,
                        f"shape {th.shape}, mean {mean:+.3f}, std {std:.3f}, reproducible {same}"))

    try:
        res = run_lab(cfg, jacobian=jacobian)
    except Diverged as exc:
        checks.append(Check("the lab run stays finite", float("nan"), 0.0, False, True, str(exc)))
        return checks

    # 2. tangent-feature dimensions
    _, Jt = jacobian(res.theta0, d["x_test"])
    want = (len(x), 3 * m)
    ok = res.jac_shape == want and Jt.shape == (len(d["x_test"]), 3 * m) and res.n_params == 3 * m
    checks.append(Check("tangent-feature dimensions J: (n, 3m)", float(res.n_params), float(3 * m), ok, True,
                        f"train {res.jac_shape}, test {Jt.shape}, want {want}"))

    # 3. finite-difference gradient test, at init and after training
    e0 = fd_errors(res.theta0, x, y, jacobian, seed=1)
    e1 = fd_errors(res.theta, x, y, jacobian, seed=2)
    worst = max(e0["grad"], e0["jvp"], e1["grad"], e1["jvp"])
    checks.append(_le("finite-difference gradient test (rel. error, eps 1e-6)", worst, FD_TOL,
                      f"grad {max(e0['grad'], e1['grad']):.1e}, J v {max(e0['jvp'], e1['jvp']):.1e}; pass if <= {FD_TOL:g}"))

    # 4. loss improvement under both dynamics
    for label, tr in (("network", res.loss), ("linearization", res.loss_lin)):
        ratio = float(tr[-1] / tr[0])
        checks.append(Check(f"loss improves under GD ({label}): final/initial", ratio, 1.0, bool(ratio < 1.0), True,
                            f"{tr[0]:.4g} -> {tr[-1]:.4g}; pass if < 1"))

    # 5. same start
    checks.append(_le("same start max|f(theta0) - f_lin(theta0)|", res.start_gap, 0.0, "pass if exactly 0"))

    # 6-7. kernel symmetry and PSD
    for label, K in (("K_0", res.K0), ("K_T", res.KT)):
        asym = float(np.max(np.abs(K - K.T)) / np.max(np.abs(K)))
        checks.append(_le(f"kernel symmetry {label}: max|K-K^T|/max|K|", asym, 1e-12))
        ev = np.linalg.eigvalsh(0.5 * (K + K.T))
        checks.append(Check(f"kernel PSD {label}: min eig / max eig", float(ev[0] / ev[-1]), -1e-10,
                            bool(ev[0] >= -1e-10 * ev[-1]), True, f"min {ev[0]:.3e}, max {ev[-1]:.3e}; pass if >= -1e-10"))

    # 8. finite outputs on the 72-setting grid
    settings = list(itertools.product(*GRID.values()))
    finite = 0
    bad = []
    for w, lr, bump, noise in settings:
        try:
            r = run_lab(replace(cfg, width=w, lr=lr, bump=bump, noise=noise, steps=GRID_STEPS, frames=4), jacobian=jacobian)
        except Diverged:
            bad.append(f"m={w} lr={lr} bump={bump} noise={noise}")
            continue
        arrays = (r.loss, r.loss_lin, r.pred_test, r.pred_test_lin, r.pred_train, r.pred_train_lin, r.drift, r.K0, r.KT, r.theta, r.theta_lin)
        if all(np.all(np.isfinite(a)) for a in arrays):
            finite += 1
        else:
            bad.append(f"m={w} lr={lr} bump={bump} noise={noise}")
    checks.append(Check(f"finite outputs on the {len(settings)}-setting grid", float(finite), float(len(settings)),
                        finite == len(settings) == 72, True,
                        f"{finite}/{len(settings)} finite" + (f"; first bad: {bad[0]}" if bad else "")))

    # 9. complete traces
    T, F = cfg.steps, len(res.snap_steps)
    parts = {
        "loss": len(res.loss) == T + 1 and np.all(np.isfinite(res.loss)),
        "loss_lin": len(res.loss_lin) == T + 1 and np.all(np.isfinite(res.loss_lin)),
        "snapshots": res.snap_steps[0] == 0 and res.snap_steps[-1] == T and np.all(np.diff(res.snap_steps) > 0),
        "predictions": res.pred_test.shape == res.pred_test_lin.shape == (F, cfg.n_test)
        and res.pred_train.shape == res.pred_train_lin.shape == (F, cfg.n_train),
        "drift": res.drift.shape == (F,) and res.drift[0] == 0.0 and np.all(np.isfinite(res.drift)),
    }
    missing = [k for k, v in parts.items() if not v]
    checks.append(Check("recorded traces complete", float(len(parts) - len(missing)), float(len(parts)), not missing, True,
                        f"{T + 1} losses per model, {F} snapshots" + (f"; incomplete: {', '.join(missing)}" if missing else "")))
    return checks
