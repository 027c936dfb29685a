"""The Ray backend (issue 9): a local 2-CPU Ray instance inside the suite runs a tiny ladder.

Its records must equal the local backend's, a second run must recompute nothing, and an
interrupt must keep every stored group and cancel the rest. The option checks run without Ray.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time

import pytest

from cli_helpers import assert_one_line_error, lines, run
from lazylab.backends import RayBackend, ray_available, worker_env
from lazylab.errors import LazylabError

# m = 1024: products big enough that XLA splits them over threads, in the driver and in a
# worker process alike; the records must still agree bit for bit.
LADDER = ["ladder", "--arms", "yat-frozen,yat-trained", "--widths", "8,16,1024", "--seeds", "0,1", "--epochs", "1",
          "--train-size", "2048", "--lr", "0.1", "--no-figures"]
N_RUNS = 12  # 2 arms x 3 widths x 2 seeds: yat-trained's seeds of a width up to 256 train together,
# the other runs alone (experiments.batched), so 10 Ray tasks


# ------------------------------------------------------------ without Ray
def test_address_needs_the_ray_backend(capsys, memo_dir):
    code, _, err = run(capsys, *LADDER, "--address", "auto")
    assert_one_line_error(code, err, "--address needs --backend ray")


@pytest.mark.parametrize("option", [["--task-cpus", "2"], ["--task-gpus", "0.5"]])
def test_task_resources_need_the_ray_backend(capsys, memo_dir, option):
    code, _, err = run(capsys, "trajectory", *option)
    assert_one_line_error(code, err, f"{option[0]} needs --backend ray")


@pytest.mark.parametrize("option", [["--task-cpus", "0"], ["--task-cpus", "nan"], ["--task-gpus", "-1"],
                                    ["--address", " "]])
def test_bad_ray_options(capsys, memo_dir, option):
    code, _, err = run(capsys, *LADDER, "--backend", "ray", *option)
    assert_one_line_error(code, err, option[0])


@pytest.mark.parametrize("address", ["127.0.0.1:1", "nonsense-host.invalid:6379", "no-port", "host:port"])
def test_an_unreachable_cluster_address_is_one_line_at_once(capsys, memo_dir, address):
    if not ray_available():
        pytest.skip("needs Ray")
    t = time.monotonic()
    code, _, err = run(capsys, *LADDER, "--backend", "ray", "--address", address)
    assert_one_line_error(code, err, f"cannot connect to the Ray cluster at {address}")
    if not address.rpartition(":")[2].isdigit():
        assert "not HOST:PORT" in err  # said plainly, not as int()'s complaint
    assert time.monotonic() - t < 60  # Ray itself would retry for over ten minutes


def test_ray_missing_says_how_to_install_it(capsys, memo_dir, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "ray", None)  # `import ray` now raises ImportError
    for command in (LADDER, ["trajectory"]):
        code, _, err = run(capsys, *command, "--backend", "ray")
        assert_one_line_error(code, err, "pip install 'lazylab[ray]'")


def test_worker_env_forwards_jax_memory_and_plugin_settings():
    env = worker_env({"XLA_PYTHON_CLIENT_MEM_FRACTION": ".3", "XLA_FLAGS": "--xla_force_host_platform_device_count=2",
                      "JAX_PLATFORMS": "cpu", "LAZYLAB_ARMS": "yat,relu", "LAZYLAB_STRICT_PLUGINS": "1",
                      "LAZYLAB_DATA": "/driver/only", "LAZYLAB_CACHE": "/driver/memo", "HOME": "/root"})
    assert env == {"XLA_PYTHON_CLIENT_PREALLOCATE": "false", "XLA_PYTHON_CLIENT_MEM_FRACTION": ".3",
                   "XLA_FLAGS": "--xla_force_host_platform_device_count=2", "JAX_PLATFORMS": "cpu",
                   "LAZYLAB_ARMS": "yat,relu", "LAZYLAB_STRICT_PLUGINS": "1"}
    assert worker_env({"XLA_PYTHON_CLIENT_PREALLOCATE": "true"})["XLA_PYTHON_CLIENT_PREALLOCATE"] == "true"


# --------------------------------------------------------------- with Ray
@pytest.fixture(scope="module")
def ray_instance():
    """A local Ray instance with 2 CPUs for this module; every RayBackend here reuses it (and leaves it up)."""
    if not ray_available():
        msg = "the Ray backend tests need Ray: bash scripts/setup.sh (pip install 'lazylab[ray]')"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no report to Ray's servers from the suite
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR,
             object_store_memory=256 * 2**20)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def ladders(ray_instance, tmp_path_factory):
    """The tiny ladder on the local backend and through Ray, each on its own memo: (json paths, memos, seconds)."""
    from lazylab.cli import main

    tmp = tmp_path_factory.mktemp("ray")
    out, seconds = {}, {}
    for name, extra in (("local", []), ("ray", ["--backend", "ray"])):
        out[name] = tmp / f"{name}.json"
        t0 = time.perf_counter()
        with pytest.raises(SystemExit) as exc:
            main([*LADDER, *extra, "--cache-dir", str(tmp / name), "--json", str(out[name])])
        seconds[name] = time.perf_counter() - t0
        assert exc.value.code == 0
    print(f"tiny ladder ({N_RUNS} runs): local {seconds['local']:.1f} s, ray {seconds['ray']:.1f} s "
          "(Ray already started)")
    return out, {name: tmp / name for name in out}, seconds


@pytest.mark.slow
def test_ray_ladder_equals_the_local_one(ladders):
    paths, _, _ = ladders
    local, ray = (json.loads(paths[name].read_text()) for name in ("local", "ray"))
    assert local["plan"] == ray["plan"] and local["arms"] == ray["arms"]
    by_key = {name: {r["key"]: r for r in doc["runs"]} for name, doc in (("local", local), ("ray", ray))}
    assert sorted(by_key["local"]) == sorted(by_key["ray"]) and len(by_key["local"]) == N_RUNS
    for key, rec in by_key["local"].items():
        other = by_key["ray"][key]
        # Everything but the wall time, bit for bit: curves, best_acc, losses, movement, scalars.
        assert {k: v for k, v in rec.items() if k != "seconds"} == {k: v for k, v in other.items() if k != "seconds"}
        assert rec["best_acc"] is not None and len(rec["curve"]) == 1


@pytest.mark.slow
def test_second_ray_ladder_recomputes_nothing(ladders, capsys):
    _, memos, _ = ladders
    code, out, err = run(capsys, *LADDER, "--backend", "ray", "--cache-dir", memos["ray"])
    assert code == 0, err
    assert f"runs: 0 computed, {N_RUNS} from the memo" in out
    assert "; 0 Ray tasks on a local Ray instance" in out


CONVEX = ["ladder", "--arms", "relu-frozen", "--widths", "8,16", "--seeds", "0,1", "--train-size", "2048",
          "--readout", "convex", "--lambdas", "1e-3,1e-5"]


@pytest.mark.slow
def test_ray_convex_readouts_equal_the_local_ones(ladders, capsys):
    """Convex cells, lambda choices and their refinements are backend jobs too: through Ray (a choice and its
    refinement per width, then 4 cells) they equal the local ones bit for bit."""
    _, memos, _ = ladders
    docs = {}
    for name, extra in (("local", []), ("ray", ["--backend", "ray"])):
        path = memos[name].parent / f"convex-{name}.json"
        code, out, err = run(capsys, *CONVEX, *extra, "--cache-dir", memos[name], "--json", path)
        assert code == 0, err
        assert "convex readouts: 8 computed, 0 from the memo" in out  # a choice and a refinement per width, 4 cells
        docs[name] = json.loads(path.read_text())["convex"]
    strip = {part: [{k: v for k, v in r.items() if k != "seconds"} for r in docs["local"][part]]
             for part in ("runs", "choices", "refinements")}
    for part, records in strip.items():
        assert records == [{k: v for k, v in r.items() if k != "seconds"} for r in docs["ray"][part]], part
    assert len(strip["choices"]) == len(strip["refinements"]) == 2 and len(strip["runs"]) == 4
    assert all(25 < r["test_acc"] < 90 for r in strip["runs"])  # m = 8 and 16 on 2,048 images


@pytest.mark.slow
def test_tasks_get_the_jax_settings(ray_instance, monkeypatch):
    monkeypatch.setenv("XLA_PYTHON_CLIENT_MEM_FRACTION", ".25")
    backend = RayBackend()
    backend._submit(lambda names: {n: __import__("os").environ.get(n) for n in names}, "probe",
                    ["XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION"])
    [(what, env)] = list(backend._as_done())
    assert what == "probe"
    assert env == {"XLA_PYTHON_CLIENT_PREALLOCATE": "false", "XLA_PYTHON_CLIENT_MEM_FRACTION": ".25"}


def _tiny_cfgs(ws, arm, widths):
    return [ws.config(arm, w, s, 0.1, epochs=1, batch=256, train_size=2048, fan_in="unit") for w in widths for s in (0, 1)]


@pytest.mark.slow
def test_a_worker_with_other_data_fails_in_one_line(ray_instance, tmp_path):
    from lazylab.arms import get_arm
    from lazylab.experiments import Workspace

    ws = Workspace(cache_dir=tmp_path / "memo")
    ws.backend = RayBackend()
    arm = get_arm("yat-frozen")
    cfg = dataclasses.replace(_tiny_cfgs(ws, arm, [8])[0], data="0" * 16)
    with pytest.raises(LazylabError) as exc:
        ws.run_cells([(arm, cfg)])
    assert "fingerprint" in str(exc.value) and "0" * 16 in str(exc.value) and len(lines(str(exc.value))) == 1
    assert ws.memo.get_record(cfg.key()) is None


@pytest.mark.slow
def test_interrupt_keeps_stored_groups_and_cancels_the_rest(ray_instance, tmp_path):
    from lazylab.arms import get_arm
    from lazylab.experiments import Reporter, Workspace

    class Interrupt(Reporter):
        def done(self, cfg, record, cached):
            raise KeyboardInterrupt  # a Ctrl-C while the first group is being reported

    ws = Workspace(cache_dir=tmp_path / "memo")
    backend = ws.backend = RayBackend()
    arm = get_arm("yat-trained")
    cfgs = _tiny_cfgs(ws, arm, [8, 16, 32])  # three groups (each width's two seeds), three tasks
    with pytest.raises(KeyboardInterrupt):
        ws.run_cells([(arm, c) for c in cfgs], Interrupt())
    stored = [c for c in cfgs if ws.memo.get_record(c.key()) is not None]
    # Each record is stored, then reported: the interrupt in the first report keeps that one run.
    assert len(stored) == 1
    assert backend.tasks == 3 and not backend._pending  # the other tasks were cancelled
    backend.close()
    assert ray_instance.is_initialized()  # a backend leaves alone a Ray it did not start


def test_a_worker_falls_back_to_its_own_data_and_checks_the_fingerprint(tmp_path):
    from lazylab import data
    from lazylab.backends import WorkerWorkspace

    ws = WorkerWorkspace(str(tmp_path / "not-on-this-node"))  # the driver's path, absent here
    assert ws.data_dir == data.locate(None) and len(ws.data.y_train) == 60000
    ws.check(data.fingerprint(ws.data_dir))
    with pytest.raises(LazylabError, match="fingerprint .* the driver's has 0123456789abcdef"):
        ws.check("0123456789abcdef")


@pytest.mark.slow
def test_ray_trajectory_equals_the_local_one(ray_instance, tmp_path):
    import numpy as np

    from lazylab.arms import get_arm
    from lazylab.experiments import Workspace
    from lazylab.experiments.trajectory import TrajectoryPlan, run_trajectory

    plan = TrajectoryPlan(arms=(get_arm("yat-trained"),), width=8, epochs=1, snapshots=2, lr=0.03, train_size=1024)
    local = run_trajectory(Workspace(cache_dir=tmp_path / "local"), plan)
    ws = Workspace(cache_dir=tmp_path / "ray")
    backend = ws.backend = RayBackend()
    remote = run_trajectory(ws, plan)
    assert backend.tasks == 1  # one task per arm
    for a, b in zip(local.arms, remote.arms):
        assert a.arm == b.arm and not b.cached
        assert {k: v for k, v in a.record.items() if k != "seconds"} == {k: v for k, v in b.record.items() if k != "seconds"}
        assert np.array_equal(a.snapshots, b.snapshots) and b.snapshots.flags.writeable
    again = run_trajectory(ws, plan)  # the driver stored both: nothing recomputed
    assert backend.tasks == 1 and all(a.cached for a in again.arms)
