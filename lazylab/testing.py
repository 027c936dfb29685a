"""A conformance suite for units, in the spirit of scikit-learn's ``check_estimator``.

``check_unit(unit)`` runs every check of the ``lazylab.arms`` contract that
needs arrays, on real Fashion-MNIST images, and raises one ``ContractError``
listing the failures; ``lazylab arms --check`` runs it on every installed
unit (and keeps each verdict), and lazylab runs it once per unit and source
before a plugin's first run (``lazylab.vetting``). A plugin's own tests get one
pytest item per check, as scikit-learn's ``parametrize_with_checks`` gives one
per estimator check::

    from lazylab.testing import parametrize_with_checks
    from lazylab_cauchy import UNIT

    @parametrize_with_checks([UNIT])
    def test_lazylab_contract(unit, check):
        check(unit)

Every check id, with what it checks, is ``CHECKS`` (``lazylab arms --check
--list`` prints it); a unit runs ``contract``, ``settings`` and, for each init
it declares, ``<init>-<check>`` for each of ``INIT_CHECKS`` (``prefix_stable``
only where declared). Each failure is one line.
"""

from __future__ import annotations

import difflib
import functools
from typing import Callable

import numpy as np

from lazylab.arms import INITS, ContractError, Unit, _check_contract, check_bank, key_hint, plugin_error
from lazylab.arms.loading import baseline_settings, process_settings, raised_by_plugin, registry

baseline_settings()  # the process-wide settings before a unit imported after this module changes them

M = 8  # units per test bank (prefix checks use the first M // 2)
N = 16  # images the gradients and steps are evaluated on (they compile per shape); a batch's prefix
N_REF = 512  # reference images, as lazylab.model passes them: features are checked on all of them
# A bank wider than the input dimension d = 784 (the ``wide`` check), so that a unit whose numbers depend
# on m > d (orthogonalised or whitened prototypes, a Gram matrix of rank d) fails before a ladder reaches
# such a width; its data init takes the first WIDE images as prototypes (check_unit needs that many).
WIDE = 1024
N_WIDE = 256  # images the wide bank's features are checked on
# Batch and order invariance: features of an image must not depend on the other images of its batch.
# Their computation may round differently per batch shape (BLAS blocking: up to 3e-5 of a unit's largest
# feature measured, the data-seeded Yat unit on one image alone); 1e-3 of it is far below what batch
# statistics move (a standardised feature moves by O(1)).
BATCH_RTOL = 1e-3
# Largest feature magnitude accepted: squares summed over 60,000 images and 8,192 units (Gram matrices,
# covariances, 1e24 x 4.9e8 = 4.9e32) stay finite in float32 (3.4e38). The data-seeded Yat unit peaks
# near 4e5 at its own image.
MAX_FEATURE = 1e12


@functools.lru_cache(maxsize=4)
def real_images(n: int = WIDE, data_dir=None) -> np.ndarray:
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

        # ``where`` names the check running (``<init>-<check>``, set by ``_run_check``): each failure line starts with it.
        self.unit, self.init, self.x, self.where = unit, init, x, f"{init} init"
        self._broken: dict[str, ContractError] = {}  # prototypes or bank that could not be made: one line, reused
        self.k_w, self.k_b, self.k_h = jax.random.split(jax.random.key(seed), 3)

    def fail(self, what: str) -> ContractError:
        return ContractError(f"{self.where}: {what}")

    def build(self, W):
        return self.unit.make_bank(W, self.x[:N_REF], key=self.k_b)

    def prototypes(self, m: int) -> np.ndarray:
        try:
            return _prototypes(self.unit, self.init, self.x, self.k_w, m)
        except ContractError as exc:
            raise self.fail(str(exc)) from None
        except BaseException as exc:  # whatever a broken unit raises is a failed check, not a crash
            if not raised_by_plugin(exc):
                raise
            raise self.fail(plugin_error(exc)) from None

    def _once(self, what: str, make):
        """``make()``, whose ContractError is kept and raised again to every later check (one line in all)."""
        if what in self._broken:
            raise self._broken[what]
        try:
            return make()
        except ContractError as exc:
            self._broken[what] = exc
            raise

    @functools.cached_property
    def W(self) -> np.ndarray:
        return self._once("W", lambda: self.prototypes(M))

    def bank_of(self, W, what: str = "bank construction"):
        """The bank of prototypes ``W``, checked against the contract (``check_bank``)."""
        try:
            feat = self.build(W)
        except BaseException as exc:
            if not raised_by_plugin(exc):
                raise
            raise self.fail(plugin_error(exc, f"{what} failed: ")
                            + key_hint(self.unit, exc)) from None
        try:
            check_bank(self.unit, feat, len(W), self.x.shape[1], W)
        except ContractError as exc:
            raise self.fail(str(exc)) from None
        return feat

    @functools.cached_property
    def bank(self):
        return self._once("bank", lambda: self.bank_of(self.W))

    def features(self, feat, n: int = N_REF, x: np.ndarray | None = None) -> np.ndarray:
        """Features of the first ``n`` images (or of ``x``) by ``feat``, as numpy."""
        import jax.numpy as jnp

        try:
            return np.asarray(feat(jnp.asarray(self.x[:n] if x is None else x)))
        except Exception as exc:
            raise self.fail(plugin_error(exc, "features failed: ")) from None

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
        raise case.fail(plugin_error(exc, "a second bank construction failed: ")) from None
    if not np.array_equal(again, F, equal_nan=True):
        fix = ("draw it from the key=, not from a global generator (numpy's, Python's random)" if case.unit.takes_key
               else "declare takes_key=True and draw it from bank(W, x_ref, key=...)")
        raise case.fail(f"not deterministic: the same prototypes and key gave other features: "
                        f"a bank's randomness must come from its key ({fix})")


def _differs(a: np.ndarray, b: np.ndarray) -> tuple[int, int] | None:
    """The first ``(row, unit)`` where ``a`` and ``b`` (features of the same images) differ by more than
    ``BATCH_RTOL`` of that unit's largest finite feature; None when they agree. NaN agrees with NaN alone
    (a non-finite feature is the ``finite`` check's failure)."""
    with np.errstate(invalid="ignore", over="ignore"):
        finite = np.where(np.isfinite(b), np.abs(b), 0.0)
        scale = np.maximum(finite.max(axis=0, initial=0.0), np.finfo(np.float32).tiny)
        bad = ~((np.abs(a - b) <= BATCH_RTOL * scale) | (np.isnan(a) & np.isnan(b)) | (a == b))
    return tuple(np.argwhere(bad)[0]) if bad.any() else None


def _agree(case: _Case, x: np.ndarray, want: np.ndarray, say: Callable[[int, int, float, float], str]) -> None:
    """The features of images ``x``, computed as a batch of their own, against ``want`` (theirs in another
    batch); at the first difference (``_differs``), ``case.fail(say(row, unit, got, wanted))``."""
    got = case.features(case.bank, x=x)
    at = _differs(got, want)
    if at is not None:
        raise case.fail(say(*at, got[at], want[at]))


def _check_batch(case: _Case) -> None:
    F = case.F
    for what, rows in ((f"in a batch of the first {N} images", slice(0, N)), ("alone", slice(0, 1)),
                       ("alone", slice(300, 301))):
        _agree(case, case.x[rows], F[rows], lambda i, j, got, want: (
            f"not batch-invariant: image {rows.start + i}, unit {j} has feature {got:.4g} {what} and {want:.4g} in "
            f"a batch of {len(F)}: a feature must depend on its own image alone (no statistics over the batch, "
            "such as standardising by its mean and std)"))


def _check_order(case: _Case) -> None:
    F = case.F
    order = np.random.default_rng(0).permutation(len(F))
    _agree(case, case.x[:len(F)][order], F[order], lambda i, j, got, want: (
        f"not order-invariant: image {order[i]}, unit {j} has feature {got:.4g} when the {len(F)} images are "
        f"shuffled and {want:.4g} in order: a feature must not depend on where its image stands in the batch"))


def _check_wide(case: _Case) -> None:
    case.bank  # a unit whose narrow bank cannot be built fails here with that one line
    d = case.x.shape[1]
    W = case.prototypes(WIDE)
    F = case.features(case.bank_of(W, f"a bank of {WIDE} units (wider than d = {d})"), n=N_WIDE)
    where = f"a bank of {WIDE} units (wider than d = {d})"
    if F.dtype != np.float32 or F.shape != (N_WIDE, WIDE):
        raise case.fail(f"{where} gave {F.dtype} {tuple(F.shape)} features, expected float32 {(N_WIDE, WIDE)}")
    if not np.isfinite(F).all():
        i, j = np.argwhere(~np.isfinite(F))[0]
        raise case.fail(f"{where} gave non-finite feature {F[i, j]} at image {i}, unit {j}")
    if np.abs(F).max(initial=0.0) > MAX_FEATURE:
        raise case.fail(f"{where} gave features above {MAX_FEATURE:.0e} in magnitude")


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
        fails = [plugin_error(exc, f"{case.where}: differentiating the bank failed: ")]
    if fails:
        raise ContractError("; ".join(fails))


def _check_steps(case: _Case) -> None:
    case.bank  # a bank that cannot be built fails here with its own line
    try:
        fails = _step_failures(case.unit, case.build, case.W, case.x[:N], case.k_h, case.where)
    except Exception as exc:
        fails = [plugin_error(exc, f"{case.where}: differentiating the bank failed: ")]
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
        ok, s = False, plugin_error(exc)
    if not ok:
        raise case.fail(f"scalars() must return {{name: finite float}}, got {s!r}")


# Per-init checks in the order check_unit runs them (``CHECKS`` says what each checks).
INIT_CHECKS: dict[str, Callable[[_Case], None]] = {
    "bank": _check_bank, "finite": _check_finite, "deterministic": _check_deterministic,
    "batch_invariant": _check_batch, "order_invariant": _check_order, "wide": _check_wide,
    "prefix_stable": _check_prefix, "gradients": _check_gradients, "steps": _check_steps, "scalars": _check_scalars,
}
_INIT_CHECK_DOCS = {
    "bank": "the bank holds W as given and maps float32 (n, d) to float32 (n, m) (lazylab.arms.check_bank)",
    "finite": f"features of the {N_REF} reference images{{own}} finite and below MAX_FEATURE = {MAX_FEATURE:.0e} in "
              "magnitude",
    "deterministic": "two banks built from the same prototypes and key give the same features bit for bit (the "
                     "fix: draw randomness from key=, with takes_key=True)",
    "batch_invariant": f"an image's features do not depend on its batch: the first {N} images alone, and images "
                       f"0 and 300 alone, give what they give among all {N_REF} (within {BATCH_RTOL:g} of each "
                       "unit's largest feature)",
    "order_invariant": f"the {N_REF} images shuffled give the same features, shuffled alike",
    "wide": f"a bank of {WIDE} units, wider than d = 784, gives finite float32 features on {N_WIDE} images",
    "prefix_stable": "(only where the unit declares it) the bank of W[:k] gives the first k feature columns",
    "gradients": "finite gradients of the features with respect to every nnx.Param",
    "steps": "a frozen step (the head's) leaves the whole bank untouched, a trained step its non-Param state",
    "scalars": "scalars(), if defined, returns {name: finite float}",
}
# Every check id, with what it checks: ``unit_checks`` gives the ones that apply to a unit.
CHECKS: dict[str, str] = {
    "contract": "the static contract (lazylab.arms's load-time checks: fields, names, callables, takes_key)",
    "settings": "importing the unit leaves the process-wide jax and numpy settings alone (x64, default "
                "matmul precision, dtype promotion, PRNG, jit, NaN checks, numpy error handling)",
    **{f"{init}-{name}": f"{init} init: " + doc.replace("{own}", " (each prototype's own image among them, x == w)"
                                                        if init == "data" else "")
       for init in INITS for name, doc in _INIT_CHECK_DOCS.items()},
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

    Ids (``CHECKS``): ``contract``, ``settings``, then ``<init>-<check>`` for each init the unit declares
    and each of ``INIT_CHECKS`` (``prefix_stable`` only where the unit declares it).
    ``check(unit, images=None, seed=0)`` raises ContractError (one line per failure) or returns None;
    ``images`` as in ``check_unit``.
    """
    return [("contract", _contract_check), ("settings", _settings_check)] + [
        (f"{init}-{name}", functools.partial(_run_check, init, name)) for init, name in _init_checks(unit)]


def _init_checks(unit: Unit):
    """``(init, check name)`` for each init the unit declares and each check that applies to it."""
    for init in unit.inits if isinstance(unit.inits, tuple) else ():
        for name in INIT_CHECKS:
            if name != "prefix_stable" or unit.prefix_stable:
                yield init, name


def _contract_check(unit: Unit, images=None, seed: int = 0) -> None:
    try:
        _check_contract(unit, getattr(unit, "name", "?"))
    except ContractError as exc:
        raise ContractError(str(exc)) from None


def _settings_check(unit: Unit, images=None, seed: int = 0) -> None:
    """The process-wide settings a unit's import changed: as the registry recorded them (and put them back),
    for a unit it imported; else as they differ now from ``baseline_settings`` (a unit imported directly)."""
    name = getattr(unit, "name", None)
    found = registry().units.get(name)
    changed = list(registry().settings.get(name, [])) if found is not None and found[0] is unit else []
    now, before = process_settings(), baseline_settings()
    changed += [f"{k}: {before[k]} -> {now[k]}" for k in before if now[k] != before[k]]
    if changed:
        raise ContractError(f"importing it changed process-wide settings: {', '.join(dict.fromkeys(changed))} "
                            "(every arm of the process would compute under them; a unit must leave them alone: "
                            "ask for a dtype or precision in its own operations)")


def _images(images, unit: Unit) -> np.ndarray:
    x = real_images() if images is None else np.asarray(images, np.float32)
    need = WIDE if "data" in (unit.inits if isinstance(unit.inits, tuple) else ()) else N
    if x.ndim != 2 or len(x) < need:
        raise ValueError(f"the checks of unit {getattr(unit, 'name', '?')!r} need at least {need} images (n, d)"
                         f"{' (its data init draws a wide bank of that many)' if need == WIDE else ''}, got shape {x.shape}")
    return x


def _run_check(init: str, name: str, unit: Unit, images=None, seed: int = 0, case=None) -> None:
    case = case or _Case(unit, init, _images(images, unit), seed)
    case.where = f"{init}-{name}"
    try:
        INIT_CHECKS[name](case)
    except ContractError:
        raise
    except BaseException as exc:  # whatever a broken unit raises (or exits with) is a failed check
        if not raised_by_plugin(exc):
            raise
        raise case.fail(plugin_error(exc)) from None


def check_unit(unit: Unit, images: np.ndarray | None = None, seed: int = 0) -> None:
    """Run the conformance suite (module docstring) on ``unit``.

    Args:
      unit: the ``lazylab.arms.Unit`` to check.
      images: float32 ``(n, 784)`` real images in [0, 1], ``n >= 16`` (``n >= WIDE`` = 1024 for a unit
        with the data init: its wide bank's prototypes); features are checked on the first 512 (default:
        ``real_images()``, the first 1024 Fashion-MNIST test images).
      seed: seed of the prototype, key and head draws.
    Raises: ContractError whose message lists every failed check once, ``"; "``-separated, and whose
      ``failures`` holds them as a list (a bank that cannot be built fails every check of its init with
      one line); ValueError for too few images; DataError if the default images cannot be found.
    Cost: banks of 8 units on 512 images, their gradients on 16, and one of 1024 units on 256 images per
      init; a few seconds.
    """
    _contract_check(unit)
    x = _images(images, unit)
    fails: list[str] = []
    try:
        _settings_check(unit)
    except ContractError as exc:
        fails.append(f"settings: {exc}")
    cases: dict[str, _Case] = {}
    for init, name in _init_checks(unit):
        case = cases.setdefault(init, _Case(unit, init, x, seed))
        try:
            _run_check(init, name, unit, case=case)
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
    Raises: ValueError naming an expected check id the unit does not have, the nearest id it has, and all of
      them (``CHECKS`` lists every id).
    """
    import pytest

    params = []
    for unit in units:
        expected = expected_failed_checks(unit) if callable(expected_failed_checks) else (expected_failed_checks or {})
        checks = unit_checks(unit)
        ids = [cid for cid, _ in checks]
        unknown = sorted(set(expected) - set(ids))
        if unknown:
            near = difflib.get_close_matches(unknown[0], ids, n=1)
            raise ValueError(f"expected_failed_checks names checks unit {unit.name!r} does not have: {unknown}"
                             + (f" (did you mean {near[0]!r}?)" if near else "") + f"; its checks: {', '.join(ids)}")
        for cid, check in checks:
            marks = [pytest.mark.xfail(strict=True, raises=ContractError, reason=expected[cid])] if cid in expected else []
            params.append(pytest.param(unit, check, id=f"{unit.name}-{cid}", marks=marks))
    return pytest.mark.parametrize("unit, check", params)
