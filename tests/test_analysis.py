"""The ladder's laws on constructed inputs with known answers, the figures, and `ladder --report`."""

from __future__ import annotations

import csv
import json
import math
from types import SimpleNamespace

import numpy as np
import pytest

from lazylab import analysis as an
from cli_helpers import run

WIDTHS = [16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192]


# ------------------------------------------------------------------ ladder law
@pytest.mark.parametrize("floor,c,alpha", [(12.5, 80.0, 0.6), (0.0, 30.0, 1.7), (14.2, 150.0, 0.25)])
def test_exact_power_law_is_recovered(floor, c, alpha):
    err = an.power_law(WIDTHS, floor, c, alpha)
    fit = an.fit_power_law(WIDTHS, err)
    assert fit["floor"] == pytest.approx(floor, abs=1e-6)
    assert fit["c"] == pytest.approx(c, rel=1e-6)
    assert fit["alpha"] == pytest.approx(alpha, rel=1e-6)
    assert fit["r2"] == pytest.approx(1.0, abs=1e-12)
    assert fit["widths"] == WIDTHS and fit["n"] == 10 and fit["dof"] == 7 and not fit["at_bound"]


def test_noisy_power_law_is_close_and_r2_below_one():
    rng = np.random.default_rng(0)
    err = an.power_law(WIDTHS, 14.0, 60.0, 0.5) + rng.normal(0, 0.05, len(WIDTHS))
    fit = an.fit_power_law(WIDTHS, err)
    assert 0.99 < fit["r2"] < 1.0
    assert fit["alpha"] == pytest.approx(0.5, abs=0.05)
    assert fit["floor"] == pytest.approx(14.0, abs=0.3)
    # The least-squares optimum: no nearby alpha does better.
    for da in (-1e-3, 1e-3):
        A = np.stack([np.ones(len(WIDTHS)), np.asarray(WIDTHS, float) ** -(fit["alpha"] + da)], 1)
        coef, *_ = np.linalg.lstsq(A, err, rcond=None)
        assert np.sum((A @ coef - err) ** 2) >= fit["sse"]


def test_power_law_rejects_too_few_points_and_bad_input():
    with pytest.raises(ValueError, match="at least 3"):
        an.fit_power_law([16, 32], [20.0, 15.0])
    with pytest.raises(ValueError, match="at least 3"):
        an.fit_power_law([16, 32, 64], [20.0, None, 15.0])  # None is dropped
    with pytest.raises(ValueError, match="length"):
        an.fit_power_law([16, 32, 64], [20.0, 15.0])
    with pytest.raises(ValueError, match="positive"):
        an.fit_power_law([0, 32, 64], [20.0, 15.0, 12.0])


def test_climbing_region_rule():
    w = [16, 32, 64, 128, 256, 512]
    assert an.climbing_region(w, [60, 70, 75, 77, 76.9, 78]) == [16, 32, 64, 128]  # first dip ends it
    assert an.climbing_region(w, [60, 70, 75, 77, 77.05, 78]) == [16, 32, 64, 128]  # +0.05 <= 0.1: plateau
    assert an.climbing_region(w, [60, 70, 75, 77, 77.05, 78], min_gain=0.0) == w
    assert an.climbing_region(w, [60, 70, 75, 77, 79, 78], min_gain=2.5) == [16, 32, 64]
    assert an.climbing_region(w, [None, 70, 75, None, 80, 81]) == [32, 64]  # leading None skipped, later None ends
    assert an.climbing_region(list(reversed(w)), [78, 79, 77, 75, 70, 60]) == [16, 32, 64, 128, 256]  # sorted by width
    assert an.climbing_region(w, [None] * 6) == []


def test_ladder_law_uses_the_region_or_the_override():
    means = list(100 - an.power_law(WIDTHS[:6], 14.0, 60.0, 0.5))
    means += [means[-1] - 0.5, means[-1] - 1.0, means[-1] - 1.5, means[-1] - 2.0]  # peaks at 512, then falls
    law = an.ladder_law(WIDTHS, means)
    assert law["widths"] == WIDTHS[:6]
    assert law["alpha"] == pytest.approx(0.5, rel=1e-6) and law["r2"] == pytest.approx(1.0)
    assert "climbing" in law["rule"]
    forced = an.ladder_law(WIDTHS, means, region=[16, 32, 64, 128, 99999])
    assert forced["widths"] == [16, 32, 64, 128] and forced["rule"] == "widths given explicitly"
    flat = an.ladder_law(WIDTHS, [86.0] * 10)
    assert flat["widths"] == [16] and "at least 3" in flat["skipped"]


# --------------------------------------------------------------- movement law
def test_exact_movement_law():
    move = 0.3 * np.asarray(WIDTHS, float) ** -0.5
    law = an.movement_law(WIDTHS, move)
    assert law["slope"] == pytest.approx(-0.5, abs=1e-12)
    assert law["intercept"] == pytest.approx(math.log(0.3), abs=1e-12)
    assert law["r2"] == pytest.approx(1.0, abs=1e-12)
    grow = an.movement_law([16, 64, 256], [0.1, 0.2, 0.4])
    assert grow["slope"] == pytest.approx(0.5) and grow["r2"] == pytest.approx(1.0)


def test_movement_law_rejects_zero_movement():
    with pytest.raises(ValueError, match="positive"):
        an.movement_law([16, 32, 64], [0.1, 0.0, 0.05])
    with pytest.raises(ValueError, match="differ in length"):
        an.movement_law([16, 32, 64], [0.1, 0.05])


def test_movement_law_needs_three_widths_and_says_why_like_the_ladder_law():
    """Two widths fit a line exactly (R^2 = 1 says nothing): skipped with the reason, as ladder_law skips."""
    two = an.movement_law([16, 64], [0.2, 0.1])
    assert two == {"widths": [16, 64], "n": 2, "skipped": "2 width(s) with movement; the movement law needs at least 3"}
    # A diverged width (None) does not count: three widths, two with movement.
    assert an.movement_law([16, 32, 64], [0.2, None, 0.1])["skipped"].startswith("2 width(s) with movement")
    assert an.movement_law([], [])["skipped"].startswith("0 width(s)")
    # The same wording as the ladder law's: "<n> width(s) ...; the ... law needs at least 3".
    ladder = an.ladder_law([16, 32], [80.0, 85.0])
    assert ladder["skipped"].split(";")[1].split(" needs ")[1] == two["skipped"].split(";")[1].split(" needs ")[1]


def test_movement_law_on_three_widths_is_the_least_squares_line():
    """Three points off a line: slope, intercept and R^2 from the closed-form OLS sums, computed here by hand."""
    m, y = [16, 64, 512], [0.30, 0.12, 0.05]
    law = an.movement_law(m, y)
    x, v = [math.log(w) for w in m], [math.log(t) for t in y]
    n, sx, sy = 3, sum(x), sum(v)
    sxx, sxy = sum(a * a for a in x), sum(a * b for a, b in zip(x, v))
    slope = (n * sxy - sx * sy) / (n * sxx - sx * sx)
    intercept = (sy - slope * sx) / n
    ss_res = sum((b - intercept - slope * a) ** 2 for a, b in zip(x, v))
    ss_tot = sum((b - sy / n) ** 2 for b in v)
    assert law["slope"] == pytest.approx(slope, rel=1e-12) and law["intercept"] == pytest.approx(intercept, rel=1e-12)
    assert law["r2"] == pytest.approx(1 - ss_res / ss_tot, rel=1e-12) and law["r2"] < 1
    assert law["widths"] == m and law["n"] == 3 and "skipped" not in law
    assert slope == pytest.approx(-0.5094, abs=1e-4)  # a fixed number (numpy.polyfit agrees), so a shared mistake fails too


def test_a_stored_two_width_movement_fit_is_read_as_skipped():
    """``--json`` files from an older lazylab carry a 2-width fit with R^2 = 1: tables and figures show the reason."""
    old = {"slope": -0.5, "intercept": -1.0, "r2": 1.0, "widths": [16, 64], "n": 2}
    assert an.movement_law_or_why(old) == {"widths": [16, 64], "n": 2,
                                           "skipped": "2 width(s) with movement; the movement law needs at least 3"}
    fitted = an.movement_law([16, 64, 512], [0.30, 0.12, 0.05])
    assert an.movement_law_or_why(fitted) is fitted
    assert an.movement_law_or_why(None)["skipped"] == "no movement law"


# ------------------------------------------------------------------------ gap
def test_pairs_share_unit_and_init():
    from lazylab.arms import get_arm

    names = ["yat-frozen", "yat-data-frozen", "relu-frozen", "gaussian-frozen",
             "yat-trained", "yat-data-trained", "gaussian-trained", "relu-trained"]
    pairs = an.pair_arms([get_arm(n) for n in names])
    assert pairs == [("yat-frozen", "yat-trained"), ("yat-data-frozen", "yat-data-trained"),
                     ("relu-frozen", "relu-trained"), ("gaussian-frozen", "gaussian-trained")]
    lone = [SimpleNamespace(name="a-frozen", unit="a", init="random", trained=False),
            SimpleNamespace(name="a-data-trained", unit="a", init="data", trained=True)]
    assert an.pair_arms(lone) == []


def test_gap_per_width():
    frozen = {16: {"mean": 70.0, "std": 0.3, "n": 3}, 64: {"mean": 80.0, "std": 0.4, "n": 3},
              256: {"mean": 84.0, "std": 0.0, "n": 3}, 1024: {"mean": None, "std": None, "n": 3}}
    trained = {"16": {"mean": 86.0, "std": 0.4, "n": 3}, "64": {"mean": 86.5, "std": 0.3, "n": 3},
               "256": {"mean": 86.2, "std": 0.0, "n": 3}, "1024": {"mean": 86.0, "std": 0.1, "n": 3}}
    g = an.gap(frozen, trained)
    assert g["per_width"] == pytest.approx({16: 16.0, 64: 6.5, 256: 2.2})
    assert g["se"][16] == pytest.approx(math.sqrt((0.16 + 0.09) / 3))
    assert (g["largest_at"], g["smallest_at"]) == (16, 256)
    assert an.gap({}, trained) == {"per_width": {}, "se": {}, "largest_at": None, "smallest_at": None}


# ----------------------------------------------------------------- redundancy
def hadamard(k: int) -> np.ndarray:
    H = np.ones((1, 1))
    for _ in range(k):
        H = np.block([[H, H], [H, -H]])
    return H


def test_uncorrelated_units_give_pr_m_and_zero_correlation():
    F = hadamard(6)[:, 1:17] * np.arange(1, 17) + np.arange(16)  # 64 images, 16 orthogonal zero-mean units, any scale
    r = an.redundancy(F)
    assert r["participation_ratio"] == pytest.approx(16.0, abs=1e-9)
    assert r["mean_abs_corr"] == pytest.approx(0.0, abs=1e-12)
    assert (r["m"], r["n"], r["constant_units"]) == (16, 64, 0)


def test_rank_one_bank_gives_pr_one():
    rng = np.random.default_rng(1)
    u, v = rng.random(500), rng.random(32) + 0.1
    r = an.redundancy(np.outer(u, v))
    assert r["participation_ratio"] == pytest.approx(1.0, abs=1e-9)
    assert r["mean_abs_corr"] == pytest.approx(1.0, abs=1e-9)
    nearly = an.redundancy(np.outer(u, v) + 1e-3 * rng.normal(size=(500, 32)))
    assert 1.0 < nearly["participation_ratio"] < 1.05


def test_random_features_match_marchenko_pastur_and_constants_are_dropped():
    rng = np.random.default_rng(2)
    n, m = 4000, 64
    F = rng.normal(size=(n, m))
    F[:, :3] = 7.0  # three dead units
    r = an.redundancy(F)
    k = m - 3
    assert r["constant_units"] == 3
    assert r["participation_ratio"] == pytest.approx(k / (1 + (k - 1) / n), rel=0.03)
    assert r["mean_abs_corr"] == pytest.approx(math.sqrt(2 / (math.pi * n)), rel=0.1)  # E|N(0, 1/n)|
    with pytest.raises(ValueError, match="vary"):
        an.redundancy(np.ones((10, 5)))
    with pytest.raises(ValueError, match=r"\(n, m\)"):
        an.redundancy(np.ones(10))


# ------------------------------------------------------------ run summaries
def record(width, seed, move, b0, b1):
    return {"config": {"width": width, "seed": seed}, "movement": None if move is None else {"w_move_rel": move},
            "scalars": {"start": {"b": b0}, "end": None if b1 is None else {"b": b1}}}


def test_per_width_stats_and_scalars():
    recs = [record(16, 0, 0.2, 0.5, 0.7), record(16, 1, 0.4, 0.5, 0.9), record(32, 0, None, 0.5, None)]
    mv = an.per_width_stats(recs, "movement.w_move_rel")
    assert mv == {16: {"mean": pytest.approx(0.3), "std": pytest.approx(math.sqrt(0.02)), "n": 2}}
    sc = an.scalar_trajectory(recs)
    assert sc["b"][16] == {"start": 0.5, "end": pytest.approx(0.8), "n": 2}
    assert sc["b"][32] == {"start": 0.5, "end": None, "n": 1}
    assert an.scalar_trajectory([{"config": {"width": 8}, "scalars": {"start": {}, "end": {}}}]) == {}


# -------------------------------------------------------------------- figures
def payload(with_trained=True):
    arms = [{"arm": "yat-frozen", "cells": {str(w): {"mean": 100 - an.power_law(w, 14, 60, 0.5), "std": 0.3, "n": 3}
                                           for w in WIDTHS[:5]}}]
    movement, laws = {}, {}
    if with_trained:
        arms.append({"arm": "yat-trained", "cells": {str(w): {"mean": 86.0, "std": 0.2, "n": 3} for w in WIDTHS[:5]}})
        movement["yat-trained"] = {str(w): {"mean": 0.02 * w ** 0.5, "std": 0.001, "n": 3} for w in WIDTHS[:5]}
        laws["yat-trained"] = an.movement_law(WIDTHS[:5], [0.02 * w ** 0.5 for w in WIDTHS[:5]])
    return {"plan": {"widths": WIDTHS[:5], "seeds": [0, 1, 2], "epochs": 12}, "arms": arms,
            "analysis": {"movement": movement, "movement_law": laws}}


@pytest.mark.parametrize("with_trained", [True, False])
def test_figures_are_written_and_non_empty(tmp_path, with_trained):
    from lazylab.render.figures import ladder_figures

    paths = ladder_figures(payload(with_trained), tmp_path / "fig")
    moved = ["movement.png", "movement.svg"] if with_trained else []  # frozen banks do not move: no movement figure
    assert sorted(p.name for p in paths) == ["accuracy.png", "accuracy.svg", *moved]
    for p in paths:
        blob = p.read_bytes()
        assert len(blob) > 5000
        assert blob.startswith(b"\x89PNG") if p.suffix == ".png" else b"<svg" in blob[:2000]
    svg = (tmp_path / "fig" / "accuracy.svg").read_text()
    for label in ("Yat head on raw pixels", "oriented-edge bank", "trained CNN backbone"):
        assert label in svg


def test_a_skipped_movement_law_is_said_below_the_table_and_in_the_legend():
    """Two trained widths: no fit line, no slope; the report's note and the figure's legend give the reason."""
    from lazylab.render.figures import movement_plot
    from lazylab.render.ladder_sections import _ladder_section

    p = payload()
    p["plan"]["widths"] = WIDTHS[:2]
    p["arms"] = [{**a, "lr": 0.01, "cells": {k: v for k, v in a["cells"].items() if int(k) in WIDTHS[:2]}} for a in p["arms"]]
    p["analysis"]["movement"]["yat-trained"] = {str(w): {"mean": 0.02 * w ** 0.5, "std": 0.001, "n": 3} for w in WIDTHS[:2]}
    # As an older lazylab wrote it: a line through the two points, R^2 = 1.
    p["analysis"]["movement_law"]["yat-trained"] = {"slope": 0.5, "intercept": math.log(0.02), "r2": 1.0,
                                                    "widths": WIDTHS[:2], "n": 2}
    why = "2 width(s) with movement; the movement law needs at least 3"
    legend = [t.get_text() for t in movement_plot(p).legends[0].get_texts()]
    assert f"yat-trained (no law: {why})" in legend and not any("fit: slope" in t for t in legend)
    p["analysis"].update(ladder_law={}, gap={})
    page = _ladder_section({"data": {**p, "name": "custom", "plan": {**p["plan"], "train_size": 1024}},
                            "spec": {"command": "lazylab ladder"}, "key": "k", "files": {}})
    table = page.split('id="movement-table"')[1].split("</table>")[0]
    assert "1.0000" not in table and "0.500" not in table  # no R^2 = 1, no slope from two points
    assert f'<p class=note id="movement-notes">Not fitted: yat-trained: {why}.</p>' in page


# ---------------------------------------------------------- the command line

@pytest.mark.slow
def test_ladder_writes_analysis_csv_figures_and_report_reprints_from_the_memo(capsys, memo_dir, tmp_path):
    out_json, figs = tmp_path / "l.json", tmp_path / "figs"
    argv = ["ladder", "--arms", "yat-frozen,yat-trained", "--widths", "8,16", "--seeds", "0", "--epochs", "1",
            "--lr", "0.03", "--train-size", "1024", "--json", str(out_json), "--out", str(figs)]

    code, _, err = run(capsys, *argv, "--report")  # empty memo: a hint, not a traceback
    assert code == 2 and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert "nothing has been computed yet" in err and "without --report" in err

    code, out, _ = run(capsys, *argv)
    assert code == 0
    for title in ("ladder law", "movement", "gap: trained - frozen", "redundancy", "learned scalars"):
        assert title in out
    data = json.loads(out_json.read_text())
    a = data["analysis"]
    assert set(a) >= {"ladder_law", "movement", "movement_law", "gap", "redundancy", "scalars"}
    assert set(a["gap"]["yat-trained - yat-frozen"]["per_width"]) == {"8", "16"}
    assert a["redundancy"]["yat"]["m"] == 256 and a["redundancy"]["yat"]["n"] == 1024
    # Two widths: the movement law is not fitted, and says why (as the ladder law does).
    assert a["movement_law"]["yat-trained"] == {
        "widths": [8, 16], "n": 2, "skipped": "2 width(s) with movement; the movement law needs at least 3"}
    rows = list(csv.DictReader(open(out_json.with_suffix(".csv"))))
    assert len(rows) == len(data["runs"]) == 4
    assert {r["arm"] for r in rows} == {"yat-frozen", "yat-trained"} and all(r["in_ladder"] == "1" for r in rows)
    for name in ("accuracy.png", "accuracy.svg", "movement.png", "movement.svg"):
        assert (figs / name).stat().st_size > 5000
        (figs / name).unlink()

    code, out2, _ = run(capsys, *argv, "--report")
    assert code == 0 and "nothing trained" in out2
    assert out2.split("runs:")[0] == out.split("runs:")[0]  # the same table
    assert out2.split("runs:")[1].split("\n", 1)[1] == out.split("runs:")[1].split("\n", 1)[1]  # same analysis
    assert json.loads(out_json.read_text())["analysis"] == a
    assert (figs / "accuracy.png").stat().st_size > 5000  # redrawn

    code, _, err = run(capsys, *argv[:4], "8,16,32", *argv[5:], "--report")
    assert code == 2 and "lacks 2 of this ladder's 6 runs" in err and len(err.strip().splitlines()) == 1
