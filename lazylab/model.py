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

from lazylab import xla_cache
from lazylab.arms import Arm, ContractError, UnitFailure, check_bank, key_hint, plugin_error
from lazylab.errors import LazylabError
from lazylab.network import N_CLASSES, Model, apply_bank  # noqa: F401  (re-exported: lazylab.model.Model)
from lazylab.vetting import check_images, vet

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
    Raises: LazylabError for a width the init cannot provide; UnitFailure when the unit's own ``sample``
      raises (``plugin_call``).
    """
    bank_key, _ = split_key(seed)
    n, d = x_train.shape
    if arm.init == "data":
        W = np.asarray(x_train[seed_indices(width, seed, n)], np.float32)
        if len(np.unique(W, axis=0)) < width:  # cheap (m rows); the full count only when rows repeat
            distinct = len(np.unique(np.asarray(x_train), axis=0))
            if width > distinct:
                raise LazylabError(f"{arm.name}: width {width} needs {width} distinct training images for data "
                                   f"seeding, but the training set holds only {distinct} distinct images")
        return W
    if arm.unit.sample is not None:
        W = np.asarray(plugin_call(arm, f"{arm.name} m={width} seed {seed}", "drawing its prototypes",
                                   arm.unit.sample, bank_key, (width, d)), np.float32)
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


def build_model(arm: Arm, width: int, seed: int, x_train: np.ndarray, fan_in: str = "unit") -> Model:
    """Bank (initialised per the arm) and head (flax defaults), deterministic in ``seed``.

    Raises: LazylabError naming the unit and its plugin if the bank breaks the
    contract (``lazylab.arms.check_bank``); UnitFailure (a LazylabError) if its
    features on the reference images, or for a trained arm its gradients, are
    not finite (``check_finite``); LazylabError under ``LAZYLAB_STRICT_PLUGINS=1`` if a
    third-party unit fails the conformance suite (``lazylab.vetting.vet``, run once per
    unit and plugin identity before its first bank).
    """
    x_ref = np.asarray(x_train[:N_REF], np.float32)
    vet(arm, lambda: check_images(fallback=x_train))  # a third-party unit passes the suite first (once per source)
    xla_cache.note_unit(arm.plugin)  # its programs will be in jax's cache: later estimates price them warm
    W = init_prototypes(arm, width, seed, x_train, fan_in)
    bank_key, head_key = split_key(seed)
    feat = plugin_call(arm, f"{arm.name} m={width} seed {seed}", "building its bank", arm.unit.make_bank, W, x_ref,
                       key=jax.random.fold_in(bank_key, 1))
    try:
        check_bank(arm.unit, feat, width, W.shape[1], W)
    except ContractError as exc:
        raise LazylabError(f"unit {arm.unit.name!r} ({arm.plugin}) breaks the lazylab.arms contract: {exc}") from None
    check_finite(arm, feat, x_ref, f"{arm.name} m={width} seed {seed}")
    return Model(feat, width, head_key)


def plugin_call(arm: Arm, cell: str, doing: str, fn, *args, **kwargs):
    """``fn(*args, **kwargs)``, a unit's own code (its ``sample`` or ``bank``), with whatever it raises —
    ``SystemExit`` and a ``KeyboardInterrupt`` no Ctrl-C sent included (``raised_by_plugin``) — turned
    into the unit's failure. Raises: UnitFailure naming the unit, its plugin, ``cell`` and the error in
    one line (``LAZYLAB_DEBUG=1`` also prints the plugin's traceback)."""
    import traceback

    from lazylab.arms.loading import raised_by_plugin, show_traceback

    try:
        return fn(*args, **kwargs)
    except BaseException as exc:
        if not raised_by_plugin(exc):
            raise
        show_traceback(traceback.format_exc())
        raise UnitFailure(arm, cell, f"an error {doing} ({plugin_error(exc)})" + key_hint(arm.unit, exc)) from None


N_GRAD = 16  # images for the run-time gradient check (eager: no compile per bank shape)


def check_finite(arm: Arm, feat: nnx.Module, x_ref: np.ndarray, cell: str) -> None:
    """Catch a unit's non-finite numbers where they appear: when its bank is built.

    Checks the features of ``x_ref`` ``(n, d)`` (every command's banks pass through
    here, so a NaN unit is named before anything trains), for the data init those of
    the prototype images themselves (the first ``N_REF``), and, for a trained arm,
    the gradient of ``mean(features**2)`` on the first ``N_GRAD`` images with respect
    to every ``nnx.Param`` of the bank.
    Raises: UnitFailure naming the unit, its plugin and ``cell``.
    """
    F = np.asarray(features(feat, x_ref))
    if not np.isfinite(F).all():
        i, j = np.argwhere(~np.isfinite(F))[0]
        raise UnitFailure(arm, cell, f"non-finite features ({F[i, j]} for training image {i}, unit {j})")
    if arm.init == "data":  # each prototype is a training image: x == w, where ||x - w||^2 = 0
        W = np.asarray(feat.W[...][:N_REF])
        F = np.asarray(features(feat, W))
        if not np.isfinite(F).all():
            i, j = np.argwhere(~np.isfinite(F))[0]
            raise UnitFailure(arm, cell, f"non-finite features ({F[i, j]} for the image of prototype {i}, unit {j})")
    if arm.trained:
        graphdef, params, rest = nnx.split(feat, nnx.Param, ...)
        x = jnp.asarray(x_ref[:N_GRAD])
        grads = jax.grad(lambda p: jnp.mean(apply_bank(nnx.merge(graphdef, p, rest), x) ** 2))(params)
        for path, g in jax.tree_util.tree_leaves_with_path(grads):
            if not np.isfinite(np.asarray(g)).all():
                raise UnitFailure(arm, cell, f"non-finite gradients with respect to {jax.tree_util.keystr(path)}")


def bank_scalars(feat: nnx.Module) -> dict[str, float]:
    """The bank's learned layer scalars (empty if the unit has none)."""
    return feat.scalars() if hasattr(feat, "scalars") else {}


@partial(jax.jit, static_argnums=0)
def _apply_bank(graphdef, state, xb):
    # One jitted function for every bank: jax compiles once per (graphdef, shapes), not per call.
    return apply_bank(nnx.merge(graphdef, state), xb)


def features(feat: nnx.Module, x: np.ndarray, chunk: int = 4096) -> jax.Array:
    """Bank features ``(n, m)`` float32 for images ``x`` ``(n, d)``, computed in chunks of ``chunk`` images."""
    graphdef, state = nnx.split(feat)
    parts = [_apply_bank(graphdef, state, jnp.asarray(x[i : i + chunk])) for i in range(0, len(x), chunk)]
    return jnp.concatenate(parts, axis=0)
