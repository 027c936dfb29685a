"""The model of SPEC section 4: a bank of units (``feat``) then a linear head.

Initialisations (SPEC section 3):
  * random: ``flax.nnx.initializers.lecun_normal()(key, (m, d))``. flax takes
    fan-in on axis -2, which is ``m`` here, so rows have norm about
    ``sqrt(d / m)`` — the reference protocol's behaviour. Units that declare
    ``fan_in="d"`` (ReLU, as a dense layer) or runs with ``fan_in="d"`` use
    fan-in ``d`` instead (row norms about 1).
  * data (Nystrom): ``m`` distinct training images drawn uniformly without
    replacement.
  * a unit with its own ``sample`` (contract v2) draws its random-init
    prototypes itself from the same bank key (``fan_in`` does not apply).

A unit with ``takes_key`` gets ``key = fold_in(bank_key, 1)`` for its bank's
other randomness: the prototype and head draws of every unit stay what they
were, so existing memo entries keep their meaning.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from lazylab.arms import Arm, ContractError, check_bank
from lazylab.errors import LazylabError

N_CLASSES = 10
N_REF = 512  # images used for data-dependent scalars (Gaussian median heuristic)


def split_key(seed: int) -> tuple[jax.Array, jax.Array]:
    """The bank key and the head key derived from one integer seed."""
    bank_key, head_key = jax.random.split(jax.random.key(seed))
    return bank_key, head_key


def init_prototypes(arm: Arm, width: int, seed: int, x_train: np.ndarray, fan_in: str = "unit") -> np.ndarray:
    """Initial prototypes ``W`` of shape ``(width, d)``, float32.

    Args:
      arm: the arm (its unit and init decide the draw).
      width: ``m >= 1``; for the data init at most ``len(x_train)``.
      seed: integer seed.
      x_train: ``(n, d)`` training images in [0, 1].
      fan_in: ``"unit"`` or ``"d"`` (see module docstring).
    Raises: LazylabError for a width the init cannot provide.
    """
    bank_key, _ = split_key(seed)
    n, d = x_train.shape
    if arm.init == "data":
        return np.asarray(x_train[seed_indices(width, seed, n)], np.float32)
    if arm.unit.sample is not None:
        W = np.asarray(arm.unit.sample(bank_key, (width, d)), np.float32)
        if W.shape != (width, d):
            raise LazylabError(f"unit {arm.unit.name!r} ({arm.plugin}) breaks the lazylab.arms contract: "
                               f"sample returned shape {W.shape}, expected {(width, d)}")
        return W
    axis_d = fan_in == "d" or arm.unit.fan_in == "d"
    init = nnx.initializers.lecun_normal(in_axis=-1, out_axis=-2) if axis_d else nnx.initializers.lecun_normal()
    return np.asarray(init(bank_key, (width, d), jnp.float32))


def seed_indices(width: int, seed: int, n: int) -> np.ndarray:
    """The ``(width,)`` indices of the training images a data-seeded bank takes as prototypes.

    Drawn uniformly without replacement from the first ``n`` images with the bank key of ``seed``.
    Raises: LazylabError if ``width > n``.
    """
    if width > n:
        raise LazylabError(f"width {width} exceeds the {n} training images available for data seeding")
    return np.asarray(jax.random.choice(split_key(seed)[0], n, (width,), replace=False))


class Model(nnx.Module):
    """``feat`` (the bank, ``(n, d) -> (n, m)``) then ``head = nnx.Linear(m, 10)``."""

    def __init__(self, feat: nnx.Module, width: int, head_key: jax.Array):
        self.feat = feat
        self.head = nnx.Linear(width, N_CLASSES, rngs=nnx.Rngs(params=head_key))

    def __call__(self, x):
        return self.head(self.feat(x))


def build_model(arm: Arm, width: int, seed: int, x_train: np.ndarray, fan_in: str = "unit") -> Model:
    """Bank (initialised per the arm) and head (flax defaults), deterministic in ``seed``.

    Raises: LazylabError naming the unit and its plugin if the bank breaks the
    contract (``lazylab.arms.check_bank``).
    """
    W = init_prototypes(arm, width, seed, x_train, fan_in)
    bank_key, head_key = split_key(seed)
    feat = arm.unit.make_bank(W, np.asarray(x_train[:N_REF], np.float32), key=jax.random.fold_in(bank_key, 1))
    try:
        check_bank(arm.unit, feat, width, W.shape[1], W)
    except ContractError as exc:
        raise LazylabError(f"unit {arm.unit.name!r} ({arm.plugin}) breaks the lazylab.arms contract: {exc}") from None
    return Model(feat, width, head_key)


def bank_scalars(feat: nnx.Module) -> dict[str, float]:
    """The bank's learned layer scalars (empty if the unit has none)."""
    return feat.scalars() if hasattr(feat, "scalars") else {}


@partial(jax.jit, static_argnums=0)
def _apply_bank(graphdef, state, xb):
    # One jitted function for every bank: jax compiles once per (graphdef, shapes), not per call.
    return nnx.merge(graphdef, state)(xb)


def features(feat: nnx.Module, x: np.ndarray, chunk: int = 4096) -> jax.Array:
    """Bank features ``(n, m)`` float32 for images ``x`` ``(n, d)``, computed in chunks of ``chunk`` images."""
    graphdef, state = nnx.split(feat)
    parts = [_apply_bank(graphdef, state, jnp.asarray(x[i : i + chunk])) for i in range(0, len(x), chunk)]
    return jnp.concatenate(parts, axis=0)
