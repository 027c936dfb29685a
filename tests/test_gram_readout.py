"""``gram`` and ``readout``: the Gram algebra, the fit, the memo, the CLI and its GIFs (real images)."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from lazylab.arms import get_arm
from lazylab.errors import LazylabError
from lazylab.experiments import Workspace
from lazylab.experiments.gram import (
    BankFeatures,
    block_contrast,
    gram_config,
    log_widths,
    loglog_slope,
    make_bank,
    normalised_gram,
    parse_classes,
    run_gram,
    select_images,
)
from lazylab.experiments.readout import readout_configs, run_readout
from lazylab.render.canvas import MAX_GIF_BYTES, read_gif
from cli_helpers import run, assert_one_line_error

SMALL_GRAM = dict(max_units=128, frames=8, ref_units=128 * 16, per_class=6)




# ------------------------------------------------------------ pure algebra
def test_normalised_gram_is_a_cosine_matrix_on_real_images(fmnist):
    idx = select_images(fmnist.y_test, (0, 1, 7), 10)
    phi = np.asarray(fmnist.x_test[idx], np.float64) - 0.3  # signed "features": real pixels, off-centre
    G = normalised_gram(phi)
    assert G.shape == (30, 30)
    np.testing.assert_allclose(np.diag(G), 1.0)
    np.testing.assert_allclose(G, G.T)
    assert np.linalg.eigvalsh(G).min() > -1e-9  # positive semi-definite
    assert G.min() >= -1.0 and G.max() <= 1.0
    unit = phi / np.linalg.norm(phi, axis=1, keepdims=True)
    np.testing.assert_allclose(G, unit @ unit.T, atol=1e-12)  # K_ij / sqrt(K_ii K_jj), 1/m cancels


def test_normalised_gram_treats_an_all_zero_image_as_orthogonal():
    phi = np.array([[1.0, 0.0], [0.0, 0.0], [2.0, 2.0]])
    G = normalised_gram(phi)
    np.testing.assert_allclose(np.diag(G), 1.0)
    assert G[1, 0] == G[0, 1] == G[1, 2] == 0.0
    assert np.isclose(G[0, 2], 1 / np.sqrt(2))


def test_block_contrast_on_constructed_matrices():
    labels = np.array([0, 0, 1, 1, 1])
    same = labels[:, None] == labels[None, :]
    G = np.where(same, 0.8, 0.2)
    np.fill_diagonal(G, 1.0)  # the diagonal must not count as within-class
    assert block_contrast(G, labels) == pytest.approx(0.6)
    # Unequal entries: within pairs (0,1), (2,3), (2,4), (3,4) = 0.9, 0.5, 0.7, 0.3 -> mean 0.6; cross all 0.1.
    G = np.full((5, 5), 0.1)
    for (i, j), v in {(0, 1): 0.9, (2, 3): 0.5, (2, 4): 0.7, (3, 4): 0.3}.items():
        G[i, j] = G[j, i] = v
    np.fill_diagonal(G, 1.0)
    assert block_contrast(G, labels) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        block_contrast(np.eye(2), np.array([0, 1]))  # no within-class pair


def test_loglog_slope_recovers_a_power_law_and_ignores_small_widths():
    w = np.array([1, 2, 4, 8, 16, 32, 64, 128, 256])
    v = 3.0 * w**-0.5
    v[:3] = [7.0, 0.01, 5.0]  # garbage below the fit range
    fit = loglog_slope(w, v, min_width=8)
    assert fit["slope"] == pytest.approx(-0.5)
    assert fit["intercept"] == pytest.approx(np.log(3.0))
    assert fit["r2"] == pytest.approx(1.0)
    assert fit["widths"] == [8, 256] and fit["n"] == 6
    assert loglog_slope(w, v, min_width=100)["slope"] is None  # only 2 widths qualify


def test_log_widths_are_distinct_log_spaced_and_complete():
    w = log_widths(2000, 40)
    assert len(w) == 40 and w[0] == 1 and w[-1] == 2000
    assert np.all(np.diff(w) > 0)
    ratios = w[10:] / w[9:-1]  # geometric once the integers allow it
    assert ratios.max() / ratios.min() < 1.1
    assert log_widths(5, 40).tolist() == [1, 2, 3, 4, 5]
    assert log_widths(7, 1).tolist() == [7]


def test_parse_classes_accepts_indices_and_names():
    assert parse_classes("0,1,7") == (0, 1, 7)
    assert parse_classes("T-shirt/top, trouser ,SNEAKER") == (0, 1, 7)
    assert parse_classes("tshirt,ankle-boot") == (0, 9)
    with pytest.raises(LazylabError, match="unknown class 'sock'"):
        parse_classes("0,sock")


# ---------------------------------------------------- science on real data
@pytest.mark.slow
def test_gram_on_real_images_crystallizes_and_second_invocation_reuses_the_memo(capsys, memo_dir, tmp_path):
    arm = get_arm("yat-frozen")
    ws = Workspace(None, memo_dir)
    cfg = gram_config(ws, arm, **SMALL_GRAM)
    first = run_gram(ws, arm, cfg)
    assert first.computed == ["features", "reference", "grams"] and not first.cached
    assert len(first.widths) == 8 and first.grams.shape == (8, 18, 18)
    assert first.contrast[0] == pytest.approx(0.0, abs=1e-6)  # one positive unit: every cosine is 1
    assert first.contrast[-1] > 0.05 and first.contrast[-1] > first.contrast[0] + 0.05
    assert first.distance[-1] < first.distance[0] / 5
    assert -0.8 < first.fit["slope"] < -0.25  # Monte Carlo -1/2, loosely at this small width
    # A second invocation (a new workspace on the same memo) recomputes nothing.
    ws2 = Workspace(None, memo_dir)
    second = run_gram(ws2, arm, gram_config(ws2, arm, **SMALL_GRAM))
    assert second.cached and second.computed == []
    np.testing.assert_array_equal(second.grams, first.grams)
    assert second.fit == first.fit
    # A new frame count reuses the stored features and reference: only the Grams are redone.
    third = run_gram(ws2, arm, gram_config(ws2, arm, **{**SMALL_GRAM, "frames": 5}))
    assert third.computed == ["grams"]
    # An ensemble of 3 banks reuses the reference and the first bank; the first bank is still the one shown.
    ens = run_gram(ws2, arm, gram_config(ws2, arm, **{**SMALL_GRAM, "repeats": 3}))
    assert ens.computed == ["features", "grams"]
    np.testing.assert_array_equal(ens.distance, first.distance)
    assert ens.ensemble["fit"]["slope"] < -0.25 and ens.ensemble["raw_fit"]["slope"] < -0.25
    assert ens.ensemble["distance"].shape == first.distance.shape and "rms_distance_to_reference" in ens.rows()[0]
    # The command line on the same memo: nothing computed; GIF, JSON and CSV written.
    out_dir = tmp_path / "gram"
    code, out, _ = run(capsys, "gram", "--max-units", "128", "--frames", "8", "--ref-units", str(128 * 16),
                       "--per-class", "6", "--images", "tshirt,trouser,sneaker", "--out", str(out_dir))
    assert code == 0, out
    assert "everything from the memo" in out and "distance-to-reference slope" in out
    gif = read_gif(out_dir / "gram.gif")
    assert gif["frames"] == 8  # one per width
    assert len(gif["sizes"]) == 1 and gif["bytes"] <= MAX_GIF_BYTES and gif["loop"] == 0
    payload = json.loads((out_dir / "gram.json").read_text())
    assert payload["widths"] == first.widths.tolist() and payload["gif"]["frames"] == 8
    assert payload["fit"]["slope"] == pytest.approx(first.fit["slope"])
    rows = list(csv.DictReader(open(out_dir / "gram.csv")))
    assert [int(r["width"]) for r in rows] == payload["widths"]
    # Again: the GIF drawn from the same result is kept, not drawn again; a GIF changed by hand is redrawn.
    argv = ["gram", "--max-units", "128", "--frames", "8", "--ref-units", str(128 * 16), "--per-class", "6",
            "--images", "tshirt,trouser,sneaker", "--out", str(out_dir)]
    before = (out_dir / "gram.gif").stat().st_mtime_ns
    code, out, _ = run(capsys, *argv)
    assert code == 0 and "kept (drawn from the same result)" in out
    assert (out_dir / "gram.gif").stat().st_mtime_ns == before
    assert json.loads((out_dir / "gram.json").read_text())["gif"] == payload["gif"]
    with open(out_dir / "gram.gif", "ab") as f:
        f.write(b"\0")
    code, out, _ = run(capsys, *argv)
    assert code == 0 and "wrote " + str(out_dir / "gram.gif") in out
    assert json.loads((out_dir / "gram.json").read_text())["gif"]["sha256"] == payload["gif"]["sha256"]
    # Facts lazylab did not write (an overflowing frame count, a size that is not two numbers): drawn again.
    for bad in ('"frames": 1e999', '"size": {"a": 1}'):
        text = (out_dir / "gram.json").read_text()
        key = bad.split(":")[0]
        start = text.index(key, text.index('"gif"'))
        end = text.index("\n", start)
        (out_dir / "gram.json").write_text(text[:start] + bad + ("," if text[end - 1] == "," else "") + text[end:])
        code, out, err = run(capsys, *argv)
        assert code == 0 and "wrote " + str(out_dir / "gram.gif") in out, err


@pytest.mark.slow
def test_gram_frames_are_prefixes_of_one_bank_with_shared_scalars(fmnist):
    """Frame m's features equal those of a bank built from the first m prototypes (Gaussian: shared sigma)."""
    arm = get_arm("gaussian-frozen")
    x = np.asarray(fmnist.x_test[:12])
    bank = make_bank(arm, 0, fmnist.x_train, width=64)
    evaluator = BankFeatures(bank)
    phi = evaluator(bank, x)
    W = np.asarray(bank.W[...])
    prefix = evaluator(make_bank(arm, 0, fmnist.x_train, W=W[:10]), x)
    np.testing.assert_allclose(prefix, phi[:, :10], rtol=1e-5)
    # Built alone, the 10-unit bank would have its own median-heuristic sigma.
    assert not np.allclose(np.asarray(make_bank(arm, 0, fmnist.x_train, W=W[:10]).sigma_raw[...]),
                           np.asarray(bank.sigma_raw[...]))


@pytest.mark.slow
def test_plugin_reference_gram_converges_to_its_known_kernel(memo_dir):
    """Random Fourier features (the lazylab-rff plugin) estimate exp(-||x - y||^2 / (2 sigma^2)) exactly.

    Checks the reference bank end to end on a plugin with per-unit random phases
    (contract v2 ``takes_key``): chunks must be independent draws of the same units.
    """
    rff = pytest.importorskip("lazylab_rff")
    arm = get_arm("rff-frozen")
    ws = Workspace(None, memo_dir)
    res = run_gram(ws, arm, gram_config(ws, arm, max_units=128, frames=4, ref_units=128 * 64, per_class=4))
    x = res.images.astype(np.float64)
    sigma = rff.median_pairwise_distance(ws.data.x_train[:512])
    exact = np.exp(-((x[:, None] - x[None]) ** 2).sum(-1) / (2 * sigma**2))
    err_ref = np.linalg.norm(res.reference - exact)
    err_bank = np.linalg.norm(res.grams[-1].astype(np.float64) - exact)
    # Monte Carlo: 64x more units -> about 8x closer (allow a factor 2 either way).
    assert 2.0 < err_bank / err_ref < 32.0
    assert res.fit["slope"] is None or res.fit["slope"] < 0


@pytest.mark.slow
def test_readout_on_real_images_and_second_invocation_reuses_the_memo(capsys, memo_dir, tmp_path):
    arm = get_arm("yat-frozen")
    ws = Workspace(None, memo_dir)
    cfgs = readout_configs(ws, arm, (8, 64), steps=40, eval_every=10, train_size=2000)
    first = run_readout(ws, arm, cfgs)
    assert first.computed == ["features m=8", "readout m=8", "features m=64", "readout m=64"]
    c8, c64 = first.curves
    assert c8.steps.tolist() == [0, 10, 20, 30, 40]
    assert c64.final_acc > c8.final_acc and c64.final_acc > 60.0
    assert c64.acc[-1] > c64.acc[0] + 30  # it learns
    assert first.widest is c64 and first.show_index.shape == (12,)
    assert c64.preds.shape == (5, 10000)
    second = run_readout(Workspace(None, memo_dir), arm, cfgs)
    assert second.cached and all(c.cached for c in second.curves)
    np.testing.assert_array_equal(second.curves[1].acc, c64.acc)
    # The command line on the same memo: nothing computed; one GIF frame per evaluation.
    out_dir = tmp_path / "race"
    code, out, _ = run(capsys, "readout", "--widths", "8,64", "--train-size", "2000", "--steps", "40",
                       "--eval-every", "10", "--out", str(out_dir))
    assert code == 0, out
    assert "everything from the memo" in out and f"{c64.final_acc:.2f}" in out
    gif = read_gif(out_dir / "readout.gif")
    assert gif["frames"] == 5 and len(gif["sizes"]) == 1 and gif["bytes"] <= MAX_GIF_BYTES and gif["loop"] == 0
    payload = json.loads((out_dir / "readout.json").read_text())
    assert [c["config"]["width"] for c in payload["curves"]] == [8, 64]
    assert len(list(csv.DictReader(open(out_dir / "readout.csv")))) == 5


# ------------------------------------------------------------- the CLI
@pytest.mark.parametrize("argv,needles", [
    (["gram", "--arm", "yat-trained"], ["frozen", "yat-trained", "yat-frozen"]),
    (["readout", "--arm", "gaussian-trained"], ["frozen", "gaussian-trained"]),
    (["gram", "--arm", "yat-frozn"], ["yat-frozn", "yat-frozen"]),
    (["gram", "--images", "0,sock"], ["sock", "Sneaker"]),
    (["gram", "--images", "1,1"], ["2 distinct classes"]),
    (["gram", "--max-units", "0"], ["--max-units"]),
    (["readout", "--widths", "64,0"], ["--widths"]),
    (["readout", "--widths", "64,64"], ["more than once"]),
])
def test_cli_errors_are_one_line_exit_2(capsys, memo_dir, tmp_path, argv, needles):
    code, _, err = run(capsys, *argv, "--out", str(tmp_path / "o"))
    assert_one_line_error(code, err, *needles)
