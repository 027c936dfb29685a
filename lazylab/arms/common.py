"""Small pieces shared by the built-in units."""

import math

import jax.numpy as jnp


def inv_softplus(y: float) -> float:
    """Raw value whose softplus is ``y`` (> 0): ``log(expm1(y))``."""
    return math.log(math.expm1(y))


def sq_distances(x, W):
    """Squared Euclidean distances ``||x_i - w_j||^2`` as ``(n, m)``, clamped at 0.

    Expanded as ``||x||^2 + ||w||^2 - 2 x.w`` (one matmul) — SPEC section 2.
    Also returns the dot products ``x W^T`` so Yat needs only one matmul.
    """
    dot = x @ W.T
    d2 = jnp.sum(x * x, axis=-1, keepdims=True) + jnp.sum(W * W, axis=-1) - 2.0 * dot
    return jnp.maximum(d2, 0.0), dot
