"""A conformance suite for units, in the spirit of scikit-learn's ``check_estimator``.

``check_unit(unit)`` runs every check of the ``lazylab.arms`` contract that
needs arrays, on real Fashion-MNIST images; ``lazylab arms --check`` runs it on
every installed unit, and a plugin's own tests call it::

    from lazylab.testing import check_unit
    from lazylab_cauchy import UNIT

    def test_conformance():
        check_unit(UNIT)

The checks (each failure is one line of the ``ContractError`` raised):

* static contract (``lazylab.arms``'s load-time checks);
* for each init the unit declares: the bank holds ``W`` as given and maps
  float32 ``(n, d)`` to float32 ``(n, m)`` (``check_bank``), with finite
  features — for the data init on images that include each prototype itself
  (``x == w``, where ``||x - w||^2 = 0``);
* determinism: two banks built from the same prototypes and key give the same
  features bit for bit;
* prefix stability, where the unit declares ``prefix_stable``: the bank of
  ``W[:k]`` gives the first ``k`` columns;
* finite gradients of the features with respect to every ``nnx.Param``;
* a frozen step (the head's gradient step, as the ``-frozen`` arms train)
  leaves the whole bank untouched, and a trained step leaves its non-Param
  state untouched;
* ``scalars()``, if defined, returns ``{name: finite float}``.
"""

from __future__ import annotations

import numpy as np

from lazylab.arms import ContractError, Unit, _check_contract, check_bank

M = 8  # units per test bank (prefix checks use the first M // 2)
N = 16  # images the features are evaluated on
N_REF = 512  # reference images, as lazylab.model passes them


def real_images(n: int = N_REF, data_dir=None) -> np.ndarray:
    """The first ``n`` Fashion-MNIST test images, float32 ``(n, 784)`` in [0, 1].

    Read from the IDX file alone (no parse of the training set). Raises DataError
    (one line) when the data cannot be found (``lazylab.data.locate``).
    """
    from lazylab import data

    directory = data.locate(data_dir)
    raw = data.read_idx(directory / data.FILES["test_images"], data.IMAGES_MAGIC)[:n]
    return raw.reshape(len(raw), -1).astype(np.float32) / 255.0


def _prototypes(unit: Unit, init: str, x: np.ndarray, key, m: int) -> np.ndarray:
    """``(m, d)`` float32 prototypes drawn as lazylab.model draws them for ``init``."""
    import jax.numpy as jnp
    from flax import nnx

    d = x.shape[1]
    if init == "data":
        return np.asarray(x[:m], np.float32)  # the first images: x[:m] holds each prototype itself
    if unit.sample is not None:
        W = np.asarray(unit.sample(key, (m, d)), np.float32)
        if W.shape != (m, d):
            raise ContractError(f"sample returned shape {W.shape}, expected {(m, d)}")
        return W
    init_fn = nnx.initializers.lecun_normal(in_axis=-1, out_axis=-2) if unit.fan_in == "d" else nnx.initializers.lecun_normal()
    return np.asarray(init_fn(key, (m, d), jnp.float32))


def _leaves(state) -> list[np.ndarray]:
    import jax

    return [np.array(a) for a in jax.tree.leaves(state)]


def _same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return len(a) == len(b) and all(x.shape == y.shape and np.array_equal(x, y, equal_nan=True) for x, y in zip(a, b))


def _check_init(unit: Unit, init: str, x: np.ndarray, seed: int) -> list[str]:
    """Every array check for one init; returns the failures (one line each)."""
    import jax
    import jax.numpy as jnp

    fails: list[str] = []
    where = f"{init} init"
    k_w, k_b, k_h = jax.random.split(jax.random.key(seed), 3)
    W = _prototypes(unit, init, x, k_w, M)
    x_ref, xs = x[:N_REF], x[:N]
    build = lambda W_: unit.make_bank(W_, x_ref, key=k_b)
    try:
        feat = build(W)
    except Exception as exc:
        return [f"{where}: bank construction failed: {type(exc).__name__}: {exc}".splitlines()[0]]
    try:
        check_bank(unit, feat, M, x.shape[1], W)
    except ContractError as exc:
        return [f"{where}: {exc}"]
    F = feat(jnp.asarray(xs))
    if F.dtype != jnp.float32 or F.shape != (N, M):
        fails.append(f"{where}: features are {F.dtype} {tuple(F.shape)}, expected float32 {(N, M)}")
    F = np.asarray(F)
    if not np.isfinite(F).all():
        bad = np.argwhere(~np.isfinite(F))[0]
        same = " (an image equal to its prototype)" if init == "data" and bad[0] == bad[1] else ""
        fails.append(f"{where}: non-finite feature {F[tuple(bad)]} at image {bad[0]}, unit {bad[1]}{same}")
    if not np.array_equal(np.asarray(build(W)(jnp.asarray(xs))), F, equal_nan=True):
        fails.append(f"{where}: not deterministic: the same prototypes and key gave other features")
    if unit.prefix_stable:
        k = M // 2
        prefix = np.asarray(build(W[:k])(jnp.asarray(xs)))
        if not np.allclose(prefix, F[:, :k], rtol=1e-5, atol=1e-6, equal_nan=True):
            fails.append(f"{where}: declares prefix_stable but the bank of W[:{k}] differs from the first {k} columns")

    try:
        fails += _check_steps(unit, feat, build, W, xs, k_h, where)
    except Exception as exc:  # e.g. a bank that mutates its state while traced
        fails.append(f"{where}: differentiating the bank failed: {type(exc).__name__}: {exc}".splitlines()[0])
    if hasattr(feat, "scalars"):
        try:
            s = feat.scalars()
            ok = isinstance(s, dict) and all(isinstance(k, str) and np.isfinite(float(v)) for k, v in s.items())
        except Exception as exc:
            ok, s = False, f"{type(exc).__name__}: {exc}".splitlines()[0]
        if not ok:
            fails.append(f"{where}: scalars() must return {{name: finite float}}, got {s!r}")
    return fails


def _check_steps(unit: Unit, feat, build, W, xs, k_h, where: str) -> list[str]:
    """Finite gradients w.r.t. every nnx.Param; a frozen step leaves the bank alone, a trained one its non-Params."""
    import jax
    import jax.numpy as jnp
    from flax import nnx

    from lazylab.model import Model

    fails: list[str] = []
    graphdef, params, rest = nnx.split(feat, nnx.Param, ...)
    loss = lambda p: jnp.mean(nnx.merge(graphdef, p, rest)(jnp.asarray(xs)) ** 2)
    grads = jax.grad(loss)(params)
    for path, g in jax.tree_util.tree_leaves_with_path(grads):
        if not np.isfinite(np.asarray(g)).all():
            fails.append(f"{where}: non-finite gradient with respect to {jax.tree_util.keystr(path)}")

    # A frozen step trains the head only; a trained step trains every nnx.Param.
    model = Model(build(W), M, k_h)
    labels = jnp.arange(len(xs)) % 10

    def step(filt):
        gd, train, other = nnx.split(model, filt, ...)
        before = _leaves(nnx.state(model.feat, nnx.Not(nnx.Param)) if filt is nnx.Param else nnx.state(model.feat))

        def ce(t):
            logits = nnx.merge(gd, t, other)(jnp.asarray(xs))
            return -jnp.mean(jax.nn.log_softmax(logits)[jnp.arange(len(xs)), labels])

        g = jax.grad(ce)(train)
        new = jax.tree.map(lambda a, b: a - 0.01 * b, train, g)
        stepped = nnx.merge(gd, new, other)
        after = _leaves(nnx.state(stepped.feat, nnx.Not(nnx.Param)) if filt is nnx.Param else nnx.state(stepped.feat))
        return before, after

    before, after = step(nnx.PathContains("head"))
    if not _same(before, after):
        fails.append(f"{where}: a frozen step (head only) changed the bank")
    before, after = step(nnx.Param)
    if not _same(before, after):
        fails.append(f"{where}: a trained step changed the bank's non-Param state")
    return fails


def check_unit(unit: Unit, images: np.ndarray | None = None, seed: int = 0) -> None:
    """Run the conformance suite (module docstring) on ``unit``.

    Args:
      unit: the ``lazylab.arms.Unit`` to check.
      images: float32 ``(n, 784)`` real images in [0, 1], ``n >= 16`` (default:
        ``real_images()``, the first 512 Fashion-MNIST test images).
      seed: seed of the prototype, key and head draws.
    Raises: ContractError whose message lists every failed check, ``"; "``-separated;
      DataError if the default images cannot be found.
    Cost: a few tiny banks (8 units, 16 images) and their gradients; seconds.
    """
    try:
        _check_contract(unit, getattr(unit, "name", "?"))
    except ContractError as exc:
        raise ContractError(str(exc)) from None
    x = real_images() if images is None else np.asarray(images, np.float32)
    if x.ndim != 2 or len(x) < N:
        raise ValueError(f"check_unit needs at least {N} images (n, d), got shape {x.shape}")
    fails = []
    for init in unit.inits:
        try:
            fails += _check_init(unit, init, x, seed)
        except ContractError as exc:
            fails.append(f"{init} init: {exc}")
        except Exception as exc:  # whatever a broken unit raises is a failed check, not a crash
            fails.append(f"{init} init: {type(exc).__name__}: {exc}".splitlines()[0])
    if fails:
        raise ContractError("; ".join(fails))
