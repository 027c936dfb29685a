"""Units, initialisations and the training protocol, on real Fashion-MNIST slices."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from flax import nnx

from lazylab.arms import get_arm
from lazylab.arms.gaussian import median_bandwidth
from lazylab.model import build_model, features, init_prototypes
from lazylab.train import batch_orders, fit

D = 784


def slice_(fmnist, n_train=2048, n_test=1000):
    return fmnist.x_train[:n_train], fmnist.y_train[:n_train], fmnist.x_test[:n_test], fmnist.y_test[:n_test]


@pytest.mark.parametrize("m", [16, 256, 2048])
def test_random_init_row_norms_follow_sqrt_d_over_m(fmnist, m):
    # flax lecun_normal on (m, d) takes fan-in m: each row has norm ~ sqrt(d / m).
    W = init_prototypes(get_arm("yat-frozen"), m, seed=0, x_train=fmnist.x_train)
    norms = np.linalg.norm(W, axis=1)
    assert W.shape == (m, D)
    assert np.mean(norms) == pytest.approx(np.sqrt(D / m), rel=0.03)
    # The fan-in-d variant and the ReLU dense-layer convention give norms ~ 1.
    Wd = init_prototypes(get_arm("yat-frozen"), m, seed=0, x_train=fmnist.x_train, fan_in="d")
    Wr = init_prototypes(get_arm("relu-frozen"), m, seed=0, x_train=fmnist.x_train)
    assert np.mean(np.linalg.norm(Wd, axis=1)) == pytest.approx(1.0, rel=0.03)
    assert np.mean(np.linalg.norm(Wr, axis=1)) == pytest.approx(1.0, rel=0.03)


def test_data_init_draws_distinct_training_images(fmnist):
    W = init_prototypes(get_arm("yat-data-frozen"), 300, seed=3, x_train=fmnist.x_train[:5000])
    rows = {r.tobytes() for r in W}
    assert len(rows) == 300
    train_rows = {r.tobytes() for r in fmnist.x_train[:5000]}
    assert rows <= train_rows
    W2 = init_prototypes(get_arm("yat-data-frozen"), 300, seed=4, x_train=fmnist.x_train[:5000])
    assert not np.array_equal(W, W2)


@pytest.mark.slow
def test_gaussian_bandwidth_is_the_median_heuristic(fmnist):
    model = build_model(get_arm("gaussian-frozen"), 64, seed=0, x_train=fmnist.x_train)
    W = np.asarray(model.feat.W[...], np.float64)
    x = fmnist.x_train[:512].astype(np.float64)
    # Direct pairwise squared distances, not the ||x||^2 + ||w||^2 - 2 x.w expansion.
    d2 = ((x[:, None, :] - W[None, :, :]) ** 2).sum(-1)
    expected = np.sqrt(np.median(d2))
    assert model.feat.scalars()["sigma"] == pytest.approx(expected, rel=1e-4)
    assert median_bandwidth(x, W) == pytest.approx(expected, rel=1e-4)


def test_yat_unit_formula_and_initial_scalars(fmnist):
    model = build_model(get_arm("yat-frozen"), 8, seed=1, x_train=fmnist.x_train)
    assert model.feat.scalars() == pytest.approx({"b": 0.5, "eps": 0.5}, rel=1e-6)
    x = fmnist.x_test[:5].astype(np.float64)
    W = np.asarray(model.feat.W[...], np.float64)
    expected = (x @ W.T + 0.5) ** 2 / (((x[:, None] - W[None]) ** 2).sum(-1) + 0.5)
    np.testing.assert_allclose(np.asarray(model.feat(fmnist.x_test[:5])), expected, rtol=2e-4)


def test_batch_orders_are_fresh_permutations_with_partial_batch_dropped():
    orders = batch_orders(seed=0, n=1000, batch=256, epochs=2)
    assert orders.shape == (2, 3, 256)
    assert len(np.unique(orders[0])) == 768
    assert not np.array_equal(orders[0], orders[1])
    np.testing.assert_array_equal(orders, batch_orders(seed=0, n=1000, batch=256, epochs=2))


@pytest.mark.slow
@pytest.mark.parametrize("arm_name", ["yat-frozen", "gaussian-frozen"])
def test_frozen_bank_is_bit_identical_after_training(fmnist, arm_name):
    xtr, ytr, xte, yte = slice_(fmnist)
    model = build_model(get_arm(arm_name), 32, seed=0, x_train=xtr)
    before = jax.tree.map(np.array, nnx.state(model.feat))
    head_before = np.array(model.head.kernel[...])
    res = fit(model, xtr, ytr, xte, yte, lr=0.1, epochs=2, batch=256, seed=0, trainable_filter=nnx.PathContains("head"))
    nnx.update(model, res.trainable)
    after = jax.tree.map(np.array, nnx.state(model.feat))
    for a, b in zip(jax.tree.leaves(before), jax.tree.leaves(after)):
        assert a.tobytes() == b.tobytes()
    assert model.feat.scalars() == pytest.approx(build_model(get_arm(arm_name), 32, 0, xtr).feat.scalars(), abs=0)
    # The head did train, so the comparison above is not vacuous.
    assert not np.array_equal(head_before, np.array(model.head.kernel[...]))


def test_trained_arm_moves_its_prototypes_and_scalars(fmnist):
    xtr, ytr, xte, yte = slice_(fmnist)
    model = build_model(get_arm("yat-trained"), 16, seed=0, x_train=xtr)
    W0 = np.array(model.feat.W[...])
    s0 = model.feat.scalars()
    res = fit(model, xtr, ytr, xte, yte, lr=0.01, epochs=1, batch=256, seed=0)
    nnx.update(model, res.trainable)
    assert not np.array_equal(W0, np.array(model.feat.W[...]))
    assert model.feat.scalars()["b"] != s0["b"]


@pytest.mark.slow
def test_head_on_stored_features_matches_step_by_step(fmnist):
    xtr, ytr, xte, yte = slice_(fmnist)
    arm = get_arm("yat-frozen")
    step_model = build_model(arm, 64, seed=2, x_train=xtr)
    feat_model = build_model(arm, 64, seed=2, x_train=xtr)
    kw = dict(lr=0.1, epochs=3, batch=256, seed=2)
    step = fit(step_model, xtr, ytr, xte, yte, trainable_filter=nnx.PathContains("head"), **kw)
    stored = fit(feat_model.head, features(feat_model.feat, xtr), ytr, features(feat_model.feat, xte), yte, **kw)
    nnx.update(step_model, step.trainable)
    nnx.update(feat_model.head, stored.trainable)
    np.testing.assert_allclose(np.array(step_model.head.kernel[...]), np.array(feat_model.head.kernel[...]), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(step.train_loss, stored.train_loss, rtol=1e-5)
    # Accuracies may differ by a rounding flip on a borderline image at most.
    np.testing.assert_allclose(step.curve, stored.curve, atol=0.2)
    assert stored.best_acc > 60.0  # a real readout on real images, not noise


@pytest.mark.slow
def test_non_finite_loss_is_recorded_as_diverged(fmnist):
    xtr, ytr, xte, yte = slice_(fmnist)
    model = build_model(get_arm("gaussian-trained"), 16, seed=0, x_train=xtr)
    res = fit(model, xtr, ytr, xte, yte, lr=1e3, epochs=3, batch=256, seed=0)
    assert res.diverged is not None
    assert not np.isfinite(float(res.diverged["loss"]))
    assert res.best_acc is None and res.final_acc is None


def test_overflowing_parameters_count_as_diverged_even_with_a_finite_loss(fmnist):
    xtr, ytr, xte, yte = slice_(fmnist)
    model = build_model(get_arm("yat-trained"), 8, seed=0, x_train=xtr)
    res = fit(model, xtr, ytr, xte, yte, lr=1e38, epochs=2, batch=256, seed=0)
    assert res.diverged is not None and res.best_acc is None
