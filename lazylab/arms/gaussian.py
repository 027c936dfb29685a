"""The Gaussian (RBF) unit: ``exp(-||x - w||^2 / (2 sigma^2))`` (SPEC section 2).

Centres are training images (Nystrom; Williams & Seeger 2001). ``sigma`` is
one scalar behind a softplus, initialised by the median heuristic
(Schoelkopf & Smola 2002; Garreau et al. 2017).
"""

import jax
import jax.numpy as jnp
from flax import nnx

from lazylab.arms import Unit
from lazylab.arms.common import inv_softplus, median_or_fallback, sq_distances


def median_bandwidth(x_ref, W) -> float:
    """Median-heuristic bandwidth ``sigma0 = sqrt(median_ij ||x_i - w_j||^2)``.

    Args:
      x_ref: ``(n, d)`` reference images (SPEC: the first 512 training images).
      W: ``(m, d)`` centres.
    Returns: ``sigma0`` in pixel units (inputs scaled to [0, 1]); for degenerate data
      (median below a floor, e.g. duplicated images) the fallback of
      ``lazylab.arms.common.median_or_fallback``, with one warning line.
    """
    d2, _ = sq_distances(jnp.asarray(x_ref, jnp.float32), jnp.asarray(W, jnp.float32))
    return median_or_fallback(d2, x_ref, "gaussian")


class GaussianBank(nnx.Module):
    """A bank of ``m`` Gaussian units with centres ``W`` ``(m, d)``.

    Args:
      W: centres, float32 ``(m, d)``.
      x_ref: ``(n, d)`` images for the median heuristic (required).
    Call: ``(n, d) -> (n, m)`` in (0, 1].
    """

    def __init__(self, W, x_ref=None):
        if x_ref is None:
            raise ValueError("the Gaussian unit needs x_ref for its median-heuristic bandwidth")
        self.W = nnx.Param(jnp.asarray(W, jnp.float32))
        sigma0 = median_bandwidth(x_ref, self.W[...])
        self.sigma_raw = nnx.Param(jnp.asarray(inv_softplus(sigma0), jnp.float32))

    def __call__(self, x):
        d2, _ = sq_distances(x, self.W[...])
        sigma = jax.nn.softplus(self.sigma_raw[...])
        return jnp.exp(-d2 / (2.0 * sigma**2))

    def scalars(self) -> dict[str, float]:
        return {"sigma": float(jax.nn.softplus(self.sigma_raw[...]))}


UNIT = Unit(
    name="gaussian",
    bank=GaussianBank,
    inits=("data",),
    prototypes_are_images=True,
    description="exp(-||x - w||^2 / (2 sigma^2)), median-heuristic sigma",
)
