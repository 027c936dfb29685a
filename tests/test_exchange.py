"""The exchange rate (issue 21 item 2) and unstable runs (item 3): constructed curves with known answers,
loss curves of real runs, and a real-data ladder through the command line."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest

from lazylab import analysis as an
from lazylab import exchange as ex
from cli_helpers import run

W = [16, 32, 64, 128, 256, 512, 1024]


# ---------------------------------------------------------------- exchange rate
def test_interpolation_is_linear_in_log_m_at_the_first_crossing():
    widths, means = [16, 64, 256, 1024], [60.0, 70.0, 80.0, 85.0]
    # 75 % lies halfway from 70 to 80: the geometric mean of 64 and 256.
    r = ex.exchange_rate(widths, means, None, 75.0)
    assert r["method"] == "interpolated" and r["between"] == [64, 256]
    assert r["frozen_width"] == pytest.approx(math.sqrt(64 * 256))
    assert r["text"] == "128 (interpolated)" and r["floor_acc"] is None
    # 72 %: a fifth of the way, 64 * 4^0.2 = 84.4.
    assert ex.exchange_rate(widths, means, None, 72.0)["frozen_width"] == pytest.approx(64 * 4 ** 0.2)
    # A curve that climbs, dips and climbs again: the FIRST crossing counts, and unsorted input is sorted.
    r = ex.exchange_rate([1024, 64, 256, 16], [90.0, 80.0, 70.0, 60.0], None, 75.0)
    assert r["between"] == [16, 64] and r["frozen_width"] == pytest.approx(16 * 4 ** 0.75)
    # A width where every seed diverged (None) is skipped, not read as 0.
    r = ex.exchange_rate(widths, [60.0, None, 80.0, 85.0], None, 70.0)
    assert r["between"] == [16, 256] and r["frozen_width"] == pytest.approx(16 * 16 ** 0.5)


def test_extrapolation_solves_the_fitted_law():
    floor, c, alpha = 10.0, 100.0, 0.5
    means = [100 - e for e in an.power_law(W, floor, c, alpha)]
    law = an.ladder_law(W, means)
    assert law["floor"] == pytest.approx(floor, abs=1e-6)
    # The sweep tops out at 100 - (10 + 100/32) = 86.9 %; 88 % means err 12 = 10 + 100 m^-0.5: m = 50^2.
    r = ex.exchange_rate(W, means, law, 88.0)
    assert r["method"] == "extrapolated"
    assert r["frozen_width"] == pytest.approx(2500.0, rel=1e-5)
    assert r["text"] == "2500 (extrapolated)" and r["floor_acc"] == pytest.approx(90.0)
    # The law at the returned width gives back the trained error.
    assert an.power_law(r["frozen_width"], law["floor"], law["c"], law["alpha"]) == pytest.approx(12.0)
    # Far out: printed in powers of ten. err 10.01: m = (100 / 0.01)^2 = 1e8.
    far = ex.exchange_rate(W, means, law, 89.99)
    assert far["frozen_width"] == pytest.approx(1e8, rel=1e-3) and far["text"] == "1e+08 (extrapolated)"
    # Below the sweep: the smallest bank already matches a weak trained arm; the law says how small.
    low = ex.exchange_rate(W, means, law, 60.0)  # err 40 = 10 + 100 m^-0.5: m = (100 / 30)^2
    assert low["method"] == "extrapolated" and low["frozen_width"] == pytest.approx((100 / 30) ** 2, rel=1e-5)
    assert "below the sweep" in low["text"]


def test_a_law_match_among_measured_widths_that_fall_short_says_so():
    # A frozen curve on the law 10 + 100 m^-0.5 up to m = 512, then falling (a rate too high for wide banks).
    widths = W[:6] + [2048, 8192]
    means = [100 - e for e in an.power_law(W[:6], 10.0, 100.0, 0.5)]
    means += [means[-1] - 1.0, means[-1] - 3.0]
    law = an.ladder_law(widths, means)
    assert law["widths"] == W[:6]
    r = ex.exchange_rate(widths, means, law, 87.5)  # err 12.5 = 10 + 100 m^-0.5: m = 40^2, inside the sweep
    assert r["method"] == "extrapolated" and r["frozen_width"] == pytest.approx(1600.0, rel=1e-5)
    assert r["text"] == "1600 (law only: measured banks fall short)"
    assert r["peak"] == [512, pytest.approx(90 - 100 / math.sqrt(512))]
    assert "peaks at 85.58 % (m = 512) and never reaches 87.50 %" in r["note"] and "(16-512)" in r["note"]
    s = ex.exchange_sentence([_row(16, 87.5, r)], widths)
    assert "the measured curve peaks at 85.6 % (m = 512)" in s and "about 1600 units" in s


def test_never_when_the_floor_is_at_or_above_the_trained_error():
    means = [100 - e for e in an.power_law(W, 10.0, 100.0, 0.5)]
    law = an.ladder_law(W, means)
    r = ex.exchange_rate(W, means, law, 91.0)  # trained err 9 < floor 10
    assert r["method"] == "never" and r["frozen_width"] is None
    assert r["text"] == "never (floor 10.0 % err >= 9.0 %)"
    exact = dict(law, floor=10.0)  # floor exactly at the trained error counts as never
    assert ex.exchange_rate(W, means, exact, 90.0)["method"] == "never"


def test_none_without_a_law_or_data():
    means = [60.0, 65.0, 70.0, 75.0, 76.0, 77.0, 78.0]
    r = ex.exchange_rate(W, means, {"widths": [16], "skipped": "1 width(s) in the region"}, 90.0)
    assert r["method"] == "none" and r["frozen_width"] is None and "1 width(s)" in r["why"]
    assert ex.exchange_rate(W, [None] * 7, None, 80.0)["method"] == "none"
    # The sweep reaches it: no law needed.
    assert ex.exchange_rate(W, means, None, 70.0)["method"] == "interpolated"
    rising = {"floor": 5.0, "c": -3.0, "alpha": 0.5}  # error growing with width: no match to solve for
    assert ex.exchange_rate(W, means, rising, 90.0)["method"] == "none"
    with pytest.raises(ValueError, match="finite"):
        ex.exchange_rate(W, means, None, float("nan"))
    with pytest.raises(ValueError, match="length"):
        ex.exchange_rate(W, means[:3], None, 80.0)


def _row(width, acc, result, trained="yat-trained", frozen="yat-frozen"):
    return {"trained": trained, "frozen": frozen, "width": width, "trained_acc": acc, **result}


def test_below_the_sweep_is_a_bound_unless_the_law_places_the_match_below_it():
    widths, means = [16, 64, 256], [80.0, 82.0, 84.0]
    # (c / (err_t - floor))^(1/alpha) = (100 / 11)^2 = 82.6: above m = 16, which already reaches 79 %
    r = ex.exchange_rate(widths, means, {"floor": 10.0, "c": 100.0, "alpha": 0.5}, 79.0)
    assert r["frozen_width"] is None and r["text"] == "<= 16 (below the sweep)" and r["below"]
    # (10 / 11)^2 = 0.83 units: below the sweep, from the law
    r = ex.exchange_rate(widths, means, {"floor": 10.0, "c": 10.0, "alpha": 0.5}, 79.0)
    assert math.isclose(r["frozen_width"], (10 / 11) ** 2) and r["below"]
    r.update(trained="yat-trained", frozen="yat-frozen", width=16, trained_acc=79.0)
    assert "even the smallest frozen Yat bank" in ex.exchange_sentence([r], widths)


def test_an_astronomical_law_width_is_a_bound_not_an_overflow():
    # alpha at its lower bound: (5 / 1)^(1/0.001) overflows a float
    r = ex.exchange_rate([16, 64, 256], [70.0, 75.0, 80.0], {"floor": 10.0, "c": 5.0, "alpha": 0.001}, 89.0)
    assert r["method"] == "extrapolated" and r["frozen_width"] is None and r["text"] == "> 1e15 (extrapolated)"
    assert "10^699" in r["note"]


def test_sentence_answers_for_the_smallest_trained_width():
    means = [100 - e for e in an.power_law(W, 14.0, 100.0, 0.5)]
    law = an.ladder_law(W, means)
    rows = [_row(w, acc, ex.exchange_rate(W, means, law, acc)) for w, acc in ((64, 86.5), (16, 86.2))]
    s = ex.exchange_sentence(rows, W)
    assert s.startswith("16 trained Yat units (86.2 %): no frozen Yat bank in the sweep (up to 1024) matches them")
    assert "floor is 14.0 % error" in s and "13.8 %" in s and "every trained width up to 64" in s
    rows = [_row(16, 80.0, ex.exchange_rate(W, means, law, 80.0))]
    assert "matched by a frozen Yat bank of about" in ex.exchange_sentence(rows, W)
    assert "no exchange rate" in ex.exchange_sentence([], W).lower()


# ---------------------------------------------------------------- unstable runs
# Loss curves of real runs (mean training loss per epoch, nats, to 4 figures): 12-epoch frozen-arm runs
# at seed 0 of the wall measurement (docs/ladder.md), rates chosen at m = 256.
ORDINARY = {  # relu-frozen m = 8192, lr 0.03: the largest rise (1.42 x) among runs with a steady test curve
    "train_loss": [1.901, 1.03, 0.9498, 0.9546, 0.7929, 0.9293, 0.842, 0.73, 0.7015, 0.7212, 0.9938, 0.7502],
    "best_epoch": 7, "diverged": None,
}
ROSE = {  # gaussian-frozen m = 2048, lr 0.03: test accuracy swings 46-72 %
    "train_loss": [6.107, 1.475, 1.291, 2.102, 1.36, 1.598, 1.413, 1.739, 1.31, 1.377, 1.536, 1.921],
    "best_epoch": 8, "diverged": None,
}
ABOVE_CHANCE = {  # gaussian-frozen m = 8192, lr 0.03
    "train_loss": [21.65, 7.222, 6.544, 5.509, 5.802, 6.062, 7.062, 5.383, 6.309, 5.12, 5.89, 7.404],
    "best_epoch": 12, "diverged": None,
}


def test_unstable_rule_on_real_loss_curves():
    assert an.unstable_reason(ORDINARY) is None
    rose = an.unstable_reason(ROSE)
    assert rose == "train loss rose from 1.29 (epoch 3) to 2.1 (epoch 4), > 1.5 x its minimum"
    assert 2.102 / 1.291 > an.UNSTABLE_RISE > 0.9938 / 0.7015
    assert an.unstable_reason(ABOVE_CHANCE) == "train loss 7.4 at best epoch 12 > ln 10 = 2.303"
    # best_epoch is 1-based (Workspace records argmax + 1): the loss of epoch 12 is the last entry.
    assert an.unstable_reason(dict(ABOVE_CHANCE, best_epoch=1)) == "train loss 21.6 at best epoch 1 > ln 10 = 2.303"
    # Just under chance at the best epoch, falling: fine; a loss that falls from a huge first epoch is fine.
    assert an.unstable_reason({"train_loss": [20.0, 2.3, 2.2], "best_epoch": 2, "diverged": None}) is None
    # Diverged runs are marked diverged, missing runs have no curve: neither is "unstable".
    assert an.unstable_reason({"train_loss": [0.9], "best_epoch": None,
                               "diverged": {"epoch": 2, "step": 300, "loss": "nan"}}) is None
    assert an.unstable_reason({"train_loss": [], "best_epoch": None, "diverged": None}) is None


# ------------------------------------------------------------- real ladder, end to end
@pytest.mark.slow
def test_ladder_reports_exchange_rates_and_unstable_runs(capsys, memo_dir, tmp_path):
    # 2 epochs on 2,048 real images at one fixed rate: yat-frozen climbs over the three widths (a law),
    # and 0.1 is too high for the trained Yat bank at m = 128 (its accuracy falls from m = 32).
    out_json = tmp_path / "x.json"
    code, out, _ = run(capsys, "ladder", "--arms", "yat-frozen,yat-trained,gaussian-frozen", "--widths", "8,32,128",
                       "--seeds", "0", "--epochs", "2", "--lr", "0.1", "--train-size", "2048",
                       "--json", out_json, "--no-figures")
    assert code == 0
    data = json.loads(out_json.read_text())
    cells = {a["arm"]: a["cells"] for a in data["arms"]}
    law = data["analysis"]["ladder_law"]["yat-frozen"]
    ex = data["analysis"]["exchange"]
    rows = ex["rows"]
    assert [(r["trained"], r["frozen"], r["width"]) for r in rows] == [("yat-trained", "yat-frozen", w) for w in (8, 32, 128)]
    frozen = {w: cells["yat-frozen"][str(w)]["mean"] for w in (8, 32, 128)}
    for r in rows:
        acc = cells["yat-trained"][str(r["width"])]["mean"]
        assert r["trained_acc"] == acc
        if r["method"] == "interpolated":  # the frozen means bracket the trained one, first crossing
            lo, hi = r["between"]
            assert frozen[lo] < acc <= frozen[hi] and all(frozen[w] < acc for w in frozen if w < lo)
            assert lo < r["frozen_width"] <= hi
            t = (acc - frozen[lo]) / (frozen[hi] - frozen[lo])
            assert r["frozen_width"] == pytest.approx(lo ** (1 - t) * hi ** t)
        elif r["method"] == "extrapolated":
            assert max(frozen.values()) < acc
            assert an.power_law(r["frozen_width"], law["floor"], law["c"], law["alpha"]) == pytest.approx(100 - acc)
        else:
            assert r["method"] == "never" and max(frozen.values()) < acc and law["floor"] >= 100 - acc
        # the table shows each trained arm at its smallest width; the rest fold into --json and the report
        assert (f"{r['width']} | {acc:.2f} | yat-frozen" in " ".join(out.split())) == (r["width"] == 8)
    assert "2 more rows (every trained width)" in " ".join(out.split())
    assert ex["sentence"].startswith(f"8 trained Yat units ({rows[0]['trained_acc']:.1f} %)")
    assert ex["sentence"] in out
    # Every run record carries "unstable"; cells count it; the table and the CSV show it.
    runs = data["runs"]
    assert len(runs) == 9 and all(r["unstable"] == an.unstable_reason(r) for r in runs)
    wide = next(r for r in runs if r["config"]["arm"] == "yat-trained" and r["config"]["width"] == 128)
    assert wide["unstable"] and wide["train_loss"][wide["best_epoch"] - 1] > math.log(10)
    assert wide["best_acc"] < cells["yat-trained"]["32"]["mean"]
    for a in data["arms"]:
        for w, c in a["cells"].items():
            assert c["unstable"] == sum(1 for r in runs if r["config"]["arm"] == a["arm"]
                                        and r["config"]["width"] == int(w) and r["unstable"])
    assert "(1 unstable)" in out
    rows_csv = list(csv.DictReader(open(out_json.with_suffix(".csv"))))
    assert [r["unstable"] for r in rows_csv] == [r["unstable"] or "" for r in runs]
    # One warning line per arm with unstable runs, naming its widths and rate; none for the fixed rate's bracket.
    warnings = data["analysis"]["warnings"]
    unstable_arms = {r["config"]["arm"] for r in runs if r["unstable"]}
    assert sorted(w.split(":")[0] for w in warnings) == sorted(unstable_arms)
    line = next(w for w in warnings if w.startswith("yat-trained"))
    assert "m = 128 (1 of 1 seed)" in line and "lr 0.1 (fixed)" in line
    printed = [l for l in out.splitlines() if l.startswith("warning: ")]
    assert printed == [f"warning: {w}" for w in warnings]


def _rec(arm, width, lr, losses, best):
    return {"key": f"run-{arm}-{width}-{lr}", "config": {"arm": arm, "width": width, "seed": 0, "lr": lr},
            "train_loss": losses, "best_epoch": best, "diverged": None, "best_acc": 80.0}


def test_warnings_name_unstable_widths_and_a_bracket_at_the_edge_of_its_grid():
    from lazylab.experiments.ladder import ArmSummary, LadderResult
    from lazylab.experiments.laws import exchange_table, ladder_warnings

    ok, bad = [1.0, 0.6, 0.5], [31.6, 12.4, 7.21]
    from lazylab.bracket import Bracket, RateScore

    grid = {"0.03": 70.0, "0.1": 71.0, "0.3": 72.0, "1.0": 73.0}

    def argmax(scores):  # the selection an argmax bracket records (seed 0 only)
        b = Bracket(rule="argmax", grid=[float(k) for k in scores])
        for k, acc in scores.items():
            b.scores[float(k)] = RateScore(lr=float(k), seeds=[0], accs=[acc], unstable=0, diverged=0)
        return dict(bracket=scores, selection=b.to_json())

    arms = [ArmSummary("yat-frozen", "builtin", 1.0, **argmax(grid)),  # top of its grid
            ArmSummary("gaussian-frozen", "builtin", 0.3, **argmax(dict(grid, **{"1.0": 60.0}))),  # inside
            ArmSummary("relu-frozen", "builtin", 0.03, **argmax(dict(grid, **{"0.03": 99.0}))),  # bottom
            ArmSummary("relu-trained", "builtin", 0.01)]  # fixed rate: no bracket
    runs = ([_rec("yat-frozen", w, 1.0, ok, 3) for w in (16, 1024)]
            + [_rec("gaussian-frozen", w, 0.3, bad if w == 1024 else ok, 3) for w in (16, 1024)]
            + [_rec("gaussian-frozen", 1024, 1.0, bad, 3)]  # a bracket-only rate: not a ladder cell
            + [_rec("relu-frozen", w, 0.03, ok, 3) for w in (16, 1024)]
            + [_rec("relu-trained", w, 0.01, bad, 3) for w in (16, 1024)])
    result = LadderResult(plan={"widths": [16, 1024], "seeds": [0]}, arms=arms, runs=runs)
    lines = ladder_warnings(result)
    assert lines == [
        "yat-frozen: the rate bracket (argmax rule, m = 256, seed 0) chose lr 1: the best rate 1 is the largest "
        "of the grid (the argmax rule does not extend it): a better rate may lie above it",
        "gaussian-frozen: unstable at m = 1024 (1 of 1 seed) with lr 0.3 (bracketed at m = 256): "
        "train loss 7.21 at best epoch 3 > ln 10 = 2.303",
        "relu-frozen: the rate bracket (argmax rule, m = 256, seed 0) chose lr 0.03: the best rate 0.03 is the "
        "smallest of the grid (the argmax rule does not extend it): a better rate may lie below it",
        "relu-trained: every run is unstable (all 2, every width, with lr 0.01 (fixed)), so its curve measures "
        "the optimiser's spikes, not the unit: train loss 7.21 at best epoch 3 > ln 10 = 2.303",
    ]
    payload = result.to_json()
    assert [r["unstable"] is not None for r in payload["runs"]] == [False, False, False, True, True, False, False,
                                                                    True, True]
    assert "unstable" not in runs[0]  # the records themselves are not changed
    empty = exchange_table(result, [], {})
    assert empty["rows"] == [] and "no exchange rate" in empty["sentence"]


def test_exchange_table_on_a_trained_arm_without_accuracy():
    from types import SimpleNamespace

    from lazylab.experiments.ladder import ArmSummary, LadderResult
    from lazylab.experiments.laws import exchange_table

    means = [100 - e for e in an.power_law([16, 64, 256], 14.0, 100.0, 0.5)]
    frozen = ArmSummary("yat-frozen", "builtin", 1.0, cells={w: {"mean": m} for w, m in zip((16, 64, 256), means)})
    trained = ArmSummary("yat-trained", "builtin", 0.01, cells={16: {"mean": None}, 64: {"mean": 85.0}, 256: {"mean": None}})
    arms = [SimpleNamespace(name=n, unit="yat", init="random", trained=n.endswith("trained"))
            for n in ("yat-frozen", "yat-trained")]
    law = an.ladder_law([16, 64, 256], means)
    ex = exchange_table(LadderResult({"widths": [16, 64, 256], "seeds": [0]}, [frozen, trained], []), arms,
                        {"yat-frozen": law})
    assert [r["method"] for r in ex["rows"]] == ["none", "extrapolated", "none"]
    assert ex["rows"][1]["frozen_width"] == pytest.approx(100 ** 2, rel=1e-5)  # err 15 = 14 + 100 m^-0.5
    assert ex["sentence"].startswith("64 trained Yat units (85.0 %)")
    trained.cells = {w: {"mean": None} for w in (16, 64, 256)}
    ex = exchange_table(LadderResult({"widths": [16, 64, 256], "seeds": [0]}, [frozen, trained], []), arms,
                        {"yat-frozen": law})
    assert ex["sentence"].startswith("yat-trained has no accuracy at any width")


# ------------------------------------------------------------------ the answer at the optimum (mechanics)
def test_crossing_interpolates_in_log_m_and_marks_the_sweep_ends():
    from lazylab.exchange import crossing

    widths = [16, 64, 256]
    assert crossing(widths, [70.0, 80.0, 90.0], 85.0) == pytest.approx(128.0)  # halfway in log m between 64 and 256
    assert crossing(widths, [70.0, None, 90.0], 80.0) == pytest.approx(64.0)  # a missing mean is skipped
    assert crossing(widths, [70.0, 80.0, 90.0], 60.0) == 0.0  # the smallest bank already matches
    assert crossing(widths, [70.0, 80.0, 90.0], 95.0) == float("inf")  # no bank of the sweep does


def test_seed_interval_brackets_the_point_and_collapses_without_spread():
    from lazylab.exchange import crossing, seed_interval

    widths = [16, 64, 256]
    flat = {16: [70.0] * 3, 64: [80.0] * 3, 256: [90.0] * 3}
    point = crossing(widths, [70.0, 80.0, 90.0], 85.0)
    assert seed_interval(widths, flat, [85.0, 85.0, 85.0]) == (pytest.approx(point), pytest.approx(point))
    noisy = {16: [69.0, 70.0, 71.0], 64: [79.0, 80.0, 81.0], 256: [89.0, 90.0, 91.0]}
    low, high = seed_interval(widths, noisy, [84.0, 85.0, 86.0])
    assert low < point < high and 64 < low and high < 256
    # a trained accuracy the widest bank reaches in only some resamples: the interval is open above
    low, high = seed_interval(widths, noisy, [89.0, 90.0, 91.0])
    assert high == float("inf") and 64 < low < 256


def test_answer_rows_pick_the_same_unit_and_the_cheapest_bank():
    from lazylab.exchange import answer_rows, answer_sentence

    widths = [16, 64, 256]
    frozen = {"yat-frozen": {16: [60.0], 64: [75.0], 256: [84.0]},
              "gaussian-frozen": {16: [70.0], 64: [82.0], 256: [87.0]},
              "relu-frozen": {16: [50.0], 64: [60.0], 256: [70.0]}}
    rows = answer_rows({"yat-trained": {16: [82.0], 64: [90.0]}}, frozen, {"yat-trained": "yat-frozen"}, widths)
    first, second = rows
    assert first["same"]["frozen"] == "yat-frozen" and 64 < first["same"]["width"] < 256
    assert first["cheapest"]["frozen"] == "gaussian-frozen" and first["cheapest"]["width"] == pytest.approx(64.0)
    assert second["same"]["width"] == "beyond" and second["cheapest"] is None  # 90 % is beyond every bank
    protocol = {"method": "never", "text": "never (floor 14.2 % err >= 14.0 %)", "frozen_width": None}
    text = answer_sentence(first, protocol, widths, epochs=12)
    assert text.startswith("16 trained Yat units (82.0 %) = about 64 frozen Gaussian units or ")
    assert "one seed: no interval" in text and "12-epoch AdamW readout" in text and "never (floor" in text


# ------------------------------------------------------------------ the fair answer's interval
SWEEP = [2 ** k for k in range(4, 14)]  # 16 ... 8192, the paper's widths


def _coverage(curve, target: float, sd_frozen: float, sd_trained: float, draws: int = 1000, seed: int = 0):
    """How often ``crossing_interval`` over three seeds a side holds the true crossing of ``curve`` at ``target``."""
    from lazylab.exchange import crossing, crossing_interval

    rng = np.random.default_rng(seed)
    true = crossing(SWEEP, [curve(w) for w in SWEEP], target)
    held = 0
    for _ in range(draws):
        frozen = {w: list(curve(w) + sd_frozen * rng.standard_normal(3)) for w in SWEEP}
        low, high = crossing_interval(SWEEP, frozen, list(target + sd_trained * rng.standard_normal(3)))
        held += low <= true <= high
    return true, held / draws


@pytest.mark.parametrize("curve, target, sd_frozen, sd_trained", [
    (lambda m: 90 - 30 * m ** -0.35, 87.0, 0.20, 0.25),  # a crossing near 700 units
    (lambda m: 90 - 30 * m ** -0.35, 88.5, 0.15, 0.30),  # near 5,300: a flat stretch of the curve
    (lambda m: 88 - 10 * m ** -0.2, 84.5, 0.30, 0.30),  # near 190
])
def test_the_crossing_interval_covers_the_true_crossing_at_about_its_level(curve, target, sd_frozen, sd_trained):
    """Synthetic three-seed curves with known noise (mechanics: the interval's method, not the science): the 95 %
    interval holds the true crossing in 93-99.5 % of 1,000 draws (Welch's t is slightly conservative here)."""
    true, rate = _coverage(curve, target, sd_frozen, sd_trained)
    print(f"true crossing {true:.0f} units: covered in {rate:.1%} of draws")
    assert 0.93 <= rate <= 0.995, (true, rate)


def test_welch_degrees_of_freedom_lie_between_the_conservative_and_the_pooled():
    from lazylab.exchange import t_quantile, welch_df

    assert welch_df(0.01, 3, 0.01, 3) == pytest.approx(4.0)  # equal variances: n_a + n_b - 2
    assert welch_df(0.01, 3, 0.0, 3) == pytest.approx(2.0)  # one side without spread: that side's n - 1
    assert welch_df(0.0, 3, 0.0, 3) == 2.0 and welch_df(0.1, 1, 0.0, 1) == 1.0
    assert t_quantile(2) == pytest.approx(4.303, abs=1e-3) and t_quantile(4) == pytest.approx(2.776, abs=1e-3)


def test_the_interval_widens_with_the_seed_spread_and_reads_a_flat_stretch_as_a_range():
    from lazylab.exchange import crossing_interval, match

    widths = [256, 512, 1024, 2048, 4096]
    steep = {256: [80, 80.1, 79.9], 512: [83, 83.1, 82.9], 1024: [86, 86.1, 85.9], 2048: [89, 89.1, 88.9],
             4096: [90, 90.1, 89.9]}
    low, high = crossing_interval(widths, steep, [85.0, 85.1, 84.9])
    assert 512 < low < 800 < high < 1024  # the crossing (about 800) held tightly by a steep, quiet curve
    noisy = {w: [a[0] - 1.0, a[1], a[2] + 1.0] for w, a in steep.items()}
    low2, high2 = crossing_interval(widths, noisy, [84.0, 85.1, 85.9])
    assert low2 < low and high2 > high
    flat = {256: [85.0, 85.2, 84.8], 512: [85.1, 85.3, 84.9], 1024: [85.2, 85.4, 85.0], 2048: [85.3, 85.5, 85.1],
            4096: [88.0, 88.2, 87.8]}
    hit = match(widths, flat, [85.15, 85.3, 85.0])
    assert hit["range"] and hit["text"].startswith("at most ")  # no point read off a flat stretch
    assert match(widths, steep, [85.0, 85.1, 84.9])["text"].startswith("about ")
    beyond = match(widths, steep, [91.0, 91.1, 90.9])
    assert beyond["width"] == "beyond" and beyond["text"].startswith("> 4,096")


def test_one_seed_a_side_gives_the_crossing_without_an_interval():
    from lazylab.exchange import match

    widths = [16, 64, 256, 1024]
    one = {16: [70.0], 64: [80.0], 256: [85.0], 1024: [88.0]}
    hit = match(widths, one, [86.0])  # between 256 (85 %) and 1024 (88 %): a third of the way in log m
    assert hit["width"] == pytest.approx(256 * 4 ** (1 / 3)) and hit["text"] == "about 410 (one seed: no interval)"
    assert match(widths, one, [89.0])["text"] == "> 1,024"


@pytest.mark.parametrize("per_unit, ranged, words", [
    ([31.2, 24.6, 43.1], False, "31"),                 # about 490 (390-690) at 16
    ([120.0, 87.5, "beyond"], True, "at least 88"),    # at least 2,800 at 32
    ([25.0, 11.25, 51.25], True, "11 to 51"),          # between 180 and 820 at 16: a factor 4.6
    ([9.0, 4.0, 16.000000000000004], False, "9.0"),      # match judged the interval 4 wide, not more: a point
    ([5.0, "below", 9.0], True, "at most 9.0"),
    ([0.3, "below", 0.42], True, "at most 0.42"),      # a ratio under 1 keeps two figures
    ([5.0, "below", "beyond"], True, None),            # anywhere: nothing worth reading
    (["beyond", 100.0, "beyond"], False, None),        # > 8,192 (at least ...): outside the sweep
])
def test_frozen_units_per_trained_unit_are_worded_as_the_width_is(per_unit, ranged, words):
    """A per-unit figure never reads as a point where the width beside it is a bound or a range (``match``'s
    ``range``), and reads as one where it is not."""
    from lazylab.exchange import per_unit_words

    assert per_unit_words({"per_unit": per_unit, "range": ranged}) == words


def test_per_unit_words_and_match_text_agree_on_every_match():
    """On matches ``match`` computes from noisy synthetic curves (sweeps of powers of two and of 12 x them), the
    per-unit words are a point exactly where the width's words are "about ..."."""
    from lazylab.exchange import match, per_unit_words

    rng = np.random.default_rng(0)
    for start in (12, 16):
        widths = [start * 2 ** k for k in range(8)]
        for _ in range(60):
            spread, slope = rng.uniform(0.05, 2.0), rng.uniform(0.3, 3.0)
            frozen = {w: [70 + slope * np.log2(w / start) + d for d in rng.normal(0, spread, 3)] for w in widths}
            trained = list(rng.uniform(68, 70 + slope * 8, 1) + rng.normal(0, spread, 3))
            for w in (12, 16, 24, 100):
                hit = match(widths, frozen, trained)
                units = lambda v: v / w if isinstance(v, float) else v  # noqa: E731 (as optimum.fair_answer)
                hit["per_unit"] = [units(hit["width"]), *map(units, hit["interval"])]
                words = per_unit_words(hit)
                assert (words is not None and words[0].isdigit() and " " not in words) == \
                    hit["text"].startswith("about"), (hit, words)
