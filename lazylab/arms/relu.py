"""The ReLU unit: ``relu(x W^T + c)`` (SPEC section 2).

A dense layer with lecun-normal kernel (fan-in d) and zero bias: the classical
random-feature control (Rahimi & Recht 2008, "Weighted sums of random kitchen
sinks"; the arc-cosine kernel of Cho & Saul 2009).
"""

import jax
import jax.numpy as jnp
from flax import nnx

from lazylab.arms import Unit


class ReluBank(nnx.Module):
    """A bank of ``m`` ReLU units with weights ``W`` ``(m, d)`` and bias ``c`` ``(m,)`` = 0.

    Call: ``(n, d) -> (n, m)``.
    """

    def __init__(self, W, x_ref=None):
        self.W = nnx.Param(jnp.asarray(W, jnp.float32))
        self.c = nnx.Param(jnp.zeros((self.W[...].shape[0],), jnp.float32))

    def __call__(self, x):
        return jax.nn.relu(x @ self.W[...].T + self.c[...])


UNIT = Unit(
    name="relu",
    bank=ReluBank,
    inits=("random",),
    fan_in="d",
    prototypes_are_images=False,
    description="relu(x W^T + c), lecun-normal fan-in d",
    prefix_stable=True,
)
