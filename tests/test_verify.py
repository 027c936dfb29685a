"""``lazylab verify`` (issue 30, point 2): rerun a sample of reference results and compare them.

The rule (``lazylab.verify.classify``, ``noise_bound``) is tested on constructed records; the command on
a tiny reference computed here on real Fashion-MNIST (yat-frozen and yat-trained, m = 8, 1 epoch on 1024
images, seeds 0, 1, 2 at two rates each: 12 runs, seconds) and written in the reference file format.
"""

from __future__ import annotations

import copy
import json
import re

import pytest

from cli_helpers import assert_one_line_error, lines, run
from lazylab import verify as V

ARMS = ("yat-frozen", "yat-trained")
RATES = {"yat-frozen": (0.1, 1.0), "yat-trained": (0.01, 0.03)}
WIDTH, SEEDS, EPOCHS, TRAIN = 8, (0, 1, 2), 1, 1024


# ------------------------------------------------------------------ the rule, on constructed records
def _record(best=80.0, **extra):
    rec = {"key": "run-x", "config": {"arm": "a"}, "best_acc": best, "final_acc": best, "best_epoch": 2,
           "curve": [70.0, best], "train_loss": [0.9, 0.5], "diverged": None,
           "scalars": {"start": {"b": 0.5}, "end": {"b": 0.6}}, "movement": {"w_move_rel": 0.1}, "seconds": 1.0}
    rec.update(extra)
    return rec


def test_classify_identical_within_noise_and_diverged_at_the_boundary():
    ref = _record(unstable=None)
    # seconds, key and the derived unstable field are not compared
    assert V.classify(ref, _record(seconds=9.0, key="run-y"), 0.5) == ("identical", 0.0)
    # one last bit of a loss: not identical, best_acc equal, so within any bound (even 0)
    assert V.classify(ref, _record(train_loss=[0.9, 0.5000000000000001]), 0.0) == ("within noise", 0.0)
    assert V.classify(ref, _record(movement={"w_move_rel": 0.10000001}), 0.0)[0] == "within noise"
    assert V.classify(ref, _record(best=80.5, curve=[70.0, 80.5]), 0.5) == ("within noise", 0.5)  # at the bound
    assert V.classify(ref, _record(best=79.5, curve=[70.0, 79.5]), 0.5) == ("within noise", -0.5)
    assert V.classify(ref, _record(best=80.51, curve=[70.0, 80.51]), 0.5) == ("diverged", 0.51)
    assert V.classify(ref, _record(best=79.49, curve=[70.0, 79.49]), 0.5) == ("diverged", -0.51)
    # a run that diverged (no accuracy) against one that did not; both diverged
    gone = _record(best=None, final_acc=None, diverged={"epoch": 1, "step": 3, "loss": "nan"})
    assert V.classify(ref, gone, 50.0) == ("diverged", None)
    assert V.classify(gone, {**gone, "curve": [1.0]}, 0.0) == ("within noise", None)
    assert V.differing_fields(ref, _record(curve=[71.0, 80.0], scalars=None)) == ["curve", "scalars"]
    assert V.stable(ref) and not V.stable(_record(unstable="train loss rose")) and not V.stable(gone)


def test_noise_bound_is_two_sample_stds_of_that_rate_else_of_the_chosen_rate():
    def run_(lr, seed, best):
        return {"config": {"arm": "a", "width": 256, "lr": lr, "seed": seed}, "best_acc": best}

    payload = {"arms": [{"arm": "a", "lr": 0.1, "cells": {"256": {"n": 3, "std": 9.0}}}],
               "runs": [run_(0.1, 0, 80.0), run_(0.1, 1, 81.0), run_(0.1, 2, 82.0), run_(1.0, 0, 70.0)]}
    assert V.noise_bound(payload, "a", 256, 0.1) == (2.0, "3 seeds at this rate")  # std 1.0 (ddof 1)
    assert V.noise_bound(payload, "a", 256, 1.0) == (2.0, "3 seeds at the chosen rate 0.1")
    del payload["runs"][1:3]  # the chosen rate's runs absent: its cell's std
    assert V.noise_bound(payload, "a", 256, 1.0) == (18.0, "3 seeds at the chosen rate 0.1")
    payload["arms"][0]["cells"] = {}
    assert V.noise_bound(payload, "a", 256, 1.0) == (0.0, "no seed spread in the reference")


# ------------------------------------------------------------------ the command, on a tiny real reference
@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A reference document of 12 real runs (computed in a memo of their own) and its file."""
    from lazylab import __version__
    from lazylab.analysis import unstable_reason
    from lazylab.arms import get_arm
    from lazylab.config import code_identity
    from lazylab.experiments import Workspace
    from lazylab.experiments.ladder import summarise
    from lazylab.reference import KIND, REFERENCE_SCHEMA, dump_reference, load_reference

    ws = Workspace(cache_dir=tmp_path_factory.mktemp("refmemo"))
    cells = [(get_arm(a), ws.config(get_arm(a), WIDTH, s, lr, epochs=EPOCHS, train_size=TRAIN))
             for a in ARMS for lr in RATES[a] for s in SEEDS]
    runs = [{**r, "unstable": unstable_reason(r)} for r in ws.run_cells(cells)]
    arms = []
    for a in ARMS:
        by_rate = {lr: [r for r in runs if r["config"]["arm"] == a and r["config"]["lr"] == lr] for lr in RATES[a]}
        chosen = max(by_rate, key=lambda lr: summarise(by_rate[lr])["mean"])
        arms.append({"arm": a, "plugin": get_arm(a).plugin, "lr": chosen,
                     "bracket": {repr(lr): summarise(rs)["mean"] for lr, rs in by_rate.items()},
                     "cells": {str(WIDTH): summarise(by_rate[chosen])}})
    from lazylab.experiments.convex import convex_config, run_convex

    frozen = get_arm("yat-frozen")  # one convex readout: verify reruns it beside the runs
    convex = run_convex(ws, [(frozen, convex_config(ws, frozen, WIDTH, 0, 1e-3, TRAIN))])
    plan = {"arms": list(ARMS), "widths": [WIDTH], "seeds": list(SEEDS), "epochs": EPOCHS, "train_size": TRAIN,
            "batch": 256, "lr": None, "fan_in": "unit", "data": ws.fingerprint}
    prov = {"where": "the test machine", "when": "2026-01-02", "exported_at": "2026-01-02T00:00:00+00:00",
            "lazylab": __version__, "code": code_identity(), "command": "tests/test_verify.py", "data": ws.fingerprint,
            "runs": len(runs)}
    doc = {"schema": REFERENCE_SCHEMA, "kind": KIND, "preset": "tiny", "provenance": prov,
           "payload": {"plan": plan, "arms": arms, "runs": runs, "analysis": {"ladder_law": {}},
                       "convex": {"lambdas": [1e-3], "tol": 1e-4, "max_iter": 1000, "holdout_fraction": "1/6",
                                  "lambda_seed": 0, "arms": {}, "runs": convex, "choices": []}}}
    path = tmp_path_factory.mktemp("ref") / "tiny.json"
    path.write_text(dump_reference(doc))
    load_reference(path)  # the format the loader accepts
    return {"doc": json.loads(json.dumps(doc)), "path": path, "memo": tmp_path_factory.mktemp("verifymemo")}


def _write(tmp_path, doc, name="planted.json"):
    from lazylab.reference import dump_reference

    path = tmp_path / name
    path.write_text(dump_reference(doc))
    return path


def _shift(doc, arm, lr, points):
    """Move every seed's best_acc (and its curve's best epoch) at (arm, lr) by ``points``: the reference's
    seed-to-seed noise there, hence the bound, stays as it was."""
    for r in doc["payload"]["runs"]:
        if (r["config"]["arm"], r["config"]["lr"]) == (arm, lr):
            r["best_acc"] = r["curve"][r["best_epoch"] - 1] = round(r["best_acc"] + points, 2)


def _find(doc, arm, lr, seed=0):
    return next(r for r in doc["payload"]["runs"]
                if (r["config"]["arm"], r["config"]["lr"], r["config"]["seed"]) == (arm, lr, seed))


def test_a_reference_computed_here_is_reproduced_bit_for_bit(tiny, capsys):
    from lazylab.reference import machine_description

    code, out, err = run(capsys, "verify", "--reference", tiny["path"], "--width", WIDTH)
    assert code == 0, err
    assert lines(err) == [], err  # only progress on stderr
    assert f"this machine: {machine_description()}" in out and "the test machine" in out
    assert "yat-frozen: reproduced bit for bit (2 of 2 runs identical)" in out
    assert "yat-trained: reproduced bit for bit (2 of 2 runs identical)" in out
    assert out.strip().splitlines()[-1] == ("verify: 4 of 4 runs identical, 0 within noise, 0 diverged; this machine "
                                            "reproduces yat-frozen, yat-trained bit for bit; convex readouts: 1 of 1 "
                                            "identical, 0 within 0.1 points, 0 beyond: exit 0")
    assert "throwaway memo (removed)" in out


def test_a_planted_difference_on_a_stable_run_is_diverged_and_exits_1(tiny, tmp_path, capsys):
    doc = copy.deepcopy(tiny["doc"])
    payload = doc["payload"]
    bad = _find(doc, "yat-frozen", 0.1)
    bound, _ = V.noise_bound(payload, "yat-frozen", WIDTH, 0.1)
    bad["unstable"] = None  # stable in the reference, whatever one epoch on 1024 images gives
    _shift(doc, "yat-frozen", 0.1, bound + 5.0)
    assert V.noise_bound(payload, "yat-frozen", WIDTH, 0.1)[0] == pytest.approx(bound, abs=0.02)
    close = _find(doc, "yat-trained", 0.03)  # one last bit of one loss: within noise
    close["unstable"] = None
    close["train_loss"][0] *= 1 + 2**-40
    path = _write(tmp_path, doc)
    code, out, err = run(capsys, "verify", "--reference", path, "--width", WIDTH, "--cache-dir", tiny["memo"],
                         "--json", tmp_path / "v.json")
    assert code == 1, out + err
    result = json.loads((tmp_path / "v.json").read_text())
    rows = {(r["arm"], r["lr"]): r for r in result["rows"]}
    assert rows["yat-frozen", 0.1]["verdict"] == "diverged" and rows["yat-frozen", 0.1]["stable"]
    assert rows["yat-frozen", 0.1]["delta"] == pytest.approx(-(bound + 5.0), abs=0.011)
    assert set(rows["yat-frozen", 0.1]["differs"]) >= {"best_acc", "curve"}
    assert rows["yat-trained", 0.03]["verdict"] == "within noise" and rows["yat-trained", 0.03]["delta"] == 0.0
    assert [r["verdict"] for k, r in rows.items() if k not in {("yat-frozen", 0.1), ("yat-trained", 0.03)}] == \
        ["identical", "identical"]
    status = {a["arm"]: a["status"] for a in result["arms"]}
    assert status == {"yat-frozen": "not reproduced", "yat-trained": "within noise"}
    assert "yat-frozen: not reproduced (1 of 2 runs diverged: lr 0.1 " in out
    assert result["verdict"] == out.strip().splitlines()[-1]
    assert result["verdict"].startswith("verify: 2 of 4 runs identical, 1 within noise, 1 diverged (stable in the "
                                        "reference)") and result["verdict"].endswith(": exit 1")


def test_a_planted_difference_on_an_unstable_run_is_reported_and_exits_0(tiny, tmp_path, capsys):
    doc = copy.deepcopy(tiny["doc"])
    bad = _find(doc, "yat-trained", 0.01)
    bound, _ = V.noise_bound(doc["payload"], "yat-trained", WIDTH, 0.01)
    bad["unstable"] = "train loss rose from 0.5 (epoch 3) to 9 (epoch 4), > 1.5 x its minimum"
    _shift(doc, "yat-trained", 0.01, bound + 5.0)
    for r in doc["payload"]["runs"]:
        if r is not bad:
            r["unstable"] = None
    code, out, err = run(capsys, "verify", "--reference", _write(tmp_path, doc), "--width", WIDTH,
                         "--cache-dir", tiny["memo"])
    assert code == 0, err
    assert "runs: 0 computed, 5 from the memo" in out  # the reruns (4 runs, 1 convex readout) of the test before
    assert "yat-trained: not reproduced (1 of 2 runs diverged: lr 0.01 " in out
    assert "only unstable runs differ)" in out
    last = out.strip().splitlines()[-1]
    assert last == ("verify: 3 of 4 runs identical, 0 within noise, 1 diverged (unstable in the reference); this "
                    "machine reproduces yat-frozen bit for bit; not reproduced: yat-trained (only unstable runs "
                    "differ); convex readouts: 1 of 1 identical, 0 within 0.1 points, 0 beyond: exit 0")


def test_an_arm_of_other_code_is_skipped_and_said_so(tiny, tmp_path, capsys):
    doc = copy.deepcopy(tiny["doc"])
    for r in doc["payload"]["runs"]:
        if r["config"]["arm"] == "yat-trained":
            r["config"]["plugin"] = "lazylab 0.1.0+src.00000000"
    code, out, err = run(capsys, "verify", "--reference", _write(tmp_path, doc), "--width", WIDTH,
                         "--cache-dir", tiny["memo"], "--json", "-")
    assert code == 0, err
    result = json.loads(out)  # stdout is the JSON alone
    skipped = next(a for a in result["arms"] if a["arm"] == "yat-trained")
    assert skipped["status"] == "skipped" and "lazylab 0.1.0+src.00000000" in skipped["line"]
    assert "comparison would not be meaningful" in skipped["line"]
    assert [r["arm"] for r in result["rows"]] == ["yat-frozen", "yat-frozen"]
    assert result["verdict"].endswith("skipped (other code): yat-trained; convex readouts: 1 of 1 identical, 0 within "
                                      "0.1 points, 0 beyond: exit 0")


@pytest.mark.parametrize("argv, needles", [
    (["--arms", "relu-frozen"], ["--arms", "relu-frozen is not in the reference", "yat-frozen, yat-trained"]),
    (["--seeds", "7"], ["no run of yat-frozen, yat-trained at m = 8 with seed 7"]),
    (["--arms", "no-such-arm"], ["unknown arm 'no-such-arm'"]),
])
def test_bad_input_is_one_line_and_exit_2(tiny, capsys, argv, needles):
    code, _, err = run(capsys, "verify", "--reference", tiny["path"], "--width", WIDTH, *argv)
    assert_one_line_error(code, err, *needles)


def test_other_data_or_a_bad_reference_file_is_one_line_and_exit_2(tiny, tmp_path, capsys):
    doc = copy.deepcopy(tiny["doc"])
    for r in doc["payload"]["runs"]:
        r["config"]["data"] = "0123456789abcdef"
    code, _, err = run(capsys, "verify", "--reference", _write(tmp_path, doc), "--width", WIDTH)
    assert_one_line_error(code, err, "fingerprint", "0123456789abcdef", "another Fashion-MNIST")
    (tmp_path / "broken.json").write_text("{not json")
    code, _, err = run(capsys, "verify", "--reference", tmp_path / "broken.json")
    assert_one_line_error(code, err, "broken.json", "not JSON")
    code, _, err = run(capsys, "verify", "--reference", tmp_path / "absent.json")
    assert_one_line_error(code, err, "absent.json", "no such file")


def test_dry_run_prints_the_plan_and_computes_nothing(tiny, tmp_path, capsys):
    memo = tmp_path / "memo"
    code, out, err = run(capsys, "verify", "--reference", tiny["path"], "--width", WIDTH, "--dry-run",
                         "--cache-dir", memo, "--arms", "yat-trained")
    assert code == 0, err
    assert out.startswith("plan: verify: 2 runs (0 in the memo, 2 to compute)")
    assert "verify yat-trained: 2 runs, m = 8, seed 0" in out
    from lazylab.cache import Memo

    assert len(Memo(memo)) == 0


def test_a_convex_readout_is_rerun_and_held_to_its_tolerance(tiny, tmp_path, capsys):
    """The reference's convex readout at the verified width is solved again: a test accuracy planted 0.05 points
    off is within the tolerance (exit 0), 0.5 points off beyond it (exit 1)."""
    for points, verdict, code in ((0.05, "within noise", 0), (0.5, "diverged", 1)):
        doc = copy.deepcopy(tiny["doc"])
        record = doc["payload"]["convex"]["runs"][0]
        record["test_acc"] = round(record["test_acc"] + points, 10)
        got, out, err = run(capsys, "verify", "--reference", _write(tmp_path, doc), "--width", WIDTH,
                            "--cache-dir", tiny["memo"])
        assert got == code, err
        # the table's rule is "│" or "|" as rich finds the terminal's encoding
        assert re.search(rf"-{points:.2f} [│|]", out), out
        assert verdict in out.split("convex readouts (test %)")[1]
