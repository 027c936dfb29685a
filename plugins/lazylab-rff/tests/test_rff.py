"""lazylab-rff's own tests: the unit's mathematics, its determinism, and its
registration, checked by driving lazylab's CLI with click's CliRunner (the
simonw/llm plugin-testing pattern), and lazylab's conformance suite
(``lazylab.testing.check_unit``, on real Fashion-MNIST images). Needs the
plugin installed (``pip install -e plugins/lazylab-rff``) and the dataset.
"""

from __future__ import annotations

import json
import math
from importlib.metadata import entry_points, version

import jax
import numpy as np
import pytest
from click.testing import CliRunner

import lazylab_rff
from lazylab.arms import check_bank, registry, reset_registry
from lazylab.testing import check_unit
from lazylab_rff import UNIT, RFFBank, median_pairwise_distance, standard_normal

D = 784


@pytest.fixture
def fresh_registry(monkeypatch):
    # The units these tests use, pinned: another plugin installed beside this one changes nothing here.
    monkeypatch.setenv("LAZYLAB_ARMS", "lazylab:yat,lazylab:relu,lazylab:gaussian,lazylab-rff:rff")
    monkeypatch.delenv("LAZYLAB_STRICT_PLUGINS", raising=False)
    reset_registry()
    yield
    reset_registry()


def images(n, seed=0):
    """Image-like inputs in [0, 1]: sparse-ish nonnegative pixels."""
    rng = np.random.default_rng(seed)
    return (rng.random((n, D)) * (rng.random((n, D)) < 0.5)).astype(np.float32)


def bank(m, x_ref, seed=0):
    k_w, k_b = jax.random.split(jax.random.key(seed))
    return UNIT.make_bank(np.asarray(standard_normal(k_w, (m, D))), x_ref, key=k_b)


def test_entry_point_is_registered_with_the_package_version():
    (ep,) = [ep for ep in entry_points(group="lazylab.arms") if ep.name == "rff"]
    assert ep.value == "lazylab_rff:UNIT"
    assert ep.dist.name == "lazylab-rff"
    assert version("lazylab-rff") == lazylab_rff.__version__


def test_cli_lists_rff_arms_with_the_plugin_version(fresh_registry, monkeypatch):
    from lazylab.cli import cli

    monkeypatch.setenv("LAZYLAB_ARMS", "rff")  # --check runs the conformance suite on this unit alone
    result = CliRunner().invoke(cli, ["arms", "--json", "-", "--check"])
    assert result.exit_code == 0, result.output
    listing = json.loads(result.stdout)
    arms = {a["arm"]: a for a in listing["arms"]}
    for name, trained in (("rff-frozen", False), ("rff-trained", True)):
        assert arms[name]["distribution"] == "lazylab-rff"
        assert arms[name]["version"] == lazylab_rff.__version__
        assert arms[name]["status"] == "ok"
        assert arms[name]["bank"] == ("trained" if trained else "frozen")
    assert not any(a.startswith("rff-data") for a in arms)  # random init only
    assert registry().arm("rff-frozen").plugin.startswith(f"lazylab-rff {lazylab_rff.__version__}+src.")


def test_median_heuristic_is_the_median_of_distinct_pair_distances():
    x = images(40, seed=1)
    brute = [np.linalg.norm(x[i].astype(np.float64) - x[j]) for i in range(40) for j in range(i + 1, 40)]
    assert median_pairwise_distance(x) == pytest.approx(float(np.median(brute)), rel=1e-9)
    with pytest.raises(ValueError):
        median_pairwise_distance(x[:1])
    with pytest.warns(UserWarning, match="falls back"):  # identical images: lazylab's documented fallback
        assert median_pairwise_distance(np.ones((5, D))) == pytest.approx(math.sqrt(D))


def test_features_are_sqrt2_cos_of_w_x_plus_b_as_in_rbfsampler():
    """Same construction as sklearn's RBFSampler, up to its sqrt(1/m) scale (see the module docstring)."""
    m, x_ref = 64, images(64)
    k_w, k_b = jax.random.split(jax.random.key(3))
    z = np.asarray(standard_normal(k_w, (m, D)))
    feat = UNIT.make_bank(z, x_ref, key=k_b)
    np.testing.assert_array_equal(np.asarray(feat.W[...]), z)  # the prototypes as given (contract)
    sigma = median_pairwise_distance(x_ref)
    assert float(feat.sigma[...]) == pytest.approx(sigma, rel=1e-6)
    gamma = 1.0 / (2.0 * sigma**2)
    random_weights = np.sqrt(2.0 * gamma) * z.astype(np.float64)  # RBFSampler.random_weights_.T
    b = np.asarray(feat.b[...], np.float64)
    assert b.shape == (m,) and b.min() >= 0.0 and b.max() < 2.0 * math.pi
    x = images(5, seed=9)
    expected = math.sqrt(2.0) * np.cos(x.astype(np.float64) @ random_weights.T + b)  # sqrt(m) * RBFSampler.transform
    np.testing.assert_allclose(np.asarray(feat(x)), expected, atol=2e-4)
    assert feat.scalars()["sigma"] == pytest.approx(sigma, rel=0.02)  # sigma / rms(z) ~ sigma


def test_features_approximate_the_gaussian_kernel_at_the_median_bandwidth():
    """Rahimi & Recht 2007, claim 1: mean of phi(x) phi(y) over units -> exp(-||x-y||^2 / (2 sigma^2))."""
    x_ref = images(64)
    x = images(6, seed=5)
    feat = bank(20000, x_ref, seed=1)
    phi = np.asarray(feat(x), np.float64)
    approx = phi @ phi.T / phi.shape[1]
    sigma = median_pairwise_distance(x_ref)
    d2 = np.sum((x[:, None, :].astype(np.float64) - x[None, :, :]) ** 2, axis=-1)
    exact = np.exp(-d2 / (2.0 * sigma**2))
    assert np.max(np.abs(approx - exact)) < 0.04  # Monte-Carlo error ~ 1/sqrt(20000) per entry
    assert exact.min() < 0.9  # the check is not trivial: the bandwidth separates the points


def test_bank_is_deterministic_in_its_draws_and_meets_the_contract():
    x_ref = images(32)
    a, b, c = bank(16, x_ref, seed=0), bank(16, x_ref, seed=0), bank(16, x_ref, seed=1)
    np.testing.assert_array_equal(np.asarray(a.W[...]), np.asarray(b.W[...]))
    np.testing.assert_array_equal(np.asarray(a.b[...]), np.asarray(b.b[...]))
    assert not np.array_equal(np.asarray(a.W[...]), np.asarray(c.W[...]))
    assert not np.array_equal(np.asarray(a.b[...]), np.asarray(c.b[...]))
    check_bank(UNIT, a, 16, D)
    assert UNIT.prototypes_are_images is False and UNIT.inits == ("random",)


def test_units_depend_only_on_their_own_draws_so_prefixes_are_smaller_banks():
    x_ref, x = images(32), images(4, seed=2)
    k_w, k_b = jax.random.split(jax.random.key(7))
    z = np.asarray(standard_normal(k_w, (48, D)))
    full = np.asarray(UNIT.make_bank(z, x_ref, key=k_b)(x))
    prefix = np.asarray(UNIT.make_bank(z[:10], x_ref, key=k_b)(x))
    np.testing.assert_allclose(prefix, full[:, :10], rtol=1e-6, atol=1e-6)


def test_bank_needs_its_key_and_reference_images():
    z = np.zeros((4, D), np.float32)
    with pytest.raises(ValueError, match="key"):
        RFFBank(z, images(8))
    with pytest.raises(ValueError, match="x_ref"):
        RFFBank(z, None, key=jax.random.key(0))


def test_the_unit_passes_lazylabs_conformance_suite():
    """Finite features and gradients on real images, determinism, prefix stability (declared),
    frozen steps leave the bank alone, the scalars are finite (lazylab.testing.check_unit)."""
    check_unit(UNIT)
