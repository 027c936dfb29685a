"""The Yat unit: ``phi_w(x) = (w.x + b)^2 / (||x - w||^2 + eps)`` (SPEC section 2).

``b`` and ``eps`` are two scalars shared by the layer, each stored raw behind
a softplus and initialised to 0.5. Source: the Yat product of Neural-Matter
Networks, with a bias inside the square, as fixed by SPEC section 2.
"""

import jax
import jax.numpy as jnp
from flax import nnx

from lazylab.arms import Unit
from lazylab.arms.common import inv_softplus, sq_distances


class YatBank(nnx.Module):
    """A bank of ``m`` Yat units.

    Args:
      W: prototypes, float32 ``(m, d)``.
      x_ref: unused (the signature is the unit contract's).

    Call: ``(n, d) -> (n, m)`` non-negative features.
    """

    def __init__(self, W, x_ref=None):
        self.W = nnx.Param(jnp.asarray(W, jnp.float32))
        self.b_raw = nnx.Param(jnp.asarray(inv_softplus(0.5), jnp.float32))
        self.eps_raw = nnx.Param(jnp.asarray(inv_softplus(0.5), jnp.float32))

    def __call__(self, x):
        d2, dot = sq_distances(x, self.W[...])
        b = jax.nn.softplus(self.b_raw[...])
        eps = jax.nn.softplus(self.eps_raw[...])
        return (dot + b) ** 2 / (d2 + eps)

    def scalars(self) -> dict[str, float]:
        return {
            "b": float(jax.nn.softplus(self.b_raw[...])),
            "eps": float(jax.nn.softplus(self.eps_raw[...])),
        }


UNIT = Unit(
    name="yat",
    bank=YatBank,
    inits=("random", "data"),
    fan_in="m",
    prototypes_are_images=True,
    description="(w.x + b)^2 / (||x - w||^2 + eps)",
    prefix_stable=True,  # b and eps are shared scalars, unit j reads only W[j]
)
