"""Trajectories on real Fashion-MNIST slices: snapshots, travel, memo, pictures and errors."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from PIL import Image

from lazylab.arms import get_arm
from lazylab.cli import main
from lazylab.errors import LazylabError
from lazylab.experiments import Workspace, train_runs
from lazylab.experiments import trajectory as T
from lazylab.model import init_prototypes
from lazylab.render.trajectory import MAX_GIF_BYTES, render_trajectory

TINY = dict(width=16, epochs=2, snapshots=4, lr=0.03, train_size=1024)


def tiny_plan(*names, **over) -> T.TrajectoryPlan:
    return T.TrajectoryPlan(arms=tuple(get_arm(n) for n in names), **{**TINY, **over})


@pytest.fixture(scope="module")
def traj(tmp_path_factory):
    """Random-init and data-seeded Yat, 2 epochs at m = 16 on the first 1,024 real training images."""
    ws = Workspace(cache_dir=tmp_path_factory.mktemp("trajmemo"))
    return ws, run_trajectory_checked(ws, tiny_plan("yat-trained", "yat-data-trained"))


def run_trajectory_checked(ws, plan):
    result = T.run_trajectory(ws, plan)
    assert [a.arm for a in result.arms] == [a.name for a in plan.arms]
    return result


def test_epoch_zero_is_the_initialisation_exactly_and_has_not_travelled(traj):
    ws, result = traj
    x = ws.data.x_train[:1024]
    for a in result.arms:
        W0 = init_prototypes(get_arm(a.arm), 16, 0, x)
        assert a.snapshots.dtype == np.float32 and a.snapshots.shape == (3, 4, 784)
        assert np.array_equal(a.snapshots[0], W0[:4])  # bit for bit
        r = a.record
        assert r["epochs"] == [0, 1, 2]
        assert r["travel_median"][0] == 0.0 and r["travel_max"][0] == 0.0 and r["w_move_rel"][0] == 0.0
        assert r["scalars"][0] == pytest.approx({"b": 0.5, "eps": 0.5})
        assert all(t > 0 for t in r["travel_median"][1:])
        assert r["travel_max"][-1] >= r["travel_median"][-1]
        assert not np.array_equal(a.snapshots[-1], a.snapshots[0])
        # The per-unit travel of the snapshotted rows agrees with the stored snapshots.
        per_unit = np.linalg.norm(a.snapshots[-1] - a.snapshots[0], axis=1) / np.linalg.norm(a.snapshots[0], axis=1)
        assert per_unit.max() <= r["travel_max"][-1] + 1e-6


def test_snapshot_hook_does_not_change_training(traj):
    """The trajectory's last epoch is the plain training run's result (same config, same curve and movement)."""
    ws, result = traj
    a = result.arms[0]
    cfg = ws.config(get_arm(a.arm), 16, 0, 0.03, epochs=2, batch=256, train_size=1024, fan_in="unit")
    plain = train_runs(ws, get_arm(a.arm), [cfg])[0]
    assert plain["curve"] == a.record["accuracy"][1:]
    assert plain["movement"]["unit_median"] == pytest.approx(a.record["travel_median"][-1], rel=1e-6)
    assert plain["scalars"]["end"] == pytest.approx(a.record["scalars"][-1], rel=1e-6)


def test_second_run_recomputes_nothing(traj, monkeypatch):
    ws, first = traj

    def boom(*args, **kwargs):
        raise AssertionError("trajectory recomputed")

    monkeypatch.setattr(T, "trajectory_run", boom)
    again = T.run_trajectory(ws, tiny_plan("yat-trained", "yat-data-trained"))
    assert all(a.cached for a in again.arms)
    for a, b in zip(first.arms, again.arms):
        assert a.record == b.record
        assert np.array_equal(a.snapshots, b.snapshots)


def test_config_key_covers_snapshots_and_run(traj):
    ws, _ = traj
    arm = get_arm("yat-trained")
    run = ws.config(arm, 64, 0, 0.03, epochs=24)
    base = T.TrajectoryConfig(run, 16)
    assert T.TrajectoryConfig(run, 16).key() == base.key()
    assert T.TrajectoryConfig(run, 8).key() != base.key()
    assert T.TrajectoryConfig(dataclasses.replace(run, seed=1), 16).key() != base.key()
    assert T.TrajectoryConfig(dataclasses.replace(run, plugin="other 9"), 16).key() != base.key()
    assert base.key() != run.key() and base.arrays_key() != base.key()
    for field in ("arm", "plugin", "width", "seed", "lr", "epochs", "train_size", "data", "schema"):
        assert f'"{field}"' in base.canonical()


def test_pictures_open_loop_and_stay_small(traj, tmp_path):
    _, result = traj
    info = render_trajectory(result, tmp_path)
    for name in ("trajectory_prototypes.gif", "trajectory_curves.gif"):
        f = info["files"][name]
        assert 0 < f["bytes"] <= MAX_GIF_BYTES
        with Image.open(f["path"]) as im:
            assert im.n_frames == 3 and im.info.get("loop") == 0
            sizes = set()
            for i in range(im.n_frames):
                im.seek(i)
                sizes.add(im.size)
            assert len(sizes) == 1
        assert (tmp_path / name.replace(".gif", ".png")).is_file()
    assert info["prototype_scale"] == "per-image" and info["colour_scale"] is None  # each image on its own scale
    assert 0 < info["image_scales"][0] <= info["image_scales"][1]
    shared = render_trajectory(result, tmp_path / "shared", prototype_scale="shared")
    assert shared["colour_scale"] > 0 and "one scale" in shared["caption"]


def test_non_image_prototypes_get_curves_and_a_note(traj, tmp_path):
    ws, result = traj
    yat = get_arm("yat-trained")
    flat = dataclasses.replace(yat, name="flat-trained", unit=dataclasses.replace(yat.unit, prototypes_are_images=False))
    res = T.run_trajectory(ws, T.TrajectoryPlan(arms=(flat,), **{**TINY, "epochs": 1}))
    assert not res.arms[0].images
    assert any("flat-trained" in n and "not images" in n for n in res.notes)
    (tmp_path / "trajectory_prototypes.gif").write_bytes(b"stale picture of an earlier run")
    info = render_trajectory(res, tmp_path)
    assert not (tmp_path / "trajectory_prototypes.gif").exists()
    assert "trajectory_prototypes.gif" not in info["files"] and "trajectory_curves.gif" in info["files"]
    assert info["notes"]


def test_bracketed_rate_is_the_ladders(tmp_path, monkeypatch):
    """Without --lr the rate is the best of the arm's grid among memoized ladder-style bracket runs.

    The protocol brackets at m = 256, seed 0, 12 epochs; the bracket is shrunk here to keep the test fast.
    """
    from lazylab.experiments.ladder import choose_rate

    assert (T.BRACKET_WIDTH, T.BRACKET_SEED, T.BRACKET_EPOCHS) == (256, 0, 12)
    monkeypatch.setattr(T, "BRACKET_WIDTH", 16)
    monkeypatch.setattr(T, "BRACKET_EPOCHS", 2)
    ws = Workspace(cache_dir=tmp_path / "memo")
    yat = get_arm("yat-trained")
    arm = dataclasses.replace(yat, unit=dataclasses.replace(yat.unit, lr_grids={"trained": (3e-3, 3e-2)}))
    res = T.run_trajectory(ws, T.TrajectoryPlan(arms=(arm,), width=8, epochs=1, snapshots=2, lr=None, train_size=512))
    a = res.arms[0]
    scores = {}
    for lr in arm.unit.grid(True):
        rec = ws.memo.get_record(ws.config(arm, 16, 0, lr, epochs=2, batch=256, train_size=512, fan_in="unit").key())
        scores[lr] = rec["best_acc"]
    assert len(scores) == 2 and a.rate_source == "bracket" and a.lr == choose_rate(scores)
    assert a.bracket == {repr(lr): acc for lr, acc in scores.items()}


@pytest.mark.parametrize(
    "argv, needles",
    [
        (["--arms", "yat-frozen"], ["yat-frozen", "frozen", "yat-trained"]),
        (["--arms", "yat-trained,gaussian-frozen"], ["gaussian-frozen", "gaussian-trained"]),
        (["--arms", "yat-trainedd"], ["yat-trainedd"]),
        (["--width", "8", "--snapshots", "16"], ["--snapshots"]),
        (["--width", "0"], ["--width"]),
    ],
)
def test_cli_errors_are_one_line(capsys, memo_dir, argv, needles):
    with pytest.raises(SystemExit) as exc:
        main(["trajectory", *argv])
    err = capsys.readouterr().err
    assert exc.value.code == 2, err
    lines = [l for l in err.strip().splitlines() if l.strip()]
    assert len(lines) == 1 and "Traceback" not in err
    for needle in needles:
        assert needle in lines[0]


def test_validate_rejects_frozen_arms_before_any_work():
    with pytest.raises(LazylabError, match="frozen"):
        T.validate(tiny_plan("yat-frozen"))


def test_cli_end_to_end_then_from_the_memo(capsys, memo_dir, tmp_path):
    argv = ["trajectory", "--arms", "yat-trained", "--width", "8", "--epochs", "1", "--snapshots", "8",
            "--lr", "0.03", "--train-size", "512", "--out", str(tmp_path / "pics")]
    for expected in ("1 computed, 0 from the memo", "0 computed, 1 from the memo"):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        out = capsys.readouterr().out
        assert exc.value.code == 0, out
        assert expected in out
        assert "trajectory_prototypes.gif (2 frames)" in out and "trajectory_curves.gif (2 frames)" in out
