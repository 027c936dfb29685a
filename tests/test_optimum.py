"""The trained side at its optimum (lazylab.experiments.optimum): rate and epoch chosen on held-out training
images, never on the test set; annealed training that computes per member what it computes alone."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from lazylab.arms import get_arm
from lazylab.experiments import Workspace
from lazylab.experiments.optimum import (choose, optimum_budget, patience_for, refit_config, run_records,
                                         select_config, chosen_on_test)
from lazylab.model import build_model
from lazylab.train import EvalSet, cosine_factor, fit_annealed

N = 1536  # training images: 1,280 fitted, the last 256 held out


def test_cosine_factor_follows_one_half_cosine_cycle():
    assert cosine_factor(0, 50) == 1.0
    assert cosine_factor(25, 50) == pytest.approx(0.5)
    assert cosine_factor(49, 50) == pytest.approx(0.5 * (1 + math.cos(math.pi * 49 / 50)))
    assert cosine_factor(49, 50) < 0.001  # the last epoch trains at a thousandth of the peak rate
    assert optimum_budget(12) == 50 and optimum_budget(3) == 13 and optimum_budget(1) == 4
    assert patience_for(50) == 10 and patience_for(13) == 3


@pytest.fixture(scope="module")
def ws(fmnist, tmp_path_factory):
    w = Workspace(None, tmp_path_factory.mktemp("optimum-memo"))
    w._data = fmnist
    return w


@pytest.fixture(scope="module")
def selection(ws):
    """yat-trained m = 16 on 1,536 images: two rates x two seeds, 4 epochs of a cosine."""
    arm = get_arm("yat-trained")
    cells = [(arm, select_config(ws, arm, 16, s, lr, N, budget=4)) for lr in (0.01, 0.03) for s in (0, 1)]
    return arm, cells, run_records(ws, cells)


@pytest.mark.slow
def test_selection_runs_score_held_out_images_and_stop_within_the_budget(selection):
    _, cells, records = selection
    for (_, cfg), r in zip(cells, records):
        assert cfg.holdout == N // 6 and r["holdout_scored"] == N // 6  # a random bank: every held-out image
        assert len(r["held_out"]) == len(r["test_curve"]) == len(r["train_loss"]) == r["epochs"] <= 4
        assert r["best_epoch"] == int(np.argmax(r["held_out"])) + 1 and r["held_out_best"] == max(r["held_out"])
        assert r["stop"] in ("budget", "patience") and 20 < r["held_out_best"] < 100
        # Held-out and test are different images: their curves differ somewhere.
        assert r["held_out"] != r["test_curve"]


@pytest.mark.slow
def test_the_choice_never_reads_a_test_accuracy(selection):
    """Reversing every run's test curve (or setting it to anything) moves neither the rate nor the epochs."""
    _, _, records = selection
    chosen = choose(records)
    reversed_ = [{**r, "test_curve": r["test_curve"][::-1]} for r in records]
    worst = [{**r, "test_curve": [0.0] * len(r["test_curve"])} for r in records]
    assert choose(reversed_) == choose(worst) == chosen
    assert chosen["lr"] in (0.01, 0.03) and set(chosen["epochs"]) == {0, 1}
    row = chosen["rates"][repr(chosen["lr"])]
    assert chosen["held_out"] == pytest.approx(np.mean(row["best"]))
    # The test-selected figure reads exactly what the choice does not.
    peek = chosen_on_test(reversed_)
    assert peek["test_acc"] == pytest.approx(max(np.mean([max(r["test_curve"]) for r in records
                                                          if r["config"]["lr"] == lr]) for lr in (0.01, 0.03)))


@pytest.mark.slow
def test_selection_runs_do_not_depend_on_the_test_labels(ws, fmnist, selection):
    """The same runs with the test labels permuted: identical held-out curves and losses (training and the
    choice never see the test set); only the test curve moves."""
    arm, cells, records = selection
    shuffled = dataclasses.replace(fmnist, y_test=np.roll(fmnist.y_test, 1))
    other = Workspace(None, ws.memo.directory.parent / "optimum-shuffled")
    other._data = shuffled
    again = run_records(other, cells[:2])
    for a, b in zip(records[:2], again):
        assert a["held_out"] == b["held_out"] and a["train_loss"] == b["train_loss"]
        assert a["test_curve"] != b["test_curve"]


def _records(held: dict) -> list[dict]:
    """Selection records of one arm and width from ``{(lr, seed): held-out curve}`` (mechanics of ``choose``)."""
    return [{"config": {"lr": lr, "seed": s}, "held_out": curve, "test_curve": curve[::-1], "diverged": None}
            for (lr, s), curve in held.items()]


def test_choose_takes_the_best_mean_and_each_seeds_own_epoch_and_never_a_diverged_rate():
    recs = _records({(0.01, 0): [80, 82, 81], (0.01, 1): [79, 80, 83], (0.03, 0): [84, 85, 85], (0.03, 1): [84, 84, 84]})
    recs.append({"config": {"lr": 0.1, "seed": 0}, "held_out": [90.0], "test_curve": [90.0], "diverged": {"epoch": 2}})
    recs.append({"config": {"lr": 0.1, "seed": 1}, "held_out": [90, 91], "test_curve": [90, 91], "diverged": None})
    c = choose(recs)
    assert c["lr"] == 0.03 and c["epochs"] == {0: 2, 1: 1}  # the first of tied epochs
    assert c["held_out"] == pytest.approx(84.5) and c["edge"] is None  # 0.1 was tried: 0.03 is interior
    assert c["rates"]["0.1"]["score"] is None  # one seed diverged: never chosen, however high the other
    tie = choose(_records({(0.01, 0): [85.0], (0.03, 0): [85.0]}))
    assert tie["lr"] == 0.01 and tie["edge"] == "bottom"  # ties go to the smaller rate, an end of the grid


@pytest.mark.slow
def test_annealed_members_compute_what_they_compute_alone(fmnist):
    """Two members side by side (different rates, seeds and epoch counts) equal each one trained alone, bit for bit."""
    arm = get_arm("yat-trained")
    x, y = fmnist.x_train[:1024], fmnist.y_train[:1024]
    evals = {"held_out": EvalSet(fmnist.x_train[1024:1536], fmnist.y_train[1024:1536]),
             "test": EvalSet(fmnist.x_test[:512], fmnist.y_test[:512], every_epoch=False)}
    models = [build_model(arm, 8, s, fmnist.x_train[:N]) for s in (0, 1)]
    both = fit_annealed(models, x, y, evals, lrs=[0.01, 0.03], seeds=[0, 1], horizon=4, batch=256, epochs=[3, 2])
    for i, (lr, seed, epochs) in enumerate(((0.01, 0, 3), (0.03, 1, 2))):
        alone = fit_annealed([models[i]], x, y, evals, lrs=[lr], seeds=[seed], horizon=4, batch=256, epochs=[epochs])[0]
        assert both[i].curves == alone.curves and both[i].train_loss == alone.train_loss
        assert both[i].epochs == epochs and both[i].stop == "epochs" and len(both[i].curves["test"]) == 1


@pytest.mark.slow
def test_early_stopping_stops_after_patience_epochs_without_gain(fmnist):
    """A rate so small that nothing is learnt stops once held-out accuracy has not risen for ``patience`` epochs."""
    arm = get_arm("yat-trained")
    evals = {"held_out": EvalSet(fmnist.x_train[1024:1536], fmnist.y_train[1024:1536])}
    model = build_model(arm, 8, 0, fmnist.x_train[:N])
    r = fit_annealed([model], fmnist.x_train[:1024], fmnist.y_train[:1024], evals, lrs=[1e-9], seeds=[0],
                     horizon=20, batch=256, monitor="held_out", patience=3)[0]
    best = int(np.argmax(r.curves["held_out"])) + 1
    assert r.stop == "patience" and r.epochs == best + 3 < 20


@pytest.mark.slow
def test_refit_trains_every_image_for_the_chosen_epochs_and_reads_the_test_set_once(ws, selection):
    arm, cells, records = selection
    chosen = choose(records)
    sel = [c for _, c in cells if c.lr == chosen["lr"]]
    fits = run_records(ws, [(arm, refit_config(c, chosen["epochs"][c.seed])) for c in sel])
    for cfg, r in zip(sel, fits):
        assert r["epochs"] == chosen["epochs"][cfg.seed] == len(r["train_loss"])
        assert r["config"]["train_size"] == N and "test_curve" not in r and 20 < r["test_acc"] < 100


def test_the_fair_sentence_says_so_when_the_smallest_frozen_bank_already_matches():
    """A frozen bank better than the trained network at every width is not "matched by no frozen bank"."""
    from lazylab.experiments.optimum import fair_sentence

    rows = [{"trained": "yat-trained", "width": 8, "trained_acc": 33.0,
             "matches": {"yat-frozen": {"width": "below", "interval": ["below", "below"], "text": "<= 8"}}}]
    text = fair_sentence(rows, [8, 16], {"yat-frozen": "random"})
    assert text.startswith("8 trained Yat units (33.0 %) are matched already by the smallest frozen bank measured, "
                           "8 random frozen Yat units: one trained Yat unit is worth at most ")
    assert "no frozen bank" not in text


def test_the_fair_sentence_prefers_a_bank_that_already_matches_at_the_smallest_width():
    """One bank matches from the smallest width, another only at 1,700: the cheapest is the first, at both the
    smallest and the widest trained width."""
    from lazylab.experiments.optimum import fair_sentence

    def row(width, acc):
        return {"trained": "yat-trained", "width": width, "trained_acc": acc,
                "matches": {"gaussian-frozen": {"width": "below", "text": "<= 16"},
                            "yat-frozen": {"width": 1700, "text": "about 1,700"}}}

    text = fair_sentence([row(16, 80.0), row(64, 85.0)], [16, 8192], {"gaussian-frozen": "data", "yat-frozen": "random"})
    assert text.startswith("16 trained Yat units (80.0 %) are matched already by the smallest frozen bank measured, "
                           "16 frozen Gaussian units centred on training images: one trained Yat unit is worth at most 1")
    assert "; 64 trained units already by the smallest, 16 frozen Gaussian" in text and "1,700" not in text


def test_the_fair_sentence_names_the_width_from_which_no_bank_matches():
    """Matched at 16, at 32 too, unmatched at 64 and 128: the sentence says so from 64 on (more than 8,192 / 64
    per trained unit), not only at the widest; a match at the widest again brings back the widest's clause."""
    from lazylab.experiments.optimum import fair_sentence

    def row(width, matched):
        hit = {"width": 500.0 * width / 16, "text": f"about {500 * width // 16}"} if matched else \
            {"width": "beyond", "text": "> 8,192"}
        return {"trained": "yat-trained", "width": width, "trained_acc": 80.0 + width / 16,
                "matches": {"gaussian-frozen": hit}}

    inits = {"gaussian-frozen": "data"}
    text = fair_sentence([row(16, True), row(32, True), row(64, False), row(128, False)], [16, 8192], inits)
    assert text.endswith("; 64 trained units (84.0 %) and every wider layer measured by no frozen bank up to 8,192 "
                         "units (more than 128 per trained unit).")
    text = fair_sentence([row(16, True), row(64, False), row(128, True)], [16, 8192], inits)
    assert text.endswith("; 128 trained units by about 4000 frozen Gaussian units centred on training images "
                         "(about 31 per trained unit).")
