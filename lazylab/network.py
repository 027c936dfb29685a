"""The network of SPEC section 4: a bank of units (``feat``) then a linear head.

Its own module so that the conformance suite (``lazylab.testing``), which steps it as lazylab
trains it, does not import ``lazylab.model``, which runs that suite before a plugin's first bank.
"""

from __future__ import annotations

import jax
from flax import nnx

from lazylab.arms.common import PRECISION

N_CLASSES = 10


def linear_head(width: int, head_key: jax.Array) -> nnx.Linear:
    """The readout ``nnx.Linear(width, 10)``: flax's default init drawn with ``head_key``, its product at float32
    ``PRECISION`` (``lazylab.arms.common``). Maps features ``(n, width)`` to logits ``(n, 10)``."""
    return nnx.Linear(width, N_CLASSES, precision=PRECISION, rngs=nnx.Rngs(params=head_key))


class Model(nnx.Module):
    """``feat`` (the bank, ``(n, d) -> (n, m)``) then ``head = linear_head(m, head_key)``.

    Args: feat: the bank module; width: its ``m``; head_key: the JAX key of the head's draw.
    """

    def __init__(self, feat: nnx.Module, width: int, head_key: jax.Array):
        self.feat = feat
        self.head = linear_head(width, head_key)

    def __call__(self, x):
        return self.head(self.feat(x))
