"""Issue 23: plugins and numerics you can trust — the conformance suite, run-time isolation
of a unit that produces NaN, no silent substitutes, no stale plugin results, degenerate data.

Fake plugins are tiny distributions (a ``.dist-info`` with ``entry_points.txt`` and
METADATA) in a temporary directory put on ``sys.path``; commands run in-process on
tiny slices of the real data (512 training images, widths 8, 1 epoch).
"""

from __future__ import annotations

import gzip
import json
import struct
import warnings
from pathlib import Path

import jax
import numpy as np
import pytest

from cli_helpers import lines, pinned, run, write_dist
import lazylab
import lazylab.api
import lazylab.config
from lazylab.arms import ContractError, registry, reset_registry

TINY = ["--train-size", "512", "--epochs", "1", "--lr", "0.1", "--seeds", "0"]

NAN_UNIT = '''
import jax.numpy as jnp
from flax import nnx
from lazylab.arms import Unit


class NanBank(nnx.Module):
    def __init__(self, W, x_ref=None):
        self.W = nnx.Param(jnp.asarray(W, jnp.float32))

    def __call__(self, x):
        return x @ self.W[...].T * jnp.nan


UNIT = Unit(name="nanunit", bank=NanBank)
'''

EDITABLE_UNIT = '''
import jax
from flax import nnx
from lazylab.arms import Unit
from lazylab.arms.relu import ReluBank

UNIT = Unit(name="editable", bank=ReluBank, fan_in="d")
'''


@pytest.fixture(scope="module")
def module_memo(tmp_path_factory):
    """One memo for this module's commands: the data is parsed once (its copy lives in the memo)."""
    return tmp_path_factory.mktemp("memo")


@pytest.fixture
def memo_dir(module_memo, monkeypatch):
    monkeypatch.setenv("LAZYLAB_CACHE", str(module_memo))
    return module_memo


@pytest.fixture
def nan_plugin(tmp_path, monkeypatch, memo_dir):
    monkeypatch.setenv("LAZYLAB_ARMS", pinned("lazylab-nan:nanunit"))
    monkeypatch.delenv("LAZYLAB_STRICT_PLUGINS", raising=False)
    root = write_dist(tmp_path / "site", "lazylab-nan", "0.1", {"nanunit": "lazylab_nan:UNIT"}, {"lazylab_nan.py": NAN_UNIT})
    monkeypatch.syspath_prepend(str(root))
    reset_registry()
    yield
    reset_registry()


def errors(err: str) -> list[str]:
    assert "Traceback" not in err and "internal error" not in err, err
    return [l for l in lines(err) if l.startswith("error: ")]


def test_check_unit_passes_builtins_and_lists_every_failure_of_a_nan_unit(nan_plugin):
    from lazylab.testing import check_unit, real_images

    x = real_images()
    assert x.shape == (1024, 784) and 0 <= x.min() and x.max() == 1.0  # real images, not synthetic
    check_unit(registry().unit("yat")[0], x)  # both inits, prefix-stable (the other units: test_plugins)
    with pytest.raises(ContractError) as exc:
        check_unit(registry().unit("nanunit")[0], x)
    msg = str(exc.value)
    assert "non-finite feature nan at image 0, unit 0" in msg and "non-finite gradient with respect to" in msg

    from dataclasses import replace

    import jax.numpy as jnp
    from flax import nnx

    from lazylab.arms.common import sq_distances
    from lazylab.arms.relu import UNIT as RELU

    class InverseDistance(nnx.Module):
        """1 / ||x - w||^2: finite on other images, inf on the image that is its prototype."""

        def __init__(self, W, x_ref=None):
            self.W = nnx.Param(jnp.asarray(W, jnp.float32))

        def __call__(self, x):
            return 1.0 / sq_distances(x, self.W[...])[0]

    with pytest.raises(ContractError, match=r"data-finite: non-finite feature inf at image (\d), unit \1 \(an image equal to its prototype\)"):
        check_unit(replace(RELU, name="invdist", bank=InverseDistance, inits=("data",), prefix_stable=False), x)


def test_check_unit_catches_a_false_prefix_claim_and_a_bank_that_mutates_its_state():
    """Two subtle breaks built from the Gaussian bank: sigma depends on all of W (not prefix-stable),
    and a bank whose call mutates its state (it cannot train, frozen or not)."""
    from dataclasses import replace

    import jax.numpy as jnp
    from flax import nnx

    from lazylab.arms.gaussian import UNIT as GAUSS, GaussianBank
    from lazylab.testing import check_unit, real_images

    x = real_images()
    with pytest.raises(ContractError, match="declares prefix_stable but the bank of W\\[:4\\] differs"):
        check_unit(replace(GAUSS, prefix_stable=True), x)

    class Counting(GaussianBank):
        def __init__(self, W, x_ref=None):
            super().__init__(W, x_ref)
            self.calls = nnx.Variable(jnp.zeros(()))

        def __call__(self, x):
            self.calls[...] = self.calls[...] + 1.0
            return super().__call__(x)

    with pytest.raises(ContractError, match="differentiating the bank failed: TraceContextError"):
        check_unit(replace(GAUSS, bank=Counting), x)

    def broken_sample(key, shape):
        raise RuntimeError("no draws today")

    with pytest.raises(ContractError, match="^random-bank: RuntimeError: no draws today$"):
        check_unit(replace(GAUSS, inits=("random",), sample=broken_sample), x)


def test_arms_check_exits_2_naming_the_nan_unit(nan_plugin, capsys, monkeypatch):
    monkeypatch.setenv("LAZYLAB_ARMS", "lazylab-nan:nanunit,relu")
    reset_registry()
    code, out, err = run(capsys, "arms", "--check")
    assert code == 2
    (line,) = errors(err)
    assert line.startswith("error: unit 'nanunit' (lazylab-nan 0.1) fails its check") and "non-finite feature" in line
    assert "relu-frozen" in out  # the listing is still printed
    assert "on real images: 1 of 2 units passed" in out


@pytest.mark.slow
def test_ladder_isolates_a_nan_unit_prints_the_healthy_table_and_json_and_exits_2(nan_plugin, capsys, tmp_path):
    out_json = tmp_path / "ladder.json"
    code, out, err = run(capsys, "ladder", "--arms", "nanunit-frozen,yat-frozen", "--widths", "8", *TINY,
                         "--json", out_json, "--no-figures")
    assert code == 2
    (line,) = errors(err)
    assert "unit 'nanunit' (lazylab-nan 0.1+src." in line and "non-finite features" in line
    assert "nanunit-frozen m=8 seed 0" in line
    result = json.loads(out_json.read_text())
    arms = {a["arm"]: a for a in result["arms"]}
    assert arms["yat-frozen"]["cells"]["8"]["mean"] > 10.0 and "failed" not in arms["yat-frozen"]
    assert arms["nanunit-frozen"]["failed"] in line
    assert arms["nanunit-frozen"]["cells"]["8"]["failed"] == 1 and arms["nanunit-frozen"]["cells"]["8"]["mean"] is None
    assert all(r["config"]["arm"] == "yat-frozen" for r in result["runs"])  # nothing of the failed arm stored
    row = next(l for l in out.splitlines() if "yat-frozen" in l)
    assert f"{arms['yat-frozen']['cells']['8']['mean']:.2f}" in row


@pytest.mark.parametrize("argv", [
    ["gram", "--arm", "nanunit-frozen", "--max-units", "8", "--frames", "2", "--ref-units", "32", "--per-class", "2"],
    ["readout", "--arm", "nanunit-frozen", "--widths", "8", "--train-size", "256", "--steps", "2", "--eval-every", "1"],
    ["ntk", "arm", "--arm", "nanunit-trained", "--width", "8", "--probe", "8", "--epochs", "1", "--train-size", "512",
     "--lr", "0.1"],
], ids=["gram", "readout", "ntk-arm"])
def test_single_arm_commands_name_the_nan_unit_in_one_line(nan_plugin, capsys, tmp_path, argv):
    code, _, err = run(capsys, *argv, "--out", tmp_path / "out")
    assert code == 2
    (line,) = errors(err)
    assert "unit 'nanunit' (lazylab-nan 0.1+src." in line and "non-finite" in line


def test_trajectory_isolates_a_nan_unit(nan_plugin, capsys, tmp_path):
    code, out, err = run(capsys, "trajectory", "--arms", "nanunit-trained,yat-trained", "--width", "8", "--snapshots", "4",
                         "--epochs", "1", "--lr", "0.01", "--train-size", "512", "--out", tmp_path / "t",
                         "--json", tmp_path / "t.json")
    assert code == 2
    (line,) = errors(err)
    assert "unit 'nanunit' (lazylab-nan 0.1+src." in line and "nanunit-trained m=8 seed 0" in line
    arms = [a["arm"] for a in json.loads((tmp_path / "t.json").read_text())["arms"]]
    assert arms == ["yat-trained"] and "yat-trained" in out


def test_a_second_yat_is_an_error_naming_both_unless_one_is_chosen(tmp_path, monkeypatch, capsys, memo_dir):
    monkeypatch.setenv("LAZYLAB_ARMS", pinned().replace("lazylab:yat", "yat"))  # yat from any distribution
    monkeypatch.syspath_prepend(str(write_dist(tmp_path, "lazylab-yat", "2.0", {"yat": "lazylab.arms.relu:UNIT"})))
    reset_registry()
    code, _, err = run(capsys, "ladder", "--arms", "yat-frozen", "--widths", "8", *TINY)
    assert code == 2
    (line,) = errors(err)
    assert "registered by both" in line and f"lazylab {lazylab.__version__}" in line and "lazylab-yat 2.0" in line
    assert len(lines(err)) == 1  # the load warning is not repeated beside the error naming the unit
    reset_registry()  # (a process loads the registry once; here each command is a fresh "process")
    code, out, err = run(capsys, "arms")
    assert code == 0 and err.startswith("warning: plugin unit 'yat'") and len(lines(err)) == 1
    monkeypatch.setenv("LAZYLAB_ARMS", "lazylab:yat,relu")
    reset_registry()
    arm = registry().arm("yat-frozen")
    assert (arm.distribution, arm.unit.name, arm.unit.description[:6]) == ("lazylab", "yat", "(w.x +")
    reset_registry()


def test_one_distribution_seen_twice_loads_once_and_strict_mode_names_every_broken_plugin(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LAZYLAB_ARMS", pinned("lazylab-twice:twice", "lazylab-one:one", "lazylab-two:two"))
    root = write_dist(tmp_path, "lazylab-twice", "1.0", {"twice": "lazylab_twice:UNIT"}, {"lazylab_twice.py": (
        "from dataclasses import replace\nfrom lazylab.arms.relu import UNIT as RELU\nUNIT = replace(RELU, name='twice')\n")})
    egg = root / "lazylab_twice.egg-info"  # the same distribution as an egg-info too (a develop install)
    egg.mkdir()
    (egg / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: lazylab-twice\nVersion: 1.0\n")
    (egg / "entry_points.txt").write_text("[lazylab.arms]\ntwice = lazylab_twice:UNIT\n")
    for name in ("one", "two"):
        write_dist(tmp_path / name, f"lazylab-{name}", "0.1", {name: f"lazylab_missing_{name}:UNIT"})
        monkeypatch.syspath_prepend(str(tmp_path / name))
    monkeypatch.syspath_prepend(str(root))
    reset_registry()
    reg = registry()
    assert reg.unit("twice")[1] == "lazylab-twice" and "twice" not in reg.errors
    reg.load_all()
    assert set(reg.errors) == {"one", "two"}
    monkeypatch.setenv("LAZYLAB_STRICT_PLUGINS", "1")
    reset_registry()
    code, _, err = run(capsys, "arms")
    assert code == 2
    (line,) = errors(err)
    assert "'one' (lazylab-one 0.1) failed: ModuleNotFoundError" in line and "'two' (lazylab-two 0.1) failed" in line
    reset_registry()


def test_a_plugin_edited_in_place_recomputes_its_runs(tmp_path, monkeypatch, capsys, memo_dir):
    monkeypatch.setenv("LAZYLAB_ARMS", pinned("lazylab-editable:editable"))
    root = write_dist(tmp_path, "lazylab-editable", "0.1", {"editable": "lazylab_editable:UNIT"},
                      {"lazylab_editable.py": EDITABLE_UNIT})
    monkeypatch.syspath_prepend(str(root))
    argv = ["ladder", "--arms", "editable-frozen", "--widths", "8", *TINY, "--no-figures"]
    counts, notes = [], []
    for widths, edit in (("8,16", None), ("8,16", None), ("8", "\n# a comment: same version, other source\n")):
        if edit:
            with open(root / "lazylab_editable.py", "a") as f:
                f.write(edit)
        reset_registry()
        code, out, err = run(capsys, *argv[:3], "--widths", widths, *argv[5:])
        assert code == 0, err
        counts.append(next(l for l in out.splitlines() if l.startswith("runs:")).split(" from")[0])
        notes.append([l for l in lines(err) if "another plugin" in l])
    assert counts == ["runs: 2 computed, 0", "runs: 0 computed, 2", "runs: 1 computed, 0"]
    # One line says why the run was computed again, counting the one run computed (the memo holds 2 of the
    # older source); the listing marks the older rows.
    assert notes[:2] == [[], []] and len(notes[2]) == 1
    new = registry().arm("editable-frozen").plugin
    # By default only the rows the installed plugin reuses are listed; include_stale / --all add the others.
    assert [r.plugin for r in lazylab.api.runs(arm="editable-frozen")] == [new]
    (old,) = {r.plugin for r in lazylab.api.runs(arm="editable-frozen", include_stale=True)} - {new}
    assert f"1 of editable-frozen by {old} (stale source; installed: {new})" in notes[2][0]
    rows = {r.plugin: r.provenance for r in lazylab.api.runs(arm="editable-frozen", include_stale=True)}
    assert rows == {old: "stale source", new: ""}
    code, out, _ = run(capsys, "runs", "--arm", "editable-frozen", "--json", "-")
    listing = json.loads(out)
    assert [r["plugin"] for r in listing["runs"]] == [new] and listing["stale"] == 2
    code, out, _ = run(capsys, "runs", "--arm", "editable-frozen")
    assert "2 results of plugins other than the installed ones not shown (--all lists them" in out
    code, out, _ = run(capsys, "runs", "--all", "--arm", "editable-frozen", "--json", "-")
    assert {r["plugin"]: r["provenance"] for r in json.loads(out)["runs"]} == rows
    # The bank's redundancy rows (no arm of their own) are marked by the same rule.
    banks = {r.plugin: r.provenance for r in lazylab.api.runs(kind="redundancy", include_stale=True)
             if "editable" in r.detail}
    assert banks == rows
    # cache info counts the stale-source entries apart; cache prune removes them (the 2 runs and their bank's
    # redundancy) and says how many; the current rows stay.
    code, out, _ = run(capsys, "cache", "info")
    assert code == 0 and f"  3 by {lazylab.config.code_identity()} for plugin sources edited since (stale source" in out
    code, out, _ = run(capsys, "cache", "prune")
    assert code == 0 and "3 entries of plugin sources edited since (stale source)" in out
    assert {r.plugin for r in lazylab.api.runs(kind=None, include_stale=True) if r.plugin and "editable" in r.plugin} \
        == {new}
    code, out, _ = run(capsys, "cache", "prune")
    assert "0 entries of plugin sources edited since" in out

    # Uninstalled: the arm is unknown, and the error says what the memo holds of it.
    monkeypatch.setenv("LAZYLAB_ARMS", pinned())
    reset_registry()
    code, _, err = run(capsys, "ladder", *argv[1:])
    (line,) = errors(err)
    assert "unknown arm 'editable-frozen'" in line and f"holds 1 result of it, computed by {new}" in line
    assert "did you mean" not in line  # not another unit's arm: the reason
    assert lazylab.api.runs(arm="editable-frozen") == []
    assert {r.provenance for r in lazylab.api.runs(arm="editable-frozen", include_stale=True)} == {"not installed"}
    reset_registry()


def write_idx(path: Path, a: np.ndarray, gz: bool = True) -> None:
    header = struct.pack(">i", 0x0800 | a.ndim) + struct.pack(f">{a.ndim}i", *a.shape)
    payload = header + a.astype(np.uint8).tobytes()
    path.write_bytes(gzip.compress(payload) if gz else payload)


@pytest.mark.slow
def test_duplicated_images_refuse_data_seeding_in_one_line_and_raw_idx_loads(tmp_path, capsys, memo_dir, fmnist):
    """600 copies of one training image (the test split real): no internal error anywhere; the
    training files are raw IDX under the usual .gz names (told apart by the gzip magic)."""
    d = tmp_path / "dup"
    d.mkdir()
    one = np.round(fmnist.x_train[0] * 255).reshape(1, 28, 28)
    write_idx(d / "train-images-idx3-ubyte.gz", np.repeat(one, 600, axis=0), gz=False)
    write_idx(d / "train-labels-idx1-ubyte.gz", np.arange(600) % 10, gz=False)
    write_idx(d / "t10k-images-idx3-ubyte.gz", np.round(fmnist.x_test[:200] * 255).reshape(-1, 28, 28))
    write_idx(d / "t10k-labels-idx1-ubyte.gz", fmnist.y_test[:200])
    code, _, err = run(capsys, "ladder", "--arms", "gaussian-frozen", "--widths", "8", *TINY, "--data-dir", d)
    assert code == 2
    (line,) = errors(err)
    assert "gaussian-frozen: width 8 needs 8 distinct training images" in line and "only 1 distinct" in line
    # A random bank reads them out; its redundancy over 600 identical images has nothing to measure:
    # one note line, and the ladder's results still stand.
    code, out, err = run(capsys, "ladder", "--arms", "relu-frozen", "--widths", "8", *TINY, "--data-dir", d)
    assert code == 0 and "relu-frozen" in out
    (note,) = lines(err)
    assert "redundancy of the relu bank not measured" in note and "vary" in note
    from lazylab import data

    loaded = data.load(d)  # the raw training files parse like the gzipped test files
    assert loaded.x_train.shape == (600, 784) and np.array_equal(loaded.x_train[599], fmnist.x_train[0])
    assert loaded.y_train[:12].tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1]


def test_median_heuristic_falls_back_on_duplicated_images_with_one_warning(fmnist):
    from lazylab.arms.gaussian import median_bandwidth
    from lazylab_rff import median_pairwise_distance

    x = np.repeat(fmnist.x_train[:1], 64, axis=0)
    scale = float(np.sqrt(np.sum(x[0].astype(np.float64) ** 2)))
    for sigma_of in (lambda: median_bandwidth(x, x[:8]), lambda: median_pairwise_distance(x)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            sigma = sigma_of()
        assert sigma == pytest.approx(scale, rel=1e-6)
        assert len(caught) == 1 and "falls back to sqrt(mean ||x||^2)" in str(caught[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # real, distinct images: the plain median, no warning
        assert 5.0 < median_bandwidth(fmnist.x_train[:64], fmnist.x_train[64:72]) < 15.0


def test_distance_products_run_at_float32_highest_precision():
    from lazylab.arms.common import sq_distances
    from lazylab_rff import UNIT as RFF

    x, W = np.zeros((3, 784), np.float32), np.ones((5, 784), np.float32)
    jaxpr = str(jax.make_jaxpr(lambda a, b: sq_distances(a, b))(x, W))
    assert "dot_general" in jaxpr and "precision=(Precision.HIGHEST, Precision.HIGHEST)" in jaxpr
    k_w, k_b = jax.random.split(jax.random.key(0))
    bank = RFF.make_bank(np.asarray(RFF.sample(k_w, (5, 784))), np.random.default_rng(0).random((8, 784)), key=k_b)
    assert "precision=(Precision.HIGHEST, Precision.HIGHEST)" in str(jax.make_jaxpr(bank)(x))


def test_every_list_option_accumulates_when_repeated(capsys):
    from lazylab.cli import ladder, ntk, studies

    commands = {"ladder": ladder.ladder, "readout": studies.readout, "gram": studies.gram,
                "trajectory": studies.trajectory, "ntk-scalar": ntk.ntk_scalar}

    def params(name, *args):
        return commands[name].make_context(name, list(args)).params

    p = params("ladder", "--seeds", "0", "--seeds", "1,2", "--arms", "yat-frozen", "--arms", "relu-frozen",
               "--widths", "8", "--widths", "16", "--climb-widths", "8", "--climb-widths", "16")
    assert (p["seeds"], p["arms_"], p["widths"], p["climb_widths"]) == ((0, 1, 2), "yat-frozen,relu-frozen", (8, 16), (8, 16))
    assert params("ladder")["seeds"] is None  # not given: the preset's
    assert params("readout")["widths"] == (64, 512) and params("readout", "--widths", "8", "--widths", "32")["widths"] == (8, 32)
    assert params("gram", "--images", "0", "--images", "sneaker")["classes"] == "0,sneaker"
    assert params("trajectory", "--arms", "yat-trained", "--arms", "relu-trained")["arms_"] == "yat-trained,relu-trained"
    assert params("ntk-scalar", "--times", "0,1", "--times", "2")["times"] == (0.0, 1.0, 2.0)
    code, _, err = run(capsys, "ladder", "--seeds", "0", "--seeds", "0")  # a repeat across flags, refused like one inside
    assert code == 2 and lines(err) == ["error: Invalid value for '--seeds': 0 is given more than once"]
