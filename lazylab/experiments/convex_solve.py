"""The convex readout's solver: the minimiser of a linear head's regularised cross-entropy on stored features.

    L(W, b) = (1/n) sum_{i < n} CE(f_i W + b, y_i) + (lambda / 2) ||W||_F^2

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

Threads: OpenBLAS wakes its thread pool for every call, about 2 ms each on a
2-core VM, which is 30 times the work of L-BFGS-B's vector operations and of the
``(m, m) x (m, 10)`` products at m = 256. So a solve runs them on one BLAS thread
and gives the pool only to the two products over the feature matrix
(threadpoolctl): on 1,280 images at m = 256 an evaluation inside a solve took
64.7 ms with the pool throughout and 8.3 ms so; at m = 4096 on 60,000 images the
products take 315 ms on two threads and 472 ms on one on quiet cores
(docs/performance.md, which also has where one thread wins).

Memory: the training features are read in place (a held-out split is a prefix
of the rows, not a copy); at m = 8192 the 60,000 x 8192 float32 matrix is
1.97 GB, the preconditioner 0.27 GB and its float64 factor 0.5 GB.
"""

from __future__ import annotations

import contextlib
import functools
import numbers

import numpy as np

TOL = 1e-4  # on ||grad_V L||_2, the gradient in whitened coordinates
FTOL = 1e-7  # on an iteration's relative decrease of the objective (float32 resolves about 6e-8)
MAX_ITER = 1000
MAXCOR = 10  # L-BFGS memory: correction pairs kept
PRECOND_ROWS = 16384  # images behind the whitening preconditioner (at least 2 per unit)
FLOAT32_TINY = np.finfo(np.float32).tiny  # the smallest normal float32, 1.18e-38
# lambda = 0 has no minimiser when the classes are separable (a wide bank on few images); a penalty below
# float32's smallest normal number (the solver's gradients are float32) is zero in all but name.
SMALLEST_LAMBDA = 1.1754944e-38
# Above it a penalty, or the refinement's steps of up to two decades past the path's top, leave float32's range.
LARGEST_LAMBDA = 1e36


def lambda_path(values) -> tuple[float, ...]:
    """A penalty path as the walk takes it: ``values`` (an iterable of real numbers: Python, NumPy or
    ``fractions`` ones) as floats, largest first.

    Raises: ValueError (one short line, naming the first offending value) when ``values`` is not an iterable of
    numbers (a string is not), is empty, holds a penalty outside ``SMALLEST_LAMBDA``..``LARGEST_LAMBDA`` (NaN
    included), or gives a penalty twice (as floats: 1e17 and 1e17 + 1 are one penalty)."""
    bounds = f"penalties from {SMALLEST_LAMBDA:.8g} to {LARGEST_LAMBDA:g}"
    try:
        if isinstance(values, (str, bytes)):
            raise TypeError
        given = list(values)
    except TypeError:
        raise ValueError(f"expected a sequence of {bounds}, got {values!r:.40}") from None
    if not given:
        raise ValueError(f"expected {bounds}, got none")
    for v in given:
        if not isinstance(v, numbers.Real) or isinstance(v, bool) or not SMALLEST_LAMBDA <= v <= LARGEST_LAMBDA:
            raise ValueError(f"expected {bounds}, got {v!r:.40}")
    path = [float(v) for v in given]
    if len(set(path)) < len(path):
        twice = next(v for v in path if path.count(v) > 1)
        raise ValueError(f"the penalty {twice:.8g} is given more than once")
    return tuple(sorted(path, reverse=True))


def normal_float32(G: np.ndarray) -> np.ndarray:
    """``G`` (any shape, float64) as float32 with its subnormal entries (``|g| < FLOAT32_TINY``, nonzero) set to 0.

    Why: a softmax probability 87-103 nats below its row's largest logit is subnormal in float32, and
    OpenBLAS's ``sgemm`` is about 23 times slower on subnormal operands on an Intel Xeon (no
    flush-to-zero in numpy's floating-point mode; docs/performance.md). The data-seeded Yat bank's
    logits spread by hundreds of nats as its solves proceed (0.6 % of ``G`` subnormal after 85
    evaluations at m = 8192). Each flushed entry is below 1e-38 of one image's gradient, far under
    float32's resolution of the sums it enters.
    """
    G32 = G.astype(np.float32)
    G32[np.abs(G32) < FLOAT32_TINY] = 0.0
    return G32


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

    def __init__(self, F, y, rows: int, mu: np.ndarray, P: np.ndarray, lam: float, pool=None):
        self.F, self.y, self.rows, self.P, self.lam = F[:rows], np.asarray(y[:rows]), rows, P, lam
        self.pool = pool if pool is not None else contextlib.nullcontext  # BLAS threads for the products over F
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
        with self.pool():
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
        with self.pool():
            FtG = self.F.T @ normal_float32(G)
        gW = FtG.astype(np.float64) - np.outer(self.mu, gb) + self.lam * W64
        grad = np.concatenate([(self.P.T @ gW.astype(np.float32)).astype(np.float64).ravel(), gb])
        self.evaluations += 1
        self.last = (x.copy(), grad)
        return value, grad


@functools.cache
def _blas():
    """threadpoolctl's controller of the BLAS libraries numpy and scipy loaded (made once, after scipy's)."""
    import scipy.linalg  # noqa: F401  (loads scipy's own OpenBLAS, so that the controller sees it)
    import scipy.optimize  # noqa: F401
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController().select(user_api="blas")


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
    blas = _blas()
    threads = max((lib["num_threads"] for lib in blas.info()), default=None)  # None: no BLAS threadpoolctl knows
    objective = _Objective(F, y, rows, mu, P, lam, pool=(lambda: blas.limit(limits=threads)) if threads else None)
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
    with blas.limit(limits=1) if threads else contextlib.nullcontext():  # the module docstring, "Threads"
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
