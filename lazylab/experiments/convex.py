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
under Adam's per-coordinate scaling no penalty reproduces it. So ``lambda`` is
chosen, not copied, the way the protocol chooses its rate (SPEC section 5): once
per arm, at the bracketing width m = 256 and seed 0 (``LambdaConfig``), from a
small grid (``LAMBDAS``), by accuracy on a held-out part of the *training* set
(its last ``1/HOLDOUT_FRACTION``, never the test set); every cell of the arm is
then one fit at that ``lambda`` on every training image (``ConvexConfig``).

Solver: L-BFGS-B (Byrd, Lu, Nocedal & Zhu 1995; Nocedal & Wright 2006,
Algorithm 7.5) from scipy, with its Moré-Thuente line search, on the
``(m + 1) * 10`` parameters. One evaluation is two float32 BLAS products over the
feature matrix (``F W`` and ``F^T G``, OpenBLAS through numpy: about three times
the rate XLA reaches on these tall, 10-column shapes, docs/convex.md). The problem
is solved in whitened coordinates, ``W = L^-T V`` with ``L L^T`` the Cholesky
factor of the features' covariance plus ``lambda I`` (the bias absorbing the
feature means): an exact change of variables of the same objective that only
makes L-BFGS converge faster; random banks are highly redundant, which
conditions the raw problem badly. Stopping rules, the first met ends the solve
and the record says which (``stop``): the gradient in whitened coordinates
``||grad_V L||_2 < TOL``; an iteration that lowers the objective by at most
``FTOL`` of its size (scipy's L-BFGS-B ``ftol`` rule); ``MAX_ITER`` iterations; a
line search that finds no lower float32-rounded value. Checked against
scikit-learn's ``LogisticRegression`` (lbfgs, float64) with ``C = 1 / (n * lambda)``
(tests/test_convex.py).

Memory: the training features are read in place (a held-out split is a prefix
of the rows, not a copy); at m = 8192 the 60,000 x 8192 float32 matrix is
1.97 GB, the preconditioner 0.27 GB and its float64 factor 0.5 GB.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import numpy as np

from lazylab.arms import Arm
from lazylab.config import CACHE_SCHEMA, RunConfig, canonical_json, memo_key
from lazylab.errors import LazylabError
from lazylab.experiments import Reporter, Workspace

# The lambda grid, largest first (the path is solved in this order, each fit warm-starting the next).
# Penalties are on the raw head weights, whose scale follows the features': Yat features are small,
# so their useful lambdas are small (docs/convex.md).
LAMBDAS = (1e-4, 1e-6, 1e-8)
LAMBDA_WIDTH = 256  # lambda is chosen where the protocol brackets its rate (lazylab.bracket.BRACKET_WIDTH)
LAMBDA_SEED = 0
HOLDOUT_FRACTION = 6  # the last 1/6 of the training images (10,000 of 60,000) choose lambda
TOL = 1e-4  # on ||grad_V L||_2, the gradient in whitened coordinates
FTOL = 1e-7  # on an iteration's relative decrease of the objective (float32 resolves about 6e-8)
MAX_ITER = 1000
MAXCOR = 10  # L-BFGS memory: correction pairs kept
PRECOND_ROWS = 16384  # images behind the whitening preconditioner (at least 2 per unit)
CONVEX_VERSION = 4  # bump when the solver or its record changes meaning


@dataclass(frozen=True)
class _Bank:
    """The frozen bank a convex readout reads (the fields ``RunConfig`` keys its features by)."""

    arm: str
    plugin: str
    width: int
    seed: int
    train_size: int
    fan_in: str
    data: str

    @property
    def lr(self) -> None:
        """No learning rate: progress displays show ``convex`` instead."""
        return None

    def canonical(self) -> str:
        """Canonical JSON of the fields (sorted keys, no spaces, floats by ``repr``)."""
        return canonical_json(self)

    def bank_run(self) -> RunConfig:
        """A run config of the same bank (the feature store's key ignores rate and epochs)."""
        return RunConfig(arm=self.arm, plugin=self.plugin, width=self.width, seed=self.seed, lr=0.0,
                         train_size=self.train_size, fan_in=self.fan_in, data=self.data)


@dataclass(frozen=True)
class LambdaConfig(_Bank):
    """The choice of an arm's ``lambda``: its bank at ``LAMBDA_WIDTH``, ``LAMBDA_SEED``, fitted at each of
    ``lambdas`` on all but the last ``holdout`` training images and scored on those.

    Attributes: the bank's fields (as in ``RunConfig``); ``lambdas`` the grid, largest first;
    ``holdout``; ``tol``, ``max_iter`` the stopping rule. The memo key hashes all of them.
    """

    lambdas: tuple[float, ...] = LAMBDAS
    holdout: int = 10000
    tol: float = TOL
    max_iter: int = MAX_ITER
    version: int = CONVEX_VERSION
    schema: int = CACHE_SCHEMA

    def key(self) -> str:
        """``"convex-lambda-"`` + the first 32 hex digits of SHA-256 of the canonical JSON of the fields."""
        return memo_key("convex-lambda", self)


@dataclass(frozen=True)
class ConvexConfig(_Bank):
    """One convex readout: the bank's head fitted at ``lam`` on every training image, scored on the test set.

    Attributes: the bank's fields (as in ``RunConfig``); ``lam`` the L2 penalty (chosen by a
    ``LambdaConfig``); ``tol``, ``max_iter`` the stopping rule. The memo key hashes all of them.
    """

    lam: float = LAMBDAS[-1]
    tol: float = TOL
    max_iter: int = MAX_ITER
    version: int = CONVEX_VERSION
    schema: int = CACHE_SCHEMA

    def key(self) -> str:
        """``"convex-"`` + the first 32 hex digits of SHA-256 of the canonical JSON of the fields."""
        return memo_key("convex", self)


def _frozen(arm: Arm) -> None:
    if arm.trained:
        raise LazylabError(f"{arm.name}: the convex readout fits a frozen bank's head; {arm.name} trains its bank "
                           "(use a -frozen arm, or --readout adamw)")


def lambda_config(ws: Workspace, arm: Arm, train_size: int = 60000, fan_in: str = "unit",
                  lambdas: tuple[float, ...] = LAMBDAS) -> LambdaConfig:
    """The canonical config of the choice of ``arm``'s ``lambda`` on this workspace's data.

    Raises: LazylabError if ``arm`` trains its bank (the convex readout needs frozen features).
    """
    _frozen(arm)
    return LambdaConfig(arm=arm.name, plugin=arm.plugin, width=LAMBDA_WIDTH, seed=LAMBDA_SEED, train_size=train_size,
                        fan_in=fan_in, data=ws.fingerprint, lambdas=tuple(float(v) for v in lambdas),
                        holdout=train_size // HOLDOUT_FRACTION)


def convex_config(ws: Workspace, arm: Arm, width: int, seed: int, lam: float, train_size: int = 60000,
                  fan_in: str = "unit") -> ConvexConfig:
    """The canonical config of ``arm``'s convex readout at ``width``, ``seed`` and penalty ``lam``.

    Raises: LazylabError if ``arm`` trains its bank.
    """
    _frozen(arm)
    return ConvexConfig(arm=arm.name, plugin=arm.plugin, width=width, seed=seed, train_size=train_size, fan_in=fan_in,
                        data=ws.fingerprint, lam=float(lam))


def moments(F, rows: int | None = None, chunk: int = 2048) -> tuple[np.ndarray, np.ndarray]:
    """Mean ``(m,)`` and covariance ``(m, m)`` (float64) of the first ``rows`` rows of ``F`` ``(n, m)``.

    ``rows`` defaults to all. Summed over centred chunks of ``chunk`` rows with BLAS ``ssyrk`` (half
    the products of ``F^T F``; float32 within a chunk, float64 across chunks): no copy of ``F`` is
    made. Raises ValueError if the features are not finite.
    """
    from scipy.linalg import blas

    F = np.asarray(F, np.float32)
    rows = F.shape[0] if rows is None else rows
    mu = F[:rows].mean(axis=0, dtype=np.float64)
    mu32 = mu.astype(np.float32)
    upper = np.zeros((F.shape[1], F.shape[1]))
    for i in range(0, rows, chunk):
        Fc = F[i : min(i + chunk, rows)] - mu32
        upper += blas.ssyrk(1.0, Fc.T)  # Fc^T Fc, upper triangle
    cov = (np.triu(upper) + np.triu(upper, 1).T) / rows
    if not (np.all(np.isfinite(cov)) and np.all(np.isfinite(mu))):
        raise ValueError("features contain non-finite values")
    return mu, cov


def preconditioner(F, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """``(mu, cov)`` behind the whitening of a solve on the first ``rows`` rows of ``F`` ``(n, m)``.

    The covariance of the first ``min(rows, max(PRECOND_ROWS, 2 m))`` rows (``moments``), its diagonal
    raised to each unit's variance over all ``rows`` rows (one cheap pass): a unit that spikes on a few
    images outside the first rows (a data-seeded Yat unit at its own seed image, about 3 x 10^5) is
    scaled as the whole fitting set sees it. Measured at yat-data-frozen, m = 256, lambda = 1e-8:
    objective 0.38879 after 786 iterations, against 0.40338 at the 1,000-iteration cap without it
    (docs/convex.md). Only shapes the path, never the optimum.
    """
    F = np.asarray(F, np.float32)
    mu, cov = moments(F, min(rows, max(PRECOND_ROWS, 2 * F.shape[1])))
    var = np.zeros(F.shape[1])
    for i in range(0, rows, 4096):  # chunks: no (rows, m) temporary
        var += np.sum(np.square(F[i : min(i + 4096, rows)] - mu.astype(np.float32), dtype=np.float64), axis=0)
    diagonal = np.diag_indices_from(cov)
    cov[diagonal] = np.maximum(cov[diagonal], var / rows)
    return mu, cov


def whitener(cov: np.ndarray, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """``(P, L)``: ``P = L^-T`` ``(m, m)`` float32 with ``L L^T = cov + lam I + jitter I`` (LAPACK
    ``dpotrf``, then ``dtrtri`` for the triangular inverse, float64).

    ``P^T (cov + lam I) P`` is about the identity, so the objective's Hessian in ``V = P^-1 W``
    is about the cross-entropy's curvature alone. The jitter (1e-6 of the mean variance, raised
    tenfold until the factorisation succeeds) only shapes the preconditioner, never the objective.
    Raises: ValueError if no jitter up to 1e+1 of the mean variance makes it factorisable.
    """
    from scipy.linalg import lapack

    m = cov.shape[0]
    jitter = 1e-6 * max(float(np.trace(cov)) / m, 1e-30)
    for _ in range(8):
        L, info = lapack.dpotrf(cov + (lam + jitter) * np.eye(m), lower=1, clean=1)
        if info == 0:
            break
        jitter *= 10
    else:
        raise ValueError("the features' covariance cannot be factorised")
    inverse, info = lapack.dtrtri(L, lower=1)
    if info != 0:
        raise ValueError("the features' covariance cannot be factorised")
    return np.ascontiguousarray(inverse.T, np.float32), L


class _Objective:
    """Value and gradient of the mean cross-entropy of the first ``rows`` rows plus ``lam/2 ||W||^2``, in
    whitened coordinates ``x = (V, c)``: ``W = P V``, bias ``c - mu W``.

    One evaluation is two float32 BLAS products over the feature matrix (``F W``, ``F^T G``), the
    softmax on the ``(rows, 10)`` logits in float64, and two ``(m, m) x (m, 10)`` products with ``P``.
    It remembers its last point and gradient (the gradient stopping rule reads them).
    """

    def __init__(self, F, y, rows: int, mu: np.ndarray, P: np.ndarray, lam: float):
        self.F, self.y, self.rows, self.P, self.lam = F[:rows], np.asarray(y[:rows]), rows, P, lam
        self.mu, self.mu32 = mu, mu.astype(np.float32)
        self.index = np.arange(rows)
        self.evaluations = 0
        self.last: tuple[np.ndarray, np.ndarray] | None = None

    def head(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(W (m, 10) float32, b (10,) float64)`` of the point ``x``."""
        m = self.P.shape[0]
        W = self.P @ x[: m * 10].reshape(m, 10).astype(np.float32)
        return W, x[m * 10 :] - self.mu32 @ W

    def __call__(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        W, b = self.head(x)
        z = (self.F @ W).astype(np.float64) + b
        z -= z.max(axis=1, keepdims=True)
        e = np.exp(z)
        s = e.sum(axis=1)
        W64 = W.astype(np.float64)
        value = float(np.mean(np.log(s) - z[self.index, self.y]) + 0.5 * self.lam * np.sum(W64 * W64))
        G = e / s[:, None]
        G[self.index, self.y] -= 1.0
        G /= self.rows
        gb = G.sum(axis=0)
        gW = (self.F.T @ G.astype(np.float32)).astype(np.float64) - np.outer(self.mu, gb) + self.lam * W64
        grad = np.concatenate([(self.P.T @ gW.astype(np.float32)).astype(np.float64).ravel(), gb])
        self.evaluations += 1
        self.last = (x.copy(), grad)
        return value, grad


def solve(F, y, lam: float, rows: int | None = None, tol: float = TOL, max_iter: int = MAX_ITER, start=None,
          precond=None) -> dict:
    """Minimise ``(1/rows) sum_{i < rows} CE(F_i W + b, y_i) + lam/2 ||W||_F^2`` by L-BFGS (module docstring).

    Args:
      F: float32 features ``(n, m)`` (numpy, or a CPU jax array: read in place).
      y: int labels ``(n,)`` in 0..9.
      lam: the L2 penalty on ``W`` (>= 0).
      rows: fit the first ``rows`` images only (default all): the rest are held out.
      tol, max_iter: stop when ``||grad_V L||_2 < tol`` (whitened coordinates) or after ``max_iter`` iterations.
      start: ``{"W", "b"}`` to start from (a warm start), else zeros.
      precond: ``preconditioner(F, rows)`` if already computed (any ``(mu, cov)`` only shapes the path).
    Returns: ``{"W" (m, 10), "b" (10,), "iterations", "evaluations", "grad_norm", "objective", "converged",
      "stop"}`` (numpy arrays, Python numbers). ``converged``: the gradient rule was met; ``stop``: the rule
      that ended the solve, ``"gradient"``, ``"objective"`` (``FTOL``), ``"max_iter"``, or ``"line_search"``
      (no step along the search direction lowers the float32-rounded objective: the optimum to
      rounding, as far as the line search can tell).
    Raises: ValueError for non-finite features or a negative ``lam``.
    """
    import scipy.optimize

    F = np.asarray(F, np.float32)
    n, m = F.shape
    rows = n if rows is None else rows
    if lam < 0:
        raise ValueError(f"lambda must be >= 0, got {lam}")
    mu, cov = preconditioner(F, rows) if precond is None else precond
    P, L = whitener(cov, lam)
    objective = _Objective(F, y, rows, mu, P, lam)
    if start is None:
        x0 = np.zeros(m * 10 + 10)
    else:  # V = P^-1 W = L^T W; the whitened bias absorbs mu W
        W = np.asarray(start["W"], np.float64)
        x0 = np.concatenate([(L.T @ W).ravel(), np.asarray(start["b"], np.float64) + mu @ W])

    def gradient_rule(intermediate_result):
        last = objective.last
        if last is not None and np.linalg.norm(last[1]) < tol and np.array_equal(last[0], intermediate_result.x):
            raise StopIteration

    # ftol: scipy's rule, (f_k - f_k+1) / max(|f_k|, |f_k+1|, 1) <= FTOL; gtol = 0 leaves the gradient to ours.
    res = scipy.optimize.minimize(objective, x0, jac=True, method="L-BFGS-B", callback=gradient_rule,
                                  options={"maxiter": max_iter, "maxfun": 4 * max_iter + 20, "ftol": FTOL,
                                           "gtol": 0.0, "maxcor": MAXCOR})
    value, grad = objective(res.x) if objective.last is None or not np.array_equal(objective.last[0], res.x) \
        else (float(res.fun), objective.last[1])
    W, b = objective.head(res.x)
    gnorm = float(np.linalg.norm(grad))
    message = str(res.message).upper()
    stop = ("gradient" if gnorm < tol else "objective" if "REL_REDUCTION" in message
            else "max_iter" if res.nit >= max_iter or "LIMIT" in message else "line_search")
    return {"W": np.asarray(W), "b": np.asarray(b, np.float32), "iterations": int(res.nit),
            "evaluations": objective.evaluations, "grad_norm": gnorm, "objective": float(value),
            "converged": gnorm < tol, "stop": stop}


def scores(F, y, W, b) -> tuple[np.ndarray, np.ndarray]:
    """Per-image cross-entropy ``(n,)`` (nats, float64) and correctness ``(n,)`` of the head ``(W, b)`` on ``F``."""
    z = (np.asarray(F, np.float32) @ np.asarray(W, np.float32)).astype(np.float64) + b
    right = np.argmax(z, axis=1) == y
    z -= z.max(axis=1, keepdims=True)
    return np.log(np.exp(z).sum(axis=1)) - z[np.arange(len(y)), y], right


def choose_lambda(F_train, y_train, cfg: LambdaConfig) -> dict:
    """Fit on the first ``train_size - holdout`` images at each of ``cfg.lambdas`` (largest first, each fit
    warm-starting the next) and keep the one with the highest accuracy on the last ``holdout`` (ties: the larger).

    Args: F_train ``(train_size, m)`` float32 features; y_train ``(train_size,)`` labels; cfg the choice.
    Returns: ``{"lambda", "selection": {repr(lambda): held-out accuracy %}, "selection_iterations":
      {repr(lambda): iterations}, "evaluations"}`` (evaluations summed over the grid).
    Raises: ValueError for non-finite features.
    """
    n = cfg.train_size
    rows = n - cfg.holdout
    precond = preconditioner(F_train, rows)
    selection, iterations, evaluations, start = {}, {}, 0, None
    for lam in sorted(cfg.lambdas, reverse=True):
        start = solve(F_train, y_train, lam, rows, cfg.tol, cfg.max_iter, start=start, precond=precond)
        right = scores(np.asarray(F_train)[rows:n], np.asarray(y_train)[rows:n], start["W"], start["b"])[1]
        selection[repr(lam)] = 100.0 * float(right.mean())
        iterations[repr(lam)] = start["iterations"]
        evaluations += start["evaluations"]
    best = max(cfg.lambdas, key=lambda lam: (selection[repr(lam)], lam))
    return {"lambda": best, "selection": selection, "selection_iterations": iterations, "evaluations": evaluations}


def convex_readout(F_train, y_train, F_test, y_test, cfg: ConvexConfig) -> dict:
    """Fit the head at ``cfg.lam`` on every training image (``solve``) and score it on the test set.

    Args:
      F_train ``(train_size, m)``, F_test ``(n_test, m)``: float32 features; y_train, y_test: labels.
      cfg: the readout's config.
    Returns: the record's numbers: ``test_acc`` (%), ``train_acc`` (%), ``train_loss`` (mean CE on every
      training image at the optimum, nats, penalty excluded), ``objective`` (penalty included),
      ``grad_norm``, ``iterations``, ``evaluations``, ``converged``, ``stop``, ``lambda``.
    Raises: ValueError for non-finite features.
    """
    fit = solve(F_train, y_train, cfg.lam, None, cfg.tol, cfg.max_iter)
    ce, right = scores(F_train, np.asarray(y_train), fit["W"], fit["b"])
    test_right = scores(F_test, np.asarray(y_test), fit["W"], fit["b"])[1]
    return {
        "test_acc": 100.0 * float(test_right.mean()), "train_acc": 100.0 * float(right.mean()),
        "train_loss": float(ce.mean()), "objective": fit["objective"], "grad_norm": fit["grad_norm"],
        "iterations": fit["iterations"], "evaluations": fit["evaluations"], "converged": fit["converged"],
        "stop": fit["stop"], "lambda": cfg.lam,
    }


def _config_json(cfg) -> dict:
    """The config as a plain dict, as stored in its record."""
    return json.loads(canonical_json(cfg))


def _features(ws, arm: Arm, cfg) -> tuple:
    """The bank's train and test features (``Workspace.bank_features``: the memo's store when it holds them)."""
    from lazylab.model import build_model

    model = build_model(arm, cfg.width, cfg.seed, ws.data.x_train[: cfg.train_size], cfg.fan_in)
    return ws.bank_features(arm, cfg.bank_run(), model)


def convex_cells(ws, arm: Arm, cfgs: list[ConvexConfig], on_epoch=None) -> list[dict]:
    """The records of the convex readouts ``cfgs`` of ``arm`` (a backend's unit of work, like
    ``experiments.train_runs``; module-level so that Ray can send it by reference).

    ``on_epoch`` is unused (a solve has no epochs). Raises: LazylabError naming the arm and cell if
    its features are not finite.
    """
    records = []
    for cfg in cfgs:
        t0 = time.perf_counter()
        F_train, F_test = _features(ws, arm, cfg)
        y_train = np.asarray(ws.data.y_train[: cfg.train_size])
        try:
            result = convex_readout(F_train, y_train, F_test, np.asarray(ws.data.y_test), cfg)
        except ValueError as exc:
            raise LazylabError(f"{arm.name} ({arm.plugin}) m={cfg.width} seed={cfg.seed}: {exc}") from None
        records.append({"key": cfg.key(), "config": _config_json(cfg), **result,
                        "seconds": round(time.perf_counter() - t0, 3)})
    return records


def _stored(ws, cfg) -> dict | None:
    """``cfg``'s memo record, or None (absent, or written for another configuration)."""
    record = ws.memo.get_record(cfg.key())
    return record if isinstance(record, dict) and record.get("config") == _config_json(cfg) else None


def run_lambda(ws: Workspace, arm: Arm, cfg: LambdaConfig, reporter: Reporter = Reporter()) -> dict:
    """The record of ``arm``'s choice of ``lambda`` (``choose_lambda``): from the memo, or computed and stored.

    Computed in this process whatever the backend (a few seconds at m = 256); in memo-only mode a
    missing choice gives ``{"key", "config", "lambda": None, "missing": True}``.
    Raises: LazylabError naming the arm if its features are not finite.
    """
    record = _stored(ws, cfg)
    if record is not None:
        reporter.done(cfg, record, cached=True)
        return record
    if ws.memo_only:
        ws.missing.append(cfg.key())
        return {"key": cfg.key(), "config": _config_json(cfg), "lambda": None, "missing": True}
    reporter.start(cfg)
    t0 = time.perf_counter()
    F_train, _ = _features(ws, arm, cfg)
    try:
        result = choose_lambda(F_train, np.asarray(ws.data.y_train[: cfg.train_size]), cfg)
    except ValueError as exc:
        raise LazylabError(f"{arm.name} ({arm.plugin}) m={cfg.width} seed={cfg.seed}: {exc}") from None
    record = {"key": cfg.key(), "config": _config_json(cfg), **result, "seconds": round(time.perf_counter() - t0, 3)}
    ws.memo.put_record(cfg.key(), record)
    reporter.done(cfg, record, cached=False)
    return record


def run_convex(ws: Workspace, cells: list[tuple[Arm, ConvexConfig]], reporter: Reporter = Reporter()) -> list[dict]:
    """Records of convex readouts, each ``(arm, cfg)``, in order: from the memo, or computed by ``ws.backend``
    and stored.

    Features come from ``Workspace.bank_features`` (the memo's feature store when it holds them), so a
    readout sees exactly the bank its protocol run trained on. Each missing cell is one job of the
    backend, given in the order of ``cells`` (the local backend computes them in that order; Ray starts
    the widest first); each record is stored as its job finishes, so an interrupt keeps every finished cell.

    Raises: LazylabError naming the arm and cell if its features are not finite.
    """
    found, todo = {}, []
    for arm, cfg in cells:
        record = _stored(ws, cfg)
        if record is not None:
            reporter.done(cfg, record, cached=True)
            found[cfg.key()] = record
        elif ws.memo_only:
            ws.missing.append(cfg.key())
            found[cfg.key()] = {"key": cfg.key(), "config": _config_json(cfg), "test_acc": None, "missing": True}
        else:
            todo.append((arm, [cfg]))
    for group, records in ws.backend.compute(ws, todo, reporter, convex_cells):
        for cfg, record in zip(group, records):
            ws.memo.put_record(cfg.key(), record)
            found[cfg.key()] = record
            reporter.done(cfg, record, cached=False)
    return [found[cfg.key()] for _, cfg in cells]


def _mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else None


def convex_plan(ws: Workspace, plan, lambdas: tuple[float, ...] = LAMBDAS) -> list[tuple[Arm, LambdaConfig]]:
    """``(arm, LambdaConfig)`` of each frozen arm of ``plan`` (a ``LadderPlan``).

    Raises: LazylabError if the plan holds a trained arm.
    """
    return [(arm, lambda_config(ws, arm, plan.train_size, plan.fan_in, lambdas)) for arm in plan.arms]


def run_convex_ladder(ws: Workspace, plan, lambdas: tuple[float, ...] = LAMBDAS,
                      reporter: Reporter = Reporter()) -> dict:
    """Convex readouts of every frozen arm of ``plan`` (a ``LadderPlan``) at each width and seed.

    Every arm's ``lambda`` is chosen first (``run_lambda``), then every cell is fitted at its arm's, widths
    ascending with the arms interleaved (``run_convex``).
    Returns: ``{"lambdas", "tol", "max_iter", "holdout_fraction", "lambda_width", "arms": {arm: {"plugin",
      "lambda", "selection", "cells": {str(width): summary}}}, "runs": [record, ...], "choices": [record, ...]}``;
      a cell's summary holds ``n``, ``mean`` and ``std`` of ``test_acc`` (%, std with ddof=1, 0 for one
      seed), ``train_loss`` (mean, nats), ``grad_norm`` (largest), ``iterations`` (mean), ``converged``
      (all seeds), ``lambdas`` (per seed).
    Raises: LazylabError if the plan holds a trained arm.
    """
    choices = convex_plan(ws, plan, lambdas)
    reporter.plan(len(choices) * (1 + len(plan.widths) * len(plan.seeds)))
    out = {"lambdas": list(lambdas), "tol": TOL, "max_iter": MAX_ITER, "holdout_fraction": f"1/{HOLDOUT_FRACTION}",
           "lambda_width": LAMBDA_WIDTH, "arms": {}, "runs": [], "choices": []}
    chosen = {}
    for arm, lcfg in choices:  # every arm's lambda first: the cells depend on it
        chosen[arm.name] = run_lambda(ws, arm, lcfg, reporter)
        out["choices"].append(chosen[arm.name])
    # Widths ascending, arms interleaved: an interrupted frontier has every arm's narrow widths.
    jobs = [(arm, convex_config(ws, arm, w, s, chosen[arm.name]["lambda"], plan.train_size, plan.fan_in))
            for w in sorted(plan.widths) for arm, _ in choices for s in plan.seeds
            if not chosen[arm.name].get("missing")]
    records = run_convex(ws, jobs, reporter)
    for arm, _ in choices:
        choice = chosen[arm.name]
        mine = [r for r in records if r["config"]["arm"] == arm.name]
        out["runs"] += mine
        cells = {}
        for w in plan.widths:
            cell = [r for r in mine if r["config"]["width"] == w and not r.get("missing")]
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
        out["arms"][arm.name] = {"plugin": arm.plugin, "lambda": choice.get("lambda"),
                                 "selection": choice.get("selection"), "cells": cells}
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


def answer(result, convex: dict, arms, exchange: dict | None = None) -> dict:
    """The study's answer at both readouts (``lazylab.exchange.answer_rows``): per trained arm and width, the
    frozen width of the same unit and the cheapest frozen bank of any unit read out at the optimum, with
    seed intervals, beside the protocol's exchange rate (``exchange``, ``experiments.laws.exchange_table``).

    Args: ``result`` a ``LadderResult``; ``convex`` from ``run_convex_ladder``; ``arms`` the ladder's arms
      (``Arm``); ``exchange`` the protocol's exchange table or None.
    Returns: ``{"rows": [answer row + "protocol": exchange row | None], "sentence": str}``; the sentence is
      the first trained arm's at its smallest width, or a note when nothing is trained.
    """
    from lazylab import analysis as an
    from lazylab.exchange import answer_rows, answer_sentence
    from lazylab.experiments.laws import ladder_records

    # A partial frontier (``experiments.render.ladders``) covers a prefix of the widths: beyond it is unmeasured.
    widths = list((convex.get("partial") or {}).get("widths") or result.plan["widths"])
    trained: dict = {}
    for a in (a for a in arms if a.trained):
        per: dict = {}
        for r in ladder_records(result, a.name):
            if r.get("best_acc") is not None and not r.get("missing"):
                per.setdefault(r["config"]["width"], []).append(r["best_acc"])
        if per:
            trained[a.name] = per
    frozen: dict = {}
    for r in convex["runs"]:
        if not r.get("missing") and r.get("test_acc") is not None:
            frozen.setdefault(r["config"]["arm"], {}).setdefault(r["config"]["width"], []).append(r["test_acc"])
    pairs = {t: f for f, t in an.pair_arms(arms)}
    protocol = {(r["trained"], r["width"]): r for r in (exchange or {}).get("rows", [])}
    rows = [{**row, "protocol": protocol.get((row["trained"], row["width"]))}
            for row in answer_rows(trained, frozen, pairs, widths)]
    sentence = answer_sentence(rows[0], rows[0]["protocol"], widths, result.plan.get("epochs"),
                               result.plan["widths"]) if rows else \
        "No trained arm in this ladder: no exchange rate."
    return {"rows": rows, "sentence": sentence}
