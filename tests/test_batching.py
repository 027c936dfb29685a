"""Seeds and rates trained as one program (issue 9) equal one-at-a-time runs, bit for bit.

Real Fashion-MNIST slices: a trained Yat bank (three seeds) and a frozen Yat
bank's head (three rates on one bank's features). Each member's step sits side
by side with the others' in one compiled program, so it computes exactly what
it computes alone: curves, losses and parameters must be identical.
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest

from lazylab.arms import get_arm
from lazylab.experiments import BATCH_MEMBERS, Workspace, batch_groups, train_runs
from lazylab.model import build_model, features
from lazylab.train import fit, fit_batch

PROTOCOL = dict(epochs=2, batch=256)


def _sequential(models, x, ytr, xt, yte, lrs, seeds):
    return [fit(m, x, ytr, xt, yte, lr=lr, seed=s, **PROTOCOL) for m, lr, s in zip(models, lrs, seeds)]


def _assert_same(batched, sequential):
    for b, s in zip(batched, sequential):
        assert b.diverged is None and s.diverged is None
        assert b.curve == s.curve  # accuracy (%) after every epoch, exactly
        assert b.train_loss == s.train_loss
        for lb, ls in zip(jax.tree.leaves(b.trainable), jax.tree.leaves(s.trainable)):
            np.testing.assert_array_equal(np.asarray(lb), np.asarray(ls))


@pytest.mark.slow
def test_batched_seeds_of_a_trained_arm_equal_sequential_runs(fmnist):
    d = fmnist.subset(train_size=3072, test_size=2000)
    arm = get_arm("yat-trained")
    seeds, lrs = [0, 1, 2], [0.01] * 3
    models = [build_model(arm, 64, s, d.x_train) for s in seeds]
    batched = fit_batch(models, d.x_train, d.y_train, d.x_test, d.y_test, lrs=lrs, seeds=seeds, **PROTOCOL)
    _assert_same(batched, _sequential(models, d.x_train, d.y_train, d.x_test, d.y_test, lrs, seeds))
    # The three seeds really are different runs.
    assert len({tuple(r.curve) for r in batched}) == 3


@pytest.mark.slow
def test_batched_rates_on_one_banks_features_equal_sequential_runs(fmnist):
    d = fmnist.subset(train_size=3072, test_size=2000)
    model = build_model(get_arm("yat-frozen"), 128, 0, d.x_train)
    ftr, fte = features(model.feat, d.x_train), features(model.feat, d.x_test)
    lrs, seeds = [0.03, 0.1, 0.3], [0] * 3
    heads = [model.head] * 3
    batched = fit_batch(heads, [ftr] * 3, d.y_train, [fte] * 3, d.y_test, lrs=lrs, seeds=seeds, **PROTOCOL)
    _assert_same(batched, _sequential(heads, ftr, d.y_train, fte, d.y_test, lrs, seeds))
    assert len({tuple(r.curve) for r in batched}) == 3


@pytest.mark.slow
def test_one_member_diverging_leaves_the_others_untouched(fmnist):
    d = fmnist.subset(train_size=2048, test_size=1000)
    model = build_model(get_arm("yat-trained"), 32, 0, d.x_train)
    lrs = [1e38, 0.01]
    batched = fit_batch([model] * 2, d.x_train, d.y_train, d.x_test, d.y_test, lrs=lrs, seeds=[0, 0], **PROTOCOL)
    alone = fit(model, d.x_train, d.y_train, d.x_test, d.y_test, lr=0.01, seed=0, **PROTOCOL)
    assert batched[0].diverged is not None and batched[0].diverged["epoch"] == 1 and batched[0].curve == []
    assert batched[1].diverged is None and batched[1].curve == alone.curve


@pytest.mark.slow
def test_members_of_different_structure_are_refused(fmnist):
    d = fmnist.subset(train_size=512, test_size=256)
    arm = get_arm("yat-trained")
    a, b = build_model(arm, 16, 0, d.x_train), build_model(arm, 32, 0, d.x_train)
    with pytest.raises(ValueError, match="one model structure"):
        fit_batch([a, b], d.x_train, d.y_train, d.x_test, d.y_test, lrs=[0.01] * 2, seeds=[0, 1], **PROTOCOL)


def test_batch_groups_join_seeds_and_rates_of_one_shape_only(tmp_path):
    from lazylab.config import RunConfig

    trained = get_arm("yat-trained")
    base = dict(arm=trained.name, plugin=trained.plugin, epochs=2, train_size=2048)
    cfgs = [RunConfig(width=w, seed=s, lr=lr, **base) for w in (16, 2048) for s in (0, 1, 2) for lr in (0.1, 0.3)]
    groups = batch_groups(trained, cfgs)
    narrow = [g for g in groups if g[0].width == 16]
    assert [len(g) for g in narrow] == [BATCH_MEMBERS] * 2  # six runs of one shape, three per group
    assert all(len(g) == 1 for g in groups if g[0].width == 2048)  # wide runs train alone
    assert sorted(c.key() for g in groups for c in g) == sorted(c.key() for c in cfgs)
    other = dataclasses.replace(cfgs[0], epochs=3)
    assert len(batch_groups(trained, [cfgs[0], other])) == 2  # another protocol is another program
    frozen = get_arm("yat-frozen")
    assert all(len(g) == 1 for g in batch_groups(frozen, [dataclasses.replace(c, arm=frozen.name) for c in cfgs]))


@pytest.mark.slow
@pytest.mark.parametrize("arm_name", ["yat-trained", "relu-trained"])
def test_a_runs_record_is_the_same_bits_whatever_it_is_grouped_with(fmnist, memo_dir, arm_name):
    """A member computes what it computes alone, so resuming or re-requesting a run never changes its record."""
    ws = Workspace(None, memo_dir)
    arm = get_arm(arm_name)
    cfgs = [ws.config(arm, 32, s, lr, epochs=2, batch=256, train_size=2048, fan_in="unit")
            for s, lr in ((0, 0.01), (1, 0.01), (2, 0.003))]
    together = train_runs(ws, arm, cfgs)
    alone = [train_runs(ws, arm, [c])[0] for c in cfgs]
    reordered = train_runs(ws, arm, cfgs[::-1])[::-1]
    for t, a, r in zip(together, alone, reordered):
        # Every field but the wall time (the group's, shared out) is the run's alone.
        without_timing = lambda rec: {k: v for k, v in rec.items() if k != "seconds"}
        assert without_timing(t) == without_timing(a) == without_timing(r)
        assert set(t) == {"key", "config", "best_acc", "final_acc", "best_epoch", "curve", "train_loss", "diverged",
                          "scalars", "movement", "seconds"}
    assert len({t["best_acc"] for t in together}) > 1
