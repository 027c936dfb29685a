"""Plans and estimates before a run (lazylab.estimate, lazylab.calibration, lazylab.cli.plan).

The run counting is checked against a tiny real ladder (yat-frozen, 2 widths x 1 seed x 1 epoch
on 512 images, bracketed), memo partly filled; the cost model with fixed constants, so that no
test measures this machine (bench/estimate.py checks the model against measured ladders).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from cli_helpers import run

from lazylab import calibration as C
from lazylab import estimate as E
from lazylab.arms import get_arm
from lazylab.config import code_identity
from lazylab.experiments import Reporter, Workspace
from lazylab.experiments.ladder import PRESETS, LadderPlan, run_ladder

CAL = C.Calibration(step_a=1e-4, step_b=1e-5, head_a=3e-5, head_b=1e-6, feature_s=2e-8, compile_s=1.0,
                    warm_compile_s=0.4, frozen_compile_s=1.0, warm_frozen_compile_s=0.2, cores=os.cpu_count() or 1,
                    load=0.0, code=code_identity(), measured_at="test")


def preset_plan(name: str, **changes) -> LadderPlan:
    p = {**PRESETS[name], **changes}
    return LadderPlan(arms=tuple(get_arm(a) for a in p["arms"]), widths=tuple(p["widths"]), seeds=tuple(p["seeds"]),
                      epochs=p["epochs"], train_size=p["train_size"])


@pytest.fixture
def cal_home(tmp_path, monkeypatch):
    """A cache home holding CAL as this machine's calibration (nothing is measured)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("LAZYLAB_RECALIBRATE", raising=False)
    return C.save(CAL)


# 1se brackets: every grid rate x seeds 0, 1, 2 (28 x 3 and 15 x 3); a bracket run at a cell's seed counts once
@pytest.mark.parametrize("preset, runs, bracket", [("paper", 300, 84), ("quick", 57, 45)])
def test_the_presets_count_their_runs_from_an_empty_memo(tmp_path, preset, runs, bracket):
    ws = Workspace(None, tmp_path / "memo")
    plan = preset_plan(preset)
    est = E.ladder_estimate(ws, plan, cal=CAL, warm=False)
    assert (est.runs_total, est.in_memo, est.to_compute) == (runs, 0, runs) == (plan.n_runs(), 0, plan.n_runs())
    assert sum(r["phase"] == "bracket" for r in est.runs) == bracket
    # until the bracket has run, the cells' rate (and so their keys) are unknown; the bracket's are the ladder's
    assert all(r["lr"] is None and r["key"] is None for r in est.runs if r["phase"] == "cell")
    keys = [r["key"] for r in est.runs if r["phase"] == "bracket"]
    assert len(set(keys)) == bracket and keys[0] == ws.config(plan.arms[0], 256, 0, 0.03, **plan.protocol()).key()
    assert est.seconds == pytest.approx(E.COMMAND_S + sum(r["seconds"] for r in est.runs), abs=0.5)
    assert json.loads(json.dumps(est.to_json()))["runs_total"] == runs


def test_runs_are_counted_against_a_partly_filled_memo(tmp_path):
    """The bracket and one width in the memo: the rate is chosen as the ladder chooses it, one cell is left.
    (The argmax bracket: one seed, no extension, so the counts are the plan's.)"""
    ws = Workspace(None, tmp_path / "memo")
    arm = get_arm("yat-frozen")
    plan = LadderPlan(arms=(arm,), widths=(16, 32), seeds=(0,), epochs=1, train_size=512, bracket="argmax")
    est = E.ladder_estimate(ws, plan, cal=CAL, warm=False)
    assert (est.runs_total, est.in_memo, est.to_compute) == (6, 0, 6)

    part = run_ladder(ws, replace(plan, widths=(16,)))  # the bracket (4 rates at m = 256) and m = 16
    est = E.ladder_estimate(ws, plan, cal=CAL, warm=False)
    assert (est.runs_total, est.in_memo, est.to_compute) == (6, 5, 1)
    (left,) = [r for r in est.runs if not r["in_memo"]]
    lr = part.arms[0].lr
    assert (left["phase"], left["width"], left["lr"]) == ("cell", 32, lr)
    assert left["key"] == ws.config(arm, 32, 0, lr, **plan.protocol()).key() and left["seconds"] > 0
    assert all(r["seconds"] == 0 for r in est.runs if r["in_memo"])

    class Count(Reporter):
        computed = 0

        def done(self, cfg, record, cached):
            Count.computed += not cached

    full = run_ladder(ws, plan, Count())
    assert Count.computed == 1 and left["key"] in {r["key"] for r in full.runs}
    est = E.ladder_estimate(ws, plan, cal=CAL, warm=False)
    assert (est.in_memo, est.to_compute, est.seconds) == (6, 0, E.COMMAND_S)

    # a bracket not all in the memo leaves the rate open: every cell counts as to compute
    other = replace(plan, epochs=2)
    run_ladder(ws, replace(other, lr=lr, widths=(256,)))  # one bracket run of `other`, at the chosen rate
    est = E.ladder_estimate(ws, other, cal=CAL, warm=False)
    assert (est.in_memo, est.to_compute) == (1, 5)
    assert any("bracket not all in the memo" in n for n in est.notes)


def test_the_estimate_grows_with_width_epochs_and_seeds(tmp_path):
    ws = Workspace(None, tmp_path / "memo")
    base = preset_plan("quick")
    seconds = lambda plan: E.ladder_estimate(ws, plan, cal=CAL, warm=False).seconds
    assert seconds(replace(base, widths=(16, 64, 256, 4096))) > seconds(base)
    assert seconds(replace(base, epochs=6)) > seconds(base)
    assert seconds(replace(base, seeds=(0, 1, 2))) > seconds(base)
    for m in (16, 256, 8192):  # one run per model term doubles its work with twice the width
        assert E.trained_group_s(CAL, 2 * m, 1, 12, 60000) > E.trained_group_s(CAL, m, 1, 12, 60000)
        assert E.head_group_s(CAL, 2 * m, 1, 12, 60000) > E.head_group_s(CAL, m, 1, 12, 60000)
    # seeds trained as one program share the per-step cost
    assert E.trained_group_s(CAL, 16, 3, 12, 60000) < 3 * E.trained_group_s(CAL, 16, 1, 12, 60000)
    # compilation once per program shape; a warm compilation cache costs less
    cold = E.ladder_estimate(ws, base, cal=CAL, warm=False)
    warm = E.ladder_estimate(ws, base, cal=CAL, warm=True)
    assert warm.seconds < cold.seconds
    # Ray: one worker per core, plus its start
    ray = E.ladder_estimate(ws, preset_plan("paper"), "ray", cal=CAL, warm=False)
    local = E.ladder_estimate(ws, preset_plan("paper"), cal=CAL, warm=False)
    assert ray.peak_bytes == local.peak_bytes * ray.cores
    cpu = (local.seconds - E.COMMAND_S) * E.effective_cores(1.0, "local", local.cores)  # the runs' CPU seconds
    assert ray.seconds == pytest.approx(E.wall_s(cpu, "ray", ray.cores), abs=0.5)
    assert ray.seconds < local.seconds


def test_disk_follows_the_feature_store_policy_and_its_cap(tmp_path):
    ws = Workspace(None, tmp_path / "memo")
    paper = preset_plan("paper")
    capped = E.ladder_estimate(ws, paper, cal=CAL, warm=False)  # 8 GiB cap: the store holds at most that
    assert 8 * 2**30 < capped.disk_bytes < 8 * 2**30 + 100 * 2**20
    none = E.ladder_estimate(ws, paper, cache_limit=0, cal=CAL, warm=False)
    assert none.disk_bytes == 300 * E.RECORD_BYTES + E.DATA_COPY_BYTES
    # the widest frozen bank's features set the peak: 4 x 70,000 x 8192 bytes, x FEATURE_PEAK_FACTOR
    assert capped.peak_bytes == E.PEAK_BASE_BYTES + int(E.FEATURE_PEAK_FACTOR * 4 * 70000 * 8192)


def test_the_calibration_is_kept_and_reused(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("LAZYLAB_RECALIBRATE", raising=False)
    calls = []
    monkeypatch.setattr(C, "measure", lambda: calls.append(1) or CAL)
    assert C.calibration(measure_now=False) is C.REFERENCE and not calls  # never measured: the reference stands in
    assert C.calibration() == CAL and len(calls) == 1
    path = tmp_path / "lazylab" / "calibration.json"
    assert C.calibration_path() == path and json.loads(path.read_text())["step_b"] == CAL.step_b
    assert C.calibration() == CAL and C.calibration(measure_now=False) == CAL and len(calls) == 1  # reused
    monkeypatch.setenv("LAZYLAB_RECALIBRATE", "1")
    C.calibration()
    assert len(calls) == 2
    monkeypatch.delenv("LAZYLAB_RECALIBRATE")
    for stale in (dict(code="lazylab 0.0.1 numerics 0"), dict(cores=CAL.cores + 1)):
        path.write_text(json.dumps({**asdict(CAL), **stale}))
        C.calibration()
    path.write_text("{not json")
    C.calibration()
    assert len(calls) == 5


def test_dry_run_prints_the_plan_and_computes_nothing(tmp_path, capsys, cal_home):
    memo = tmp_path / "memo"
    code, out, err = run(capsys, "ladder", "--dry-run", "--cache-dir", memo)
    assert code == 0, err
    # up to 2 half-decade extensions x 3 seeds per arm's bracket: a range of runs
    assert out.startswith("plan: ladder: 300-348 runs (0 in the memo, 300 to compute); estimate on this machine: ")
    assert "note: up to 48 more runs if the brackets extend their grids" in out
    assert "bracket: 84 runs of 8 arms, m = 256, seeds 0, 1, 2" in out and "cell relu-trained: 27 runs" in out
    code, out, err = run(capsys, "ladder", "--preset", "quick", "--dry-run", "--json", "-", "--cache-dir", memo)
    assert code == 0, err
    est = json.loads(out)
    assert (est["runs_total"], est["runs_high"], est["to_compute"]) == (57, 57 + 4 * 2 * 3, 57)
    assert est["calibration"]["measured_at"] == "test"
    assert est["contention"] == {"share": 1.0, "cores": E.BUSY_CORES}  # LAZYLAB_CPU_SHARE=1 (conftest): quiet cores
    assert len(Workspace(None, memo).memo) == 0  # nothing computed, nothing stored


def test_a_long_command_announces_its_estimate_on_stderr(tmp_path, capsys):
    from lazylab.cli import plan as P

    est = E.ladder_estimate(Workspace(None, tmp_path / "memo"), preset_plan("paper"), cal=CAL, warm=False)
    assert est.seconds > P.ANNOUNCE_S
    P.announce(est)
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("estimate: ladder: 300-348 runs (0 in the memo")
    assert captured.err.count("\n") == 1 and "--dry-run shows the plan" in captured.err
    P.announce(replace(est, seconds=P.ANNOUNCE_S))
    assert capsys.readouterr().err == ""


def test_redundancy_and_ntk_arm_dry_runs_count_what_the_memo_holds(capsys, memo_dir):
    """Both compute (so both plan): the redundancy grid's measurements are counted under the
    experiment's keys (a random bank's samples share one), before and after the real run."""
    from cli_helpers import run

    argv = ["redundancy", "--arms", "yat-frozen", "--width", "16", "--images", "300", "--seeds", "0,1",
            "--train-size", "512", "--cache-dir", memo_dir]
    code, out, err = run(capsys, *argv, "--dry-run")
    assert code == 0, err
    assert "redundancy: 4 runs (0 in the memo, 4 to compute)" in out  # 2 fan-ins x 2 seeds; 3 samples share
    assert run(capsys, *argv)[0] == 0
    code, out, _ = run(capsys, *argv, "--dry-run")
    assert "redundancy: 4 runs (4 in the memo, 0 to compute)" in out
    code, out, err = run(capsys, "ntk", "arm", "--arm", "yat-trained", "--width", "4", "--dry-run",
                         "--cache-dir", memo_dir)
    assert code == 0 and "ntk arm: 1 run (0 in the memo, 1 to compute)" in out, err


def test_other_work_on_the_cores_scales_the_wall_time_and_says_so(tmp_path, monkeypatch):
    """The runs' CPU seconds over the cores the command gets: BUSY_CORES on quiet cores, share x cores below it."""
    ws = Workspace(None, tmp_path / "memo")
    plan = preset_plan("quick")
    quiet = E.ladder_estimate(ws, plan, cal=CAL, warm=False)
    monkeypatch.setenv("LAZYLAB_CPU_SHARE", "0.25")  # a probe got a quarter of the cores: half a core of 2
    busy = E.ladder_estimate(ws, plan, cal=CAL, warm=False)
    cores = os.cpu_count() or 1
    gets = min(E.BUSY_CORES, 0.25 * cores)
    assert busy.contention == {"share": 0.25, "cores": pytest.approx(gets, abs=1e-3)}
    assert busy.seconds - E.COMMAND_S == pytest.approx((quiet.seconds - E.COMMAND_S) * E.BUSY_CORES / gets, rel=1e-3)
    assert any("other work leaves this command" in n for n in busy.notes) == (gets < E.BUSY_CORES)
    assert not any("may be high" in n for n in busy.notes + quiet.notes)
    monkeypatch.setenv("LAZYLAB_CPU_SHARE", "2")
    with pytest.raises(Exception, match="LAZYLAB_CPU_SHARE"):
        E.ladder_estimate(ws, plan, cal=CAL, warm=False)


def test_a_unit_jax_has_not_compiled_is_priced_cold(tmp_path, monkeypatch):
    """With programs in jax's cache, a unit it has built banks of is priced warm; another unit cold."""
    from lazylab import xla_cache

    cache = tmp_path / "xla"
    monkeypatch.setenv("LAZYLAB_XLA_CACHE", str(cache))
    folder = xla_cache.cache_dir()
    folder.mkdir(parents=True)
    (folder / "jit_step-0123-cache").write_bytes(b"x")  # a program: the cache is warm
    ws = Workspace(None, tmp_path / "memo")
    yat, relu = get_arm("yat-frozen"), get_arm("relu-frozen")
    (folder / xla_cache.UNITS).write_text(json.dumps([yat.plugin]))
    assert xla_cache.cached_units(folder) == {yat.plugin}
    plan = LadderPlan(arms=(yat, relu), widths=(16,), seeds=(0,), epochs=1, train_size=512, lr=0.1)
    pricer = E.Pricer(CAL, warm=None)
    assert pricer.warm and pricer.warm_for(yat) and not pricer.warm_for(relu)
    est = E.ladder_estimate(ws, plan, cal=CAL)
    cold = E.ladder_estimate(ws, plan, cal=CAL, warm=False)
    warm = E.ladder_estimate(ws, plan, cal=CAL, warm=True)
    secs = lambda e, arm: sum(r["seconds"] for r in e.runs if r["arm"] == arm)
    assert secs(est, "yat-frozen") == pytest.approx(secs(warm, "yat-frozen"))
    assert secs(est, "relu-frozen") == pytest.approx(secs(cold, "relu-frozen"))
    assert secs(cold, "relu-frozen") > secs(warm, "relu-frozen")


def test_a_refinement_whose_optimum_leaves_the_path_is_priced_at_the_steps_it_takes():
    """``refine_solves``: 2.5 solves where nothing says the refinement will step on; where the walk chose an end
    of its path and the narrower width's refined penalty lies past it, 2 + the half-decades between them, capped
    at the steps the refinement may take. Checked against the shipped data-seeded Yat refinement at m = 4096,
    whose walk chose the path's top and which fitted 5 penalties."""
    from lazylab.estimate_convex import REFINE_SOLVES, refine_solves
    from lazylab.experiments.convex import LAMBDAS, REFINE_BEYOND

    top, bottom = max(LAMBDAS), min(LAMBDAS)
    assert refine_solves(top, LAMBDAS, None) == REFINE_SOLVES
    assert refine_solves(top, LAMBDAS, top) == REFINE_SOLVES  # the narrower width's optimum sits inside the path
    assert refine_solves(1e-6, LAMBDAS, 1e-3) == REFINE_SOLVES  # inside the path: the walk fitted both sides
    assert refine_solves(top, LAMBDAS, 0.316) == 5  # 0.01 -> 0.316: three half-decades
    assert refine_solves(bottom, LAMBDAS, bottom / 100) == 6
    assert refine_solves(top, LAMBDAS, 1e6) == 2 + REFINE_BEYOND

    payload = json.loads((Path(E.__file__).parent / "reference" / "paper.json").read_text())["payload"]
    fitted = {(r["config"]["arm"], r["config"]["width"]): r for r in payload["convex"]["refinements"]}
    record = fitted[("yat-data-frozen", 4096)]
    priced = refine_solves(record["coarse"], tuple(record["config"]["lambdas"]),
                           fitted[("yat-data-frozen", 2048)]["lambda"])
    assert len(record["selection"]) == 5 and 5 / 1.5 <= priced <= 5, priced
