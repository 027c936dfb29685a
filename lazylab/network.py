"""The network of SPEC section 4: a bank of units (``feat``) then a linear head.

Its own module so that the conformance suite (``lazylab.testing``), which steps it as lazylab
trains it, does not import ``lazylab.model``, which runs that suite before a plugin's first bank.
"""

from __future__ import annotations

import jax
from flax import nnx

N_CLASSES = 10


class Model(nnx.Module):
    """``feat`` (the bank, ``(n, d) -> (n, m)``) then ``head = nnx.Linear(m, 10)`` (flax's default init).

    Args: feat: the bank module; width: its ``m``; head_key: the JAX key of the head's draw.
    """

    def __init__(self, feat: nnx.Module, width: int, head_key: jax.Array):
        self.feat = feat
        self.head = nnx.Linear(width, N_CLASSES, rngs=nnx.Rngs(params=head_key))

    def __call__(self, x):
        return self.head(self.feat(x))
