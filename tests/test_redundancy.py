"""Redundancy's two hidden choices (docs/results.md, "Redundancy, reconciled"): the image sample and the fan-in."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cli_helpers import assert_one_line_error, run
from lazylab.arms import get_arm
from lazylab.experiments import Workspace
from lazylab.experiments.laws import bank_redundancy, sample_images
from lazylab.model import seed_indices


def test_samples_hold_or_exclude_the_seed_images():
    arm = get_arm("yat-data-frozen")
    seeds = set(seed_indices(64, 0, 2000).tolist())
    held = sample_images(arm, 64, 500, 0, 2000, "held-out")
    with_seeds = sample_images(arm, 64, 500, 0, 2000, "with-seeds")
    assert len(held) == len(set(held)) == 500 and not seeds & set(held.tolist())
    assert len(with_seeds) == len(set(with_seeds)) == 500 and seeds <= set(with_seeds.tolist())
    # A random bank has no seed images: every sample is the first n.
    assert np.array_equal(sample_images(get_arm("yat-frozen"), 64, 500, 0, 2000, "with-seeds"), np.arange(500))


def test_seed_images_make_the_data_bank_look_independent(memo_dir):
    """On real images, a sample holding every seed image multiplies the data bank's participation ratio
    (each unit's one spike, at its own seed image, dominates its z-scored feature)."""
    ws = Workspace(cache_dir=memo_dir)
    arm = get_arm("yat-data-frozen")
    held = bank_redundancy(ws, arm, 64, 800, 0, "unit", 2000, "held-out")
    with_seeds = bank_redundancy(ws, arm, 64, 800, 0, "unit", 2000, "with-seeds")
    assert with_seeds["participation_ratio"] >= 10 * held["participation_ratio"], (with_seeds, held)
    assert with_seeds["mean_abs_corr"] < held["mean_abs_corr"] / 5


def test_redundancy_command_table_and_json(capsys, memo_dir, tmp_path):
    code, out, err = run(capsys, "redundancy", "--arms", "yat-frozen", "--width", "32", "--images", "300",
                         "--seeds", "0,1", "--train-size", "1000", "--sample", "first-n,with-seeds",
                         "--json", tmp_path / "r.json")
    assert code == 0, err
    rows = json.loads((tmp_path / "r.json").read_text())["rows"]
    assert [(r["fan_in"], r["sample"]) for r in rows] == [("unit", "first-n"), ("unit", "with-seeds"),
                                                          ("d", "first-n"), ("d", "with-seeds")]
    # A random bank has no seed images: both samples are one measurement, memoized once.
    assert rows[0]["participation_ratio"] == rows[1]["participation_ratio"]
    from lazylab.cache import Memo

    assert sum(k.startswith("redundancy-") for k in Memo(memo_dir)._cache.iterkeys()) == 4  # 2 fan-ins x 2 seeds
    rows = rows[::2]
    unit, d = (r["participation_ratio"]["mean"] for r in rows)
    assert unit > 1.5 * d  # fan-in d's larger prototypes make the random Yat bank more redundant
    assert f"{rows[1]['mean_abs_corr']['mean']:.3f}" in out


@pytest.mark.parametrize("args,needle", [(["--sample", "firstn"], "--sample"), (["--fan-in", "x"], "--fan-in"),
                                         (["--images", "5000", "--train-size", "1000"], "--images"),
                                         (["--sample", "held-out", "--sample", "held-out"], "--sample")])
def test_redundancy_bad_options(capsys, memo_dir, args, needle):
    code, _, err = run(capsys, "redundancy", *args)
    assert_one_line_error(code, err, needle)
