"""The convex readout: a frozen bank's head fitted to the optimum of its objective.

The protocol (SPEC section 5) reads a frozen bank out with 12 epochs of AdamW at
a constant rate, which stops wherever the optimiser is after 12 epochs. This
module fits the same head — ``nnx.Linear(m, 10)`` on the bank's stored features
— to the minimiser of the regularised softmax cross-entropy

    L(W, b) = (1/n) sum_i CE(f_i W + b, y_i) + (lambda / 2) ||W||_F^2,

so a ladder can tell an optimiser wall (the protocol stops short of what the
features allow) from a kernel wall (the optimum itself stalls). The objective is
convex in ``(W, b)`` and strictly convex in ``W`` for ``lambda > 0``; the bias is
not penalised (as in scikit-learn's ``LogisticRegression``).

What ``lambda`` corresponds to in the protocol: AdamW's decoupled weight decay
(Loshchilov & Hutter 2019, Algorithm 2) shrinks ``W`` by ``lr * wd * W`` per
step. For plain SGD that is exactly an L2 penalty with ``lambda = wd`` (1e-4);
under Adam's per-coordinate scaling no penalty reproduces it: AdamW's fixed
point solves ``m_hat / (sqrt(v_hat) + eps) = -wd * W``, i.e. an L2 penalty whose
coefficient is ``wd * sqrt(v_hat)`` per coordinate, far below ``wd`` once the
gradients are small. So ``lambda`` is chosen, not copied: from a small grid
(``LAMBDAS``), by accuracy on a held-out part of the *training* set (its last
``1/HOLDOUT_FRACTION``, never the test set), then refitted on every training image.

Solver: L-BFGS (Nocedal & Wright 2006, Algorithm 7.5) from optax, with its zoom
line search (strong Wolfe conditions, Algorithm 3.5), on the (m + 1) * 10
parameters. L-BFGS rather than Newton/IRLS: the Hessian has ((m + 1) * 10)^2
entries (6.7e9 at m = 8192), out of reach of a 24 GiB machine, and each L-BFGS
iteration costs two passes over the feature matrix, like one AdamW epoch's
worth of products on a tenth of the data. The problem is solved in whitened
coordinates, ``W = L^-T V`` with ``L L^T`` the Cholesky factor of the features'
covariance plus ``lambda I`` (the bias absorbing the feature means): an exact
change of variables of the same objective, which only makes L-BFGS converge
faster; random banks are highly redundant, which conditions the raw problem
badly (docs/convex.md measures the difference). Stopping rules, the first met
ends the solve and the record says which (``stop``): the gradient in whitened
coordinates ``||grad_V L||_2 < TOL``; an iteration that lowers the objective by
at most ``FTOL`` of its size (scipy's L-BFGS-B rule; float32 resolves about
6e-8); ``MAX_ITER`` iterations. Checked against scikit-learn's
``LogisticRegression`` (lbfgs, float64) with ``C = 1 / (n * lambda)``: the
objectives agree to 1e-5 (tests/test_convex.py).

Memory: the train features are read in place (the held-out split is a weight
vector of zeros, not a copy); at m = 8192 the 60,000 x 8192 float32 matrix is
1.97 GB and the solver holds a few (m, 10) vectors besides.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax
import optax.tree_utils as otu

from lazylab.arms import Arm
from lazylab.config import CACHE_SCHEMA, RunConfig, canonical_json, memo_key
from lazylab.errors import LazylabError
from lazylab.experiments import Reporter, Workspace

# The lambda grid, largest first (the path is solved in this order, each fit warm-starting the next).
# Penalties are on the raw head weights, whose scale follows the features': Yat features are small,
# so their useful lambdas are small (docs/convex.md).
LAMBDAS = (1e-4, 1e-6, 1e-8)
HOLDOUT_FRACTION = 6  # the last 1/6 of the training images (10,000 of 60,000) choose lambda
TOL = 1e-4  # on ||grad_V L||_2, the gradient in whitened coordinates
FTOL = 1e-7  # on an iteration's relative decrease of the objective (float32 resolves about 6e-8)
MAX_ITER = 1000
PRECOND_ROWS = 16384  # images behind the whitening preconditioner (at least 2 per unit)
CONVEX_VERSION = 3  # bump when the solver or its record changes meaning


@dataclass(frozen=True)
class ConvexConfig:
    """Everything that determines one convex readout (its memo key hashes all of it).

    Attributes:
      arm, plugin, width, seed, train_size, fan_in, data: the frozen bank (as in ``RunConfig``).
      lambdas: the penalty grid, largest first.
      holdout: training images held out to choose lambda (the last ones).
      tol, max_iter: the stopping rule.
    """

    arm: str
    plugin: str
    width: int
    seed: int
    train_size: int = 60000
    fan_in: str = "unit"
    data: str = ""
    lambdas: tuple[float, ...] = LAMBDAS
    holdout: int = 10000
    tol: float = TOL
    max_iter: int = MAX_ITER
    version: int = CONVEX_VERSION
    schema: int = CACHE_SCHEMA

    @property
    def lr(self) -> None:
        """No learning rate: progress displays show ``convex`` instead."""
        return None

    def key(self) -> str:
        """``"convex-"`` + the first 32 hex digits of SHA-256 of the canonical JSON of the fields."""
        return memo_key("convex", self)

    def bank_run(self) -> RunConfig:
        """A run config of the same bank (the feature store's key ignores rate and epochs)."""
        return RunConfig(arm=self.arm, plugin=self.plugin, width=self.width, seed=self.seed, lr=0.0,
                         train_size=self.train_size, fan_in=self.fan_in, data=self.data)


def convex_config(ws: Workspace, arm: Arm, width: int, seed: int, train_size: int = 60000, fan_in: str = "unit",
                  lambdas: tuple[float, ...] = LAMBDAS, tol: float = TOL, max_iter: int = MAX_ITER) -> ConvexConfig:
    """The canonical config of ``arm``'s convex readout at ``width``, ``seed`` on this workspace's data.

    Raises: LazylabError if ``arm`` trains its bank (the convex readout needs frozen features).
    """
    if arm.trained:
        raise LazylabError(f"{arm.name}: the convex readout fits a frozen bank's head; {arm.name} trains its bank "
                           "(use a -frozen arm, or --readout adamw)")
    return ConvexConfig(arm=arm.name, plugin=arm.plugin, width=width, seed=seed, train_size=train_size, fan_in=fan_in,
                        data=ws.fingerprint, lambdas=tuple(float(v) for v in lambdas),
                        holdout=train_size // HOLDOUT_FRACTION, tol=float(tol), max_iter=int(max_iter))


@partial(jax.jit, static_argnames="max_iter")
def _lbfgs(F, y, weights, mu, P, lam, V, b, tol, max_iter: int):
    """L-BFGS on ``sum_i weights_i CE(logits_i, y_i) + lam/2 ||W||^2`` in whitened coordinates.

    ``F`` ``(n, m)`` float32 features, ``y`` ``(n,)`` labels, ``weights`` ``(n,)`` (zeros leave an
    image out), ``mu`` ``(m,)`` and ``P`` ``(m, m)`` the change of variables ``W = P V`` (bias
    ``b - mu W``); ``V`` ``(m, 10)``, ``b`` ``(10,)`` the start.
    Returns ``(V, b, iterations, grad_norm, value, flat)``; ``flat``: the last iteration lowered the
    objective by at most ``FTOL`` of its size.
    """
    def objective(p):
        W = jnp.dot(P, p["V"], precision="highest")
        logits = jnp.dot(F, W, precision="highest") + (p["b"] - jnp.dot(mu, W, precision="highest"))
        ce = optax.softmax_cross_entropy_with_integer_labels(logits, y)
        return jnp.sum(weights * ce) + 0.5 * lam * jnp.sum(W * W)

    opt = optax.lbfgs()
    value_and_grad = optax.value_and_grad_from_state(objective)

    def step(carry):
        p, state, _, _ = carry
        value, grad = value_and_grad(p, state=state)
        updates, state = opt.update(grad, state, p, value=value, grad=grad, value_fn=objective)
        return optax.apply_updates(p, updates), state, value, otu.tree_get(state, "value")

    def going(carry):
        _, state, before, after = carry
        count = otu.tree_get(state, "count")
        small = otu.tree_norm(otu.tree_get(state, "grad")) < tol
        # scipy's L-BFGS-B rule: stop once an iteration lowers the objective by at most FTOL of its size.
        flat = before - after <= FTOL * jnp.maximum(jnp.abs(after), 1.0)
        return (count == 0) | ((count < max_iter) & ~small & ~flat)

    p0 = {"V": V, "b": b}
    state = opt.init(p0)
    p, state, before, after = jax.lax.while_loop(going, step, (p0, state, jnp.inf, jnp.asarray(jnp.inf, jnp.float32)))
    grad = value_and_grad(p, state=state)[1]
    flat = before - after <= FTOL * jnp.maximum(jnp.abs(after), 1.0)
    return p["V"], p["b"], otu.tree_get(state, "count"), otu.tree_norm(grad), otu.tree_get(state, "value"), flat


@jax.jit
def _scores(F, y, W, b):
    """Per-image cross-entropy ``(n,)`` and correctness ``(n,)`` of the head ``(W, b)`` on ``F``."""
    logits = jnp.dot(F, W, precision="highest") + b
    return optax.softmax_cross_entropy_with_integer_labels(logits, y), jnp.argmax(logits, axis=-1) == y


def moments(F, weights, rows: int | None = None, chunk: int = 4096) -> tuple[np.ndarray, np.ndarray]:
    """Weighted mean ``(m,)`` and covariance ``(m, m)`` (float64) of the rows of ``F`` ``(n, m)``.

    ``weights`` ``(n,)`` sum to 1; only the first ``rows`` rows are read (default all: the
    weights of the others must be 0). Summed over chunks of ``chunk`` rows, so no copy of ``F``
    is made. Raises ValueError if the features are not finite.
    """
    F = jnp.asarray(F, jnp.float32)
    rows = F.shape[0] if rows is None else rows
    w = jnp.asarray(weights, jnp.float32)
    mu = np.asarray(jnp.dot(w[:rows], F[:rows], precision="highest"), np.float64)
    G = np.zeros((F.shape[1], F.shape[1]))
    for i in range(0, rows, chunk):
        Fc = F[i : min(i + chunk, rows)]
        G += np.asarray(jnp.dot(Fc.T * w[i : i + len(Fc)], Fc, precision="highest"), np.float64)
    if not (np.all(np.isfinite(G)) and np.all(np.isfinite(mu))):
        raise ValueError("features contain non-finite values")
    return mu, G - np.outer(mu, mu)


def whitener(cov: np.ndarray, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """``(P, L)``: ``P = L^-T`` ``(m, m)`` float32 with ``L L^T = cov + lam I + jitter I`` (Cholesky, float64).

    ``P^T (cov + lam I) P`` is about the identity, so the objective's Hessian in ``V = P^-1 W``
    is about the cross-entropy's curvature alone. The jitter (1e-6 of the mean variance, raised
    tenfold until the factorisation succeeds) only shapes the preconditioner, never the objective.
    """
    import scipy.linalg

    m = cov.shape[0]
    jitter = 1e-6 * max(float(np.trace(cov)) / m, 1e-30)
    for _ in range(8):
        try:
            L = scipy.linalg.cholesky(cov + (lam + jitter) * np.eye(m), lower=True)
            break
        except np.linalg.LinAlgError:
            jitter *= 10
    else:
        raise ValueError("the features' covariance cannot be factorised")
    return np.asarray(scipy.linalg.solve_triangular(L, np.eye(m), lower=True).T, np.float32), L


def solve(F, y, lam: float, weights=None, tol: float = TOL, max_iter: int = MAX_ITER, start=None,
          cov=None) -> dict:
    """Minimise ``sum_i weights_i CE(F_i W + b, y_i) + lam/2 ||W||_F^2`` by L-BFGS (module docstring).

    Args:
      F: float32 features ``(n, m)`` (numpy or jax).
      y: int labels ``(n,)`` in 0..9.
      lam: the L2 penalty on ``W`` (>= 0).
      weights: ``(n,)`` nonnegative image weights summing to 1 (default ``1/n`` each); zeros hold images out.
      tol, max_iter: stop when ``||grad_V L||_2 < tol`` (whitened coordinates) or after ``max_iter`` iterations.
      start: ``{"W", "b"}`` to start from (a warm start), else zeros.
      cov: ``moments(F, weights)`` if already computed (any such pair only shapes the preconditioner).
    Returns: ``{"W" (m, 10), "b" (10,), "iterations", "grad_norm", "objective", "converged", "stop"}``
      (numpy arrays, Python numbers). ``converged``: the gradient rule was met; ``stop``: the rule
      that ended the solve, ``"gradient"``, ``"objective"`` (``FTOL``) or ``"max_iter"``.
    Raises: ValueError for non-finite features or a negative ``lam``.
    """
    F = jnp.asarray(F, jnp.float32)
    n, m = F.shape
    if lam < 0:
        raise ValueError(f"lambda must be >= 0, got {lam}")
    weights = np.full((n,), 1.0 / n, np.float32) if weights is None else np.asarray(weights, np.float32)
    mu, cov = moments(F, weights) if cov is None else cov
    P, L = whitener(cov, lam)
    mu = jnp.asarray(mu, jnp.float32)
    if start is None:
        V, b = jnp.zeros((m, 10), jnp.float32), jnp.zeros((10,), jnp.float32)
    else:  # V = P^-1 W = L^T W; the bias in whitened coordinates absorbs mu W
        W = jnp.asarray(start["W"], jnp.float32)
        V = jnp.asarray(L.T @ np.asarray(W, np.float64), jnp.float32)
        b = jnp.asarray(start["b"], jnp.float32) + mu @ W
    P = jnp.asarray(P)
    V, b, count, gnorm, value, flat = _lbfgs(F, jnp.asarray(y), jnp.asarray(weights), mu, P, jnp.float32(lam),
                                                V, b, jnp.float32(tol), int(max_iter))
    W = jnp.dot(P, V, precision="highest")
    return {"W": np.asarray(W), "b": np.asarray(b - mu @ W), "iterations": int(count), "grad_norm": float(gnorm),
            "objective": float(value), "converged": bool(gnorm < tol),
            "stop": "gradient" if gnorm < tol else "objective" if bool(flat) else "max_iter"}


def _evaluate(F, y, fit: dict, rows=slice(None)) -> tuple[float, float]:
    """``(mean cross-entropy in nats, accuracy in %)`` of ``fit``'s head on the rows ``rows`` of ``F``."""
    ce, right = _scores(F, jnp.asarray(y), jnp.asarray(fit["W"]), jnp.asarray(fit["b"]))
    ce, right = np.asarray(ce)[rows], np.asarray(right)[rows]
    return float(ce.mean()), 100.0 * float(right.mean())


def convex_readout(F_train, y_train, F_test, y_test, cfg: ConvexConfig) -> dict:
    """Choose lambda on the held-out split, refit on every training image, score on the test set.

    The grid is solved largest lambda first on the first ``train_size - holdout`` images, each fit
    warm-starting the next; the lambda with the highest held-out accuracy (ties: the larger
    lambda) is refitted on all ``train_size`` images from its split solution.

    Args:
      F_train ``(train_size, m)``, F_test ``(n_test, m)``: float32 features; y_train, y_test: labels.
      cfg: the readout's config.
    Returns: the record's numbers: ``test_acc`` (%), ``train_loss`` (mean CE on every training
      image at the optimum, nats, penalty excluded), ``objective`` (penalty included),
      ``grad_norm``, ``iterations``, ``converged``, ``stop``, ``lambda``, ``selection``
      (``{repr(lambda): held-out accuracy %}``), ``selection_iterations``.
    Raises: ValueError for non-finite features.
    """
    n = cfg.train_size
    fit_rows = n - cfg.holdout
    weights = np.zeros(n, np.float32)
    weights[:fit_rows] = 1.0 / fit_rows
    fits, selection, iterations = {}, {}, {}
    start = None
    # The preconditioner only shapes the path, never the optimum: the covariance of the first
    # PRECOND_ROWS fitting images (at least 2 per unit) is enough, at a fraction of the full cost.
    rows = min(fit_rows, max(PRECOND_ROWS, 2 * F_train.shape[1]))
    cov = moments(F_train, np.where(np.arange(n) < rows, 1.0 / rows, 0.0), rows)
    for lam in sorted(cfg.lambdas, reverse=True):
        fit = start = solve(F_train, y_train, lam, weights, cfg.tol, cfg.max_iter, start=start, cov=cov)
        fits[lam] = fit
        selection[repr(lam)] = _evaluate(F_train, y_train, fit, slice(fit_rows, n))[1]
        iterations[repr(lam)] = fit["iterations"]
    best = max(fits, key=lambda lam: (selection[repr(lam)], lam))
    final = solve(F_train, y_train, best, None, cfg.tol, cfg.max_iter, start=fits[best], cov=cov)
    train_loss, train_acc = _evaluate(F_train, y_train, final)
    return {
        "test_acc": _evaluate(F_test, y_test, final)[1], "train_acc": train_acc, "train_loss": train_loss,
        "objective": final["objective"], "grad_norm": final["grad_norm"], "iterations": final["iterations"],
        "converged": final["converged"], "stop": final["stop"], "lambda": best,
        "selection": selection, "selection_iterations": iterations,
    }


def _config_json(cfg: ConvexConfig) -> dict:
    """The config as a plain dict, as stored in its record."""
    return json.loads(canonical_json(cfg))


def run_convex(ws: Workspace, arm: Arm, cfgs: list[ConvexConfig], reporter: Reporter = Reporter()) -> list[dict]:
    """Records of convex readouts of ``arm``, in order: from the memo, or computed and stored.

    Features come from ``Workspace.bank_features`` (the memo's feature store when it holds
    them), so a readout sees exactly the bank its protocol run trained on. Runs one cell at a
    time in this process: a solve at large m is bound by reading one feature matrix, which
    members of a batch would not share.

    Raises: LazylabError naming the arm and cell if its features are not finite.
    """
    from lazylab.model import build_model

    records = []
    for cfg in cfgs:
        key = cfg.key()
        record = ws.memo.get_record(key)
        if isinstance(record, dict) and record.get("config") == _config_json(cfg):
            reporter.done(cfg, record, cached=True)
            records.append(record)
            continue
        if ws.memo_only:
            ws.missing.append(key)
            records.append({"key": key, "config": _config_json(cfg), "test_acc": None, "missing": True})
            continue
        reporter.start(cfg)
        t0 = time.perf_counter()
        d = ws.data.subset(train_size=cfg.train_size)
        model = build_model(arm, cfg.width, cfg.seed, d.x_train, cfg.fan_in)
        F_train, F_test = ws.bank_features(arm, cfg.bank_run(), model)
        try:
            result = convex_readout(F_train, d.y_train, F_test, d.y_test, cfg)
        except ValueError as exc:
            raise LazylabError(f"{arm.name} ({arm.plugin}) m={cfg.width} seed={cfg.seed}: {exc}") from None
        record = {"key": key, "config": _config_json(cfg), **result,
                  "seconds": round(time.perf_counter() - t0, 3)}
        ws.memo.put_record(key, record)
        reporter.done(cfg, record, cached=False)
        records.append(record)
    return records


def _mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else None


def run_convex_ladder(ws: Workspace, plan, lambdas: tuple[float, ...] = LAMBDAS,
                      reporter: Reporter = Reporter()) -> dict:
    """Convex readouts of every frozen arm of ``plan`` (a ``LadderPlan``) at each width and seed.

    Returns: ``{"lambdas", "tol", "max_iter", "holdout", "arms": {arm: {"plugin", "cells": {str(width):
      summary}}}, "runs": [record, ...]}``; a cell's summary holds ``n``, ``mean`` and ``std`` of
      ``test_acc`` (%, std with ddof=1, 0 for one seed), ``train_loss`` (mean, nats), ``grad_norm``
      (largest), ``iterations`` (mean), ``converged`` (all seeds), ``lambdas`` (chosen, per seed).
    Raises: LazylabError if the plan holds a trained arm.
    """
    cfgs = {arm.name: [convex_config(ws, arm, w, s, plan.train_size, plan.fan_in, lambdas)
                       for w in plan.widths for s in plan.seeds] for arm in plan.arms}
    reporter.plan(sum(map(len, cfgs.values())))
    out = {"lambdas": list(lambdas), "tol": TOL, "max_iter": MAX_ITER, "holdout_fraction": f"1/{HOLDOUT_FRACTION}",
           "arms": {}, "runs": []}
    for arm in plan.arms:
        records = run_convex(ws, arm, cfgs[arm.name], reporter)
        out["runs"] += records
        cells = {}
        for w in plan.widths:
            cell = [r for r in records if r["config"]["width"] == w and not r.get("missing")]
            accs = [r["test_acc"] for r in cell]
            cells[str(w)] = {
                "n": len(cell), "mean": _mean(accs),
                "std": float(np.std(accs, ddof=1)) if len(accs) > 1 else 0.0 if accs else None,
                "train_loss": _mean(r["train_loss"] for r in cell),
                "grad_norm": max((r["grad_norm"] for r in cell), default=None),
                "iterations": _mean(r["iterations"] for r in cell),
                "converged": all(r["converged"] for r in cell),
                "lambdas": [r["lambda"] for r in cell],
            }
        out["arms"][arm.name] = {"plugin": arm.plugin, "cells": cells}
    return out


def wall(result, convex: dict, climb_widths=None, min_gain: float | None = None) -> dict:
    """The wall table: each frozen arm's protocol readout against its convex optimum, per width.

    Per arm and width (means over the seeds both have): ``best_acc`` and ``final_acc`` of the
    protocol (%), ``convex_acc`` (%), ``gap`` = convex minus protocol ``best_acc`` (points) and
    ``loss_gap`` = the protocol's last-epoch mean training loss minus the convex optimum's
    training loss (nats; the protocol's is averaged over the last epoch's batches as it trains,
    the optimum's over every training image at the end; positive: the optimiser stopped short).
    Also the ladder law (``analysis.ladder_law``) fitted to both curves.

    Args: ``result`` a ``LadderResult``; ``convex`` from ``run_convex_ladder``; ``climb_widths``,
      ``min_gain`` as for the protocol's law.
    Returns: ``{"arms": {arm: {str(width): row}}, "law": {arm: {"protocol": fit, "convex": fit}},
      "lambda_at_edge": [readouts whose chosen lambda is the grid's smallest, readouts]}``.
    """
    from lazylab import analysis as an
    from lazylab.experiments.laws import ladder_records

    min_gain = an.DEFAULT_MIN_GAIN if min_gain is None else min_gain
    chosen = [r["lambda"] for r in convex["runs"] if not r.get("missing")]
    out: dict = {"arms": {}, "law": {},
                 "lambda_at_edge": [sum(lam == min(convex["lambdas"]) for lam in chosen), len(chosen)]}
    widths = result.plan["widths"]
    conv = {(r["config"]["arm"], r["config"]["width"], r["config"]["seed"]): r
            for r in convex["runs"] if not r.get("missing")}
    for summary in result.arms:
        if summary.arm not in convex["arms"]:
            continue
        proto = {(r["config"]["width"], r["config"]["seed"]): r for r in ladder_records(result, summary.arm)}
        rows = {}
        for w in widths:
            pairs = [(p, conv[(summary.arm, w, s)]) for (pw, s), p in proto.items()
                     if pw == w and (summary.arm, w, s) in conv and p.get("best_acc") is not None]
            if not pairs:
                continue
            rows[str(w)] = {
                "seeds": len(pairs),
                "best_acc": _mean(p["best_acc"] for p, _ in pairs),
                "final_acc": _mean(p["final_acc"] for p, _ in pairs),
                "convex_acc": _mean(c["test_acc"] for _, c in pairs),
                "gap": _mean(c["test_acc"] - p["best_acc"] for p, c in pairs),
                "loss_gap": _mean(p["train_loss"][-1] - c["train_loss"] for p, c in pairs),
                "protocol_loss": _mean(p["train_loss"][-1] for p, _ in pairs),
                "convex_loss": _mean(c["train_loss"] for _, c in pairs),
                "grad_norm": max(c["grad_norm"] for _, c in pairs),
                "converged": all(c["converged"] for _, c in pairs),
            }
        out["arms"][summary.arm] = rows
        used = [w for w in widths if str(w) in rows]
        out["law"][summary.arm] = {
            curve: an.ladder_law(used, [rows[str(w)][col] for w in used], region=climb_widths, min_gain=min_gain)
            for curve, col in (("protocol", "best_acc"), ("convex", "convex_acc"))
        }
    return out
