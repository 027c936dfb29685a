"""Empirical neural tangent kernels of lazylab models, with jax alone.

Convention. For a model with ``C = 10`` logits and trainable parameters
``theta`` (all of them for a trained arm, the head for a frozen one), the
empirical NTK on probe images ``x_1..x_N`` is the full class-resolved kernel

    Theta[i, c, j, c'] = sum_p  d f_c(x_i) / d theta_p  *  d f_c'(x_j) / d theta_p,

stored as ``(N, C, N, C)``; as a matrix it is ``J J^T`` with ``J`` the
``(N C, P)`` Jacobian (rows ordered example-major). The class trace
``sum_c Theta[i, c, j, c]`` ``(N, N)`` is also reported. Kernel drift uses
the Frobenius norm of the full ``(N C, N C)`` matrix.

Three ways to compute it, all exact (Novak, Sohl-Dickstein & Schoenholz
2022, "Fast Finite Width Neural Tangent Kernel", name the first two
"Jacobian contraction" and "structured derivatives"):

* ``"jacobian"`` — per-example Jacobians (``vmap`` of ``jacrev``) for the
  whole probe, contracted as ``J J^T``. Memory ``N C P`` floats. This is the
  reference, and it is refused above ``JACOBIAN_LIMIT_BYTES`` (256 MiB) —
  "comfortably fits" on the 2-core, few-GB machines this lab targets.
* ``"rows"`` — the same contraction in example chunks: Jacobian rows of two
  chunks at a time, ``2 b C P`` floats, with ``b`` chosen to stay under the
  limit. Works for any model; recomputes chunk Jacobians.
* ``"structured"`` — for a lazylab ``Model`` (a bank then a linear head)
  the Jacobian factorizes. With features ``Phi = feat(X)`` ``(N, m)`` and
  head kernel ``H`` ``(m, C)``:
    - head: ``Theta_head = (Phi Phi^T + 1) (x) I_C`` (kernel and bias);
    - per-unit bank leaves (a leaf whose row ``k`` reaches only feature
      ``k``, e.g. the prototypes ``W``; checked numerically with ``jvp``
      before use): with ``g_k(x) = d phi_k(x) / d (row k)``, one per-example
      gradient of ``sum_k phi_k(x)`` gives every ``g_k(x)`` at once, and
      ``Theta[i,c,j,c'] = sum_k H_kc H_kc' <g_k(x_i), g_k(x_j)>``;
    - shared bank leaves (the layer scalars ``b``, ``eps``, ``sigma``):
      forward-mode ``jacfwd`` columns ``d Phi / d s``, contracted with ``H``.
  Cost ``N^2 m r`` for the bank (``r`` = row size) instead of
  ``N^2 C^2 P``, memory ``b m r`` floats per chunk.

``"auto"`` picks ``structured`` when the model qualifies, else
``jacobian`` when the full Jacobian fits under the limit, else ``rows``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from lazylab.network import PRECISION, apply_bank

JACOBIAN_LIMIT_BYTES = 256 * 2**20
SHARED_MAX = 4096  # most shared-leaf elements the structured path differentiates in forward mode
METHODS = ("auto", "structured", "jacobian", "rows")


class NTKTooLarge(ValueError):
    """The requested contraction would exceed its memory limit."""


@dataclass
class NTK:
    """An empirical NTK.

    Attributes:
      kernel: ``(N, C, N, C)`` float64 (computed in the model's float32, summed in float64).
      method: the method used.
      n_params: trainable parameter count ``P``.
      jacobian_bytes: bytes a full float32 Jacobian ``(N C, P)`` would take.
      work_bytes: bytes of the method's largest intermediate (estimate).
      seconds: wall time.
      notes: how the structured path classified the leaves, or why it was not used.
    """

    kernel: np.ndarray
    method: str
    n_params: int
    jacobian_bytes: int
    work_bytes: int
    seconds: float
    notes: str = ""

    def matrix(self) -> np.ndarray:
        """``(N C, N C)`` matrix, example-major."""
        n, c = self.kernel.shape[:2]
        return self.kernel.reshape(n * c, n * c)

    def trace(self) -> np.ndarray:
        """Class trace ``sum_c Theta[:, c, :, c]`` ``(N, N)``."""
        return np.einsum("icjc->ij", self.kernel)


def relative_drift(K1: np.ndarray, K0: np.ndarray) -> float:
    """``||K1 - K0||_F / ||K0||_F`` (any shape; float64)."""
    K0 = np.asarray(K0, np.float64)
    return float(np.linalg.norm(np.asarray(K1, np.float64) - K0) / np.linalg.norm(K0))


def symmetry_psd(K: np.ndarray) -> dict:
    """``asym = max|K - K^T| / max|K|`` and ``min_eig / max_eig`` of the symmetrised matrix ``K`` (2-D)."""
    K = np.asarray(K, np.float64)
    asym = float(np.max(np.abs(K - K.T)) / max(np.max(np.abs(K)), 1e-300))
    ev = np.linalg.eigvalsh(0.5 * (K + K.T))
    return {"asym": asym, "min_eig": float(ev[0]), "max_eig": float(ev[-1]), "min_over_max": float(ev[0] / max(ev[-1], 1e-300))}


# ------------------------------------------------------------- generic
def _apply(graphdef, params, rest, x):
    return nnx.merge(graphdef, params, rest)(x)


@partial(jax.jit, static_argnums=0)
def _per_example_jac(graphdef, params, rest, x):
    """Per-example Jacobian rows ``(b, C, P)`` (leaves flattened and concatenated)."""

    def one(xi):
        J = jax.jacrev(lambda p: _apply(graphdef, p, rest, xi[None])[0])(params)
        return jnp.concatenate([l.reshape(l.shape[0], -1) for l in jax.tree.leaves(J)], axis=1)

    return jax.vmap(one)(x)


@jax.jit
def _contract(Ja, Jb):
    b1, c, p = Ja.shape
    b2 = Jb.shape[0]
    return jnp.matmul(Ja.reshape(b1 * c, p), Jb.reshape(b2 * c, p).T, precision=PRECISION).reshape(b1, c, b2, c)


def count_params(state) -> int:
    return int(sum(np.prod(np.shape(l)) for l in jax.tree.leaves(state)))


def ntk_jacobian(graphdef, params, rest, x, limit: int | None = JACOBIAN_LIMIT_BYTES) -> np.ndarray:
    """Full Jacobian contraction ``J J^T``; NTKTooLarge if ``N C P`` float32 exceeds ``limit`` (None: no limit)."""
    x = jnp.asarray(x)
    n_out = int(jax.eval_shape(lambda: _apply(graphdef, params, rest, x[:1])).shape[-1])
    need = len(x) * n_out * count_params(params) * 4
    if limit is not None and need > limit:
        raise NTKTooLarge(f"a full Jacobian needs {need / 2**20:.0f} MiB, over the {limit / 2**20:.0f} MiB limit")
    J = _per_example_jac(graphdef, params, rest, x)
    return np.asarray(_contract(J, J), np.float64)


def ntk_rows(graphdef, params, rest, x, limit: int = JACOBIAN_LIMIT_BYTES) -> tuple[np.ndarray, int]:
    """Chunked contraction: Jacobian rows of two example chunks at a time. Returns (kernel, chunk size)."""
    x = jnp.asarray(x)
    n = len(x)
    n_out = int(jax.eval_shape(lambda: _apply(graphdef, params, rest, x[:1])).shape[-1])
    per = n_out * count_params(params) * 4
    b = int(max(1, min(n, limit // (2 * per))))
    K = np.zeros((n, n_out, n, n_out))
    starts = list(range(0, n, b))
    for a, i0 in enumerate(starts):
        Ji = _per_example_jac(graphdef, params, rest, x[i0 : i0 + b])
        for j0 in starts[a:]:
            Jj = Ji if j0 == i0 else _per_example_jac(graphdef, params, rest, x[j0 : j0 + b])
            blk = np.asarray(_contract(Ji, Jj), np.float64)
            K[i0 : i0 + b, :, j0 : j0 + b, :] = blk
            if j0 != i0:
                K[j0 : j0 + b, :, i0 : i0 + b, :] = blk.transpose(2, 3, 0, 1)
    return K, b


# ------------------------------------------------------------- structured
@dataclass
class _Plan:
    head_kernel: bool
    head_bias: bool
    per_unit: list  # paths inside feat
    shared: list  # paths inside feat
    row_size: int
    shared_size: int
    notes: str


def _paths(state) -> list[tuple]:
    return [tuple(p) for p, _ in nnx.to_flat_state(state)]


def _feat_split(feat, per_unit, shared):
    pu = set(per_unit)
    sh = set(shared)
    return nnx.split(feat, lambda path, v: tuple(path) in pu, lambda path, v: tuple(path) in sh, ...)


def _phi(gd, pu, sh, rest, x):
    return apply_bank(nnx.merge(gd, pu, sh, rest), x)


def _is_per_unit(feat, path, m, x) -> bool:
    """True if row ``k`` of the leaf at ``path`` reaches feature ``k`` only (two jvp probes, exact zeros required)."""
    gd, pu, sh, rest = _feat_split(feat, [path], [])
    leaf = jax.tree.leaves(pu)[0]
    if leaf.ndim == 0 or leaf.shape[0] != m or m < 2:
        return False
    rng = np.random.default_rng(0)
    subset = rng.permutation(m)[: max(1, m // 2)]
    for rows in (subset, rng.integers(0, m, 1)):
        mask = np.zeros(m, bool)
        mask[rows] = True
        t = rng.standard_normal(leaf.shape).astype(np.asarray(leaf).dtype)
        t[~mask] = 0
        tangent = jax.tree.map(lambda l: jnp.asarray(t), pu)
        _, out = jax.jvp(lambda p: _phi(gd, p, sh, rest, x), (pu,), (tangent,))
        out = np.asarray(out)
        if out.shape[-1] != m or np.any(out[:, ~mask] != 0) or not np.all(np.isfinite(out)):
            return False
    return True


def structured_plan(model, trainable_filter, x_check) -> _Plan | str:
    """How the structured path would treat ``model``'s trainable leaves, or a reason it cannot."""
    if not (hasattr(model, "feat") and hasattr(model, "head") and isinstance(model.head, nnx.Linear)):
        return "not a bank + linear head model"
    paths = _paths(nnx.state(model, trainable_filter))
    head = {p for p in paths if p[0] == "head"}
    bank = [p[1:] for p in paths if p[0] == "feat"]
    if len(head) + len(bank) != len(paths) or not head <= {("head", "kernel"), ("head", "bias")}:
        return "trainable parameters outside feat/head.kernel/head.bias"
    m = int(model.head.kernel[...].shape[0])
    x_check = jnp.asarray(x_check[: min(len(x_check), 8)])
    per_unit, shared = [], []
    for p in bank:
        (per_unit if _is_per_unit(model.feat, p, m, x_check) else shared).append(p)
    leaves = dict((tuple(p), v) for p, v in nnx.to_flat_state(nnx.state(model.feat, nnx.Param)))
    row = int(sum(np.prod(np.shape(leaves[p][...])[1:]) for p in per_unit))
    sh = int(sum(np.prod(np.shape(leaves[p][...])) for p in shared))
    if sh > SHARED_MAX:
        return f"{sh} shared bank parameters (over {SHARED_MAX})"
    notes = f"per-unit: {','.join('.'.join(map(str, p)) for p in per_unit) or '-'}; shared: {','.join('.'.join(map(str, p)) for p in shared) or '-'}"
    return _Plan(("head", "kernel") in head, ("head", "bias") in head, per_unit, shared, row, sh, notes)


@partial(jax.jit, static_argnums=0)
def _unit_grads(gd, pu, sh, rest, x):
    """``(b, m, r)``: per example, the gradient of ``sum_k phi_k(x)`` w.r.t. the per-unit leaves, rows flattened."""

    def one(xi):
        g = jax.grad(lambda p: jnp.sum(_phi(gd, p, sh, rest, xi[None])))(pu)
        return jnp.concatenate([l.reshape(l.shape[0], -1) for l in jax.tree.leaves(g)], axis=1)

    return jax.vmap(one)(x)


@jax.jit
def _unit_block(Ga, Gb, HH):
    """``sum_k HH[k, c, c'] <Ga[i, k], Gb[j, k]>`` as ``(b1, C, b2, C)``."""
    S = jnp.einsum("ikr,jkr->ijk", Ga, Gb, precision=PRECISION)
    return jnp.einsum("ijk,kcd->icjd", S, HH, precision=PRECISION)


@partial(jax.jit, static_argnums=0)
def _shared_cols(gd, pu, sh, rest, x, H):
    """``(N, C, s)``: d f / d shared-leaf elements = (d Phi / d s) contracted with the head kernel."""
    Jf = jax.jacfwd(lambda s: _phi(gd, pu, s, rest, x))(sh)
    cols = jnp.concatenate([l.reshape(l.shape[0], l.shape[1], -1) for l in jax.tree.leaves(Jf)], axis=2)
    return jnp.einsum("nks,kc->ncs", cols, H, precision=PRECISION)


def ntk_structured(model, plan: _Plan, x, limit: int = JACOBIAN_LIMIT_BYTES) -> tuple[np.ndarray, int]:
    """The factorized NTK of a bank + linear-head model (see module docstring). Returns (kernel, chunk size)."""
    from lazylab.model import features

    x = np.asarray(x)
    n = len(x)
    H = jnp.asarray(model.head.kernel[...])
    m, C = H.shape
    K = np.zeros((n, C, n, C))
    eye = np.eye(C)
    if plan.head_kernel or plan.head_bias:
        Phi = np.asarray(features(model.feat, x), np.float64)
        base = (Phi @ Phi.T if plan.head_kernel else 0.0) + (1.0 if plan.head_bias else 0.0)
        K += np.einsum("ij,cd->icjd", base, eye)
    b = n
    if plan.per_unit or plan.shared:
        gd, pu, sh, rest = _feat_split(model.feat, plan.per_unit, plan.shared)
    if plan.per_unit:
        HH = H[:, :, None] * H[:, None, :]
        per = m * plan.row_size * 4
        b = int(max(1, min(n, limit // (2 * per))))
        keep_all = n * per <= limit
        starts = list(range(0, n, b))
        cache = {}

        def grads(i0):
            if i0 in cache:
                return cache[i0]
            g = _unit_grads(gd, pu, sh, rest, jnp.asarray(x[i0 : i0 + b]))
            if keep_all:
                cache[i0] = g
            return g

        for a, i0 in enumerate(starts):
            Gi = grads(i0)
            for j0 in starts[a:]:
                Gj = Gi if j0 == i0 else grads(j0)
                blk = np.asarray(_unit_block(Gi, Gj, HH), np.float64)
                K[i0 : i0 + b, :, j0 : j0 + b, :] += blk
                if j0 != i0:
                    K[j0 : j0 + b, :, i0 : i0 + b, :] += blk.transpose(2, 3, 0, 1)
    if plan.shared:
        cols = np.asarray(_shared_cols(gd, pu, sh, rest, jnp.asarray(x), H), np.float64)
        K += np.einsum("ics,jds->icjd", cols, cols)
    return K, b


# ------------------------------------------------------------- front door
def empirical_ntk(model, x, trainable_filter=nnx.Param, method: str = "auto", limit: int = JACOBIAN_LIMIT_BYTES) -> NTK:
    """The empirical NTK of ``model`` on images ``x`` ``(N, d)`` w.r.t. the parameters ``trainable_filter`` selects.

    Args:
      model: an nnx module mapping ``(N, d)`` to ``(N, C)`` (a lazylab ``Model`` for ``"structured"``).
      x: probe inputs, float32.
      trainable_filter: nnx filter of the parameters the kernel differentiates.
      method: one of ``METHODS`` (module docstring).
      limit: memory limit in bytes for Jacobian-sized intermediates (None: the full
        Jacobian is never refused, and the chunked methods use ``JACOBIAN_LIMIT_BYTES``).
    Returns: NTK. Raises: NTKTooLarge (``"jacobian"`` over the limit),
    ValueError (``"structured"`` on a model that does not qualify, or an unknown method).
    """
    if method not in METHODS:
        raise ValueError(f"unknown NTK method {method!r}; choose from {', '.join(METHODS)}")
    x = np.asarray(x, np.float32)
    jac_limit = limit  # None: the full Jacobian is never refused
    limit = JACOBIAN_LIMIT_BYTES if limit is None else int(limit)  # chunk budget of the other methods
    graphdef, params, rest = nnx.split(model, trainable_filter, ...)
    P = count_params(params)
    C = int(jax.eval_shape(lambda: _apply(graphdef, params, rest, jnp.asarray(x[:1]))).shape[-1])
    jac_bytes = len(x) * C * P * 4
    t0 = time.perf_counter()
    notes = ""
    plan = None
    if method in ("auto", "structured"):
        plan = structured_plan(model, trainable_filter, x)
        if isinstance(plan, str):
            if method == "structured":
                raise ValueError(f"structured NTK not applicable: {plan}")
            notes, plan = f"structured not applicable: {plan}", None
    if plan is not None:
        K, b = ntk_structured(model, plan, x, limit)
        used, work = "structured", 2 * b * int(model.head.kernel[...].shape[0]) * plan.row_size * 4
        notes = plan.notes + (f"; chunk {b}" if plan.per_unit else "")
    elif method == "jacobian" or (method == "auto" and jac_bytes <= limit):
        K = ntk_jacobian(graphdef, params, rest, x, jac_limit)
        used, work = "jacobian", jac_bytes
    else:
        K, b = ntk_rows(graphdef, params, rest, x, limit)
        used, work = "rows", 2 * b * C * P * 4
        notes = (notes + "; " if notes else "") + f"chunk {b}"
    return NTK(K, used, P, jac_bytes, int(work), time.perf_counter() - t0, notes)
