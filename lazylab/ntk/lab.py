"""The 1-D tangent-kernel lab (SPEC section 7, ``ntk`` item 1).

A two-layer tanh network in the NTK parametrization (Jacot, Gabriel & Hongler
2018, "Neural Tangent Kernel", eq. 1 with one hidden layer)::

    f(x; theta) = m^(-1/2) sum_j a_j tanh(w_j x + b_j),    theta = (a, w, b),  a, w, b ~ N(0, 1)

and its first-order Taylor model at the initialization (Lee et al. 2019,
"Wide Neural Networks of Any Depth Evolve as Linear Models Under Gradient
Descent", eq. 6)::

    f_lin(x; theta) = f(x; theta0) + J0(x) (theta - theta0),

both trained by full-batch gradient descent on half the mean squared error
``L = (1/2n) sum_i (f(x_i) - y_i)^2`` from the same ``theta0`` with the same
rate and step count. Everything is float64 numpy with the Jacobian written
out by hand (the model is tiny, and exactness matters for the audit); the
audit checks that Jacobian against finite differences, and the tests check
it against ``jax.jacrev``.

The tangent kernel on inputs ``X`` is ``K = J(X) J(X)^T`` ``(n, n)``; its
drift is ``||K_T - K_0||_F / ||K_0||_F`` on the training inputs.

Data: ``n_train`` inputs uniform on ``[-2, 2]`` (``data_seed``), targets
``y = sin(1.5 x) + bump * exp(-(x - 0.6)^2 / (2 * 0.15^2)) + noise * N(0, 1)``.
Test MSE is measured against the noiseless target on ``n_test`` evenly spaced
points of ``[-2, 2]``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Callable

import numpy as np

from lazylab.errors import LazylabError

DOMAIN = (-2.0, 2.0)
BUMP_CENTER = 0.6
BUMP_WIDTH = 0.15


@dataclass(frozen=True)
class LabConfig:
    """One run of the lab.

    Attributes:
      width: hidden units ``m >= 1``.
      lr: gradient-descent rate (> 0).
      steps: full-batch steps ``T >= 1``.
      bump: amplitude of the local bump in the target (finite).
      noise: standard deviation of the label noise (>= 0).
      seed: initialization seed (``numpy.random.default_rng``).
      data_seed: seed of the training inputs and their noise.
      n_train, n_test: training points and test grid size.
      frames: number of snapshots kept through training (log-spaced steps, 0 and T included).
    """

    width: int = 32
    lr: float = 0.5
    steps: int = 2000
    bump: float = 1.0
    noise: float = 0.1
    seed: int = 0
    data_seed: int = 0
    n_train: int = 32
    n_test: int = 256
    frames: int = 60

    def validate(self) -> "LabConfig":
        """Raise ValueError naming the first bad field; return self."""
        for name in ("width", "steps", "n_train", "n_test", "frames"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"lr must be a finite number > 0, got {self.lr}")
        if not math.isfinite(self.bump):
            raise ValueError(f"bump must be finite, got {self.bump}")
        if not (math.isfinite(self.noise) and self.noise >= 0):
            raise ValueError(f"noise must be finite and >= 0, got {self.noise}")
        if self.seed < 0 or self.data_seed < 0:
            raise ValueError("seeds must be >= 0")
        return self


# ------------------------------------------------------------------ model
def target(x: np.ndarray, bump: float) -> np.ndarray:
    """Noiseless target ``sin(1.5 x) + bump * exp(-(x - 0.6)^2 / (2 * 0.15^2))``, float64."""
    x = np.asarray(x, np.float64)
    return np.sin(1.5 * x) + bump * np.exp(-0.5 * ((x - BUMP_CENTER) / BUMP_WIDTH) ** 2)


def make_data(cfg: LabConfig) -> dict[str, np.ndarray]:
    """``x_train``, ``y_train`` (noisy), ``x_test`` (grid), ``y_test`` (noiseless): float64 1-D arrays."""
    rng = np.random.default_rng(cfg.data_seed)
    x = np.sort(rng.uniform(*DOMAIN, cfg.n_train))
    y = target(x, cfg.bump) + cfg.noise * rng.standard_normal(cfg.n_train)
    xt = np.linspace(*DOMAIN, cfg.n_test)
    return {"x_train": x, "y_train": y, "x_test": xt, "y_test": target(xt, cfg.bump)}


def init_params(width: int, seed: int) -> np.ndarray:
    """``theta0`` of shape ``(3, m)``: rows ``a``, ``w``, ``b``, i.i.d. standard normal, float64."""
    return np.random.default_rng(seed).standard_normal((3, width))


def forward(theta: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``f(x; theta)`` ``(n,)`` for ``theta`` ``(3, m)`` and inputs ``x`` ``(n,)``."""
    a, w, b = theta
    return np.tanh(np.outer(x, w) + b) @ a / math.sqrt(len(a))


def forward_jacobian(theta: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``f(x)`` ``(n,)`` and the tangent features ``J = df/dtheta`` ``(n, 3m)``.

    Column blocks follow ``theta.ravel()``: ``[df/da | df/dw | df/db]`` with
    ``df/da_j = tanh(z_j) / sqrt(m)``, ``df/dw_j = a_j sech^2(z_j) x / sqrt(m)``,
    ``df/db_j = a_j sech^2(z_j) / sqrt(m)``, ``z_j = w_j x + b_j``.
    """
    a, w, b = theta
    s = 1.0 / math.sqrt(len(a))
    t = np.tanh(np.outer(x, w) + b)
    da = (1.0 - t * t) * a
    return t @ a * s, np.concatenate([t, da * np.asarray(x)[:, None], da], axis=1) * s


def kernel(J: np.ndarray, J2: np.ndarray | None = None) -> np.ndarray:
    """Tangent kernel ``J J2^T`` (``J2`` defaults to ``J``)."""
    return J @ (J if J2 is None else J2).T


def half_mse(pred: np.ndarray, y: np.ndarray) -> float:
    """``(1/2n) sum (pred - y)^2``."""
    r = np.asarray(pred) - np.asarray(y)
    return float(0.5 * np.mean(r * r))


def mse(pred: np.ndarray, y: np.ndarray) -> float:
    """``(1/n) sum (pred - y)^2``."""
    r = np.asarray(pred) - np.asarray(y)
    return float(np.mean(r * r))


def rel_drift(K: np.ndarray, K0: np.ndarray) -> float:
    """``||K - K0||_F / ||K0||_F``."""
    return float(np.linalg.norm(K - K0) / np.linalg.norm(K0))


def checkpoints(steps: int, frames: int) -> np.ndarray:
    """Sorted unique snapshot steps: 0, then up to ``frames - 1`` log-spaced steps ending at ``steps``."""
    pts = np.unique(np.round(np.geomspace(1, steps, max(frames - 1, 1))).astype(int))
    return np.unique(np.concatenate([[0], pts, [steps]]))


# ------------------------------------------------------------------ run
class Diverged(LazylabError):
    """Gradient descent produced a non-finite loss (the rate is too large for this width)."""
@dataclass
class LabResult:
    """Everything one lab run measured (float64 numpy arrays; JSON via ``summary``).

    Attributes:
      config: the LabConfig.
      data: ``make_data(config)``.
      theta0, theta, theta_lin: parameters ``(3, m)`` at init, after training the
        network, and of the linearized model after training.
      loss, loss_lin: half-MSE on the training set at every step ``0..T`` (``T + 1``).
      snap_steps: the snapshot steps ``(F,)``.
      pred_test, pred_test_lin: predictions on the test grid at each snapshot ``(F, n_test)``.
      pred_train, pred_train_lin: predictions on the training inputs at each snapshot ``(F, n_train)``.
      drift: NTK drift on the training inputs at each snapshot ``(F,)``.
      K0, KT: tangent kernels on the training inputs at init and after training ``(n, n)``.
      n_params: ``3m``; jac_shape: shape of ``J0`` on the training inputs.
    """

    config: LabConfig
    data: dict
    theta0: np.ndarray
    theta: np.ndarray
    theta_lin: np.ndarray
    loss: np.ndarray
    loss_lin: np.ndarray
    snap_steps: np.ndarray
    pred_test: np.ndarray
    pred_test_lin: np.ndarray
    pred_train: np.ndarray
    pred_train_lin: np.ndarray
    drift: np.ndarray
    K0: np.ndarray
    KT: np.ndarray
    n_params: int
    jac_shape: tuple
    start_gap: float = field(default=0.0)

    def summary(self) -> dict:
        """The printed figures: MSEs, movements, drift, disagreement (all floats)."""
        d, c = self.data, self.config
        n0 = np.linalg.norm(self.theta0)
        diff = self.pred_test[-1] - self.pred_test_lin[-1]
        moved = self.pred_test[-1] - self.pred_test[0]
        return {
            "config": asdict(c),
            "train_mse": mse(self.pred_train[-1], d["y_train"]),
            "train_mse_lin": mse(self.pred_train_lin[-1], d["y_train"]),
            "test_mse": mse(self.pred_test[-1], d["y_test"]),
            "test_mse_lin": mse(self.pred_test_lin[-1], d["y_test"]),
            "train_mse_init": mse(self.pred_train[0], d["y_train"]),
            "test_mse_init": mse(self.pred_test[0], d["y_test"]),
            "loss_start": float(self.loss[0]),
            "loss_end": float(self.loss[-1]),
            "loss_lin_start": float(self.loss_lin[0]),
            "loss_lin_end": float(self.loss_lin[-1]),
            "move_net": float(np.linalg.norm(self.theta - self.theta0) / n0),
            "move_lin": float(np.linalg.norm(self.theta_lin - self.theta0) / n0),
            "move_net_layers": {k: float(np.linalg.norm(self.theta[i] - self.theta0[i]) / np.linalg.norm(self.theta0[i]))
                                for i, k in enumerate("awb")},
            "drift": float(self.drift[-1]),
            "disagreement": float(np.sqrt(np.mean(diff * diff))),
            "disagreement_rel": float(np.linalg.norm(diff) / max(np.linalg.norm(moved), 1e-300)),
            "start_gap": float(self.start_gap),
        }


def run_lab(cfg: LabConfig, jacobian: Callable = forward_jacobian) -> LabResult:
    """Train the network and its linearization from one init; record traces.

    Args:
      cfg: the run (validated here).
      jacobian: ``(theta, x) -> (f, J)``; the default is the analytic
        ``forward_jacobian`` (the audit swaps in a broken one on purpose).
    Returns: LabResult. Raises: ValueError for an invalid config; Diverged (a
    LazylabError) at the first non-finite loss of either model.
    """
    cfg.validate()
    d = make_data(cfg)
    x, y, xt = d["x_train"], d["y_train"], d["x_test"]
    n, m = len(x), cfg.width
    theta0 = init_params(m, cfg.seed)
    f0, J0 = jacobian(theta0, x)
    f0t, J0t = jacobian(theta0, xt)
    K0 = kernel(J0)
    snaps = checkpoints(cfg.steps, cfg.frames)
    want = set(int(s) for s in snaps)

    theta = theta0.copy()
    delta = np.zeros(theta0.size)
    loss = np.empty(cfg.steps + 1)
    loss_lin = np.empty(cfg.steps + 1)
    P, PL, PT, PTL, DR = [], [], [], [], []
    start_gap = None
    KT = K0
    for step in range(cfg.steps + 1):
        with np.errstate(all="ignore"):
            f, J = jacobian(theta, x)
            fl = f0 + J0 @ delta
            loss[step] = half_mse(f, y)
            loss_lin[step] = half_mse(fl, y)
        if start_gap is None:
            start_gap = float(np.max(np.abs(f - fl)))
        for name, value in (("network", loss[step]), ("linearization", loss_lin[step])):
            if not (np.isfinite(value) and np.all(np.isfinite(J))):
                raise Diverged(f"the {name} diverged at step {step} (m = {m}, lr {cfg.lr:g}, seed {cfg.seed}); "
                               f"use a smaller --lr")
        if step in want:
            K = kernel(J)
            DR.append(rel_drift(K, K0))
            P.append(f)
            PL.append(fl)
            PT.append(forward(theta, xt))
            PTL.append(f0t + J0t @ delta)
            KT = K
        if step == cfg.steps:
            break
        with np.errstate(all="ignore"):
            theta = theta - cfg.lr * (J.T @ (f - y) / n).reshape(theta.shape)
            delta = delta - cfg.lr * (J0.T @ (fl - y) / n)
    return LabResult(
        config=cfg, data=d, theta0=theta0, theta=theta, theta_lin=theta0 + delta.reshape(theta0.shape),
        loss=loss, loss_lin=loss_lin, snap_steps=snaps,
        pred_test=np.array(PT), pred_test_lin=np.array(PTL), pred_train=np.array(P), pred_train_lin=np.array(PL),
        drift=np.array(DR), K0=K0, KT=KT, n_params=theta0.size, jac_shape=tuple(J0.shape), start_gap=start_gap,
    )


# ------------------------------------------------------------------ sweep
def loglog_slope(x, y) -> dict:
    """Ordinary least squares of ``log y`` on ``log x``: ``slope``, ``intercept``, ``r2``."""
    lx, ly = np.log(np.asarray(x, float)), np.log(np.asarray(y, float))
    slope, intercept = np.polyfit(lx, ly, 1)
    resid = ly - (slope * lx + intercept)
    ss = np.sum((ly - ly.mean()) ** 2)
    return {"slope": float(slope), "intercept": float(intercept), "r2": float(1 - np.sum(resid**2) / ss) if ss > 0 else 1.0}


@dataclass
class SweepResult:
    """A width sweep: per width, the mean over seeds of drift, disagreement and movement; fitted slopes."""

    config: LabConfig
    widths: list[int]
    seeds: list[int]
    rows: list[dict]
    slopes: dict

    def to_json(self) -> dict:
        return {"config": asdict(self.config), "widths": self.widths, "seeds": self.seeds, "rows": self.rows, "slopes": self.slopes}


def sweep(cfg: LabConfig, widths, seeds, on_run: Callable | None = None) -> SweepResult:
    """Run the lab at every width and seed (no snapshots kept but the first and last).

    Returns: SweepResult with rows ``{width, drift, drift_std, disagreement,
    disagreement_std, move_net, move_lin, train_mse, train_mse_lin, test_mse,
    test_mse_lin}`` (means over seeds) and the log-log OLS slopes of drift,
    disagreement and net movement against width.
    """
    widths, seeds = [int(w) for w in widths], [int(s) for s in seeds]
    if len(widths) < 2:
        raise ValueError("a sweep needs at least two widths")
    rows = []
    for w in widths:
        per = []
        for s in seeds:
            res = run_lab(replace(cfg, width=w, seed=s, frames=2))
            per.append(res.summary())
            if on_run:
                on_run(w, s)
        keys = ("drift", "disagreement", "move_net", "move_lin", "train_mse", "train_mse_lin", "test_mse", "test_mse_lin")
        row = {"width": w, **{k: float(np.mean([p[k] for p in per])) for k in keys}}
        row["drift_std"] = float(np.std([p["drift"] for p in per]))
        row["disagreement_std"] = float(np.std([p["disagreement"] for p in per]))
        rows.append(row)
    slopes = {k: loglog_slope(widths, [r[k] for r in rows]) for k in ("drift", "disagreement", "move_net")}
    return SweepResult(config=cfg, widths=widths, seeds=seeds, rows=rows, slopes=slopes)
