"""Small pieces shared by the built-in units."""

import math

import jax
import jax.numpy as jnp
import numpy as np

# Distances and similarities are differences of large products: float32 throughout
# (on GPUs jax would otherwise allow TF32 products, ~3 significant digits).
PRECISION = jax.lax.Precision.HIGHEST
# A median squared distance below this fraction of the data's mean squared norm is
# rounding noise (duplicated images), not a bandwidth.
MEDIAN_FLOOR = 1e-6


def inv_softplus(y: float) -> float:
    """Raw value whose softplus is ``y`` (> 0): ``log(expm1(y))``."""
    return math.log(math.expm1(y))


def sq_distances(x, W):
    """Squared Euclidean distances ``||x_i - w_j||^2`` as ``(n, m)``, clamped at 0.

    Expanded as ``||x||^2 + ||w||^2 - 2 x.w`` (one matmul) — SPEC section 2.
    Also returns the dot products ``x W^T`` so Yat needs only one matmul.
    """
    dot = jnp.matmul(x, W.T, precision=PRECISION)
    d2 = jnp.sum(x * x, axis=-1, keepdims=True) + jnp.sum(W * W, axis=-1) - 2.0 * dot
    return jnp.maximum(d2, 0.0), dot


def median_or_fallback(d2, x_ref, unit: str) -> float:
    """Median heuristic ``sigma0 = sqrt(median(d2))`` with a fallback for degenerate data.

    Args: ``d2`` squared distances (any shape), ``x_ref`` ``(n, d)`` the images they
      come from, ``unit`` the unit's name (for the warning).
    Returns: ``sqrt(median(d2))``; when that median is below ``MEDIAN_FLOOR`` x the mean
      squared norm of ``x_ref`` (e.g. every reference image the same), the data's own
      scale ``sqrt(mean ||x||^2)`` instead (1.0 if the images are all zero), announced
      in one line through ``lazylab.arms.note``.
    """
    from lazylab.arms import note

    med = float(np.median(np.asarray(d2, np.float64)))
    scale = float(np.mean(np.sum(np.square(np.asarray(x_ref, np.float64)), axis=-1)))
    if med >= MEDIAN_FLOOR * scale and med > 0:
        return math.sqrt(med)
    sigma = math.sqrt(scale) if scale > 0 else 1.0
    note(f"unit {unit!r}: median squared distance {med:.3g} is below {MEDIAN_FLOOR:g} x the images' mean squared "
         f"norm {scale:.3g} (duplicated images?); bandwidth falls back to sqrt(mean ||x||^2) = {sigma:.4g}")
    return sigma
