"""Random Fourier features as a lazylab unit: ``phi_w(x) = sqrt(2) cos(w.x + b)``.

Rahimi & Recht, "Random features for large-scale kernel machines" (NIPS 2007),
eq. 2 and Algorithm 1: with ``w ~ N(0, sigma^-2 I_d)`` and ``b ~ U(0, 2 pi)``,
``E_w,b[phi_w(x) phi_w(y)] = exp(-||x - y||^2 / (2 sigma^2))``, the Gaussian
(RBF) kernel. This is the construction of scikit-learn's ``RBFSampler``
(``random_weights_ = sqrt(2 gamma) N(0, 1)``, ``random_offset_ ~ U(0, 2 pi)``,
``gamma = 1 / (2 sigma^2)``).

Choices:
  * bandwidth ``sigma``: the median heuristic over distinct pairs of the
    reference images, ``sigma = median_{i<j} ||x_i - x_j||`` (Schoelkopf &
    Smola 2002; Garreau et al. 2017), computed once when the bank is built;
  * scale: ``sqrt(2)`` per feature, not RBFSampler's ``sqrt(2 / m)``: lazylab's
    linear head is initialised with fan-in ``m`` and learns the ``1 / sqrt(m)``
    itself, and ``sqrt(2)`` keeps features comparable across widths;
  * draws: the prototypes are ``W = z ~ N(0, I)`` (exactly Gaussian, not
    lecun's truncated normal), drawn from lazylab's bank key through
    ``Unit.sample``; the bank holds them as given and applies ``1 / sigma`` in
    its forward pass, ``w = z / sigma`` (so the trained arm trains ``z``: a
    rate ``lr`` on ``z`` is ``lr / sigma`` on ``w``). ``sigma`` is a fixed
    ``nnx.Variable``, not a parameter: it never trains.
  * phases: ``b_j ~ U(0, 2 pi)`` from ``fold_in(key, j)``, ``key`` being the
    independent bank key lazylab passes (``Unit.takes_key``). Unit ``j``
    depends only on ``(z_j, key, j)``: the first ``k`` units of a bank are the
    bank built from ``W[:k]``. Everything is deterministic in the run's seed.

Arms: ``rff-frozen`` (random features, head only) and ``rff-trained`` (``W``
and ``b`` train too). Only the random init: an RFF prototype is a frequency,
not an image.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from lazylab.arms import CONTRACT_VERSION, Unit
from lazylab.arms.common import median_or_fallback

if CONTRACT_VERSION < 3:  # pragma: no cover - reported by `lazylab arms` as an import error
    raise ImportError(f"lazylab-rff needs lazylab.arms contract version 3, this lazylab has {CONTRACT_VERSION}")

__version__ = "0.1.0"


def median_pairwise_distance(x_ref) -> float:
    """Median heuristic: ``median_{i<j} ||x_i - x_j||`` over the rows of ``x_ref``.

    Args: ``x_ref``: ``(n, d)`` images, ``n >= 2`` (lazylab passes 512 in [0, 1]).
    Returns: the distance in pixel units (float64 arithmetic). For degenerate data
      (the median squared distance below 1e-6 x the images' mean squared norm, e.g.
      duplicated images) lazylab's documented fallback ``sqrt(mean ||x||^2)``, with
      one warning line (``lazylab.arms.common.median_or_fallback``).
    Raises: ValueError for fewer than two rows.
    """
    x = np.asarray(x_ref, np.float64)
    if x.ndim != 2 or len(x) < 2:
        raise ValueError(f"the median heuristic needs at least two reference rows, got shape {x.shape}")
    sq = np.sum(x * x, axis=1)
    d2 = np.maximum(sq[:, None] + sq[None, :] - 2.0 * (x @ x.T), 0.0)
    iu = np.triu_indices(len(x), k=1)
    return median_or_fallback(d2[iu], x, "rff")


def standard_normal(key, shape) -> jax.Array:
    """``Unit.sample``: ``z ~ N(0, I)`` of ``shape`` ``(m, d)``, float32."""
    return jax.random.normal(key, shape, jnp.float32)


def phases(key, m: int) -> jax.Array:
    """``b_j ~ U(0, 2 pi)`` for ``j < m``, float32 ``(m,)``, unit ``j`` from ``fold_in(key, j)`` (prefix-stable)."""
    draw = lambda j: jax.random.uniform(jax.random.fold_in(key, j), (), jnp.float32, 0.0, 2.0 * math.pi)
    return jax.vmap(draw)(jnp.arange(m))


class RFFBank(nnx.Module):
    """A bank of ``m`` random Fourier features ``sqrt(2) cos(x W^T / sigma + b)``.

    Args:
      W: ``(m, d)`` prototypes ``z``, standard normal at initialisation
        (``standard_normal``); held as the ``nnx.Param`` ``W`` unchanged.
      x_ref: ``(n, d)`` reference images for the median-heuristic ``sigma``.
      key: JAX key for the phases ``b`` ``(m,)`` (``phases``; required).
    Call: float32 ``(n, d) -> (n, m)`` in ``[-sqrt(2), sqrt(2)]``.
    Raises: ValueError without ``x_ref`` or ``key``.
    """

    def __init__(self, W, x_ref=None, *, key=None):
        if x_ref is None:
            raise ValueError("the rff unit needs x_ref for its median-heuristic bandwidth")
        if key is None:
            raise ValueError("the rff unit needs key= for its phases; build banks through "
                             "lazylab.model.build_model or Unit.make_bank")
        self.W = nnx.Param(jnp.asarray(W, jnp.float32))
        self.sigma = nnx.Variable(jnp.asarray(median_pairwise_distance(x_ref), jnp.float32))
        self.b = nnx.Param(phases(key, self.W[...].shape[0]))

    def __call__(self, x):
        # float32 products (not TF32 on GPUs): the phase x.w / sigma spans many periods.
        dot = jnp.matmul(x, self.W[...].T, precision=jax.lax.Precision.HIGHEST)
        return math.sqrt(2.0) * jnp.cos(dot / self.sigma[...] + self.b[...])

    def scalars(self) -> dict[str, float]:
        """``sigma``: the effective bandwidth ``sigma * 1 / rms(W)`` (pixel units); at
        initialisation about the median heuristic, and it moves if the trained arm rescales ``W``."""
        return {"sigma": float(self.sigma[...] / jnp.sqrt(jnp.mean(self.W[...] ** 2)))}


UNIT = Unit(
    name="rff",
    bank=RFFBank,
    inits=("random",),
    fan_in="d",
    # Frozen: SPEC's grid (3e-2 .. 1) peaks at its lower edge for these
    # features, so the plugin brackets lower (docs/plugins.md has the numbers).
    # Trained: SPEC's grid (3e-3, 1e-2, 3e-2) on z brackets the optimum (2
    # epochs on 20k images, m = 256: 81.6, 83.5, 80.9 %; 1e-1: 74.9 %).
    lr_grids={"frozen": (1e-3, 3e-3, 1e-2, 3e-2)},
    prototypes_are_images=False,
    description="sqrt(2) cos(w.x + b), w ~ N(0, I/sigma^2) median heuristic, b ~ U(0, 2pi)",
    sample=standard_normal,
    takes_key=True,
    contract=3,
    prefix_stable=True,  # unit j reads only (z_j, key, j): see the module docstring
)
