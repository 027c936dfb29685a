"""A conformance suite for units, in the spirit of scikit-learn's ``check_estimator``.

``check_unit(unit)`` runs every check of the ``lazylab.arms`` contract that
needs arrays, on real Fashion-MNIST images, and raises one ``ContractError``
listing the failures; ``lazylab arms --check`` runs it on every installed
unit, and lazylab runs it once per unit and source before a plugin's first run
(``lazylab.vetting``). A plugin's own tests get one pytest item per check, as
scikit-learn's ``parametrize_with_checks`` gives one per estimator check::

    from lazylab.testing import parametrize_with_checks
    from lazylab_cauchy import UNIT

    @parametrize_with_checks([UNIT])
    def test_lazylab_contract(unit, check):
        check(unit)

The checks, by id (``unit_checks``; each failure is one line):

* ``contract``: the static contract (``lazylab.arms``'s load-time checks);
* for each init the unit declares, ``<init>-<check>``:
  ``bank``: the bank holds ``W`` as given and maps float32 ``(n, d)`` to
  float32 ``(n, m)`` (``check_bank``);
  ``finite``: its features on the 512 reference images are finite and below
  ``MAX_FEATURE`` in magnitude — for the data init on images that include each
  prototype itself (``x == w``, where ``||x - w||^2 = 0``);
  ``deterministic``: two banks built from the same prototypes and key give the
  same features bit for bit (the fix: draw randomness from ``key``, with
  ``takes_key=True``);
  ``prefix_stable`` (only where the unit declares it): the bank of ``W[:k]``
  gives the first ``k`` columns;
  ``gradients``: finite gradients of the features with respect to every
  ``nnx.Param``;
  ``steps``: a frozen step (the head's gradient step, as the ``-frozen`` arms
  train) leaves the whole bank untouched, and a trained step its non-Param
  state;
  ``scalars``: ``scalars()``, if defined, returns ``{name: finite float}``.
"""

from __future__ import annotations

import functools
from typing import Callable

import numpy as np

from lazylab.arms import ContractError, Unit, _check_contract, check_bank

M = 8  # units per test bank (prefix checks use the first M // 2)
N = 16  # images the gradients and steps are evaluated on (they compile per shape)
N_REF = 512  # reference images, as lazylab.model passes them: features are checked on all of them
# Largest feature magnitude accepted: squares summed over 60,000 images and 8,192 units (Gram matrices,
# covariances, 1e24 x 4.9e8 = 4.9e32) stay finite in float32 (3.4e38). The data-seeded Yat unit peaks
# near 4e5 at its own image.
MAX_FEATURE = 1e12


@functools.lru_cache(maxsize=4)
def real_images(n: int = N_REF, data_dir=None) -> np.ndarray:
    """The first ``n`` Fashion-MNIST test images, float32 ``(n, 784)`` in [0, 1].

    Read from the IDX file alone (no parse of the training set), once per process
    (read-only: do not modify the array). Raises DataError (one line) when the data
    cannot be found (``lazylab.data.locate``).
    """
    from lazylab import data

    directory = data.locate(data_dir)
    raw = data.read_idx(directory / data.FILES["test_images"], data.IMAGES_MAGIC)[:n]
    x = raw.reshape(len(raw), -1).astype(np.float32) / 255.0
    x.flags.writeable = False
    return x


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


class _Case:
    """One unit and init on given images: the prototypes, the bank and its features, built once and shared
    by the checks (a failure to build them is every check's failure, one line, raised as ContractError)."""

    def __init__(self, unit: Unit, init: str, x: np.ndarray, seed: int):
        import jax

        self.unit, self.init, self.x, self.where = unit, init, x, f"{init} init"
        self.k_w, self.k_b, self.k_h = jax.random.split(jax.random.key(seed), 3)

    def fail(self, what: str) -> ContractError:
        return ContractError(f"{self.where}: {what}")

    def build(self, W):
        return self.unit.make_bank(W, self.x[:N_REF], key=self.k_b)

    @functools.cached_property
    def W(self) -> np.ndarray:
        try:
            return _prototypes(self.unit, self.init, self.x, self.k_w, M)
        except ContractError as exc:
            raise self.fail(str(exc)) from None
        except (Exception, SystemExit) as exc:  # whatever a broken unit raises is a failed check, not a crash
            raise self.fail(f"{type(exc).__name__}: {exc}".splitlines()[0]) from None

    @functools.cached_property
    def bank(self):
        W = self.W
        try:
            feat = self.build(W)
        except (Exception, SystemExit) as exc:
            raise self.fail(f"bank construction failed: {type(exc).__name__}: {exc}".splitlines()[0]) from None
        try:
            check_bank(self.unit, feat, M, self.x.shape[1], W)
        except ContractError as exc:
            raise self.fail(str(exc)) from None
        return feat

    def features(self, feat, n: int = N_REF) -> np.ndarray:
        import jax.numpy as jnp

        try:
            return np.asarray(feat(jnp.asarray(self.x[:n])))
        except Exception as exc:
            raise self.fail(f"features failed: {type(exc).__name__}: {exc}".splitlines()[0]) from None

    @functools.cached_property
    def F(self) -> np.ndarray:
        """Features of the reference images ``(N_REF, M)``; checked to be float32 of that shape."""
        F = self.features(self.bank)
        n = min(N_REF, len(self.x))
        if F.dtype != np.float32 or F.shape != (n, M):
            raise self.fail(f"features are {F.dtype} {tuple(F.shape)}, expected float32 {(n, M)}")
        return F


def _check_bank(case: _Case) -> None:
    case.F


def _check_finite(case: _Case) -> None:
    F = case.F
    if not np.isfinite(F).all():
        bad = np.argwhere(~np.isfinite(F))[0]
        same = " (an image equal to its prototype)" if case.init == "data" and bad[0] == bad[1] else ""
        raise case.fail(f"non-finite feature {F[tuple(bad)]} at image {bad[0]}, unit {bad[1]}{same}")
    peak = np.abs(F).max(initial=0.0)
    if peak > MAX_FEATURE:
        at = np.unravel_index(np.abs(F).argmax(), F.shape)
        raise case.fail(f"feature {F[at]:.3g} at image {at[0]}, unit {at[1]} exceeds {MAX_FEATURE:.0e} "
                        "in magnitude (its squares overflow float32 sums)")


def _check_deterministic(case: _Case) -> None:
    F = case.F
    try:
        again = case.features(case.build(case.W))
    except ContractError:
        raise
    except Exception as exc:
        raise case.fail(f"a second bank construction failed: {type(exc).__name__}: {exc}".splitlines()[0]) from None
    if not np.array_equal(again, F, equal_nan=True):
        fix = ("draw it from the key=, not from a global generator (numpy's, Python's random)" if case.unit.takes_key
               else "declare takes_key=True and draw it from bank(W, x_ref, key=...)")
        raise case.fail(f"not deterministic: the same prototypes and key gave other features: "
                        f"a bank's randomness must come from its key ({fix})")


def _check_prefix(case: _Case) -> None:
    k = M // 2
    prefix = case.features(case.build(case.W[:k]))
    if not np.allclose(prefix, case.F[:, :k], rtol=1e-5, atol=1e-6, equal_nan=True):
        raise case.fail(f"declares prefix_stable but the bank of W[:{k}] differs from the first {k} columns")


def _check_gradients(case: _Case) -> None:
    feat = case.bank
    try:
        fails = _gradient_failures(feat, case.x[:N], case.where)
    except Exception as exc:  # e.g. a bank that mutates its state while traced
        fails = [f"{case.where}: differentiating the bank failed: {type(exc).__name__}: {exc}".splitlines()[0]]
    if fails:
        raise ContractError("; ".join(fails))


def _check_steps(case: _Case) -> None:
    case.bank  # a bank that cannot be built fails here with its own line
    try:
        fails = _step_failures(case.unit, case.build, case.W, case.x[:N], case.k_h, case.where)
    except Exception as exc:
        fails = [f"{case.where}: differentiating the bank failed: {type(exc).__name__}: {exc}".splitlines()[0]]
    if fails:
        raise ContractError("; ".join(fails))


def _check_scalars(case: _Case) -> None:
    feat = case.bank
    if not hasattr(feat, "scalars"):
        return
    try:
        s = feat.scalars()
        ok = isinstance(s, dict) and all(isinstance(k, str) and np.isfinite(float(v)) for k, v in s.items())
    except Exception as exc:
        ok, s = False, f"{type(exc).__name__}: {exc}".splitlines()[0]
    if not ok:
        raise case.fail(f"scalars() must return {{name: finite float}}, got {s!r}")


# Per-init checks in the order check_unit runs them (the module docstring says what each checks).
INIT_CHECKS: dict[str, Callable[[_Case], None]] = {
    "bank": _check_bank, "finite": _check_finite, "deterministic": _check_deterministic,
    "prefix_stable": _check_prefix, "gradients": _check_gradients, "steps": _check_steps, "scalars": _check_scalars,
}


def _gradient_failures(feat, xs, where: str) -> list[str]:
    """Finite gradients of ``mean(features**2)`` with respect to every nnx.Param of the bank."""
    import jax
    import jax.numpy as jnp
    from flax import nnx

    fails: list[str] = []
    graphdef, params, rest = nnx.split(feat, nnx.Param, ...)
    loss = lambda p: jnp.mean(nnx.merge(graphdef, p, rest)(jnp.asarray(xs)) ** 2)
    grads = jax.grad(loss)(params)
    for path, g in jax.tree_util.tree_leaves_with_path(grads):
        if not np.isfinite(np.asarray(g)).all():
            fails.append(f"{where}: non-finite gradient with respect to {jax.tree_util.keystr(path)}")
    return fails


def _step_failures(unit: Unit, build, W, xs, k_h, where: str) -> list[str]:
    """A frozen step (the head only) leaves the bank alone, a trained one (every nnx.Param) its non-Params."""
    import jax
    import jax.numpy as jnp
    from flax import nnx

    from lazylab.network import Model

    fails: list[str] = []
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


def unit_checks(unit: Unit) -> list[tuple[str, Callable[..., None]]]:
    """The conformance checks that apply to ``unit``, as ``(id, check)`` in the order ``check_unit`` runs them.

    Ids: ``contract``, then ``<init>-<check>`` for each init the unit declares and each of ``INIT_CHECKS``
    (``prefix_stable`` only where the unit declares it). ``check(unit, images=None, seed=0)`` raises
    ContractError (one line per failure) or returns None; ``images`` as in ``check_unit``.
    """
    return [("contract", _contract_check)] + [(f"{init}-{name}", functools.partial(_run_check, init, fn))
                                               for init, name, fn in _init_checks(unit)]


def _init_checks(unit: Unit):
    """``(init, check name, check)`` for each init the unit declares and each check that applies to it."""
    for init in unit.inits if isinstance(unit.inits, tuple) else ():
        for name, fn in INIT_CHECKS.items():
            if name != "prefix_stable" or unit.prefix_stable:
                yield init, name, fn


def _contract_check(unit: Unit, images=None, seed: int = 0) -> None:
    try:
        _check_contract(unit, getattr(unit, "name", "?"))
    except ContractError as exc:
        raise ContractError(str(exc)) from None


def _images(images) -> np.ndarray:
    x = real_images() if images is None else np.asarray(images, np.float32)
    if x.ndim != 2 or len(x) < N:
        raise ValueError(f"the checks need at least {N} images (n, d), got shape {x.shape}")
    return x


def _run_check(init: str, fn: Callable[[_Case], None], unit: Unit, images=None, seed: int = 0, case=None) -> None:
    case = case or _Case(unit, init, _images(images), seed)
    try:
        fn(case)
    except ContractError:
        raise
    except (Exception, SystemExit) as exc:  # whatever a broken unit raises (or exits with) is a failed check
        raise case.fail(f"{type(exc).__name__}: {exc}".splitlines()[0]) from None


def check_unit(unit: Unit, images: np.ndarray | None = None, seed: int = 0) -> None:
    """Run the conformance suite (module docstring) on ``unit``.

    Args:
      unit: the ``lazylab.arms.Unit`` to check.
      images: float32 ``(n, 784)`` real images in [0, 1], ``n >= 16``; features are checked on the
        first 512 (default: ``real_images()``, the first 512 Fashion-MNIST test images).
      seed: seed of the prototype, key and head draws.
    Raises: ContractError whose message lists every failed check once, ``"; "``-separated, and whose
      ``failures`` holds them as a list (a bank that cannot be built fails every check of its init with
      one line); ValueError for fewer than
      16 images; DataError if the default images cannot be found.
    Cost: banks of 8 units on 512 images, their gradients on 16; a few seconds.
    """
    _contract_check(unit)
    x = _images(images)
    fails: list[str] = []
    cases: dict[str, _Case] = {}
    for init, _, fn in _init_checks(unit):
        case = cases.setdefault(init, _Case(unit, init, x, seed))
        try:
            _run_check(init, fn, unit, case=case)
        except ContractError as exc:
            fails += [line for line in str(exc).split("; ") if line not in fails]
    if fails:
        error = ContractError("; ".join(fails))
        error.failures = fails
        raise error


def parametrize_with_checks(units: list[Unit], expected_failed_checks=None):
    """A ``pytest.mark.parametrize`` over every (unit, check) pair: one test item per check, with ids
    ``<unit>-<check id>``, as scikit-learn's ``sklearn.utils.estimator_checks.parametrize_with_checks``.

    Args:
      units: the units to check.
      expected_failed_checks: ``{check id: reason}``, or a callable ``unit -> {check id: reason}``: those
        items are marked ``xfail(strict=True)`` with the reason (a check that starts passing fails the run).
    Returns: the decorator for ``def test(unit, check): check(unit)``.
    Raises: ValueError naming an expected check id the unit does not have.
    """
    import pytest

    params = []
    for unit in units:
        expected = expected_failed_checks(unit) if callable(expected_failed_checks) else (expected_failed_checks or {})
        checks = unit_checks(unit)
        unknown = set(expected) - {cid for cid, _ in checks}
        if unknown:
            raise ValueError(f"expected_failed_checks names checks unit {unit.name!r} does not have: {sorted(unknown)}")
        for cid, check in checks:
            marks = [pytest.mark.xfail(strict=True, raises=ContractError, reason=expected[cid])] if cid in expected else []
            params.append(pytest.param(unit, check, id=f"{unit.name}-{cid}", marks=marks))
    return pytest.mark.parametrize("unit, check", params)
