"""The network of SPEC section 4: a bank of units (``feat``) then a linear head.

Its own module so that the conformance suite (``lazylab.testing``), which steps it as lazylab
trains it, does not import ``lazylab.model``, which runs that suite before a plugin's first bank.
"""

from __future__ import annotations

import jax
from flax import nnx

# float32 products (jax.lax.Precision.HIGHEST): on Ampere/Hopper GPUs jax's default precision lets float32
# products run in TF32 (about three significant digits), so a GPU run would silently differ from the CPU's. On
# CPU it computes what the default computes, bit for bit. tests/test_precision.py walks the programs.
from lazylab.arms.common import PRECISION

N_CLASSES = 10


def apply_bank(feat: nnx.Module, x: jax.Array) -> jax.Array:
    """A bank's features ``feat(x)``: images ``(n, d)`` to ``(n, m)``, every product at float32 ``PRECISION``.

    The precision is set around the call (``jax.default_matmul_precision``, read when jax traces it), so it
    holds for every unit, a third-party one and a built-in one whose source cannot change without changing
    the identity its memo keys hold (``lazylab.arms.source_hash``; ``relu`` names none itself), and for the
    gradients taken through it. Every place lazylab evaluates a bank goes through here.
    """
    with jax.default_matmul_precision(PRECISION.name.lower()):
        return feat(x)


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
        return self.head(apply_bank(self.feat, x))
