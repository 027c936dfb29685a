"""The convex readout (lazylab.experiments.convex): the optimum checked against an independent
solver on real features, lambda chosen without the test set, and the ladder's wall table."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cli_helpers import assert_one_line_error, run
from lazylab.arms import get_arm
from lazylab.experiments import Workspace
from lazylab.experiments.convex import ConvexConfig, LambdaConfig, choose_lambda, convex_readout
from lazylab.experiments.convex_solve import scores, solve
from lazylab.model import build_model, features, seed_indices


def _objective(F, y, W, b, lam):
    """The regularised mean cross-entropy in float64 (the objective both solvers minimise)."""
    z = np.asarray(F, np.float64) @ W + b
    z -= z.max(axis=1, keepdims=True)
    ce = np.log(np.exp(z).sum(axis=1)) - z[np.arange(len(y)), y]
    return ce.mean() + 0.5 * lam * np.sum(W * W)


@pytest.fixture(scope="module")
def relu_features(fmnist):
    """relu-frozen's bank at m = 32 on the first 1,500 training and 500 test images."""
    x, y = fmnist.x_train[:1500], fmnist.y_train[:1500]
    model = build_model(get_arm("relu-frozen"), 32, 0, x)
    return (np.asarray(features(model.feat, x)), y,
            np.asarray(features(model.feat, fmnist.x_test[:500])), fmnist.y_test[:500])


@pytest.mark.slow
@pytest.mark.parametrize("lam", [1e-2, 1e-4])
def test_optimum_matches_scikit_learn(relu_features, lam):
    """sklearn's multinomial LogisticRegression (lbfgs, float64) minimises sum CE + ||W||^2 / (2C):
    with C = 1 / (n lam) it is our objective times n; both optima agree to 1e-3 in loss."""
    from sklearn.linear_model import LogisticRegression

    F, y, _, _ = relu_features
    ours = solve(F, y, lam)
    sk = LogisticRegression(C=1.0 / (len(y) * lam), tol=1e-10, max_iter=5000).fit(F.astype(np.float64), y)
    mine = _objective(F, y, ours["W"].astype(np.float64), ours["b"], lam)
    theirs = _objective(F, y, sk.coef_.T, sk.intercept_, lam)
    assert abs(mine - theirs) < 1e-3, (mine, theirs)
    assert mine < _objective(F, y, np.zeros((32, 10)), np.zeros(10), lam) - 0.5  # it moved far from the start
    assert ours["stop"] in ("gradient", "objective", "line_search")  # not the iteration cap
    assert abs(ours["objective"] - mine) < 1e-4  # the value it reports is the objective it minimised


def test_a_solve_without_a_blas_threadpoolctl_knows(relu_features, monkeypatch):
    """Where threadpoolctl finds no BLAS (Apple's Accelerate, threadpoolctl issue 135) the solve runs with the
    library's own threads, to the same optimum."""
    from threadpoolctl import ThreadpoolController

    from lazylab.experiments import convex_solve

    F, y, _, _ = relu_features
    known = solve(F, y, 1e-2)
    monkeypatch.setattr(convex_solve, "_blas", lambda: ThreadpoolController().select(internal_api="no-such-blas"))
    assert convex_solve._blas().info() == []
    alone = solve(F, y, 1e-2)
    assert abs(alone["objective"] - known["objective"]) < 1e-6 and alone["stop"] != "max_iter"


def test_subnormal_probabilities_are_flushed_without_moving_the_gradient(relu_features, monkeypatch):
    """Softmax probabilities 87-103 nats under a row's top logit are subnormal in float32 (slow in OpenBLAS):
    the objective gives BLAS zeros instead, and its gradient keeps every bit."""
    from lazylab.experiments import convex_solve

    tiny, normal_float32 = np.finfo(np.float32).tiny, convex_solve.normal_float32
    flushed = normal_float32(np.array([1e-40, -1e-39, 1e-30, 0.5, -2e-38, 0.0]))
    assert flushed.dtype == np.float32 and list(flushed) == [0.0, 0.0, np.float32(1e-30), 0.5, np.float32(-2e-38), 0.0]

    F, y, _, _ = relu_features
    m = F.shape[1]
    W = np.random.default_rng(0).standard_normal((m, 10))
    W *= 150 / np.median(np.ptp(F @ W, axis=1))  # logits spread by about 150 nats, as late in a data-seeded solve
    x = np.concatenate([W.ravel(), np.zeros(10)])
    casts = []

    def gradient(cast):
        monkeypatch.setattr(convex_solve, "normal_float32", lambda G: casts.append(cast(G)) or casts[-1])
        objective = convex_solve._Objective(F, y, len(y), np.zeros(m), np.eye(m, dtype=np.float32), 1e-4)
        return objective(x)

    value, grad = gradient(lambda G: G.astype(np.float32))
    assert np.sum((casts[0] != 0) & (np.abs(casts[0]) < tiny)) > 0  # the plain cast makes subnormals here
    value_flushed, grad_flushed = gradient(normal_float32)
    assert np.sum((casts[1] != 0) & (np.abs(casts[1]) < tiny)) == 0
    assert value_flushed == value and np.array_equal(grad_flushed, grad)


@pytest.mark.slow
def test_warm_start_reaches_the_same_optimum(relu_features):
    F, y, _, _ = relu_features
    cold = solve(F, y, 1e-3)
    warm = solve(F, y, 1e-3, start=solve(F, y, 1e-1))
    assert abs(cold["objective"] - warm["objective"]) < 1e-5


@pytest.mark.slow
def test_lambda_is_chosen_on_held_out_training_images(relu_features):
    """The choice reads the training images only (it takes no test set): the path's fits see the first
    5/6, their accuracies are those on the last 1/6, the walk stops at the first lambda that does not beat
    the best so far, and the best wins (ties: the larger lambda)."""
    F, y, _, _ = relu_features
    cfg = LambdaConfig(arm="relu-frozen", plugin="x", width=32, seed=0, train_size=len(y), fan_in="unit", data="",
                       lambdas=(1e1, 1e-1, 1e-3, 1e-5, 1e-7), holdout=len(y) // 6)
    a = choose_lambda(F, y, cfg)
    fitted = [float(k) for k in a["selection"]]
    acc = [a["selection"][k] for k in a["selection"]]
    assert fitted == list(cfg.lambdas[: len(fitted)]) and len(fitted) >= 2
    assert a["lambda"] == max(fitted, key=lambda lam: (a["selection"][repr(lam)], lam))
    assert all(acc[i + 1] > max(acc[: i + 1]) for i in range(len(acc) - 2))  # every fit but the last gained
    assert len(fitted) == len(cfg.lambdas) or acc[-1] <= max(acc[:-1])  # the last did not, or ended the path
    assert acc[0] < max(acc) - 5  # lambda = 10 crushes the head: the walk had to leave it
    assert all(40 < v < 95 for v in acc[1:])
    shuffled = y.copy()
    shuffled[-cfg.holdout:] = (shuffled[-cfg.holdout:] + 1) % 10  # wrong held-out labels: chance-level scores
    b = choose_lambda(F, shuffled, cfg)
    assert all(v < 20 for v in b["selection"].values())
    common = set(a["selection"]) & set(b["selection"])
    assert {k: b["selection_iterations"][k] for k in common} == {k: a["selection_iterations"][k] for k in common}


@pytest.mark.slow
def test_the_walk_goes_on_past_a_tie_at_chance(relu_features):
    """Penalties so strong that the head learns only the class frequencies score the commonest held-out
    class's share at best, both the same: a tie, but at chance, so the walk goes on to a lambda that learns."""
    F, y, _, _ = relu_features
    cfg = LambdaConfig(arm="relu-frozen", plugin="x", width=32, seed=0, train_size=len(y), fan_in="unit", data="",
                       lambdas=(1e4, 1e3, 1e-3), holdout=len(y) // 6)
    a = choose_lambda(F, y, cfg)
    chance = 100 * np.bincount(y[-cfg.holdout:]).max() / cfg.holdout
    assert a["selection"]["10000.0"] == a["selection"]["1000.0"] <= chance
    assert a["lambda"] == 1e-3 and a["selection"]["0.001"] > chance + 40


def test_a_tie_at_chance_is_counted_not_rounded():
    """58 of 500 held-out images in the commonest class: as a percentage, 100 * mean is 11.600000000000001
    against 100 * 58 / 500 = 11.6, so a crushed head would seem above chance; counted, it is at chance and the
    walk goes on (synthetic features: the rule's mechanics only)."""
    rng = np.random.default_rng(0)
    n, h = 3000, 500
    y_fit = np.r_[np.zeros(500, int), rng.integers(1, 10, n - h - 500)]  # class 0 commonest: a crushed head says 0
    y_held = np.r_[np.zeros(58, int), np.repeat(np.arange(1, 10), 49), [1]]
    y = np.r_[y_fit, y_held]
    F = np.c_[np.eye(10)[y] + 0.3 * rng.standard_normal((n, 10)), 0.1 * rng.standard_normal((n, 6))]
    cfg = LambdaConfig(arm="x", plugin="x", width=16, seed=0, train_size=n, fan_in="unit", data="",
                       lambdas=(1e4, 1e3, 1e-3), holdout=h)
    a = choose_lambda(F.astype(np.float32), y, cfg)
    assert a["selection"]["10000.0"] == a["selection"]["1000.0"] > 100 * 58 / 500  # the rounding
    assert a["lambda"] == 1e-3 and a["selection"]["0.001"] > 90


@pytest.mark.slow
def test_held_out_images_that_seed_a_unit_are_not_scored(fmnist):
    """A data-seeded bank's prototype images sit at their units' peaks: held out, the fitted head gets
    them almost all wrong (measured: 1 of 24 right at m = 128, 1,000 iterations), so the choice scores only the others."""
    n, m = 1500, 128
    x, y = fmnist.x_train[:n], fmnist.y_train[:n]
    F = np.asarray(features(build_model(get_arm("yat-data-frozen"), m, 0, x).feat, x))
    seeds = seed_indices(m, 0, n)
    cfg = LambdaConfig(arm="yat-data-frozen", plugin="x", width=m, seed=0, train_size=n, fan_in="unit", data="",
                       lambdas=(1e-2, 1e-4), holdout=n // 6, max_iter=100)  # converging is not the point here
    held = np.arange(n - cfg.holdout, n)
    mine = np.intersect1d(held, seeds)
    assert len(mine) > 10
    a = choose_lambda(F, y, cfg, seeds)
    assert a["holdout_scored"] == cfg.holdout - len(mine)
    relabelled = y.copy()
    relabelled[mine] = (relabelled[mine] + 1) % 10  # not scored, not fitted: nothing may change
    assert choose_lambda(F, relabelled, cfg, seeds)["selection"] == a["selection"]
    fit = solve(F, y, a["lambda"], n - cfg.holdout, max_iter=300)
    right = scores(F[mine], y[mine], fit["W"], fit["b"])[1]
    assert right.mean() < 0.2 < 0.5 < a["selection"][repr(a["lambda"])] / 100
    assert choose_lambda(F, y, cfg)["holdout_scored"] == cfg.holdout  # a random bank's seeds: none
    with pytest.raises(ValueError, match="no held-out image to choose lambda on"):
        choose_lambda(F, y, cfg, np.arange(n))  # nothing left to score: refused, not NaN


@pytest.mark.slow
def test_the_fit_never_reads_the_test_labels(relu_features):
    F, y, Ft, yt = relu_features
    cfg = ConvexConfig(arm="relu-frozen", plugin="x", width=32, seed=0, train_size=len(y), fan_in="unit", data="",
                       lam=1e-3)
    a = convex_readout(F, y, Ft, yt, cfg)
    b = convex_readout(F, y, Ft, (yt + 1) % 10, cfg)
    assert (a["train_loss"], a["objective"], a["iterations"]) == (b["train_loss"], b["objective"], b["iterations"])
    assert a["test_acc"] != b["test_acc"] and 50 < a["test_acc"] < 95 and a["lambda"] == 1e-3


TINY = ["--train-size", "1536", "--epochs", "1", "--lr", "0.1", "--seeds", "0"]


@pytest.mark.slow
def test_ladder_readout_both_prints_the_wall_and_memoizes(capsys, memo_dir, tmp_path):
    argv = ["ladder", "--arms", "relu-frozen,yat-trained", "--widths", "8,16", *TINY, "--readout", "both",
            "--lambdas", "1e-3,1e-5", "--json", tmp_path / "r.json", "--out", tmp_path / "fig"]
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    assert "the wall" in out and "wall.png" in out
    payload = json.loads((tmp_path / "r.json").read_text())
    rows = payload["analysis"]["wall"]["arms"]
    assert list(rows) == ["relu-frozen"]  # trained arms have no convex readout
    for r in rows["relu-frozen"].values():
        # One AdamW epoch stops far short of the optimum of the same features.
        assert r["convex_loss"] < r["protocol_loss"] and r["loss_gap"] > 0
        assert r["convex_acc"] == pytest.approx(r["best_acc"] + r["gap"])
    runs = payload["convex"]["runs"]
    choices = {ch["config"]["width"]: ch for ch in payload["convex"]["choices"]}  # one per width, on seed 0's bank
    assert set(choices) == {8, 16} and all(ch["config"]["seed"] == 0 for ch in choices.values())
    assert all("0.001" in ch["selection"] and set(ch["selection"]) <= {"0.001", "1e-05"} for ch in choices.values())
    refined = {ch["config"]["width"]: ch for ch in payload["convex"]["refinements"]}  # each choice's refinement
    assert {w: r["coarse"] for w, r in refined.items()} == {w: ch["lambda"] for w, ch in choices.items()}
    assert len(runs) == 2 and all(r["lambda"] == refined[r["config"]["width"]]["lambda"] for r in runs)
    said = {w: f"{refined[w]['lambda']:g}" for w in (8, 16)}
    line = ("relu-frozen " + (f"{said[8]} (m = 8-16)" if said[8] == said[16] else f"{said[8]} (m = 8), {said[16]} (m = 16)"))
    assert "lambda per width, chosen on seed 0's bank by held-out accuracy: " + line in out.replace("\n", " ")
    again = run(capsys, *argv)
    assert "convex readouts: 6 computed, 0 from the memo" in out  # each width's lambda choice, refinement, cell
    assert again[0] == 0 and "0 computed, 4 from the memo" in again[1]
    assert "convex readouts: 0 computed, 6 from the memo" in again[1]
    assert json.loads((tmp_path / "r.json").read_text())["convex"]["runs"] == runs  # from the memo, unchanged


@pytest.mark.slow
def test_readout_convex_says_when_lambda_is_an_end_of_the_path(capsys, memo_dir):
    """On a path of two penalties far too strong, the best lies past its smaller end (the refinement follows it
    there): the convex-only table says so, as the wall table does."""
    code, out, err = run(capsys, "ladder", "--arms", "relu-frozen", "--widths", "8,16", *TINY, "--readout", "convex",
                         "--lambdas", "10,1")
    assert code == 0, err
    assert ("lambda: in 2 of 2 readouts the held-out accuracy was not seen to fall on both sides of the chosen "
            "penalty: the best may lie beyond (--lambdas extends the path)\n") in out  # one line


def test_a_lambda_counts_as_bracketed_only_where_the_held_out_score_falls_on_both_sides():
    """A choice at the path's end that the refinement carried past it and saw fall again is bracketed; one at the
    end of the refinement's steps, one on a plateau (ties at chance) and an unrefined one at the path's end are
    not."""
    from lazylab.experiments.convex_wall import lambda_at_edge

    def rec(arm, held_out, chosen):
        return {"config": {"arm": arm, "width": 64}, "selection": {f"{lam:g}": acc for lam, acc in held_out.items()},
                "lambda": chosen}

    path = [1e-2, 1e-4, 1e-6]
    climbing = {1e-2: 40.0, 1e-4: 60.0, 1e-6: 70.0}
    convex = {"lambdas": path,
              "choices": [rec("bracketed", climbing, 1e-6), rec("still-rising", climbing, 1e-6),
                          rec("unrefined", {1e-2: 80.0, 1e-4: 70.0}, 1e-2),
                          rec("plateau", {1e-2: 10.0, 1e-4: 10.0}, 1e-2)],
              "refinements": [rec("bracketed", {3.16e-7: 72.0, 1e-7: 71.0}, 3.16e-7),
                              rec("still-rising", {3.16e-7: 72.0, 1e-7: 73.0}, 1e-7),
                              rec("plateau", {3.16e-2: 10.0, 3.16e-3: 10.0}, 1e-2)],
              "runs": [{"config": {"arm": arm, "width": 64}, "lambda": lam}
                       for arm, lam in [("bracketed", 3.16e-7), ("still-rising", 1e-7), ("unrefined", 1e-2),
                                        ("plateau", 1e-2)]
                       for _ in range(2)] + [{"missing": True}]}
    assert lambda_at_edge(convex) == [6, 8]


@pytest.mark.slow
def test_report_shows_the_wall_once_it_is_in_the_memo(capsys, memo_dir, tmp_path):
    """render's ladder payload carries the wall (and the report its table and figure) only when
    every convex readout of the shown ladder's frozen arms is in the memo."""
    from lazylab.experiments import render as xr
    from lazylab.render.ladder_sections import _wall_section

    plan = dict(arms=["relu-frozen"], widths=[8, 16], seeds=[0], epochs=1, train_size=1536, lr=0.1)
    ws = Workspace(cache_dir=memo_dir)
    spec = xr.ladder_spec(ws, xr.LadderSettings.explicit(**plan))
    before = xr.ladder_result(ws, spec)
    assert "wall" not in before["analysis"]
    note = "".join(_wall_section({"data": before}))
    assert "--widths 8,16 --seeds 0 --epochs 1 --train-size 1536 --lr 0.1 --readout both" in note
    code, _, err = run(capsys, "ladder", "--arms", "relu-frozen", "--widths", "8,16", *TINY, "--readout", "both",
                       "--no-figures")
    assert code == 0, err
    assert xr.memo_extras(ws, spec["plan"])["wall"]
    after = xr.ladder_result(ws, spec)
    rows = after["analysis"]["wall"]["arms"]["relu-frozen"]
    assert set(rows) == {"8", "16"}
    html = "".join(_wall_section({"data": after, "files": {}}))
    assert 'id="wall-table"' in html and f"{rows['16']['convex_acc']:.2f}" in html and "(1 AdamW epoch," in html


@pytest.mark.parametrize("argv,needle", [
    (["--arms", "yat-trained", "--readout", "both"], "frozen"),
    (["--arms", "yat-frozen", "--lambdas", "1e-3"], "--lambdas"),
])
def test_convex_options_that_cannot_apply_are_refused(capsys, memo_dir, argv, needle):
    code, _, err = run(capsys, "ladder", "--widths", "8", *TINY, *argv)
    assert_one_line_error(code, err, needle)


def test_convex_readout_refuses_a_trained_arm(capsys, memo_dir):
    code, _, err = run(capsys, "ladder", "--arms", "yat-trained", "--widths", "8", *TINY, "--readout", "convex")
    assert_one_line_error(code, err, "yat-trained", "frozen")
    for dry in ([], ["--dry-run"]):  # beside a frozen arm too, and the plan refuses what the run would
        code, _, err = run(capsys, "ladder", "--arms", "yat-trained,relu-frozen", "--widths", "8", *TINY,
                           "--readout", "convex", *dry)
        assert_one_line_error(code, err, "not trained ones (yat-trained)", "--readout both")


@pytest.mark.parametrize("lambdas", ["abc", "-1", "0", "nan", "inf", ",", "1e-3,0.001", "1e-2,,1e-4", "5e-324",
                                     "1e37", "1e300,1e-10"])
def test_bad_lambdas(capsys, memo_dir, lambdas):
    code, _, err = run(capsys, "ladder", "--arms", "yat-frozen", "--readout", "convex", "--lambdas", lambdas)
    assert_one_line_error(code, err, "--lambdas")


@pytest.mark.parametrize("lambdas", [(), ("1e-3",), (True,), (0.0,), (1e37,), (1e-3, 0.001), (float("nan"),), 1e-3,
                                     "1e-3", (10**17, 10**17 + 1), (10**400,), [1.0] * 5000])
def test_bad_lambdas_from_python(memo_dir, lambdas):
    """``lazylab.api.ladder(lambdas=)`` refuses what ``--lambdas`` refuses, in one short line, before any work."""
    from lazylab import api
    from lazylab.errors import LazylabError

    with pytest.raises(LazylabError, match=r"^lambdas: (expected (a sequence of )?penalties from|the penalty \S+ is "
                                           r"given more than once)") as err:
        api.ladder(arms="yat-frozen", readout="convex", lambdas=lambdas, cache_dir=memo_dir)
    assert "\n" not in str(err.value) and len(str(err.value)) < 160


def test_a_lambda_path_takes_any_real_numbers_as_floats():
    """NumPy and ``fractions`` numbers are penalties as Python floats are (what the CLI's text would give)."""
    from fractions import Fraction

    import numpy as np

    from lazylab.experiments.convex_solve import lambda_path

    assert lambda_path(np.array([1e-4, 1e-2])) == (1e-2, 1e-4)
    assert lambda_path([np.float32(0.5), np.int64(2), Fraction(1, 1000)]) == (2.0, 0.5, 0.001)
    assert lambda_path(x for x in (1e-6, 1e-3)) == (1e-3, 1e-6)


def test_the_help_gives_the_lambda_path_and_bounds_the_code_uses(capsys):
    """``ladder --help`` states the default path and the bounds ``--lambdas`` enforces, as numbers it accepts."""
    import re

    from lazylab.experiments.convex import LAMBDAS
    from lazylab.experiments.convex_solve import LARGEST_LAMBDA, SMALLEST_LAMBDA

    code, out, _ = run(capsys, "ladder", "--help")
    assert code == 0
    text = " ".join(out.split())
    low, high = map(float, re.search(r"each from (\S+) to (\S+) \[default", text).groups())
    assert low == pytest.approx(SMALLEST_LAMBDA, rel=0.05) and low >= SMALLEST_LAMBDA and high == LARGEST_LAMBDA
    default = re.search(r"\[default: ([0-9e.,-]+)\]", text[text.index("each from"):]).group(1)
    assert tuple(map(float, default.split(","))) == LAMBDAS


def test_runs_lists_a_choice_in_the_walks_order():
    """The memo stores a choice's selection keys sorted as text ("0.0001" before "0.01"): `lazylab runs`
    shows them in the walk's order, largest lambda first."""
    from lazylab.runs import run_from_record

    rec = {"key": "convex-lambda-" + "0" * 32, "lambda": 0.01, "seconds": 1.0,
           "config": {"arm": "relu-frozen", "width": 16, "seed": 0, "train_size": 60000},
           "selection": {"0.0001": 80.5, "0.01": 81.25, "1e-06": 79.0}}
    run = run_from_record(rec, "convex-lambda")
    assert run.detail == "lambda 0.01 chosen on held-out images: 0.01 81.25 %, 0.0001 80.50 %, 1e-06 79.00 %"


@pytest.mark.slow
def test_refinement_fits_the_half_decade_neighbours_and_keeps_the_choice_within_the_gain(relu_features):
    """On real ReLU features: the walk (factor 100 a step), then its refinement fits the two penalties half a decade
    either side on the same held-out images; the refined choice's held-out accuracy is within ``gain`` points of
    the best over walk and refinement, and a refined penalty replaces the walk's only by gaining at least that."""
    from lazylab.experiments.convex import REFINE_GAIN, refine_config, refine_lambda

    F, y, _, _ = relu_features
    cfg = LambdaConfig(arm="relu-frozen", plugin="x", width=32, seed=0, train_size=len(y), fan_in="unit", data="",
                       lambdas=(1e-1, 1e-3, 1e-5), holdout=500)
    walk = choose_lambda(F, y, cfg)
    ref = refine_lambda(F, y, refine_config(cfg, walk))
    coarse = walk["lambda"]
    assert ref["coarse"] == coarse
    assert set(ref["selection"]) >= {repr(float(f"{coarse * 10 ** 0.5:.3g}")), repr(float(f"{coarse / 10 ** 0.5:.3g}"))}
    every = {**walk["selection"], **ref["selection"]}
    chosen = every[repr(ref["lambda"])]
    assert ref["best"] == max(every.values()) and chosen >= ref["best"] - REFINE_GAIN - 1e-9
    if ref["lambda"] != coarse:
        assert chosen >= walk["selection"][repr(coarse)] + REFINE_GAIN - 1e-9
    # Refining a walk that ended at the path's smallest penalty may go on below it, a half-decade a step.
    low = refine_lambda(F, y, refine_config(cfg, {"lambda": 1e-5, "selection": {"1e-05": 0.0, "0.001": 0.0}}))
    assert min(float(k) for k in low["selection"]) <= 1e-5 / 10 ** 0.5 * 1.01


@pytest.mark.slow
def test_refinement_follows_a_neighbour_that_gained_until_the_best_is_bracketed(relu_features):
    """On real ReLU features, a walk's choice two decades too strong (1e-1 on the path 10, 1e-1, 1e-3): its
    smaller neighbour beats it, so stage two steps on (1e-2, then 3.16e-3 while it gains) and stops before the
    walk's next penalty, fitted by the walk; the best penalty fitted then has both half-decade neighbours
    fitted. Given its version-1 record (stage one) as ``first``, the refinement gives the same record to the
    bit."""
    import dataclasses

    from lazylab.experiments.convex import refine_config, refine_lambda

    F, y, _, _ = relu_features
    cfg = LambdaConfig(arm="relu-frozen", plugin="x", width=32, seed=0, train_size=len(y), fan_in="unit", data="",
                       lambdas=(10.0, 1e-1, 1e-3), holdout=500)
    rcfg = refine_config(cfg, {"lambda": 1e-1, "selection": {"10.0": 10.0, "0.1": 20.0, "0.001": 30.0}})
    stage_one = refine_lambda(F, y, dataclasses.replace(rcfg, version=1))
    assert list(stage_one["selection"]) == ["0.316", "0.0316"]
    whole = refine_lambda(F, y, rcfg)
    assert list(whole["selection"])[:3] == ["0.316", "0.0316", "0.01"]  # 1e-1 / 10, not 0.0316 / 3.16
    assert "0.001" not in whole["selection"] and len(whole["selection"]) <= 4
    every = {float(k): v for k, v in {**dict((repr(a), b) for a, b in rcfg.walk), **whole["selection"]}.items()}
    ladder = sorted(every)
    best = max(every.values())
    assert any(0 < i < len(ladder) - 1 and ladder[i + 1] / ladder[i] < 3.3 and ladder[i] / ladder[i - 1] < 3.3
               for i, lam in enumerate(ladder) if every[lam] == best), every
    assert whole["lambda"] == max((k for k in every if every[k] == best and k != 0.1), default=0.1)
    assert refine_lambda(F, y, rcfg, first=stage_one) == whole


def test_an_interrupted_refinement_resumes_from_its_last_finished_solve_to_the_bit(relu_features, tmp_path,
                                                                                 monkeypatch):
    """``step_memo`` keeps each solve of a refinement as it finishes: interrupted during its second solve, the
    refinement resumes without redoing the first and gives the record an uninterrupted one gives, to the bit."""
    from types import SimpleNamespace

    from lazylab.cache import Memo
    from lazylab.experiments import convex

    F, y, _, _ = relu_features
    cfg = LambdaConfig(arm="relu-frozen", plugin="x", width=32, seed=0, train_size=len(y), fan_in="unit", data="",
                       lambdas=(1e-1, 1e-3, 1e-5), holdout=500)
    rcfg = convex.refine_config(cfg, choose_lambda(F, y, cfg))
    whole = convex.refine_lambda(F, y, rcfg)
    calls = []

    def counted(*args, **kwargs):
        calls.append(args[2])  # the penalty
        if len(calls) == 2 and interrupt:
            raise KeyboardInterrupt
        return solve(*args, **kwargs)

    monkeypatch.setattr(convex, "solve", counted)
    ws = SimpleNamespace(memo=Memo(tmp_path / "memo"))
    interrupt = True
    with pytest.raises(KeyboardInterrupt):
        convex.refine_lambda(F, y, rcfg, remember=convex.step_memo(ws, rcfg))
    interrupt = False
    resumed = convex.refine_lambda(F, y, rcfg, remember=convex.step_memo(ws, rcfg))
    assert calls[0] not in calls[2:]  # the first solve came from the memo
    assert len(calls) == 1 + len(whole["selection"])
    assert resumed == whole and ws.memo.problems == []
    # A worker without a memo (Ray) refines in one piece.
    assert convex.step_memo(SimpleNamespace(), rcfg) is None
