"""``ntk``: the exact scalar model, the 1-D lab and its audit, and empirical NTKs of arms.

Tolerances (all stated where used):
  * scalar closed forms vs RK4 integration: absolute 1e-6 (the SPEC's), float64;
  * empirical NTK vs explicit ``J J^T``: relative 1e-5 of ``max|K|`` (float32 models);
  * lab Jacobian vs ``jax.jacrev`` in float64: relative 1e-12;
  * drift falls with width: three seeds at m = 16, 64, 256, lr 0.05, 600 steps; the mean drift
    must fall monotonically and by at least 4x from 16 to 256 (m^-1/2 alone predicts 4x).
"""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from lazylab.config import memo_key
from lazylab.ntk import kernels, lab, scalar
from lazylab.ntk.audit import run_audit
from cli_helpers import run



# ------------------------------------------------------------------ scalar
@pytest.mark.parametrize("w0", [0.01, 0.3, 0.9, 4.0])
def test_scalar_closed_forms_match_integration(w0):
    res = scalar.run_scalar(w0=w0, times=(0.0, 0.5, 2.0, 10.0, 40.0), dt=2e-3)
    real = [c for c in res.checks if c.expect]
    controls = [c for c in res.checks if not c.expect]
    assert all(c.passed for c in real), [(c.name, c.value) for c in real if not c.passed]
    assert max(c.value for c in real) <= 1e-6
    t = res.table
    np.testing.assert_allclose(t["f_net_int"], scalar.w_closed(res.times, w0), rtol=0, atol=1e-6)
    np.testing.assert_allclose(t["f_lin_int"], scalar.f_lin_closed(res.times, w0), rtol=0, atol=1e-6)
    np.testing.assert_allclose(t["kernel_net_int"], 2 * t["f_net_int"], rtol=0, atol=1e-12)  # a = b
    # the negative controls fail their checks, as they must (w0 = 1 would make control 2 coincide)
    assert controls and not any(c.passed for c in controls)
    assert res.ok


def test_scalar_cli_writes_csv_and_figure(capsys, tmp_path):
    code, out, _ = run(capsys, "ntk", "scalar", "--w0", "0.01", "--times", "0,0.5,2,10,50", "--out", str(tmp_path))
    assert code == 0, out
    assert "fails, as it must" in out and "PASSES (must fail)" not in out
    header = (tmp_path / "scalar.csv").read_text().splitlines()[0].split(",")
    for col in ("t", "f_net_closed", "f_net_int", "f_lin_closed", "f_lin_int", "resid_net_int", "kernel_net_closed", "mode2_int"):
        assert col in header
    assert (tmp_path / "scalar.png").stat().st_size > 10_000


def test_two_mode_decay_rates():
    t = np.array([0.0, 1.0, 100.0])
    modes = scalar.two_mode_closed(t)
    np.testing.assert_allclose(modes[1], [np.exp(-1), np.exp(-0.01)])
    np.testing.assert_allclose(modes[2, 1], np.exp(-1))  # the slow mode needs 100x longer


# ------------------------------------------------------------------ the lab
@pytest.mark.slow
def test_lab_jacobian_matches_jax_jacrev_in_float64():
    theta = lab.init_params(5, 3)
    x = np.linspace(-2, 2, 7)
    with jax.enable_x64(True):
        def f(th):
            a, w, b = th
            return jnp.tanh(jnp.outer(jnp.asarray(x), w) + b) @ a / jnp.sqrt(a.shape[0])

        J = np.asarray(jax.jacrev(f)(jnp.asarray(theta, jnp.float64))).reshape(len(x), -1)
    f0, J0 = lab.forward_jacobian(theta, x)
    np.testing.assert_allclose(J0, J, rtol=0, atol=1e-12 * np.abs(J).max())
    np.testing.assert_allclose(f0, lab.forward(theta, x), rtol=0, atol=1e-15)


def test_lab_same_start_both_improve_and_kernel_is_symmetric_psd():
    res = lab.run_lab(lab.LabConfig(width=16, steps=300, frames=10))
    s = res.summary()
    assert s["start_gap"] == 0.0
    assert res.pred_test[0].tolist() == res.pred_test_lin[0].tolist()
    assert s["loss_end"] < s["loss_start"] and s["loss_lin_end"] < s["loss_lin_start"]
    for K in (res.K0, res.KT):
        assert np.array_equal(K, K.T)
        ev = np.linalg.eigvalsh(K)
        assert ev[0] >= -1e-10 * ev[-1]
    assert res.drift[0] == 0.0 and res.drift[-1] > 0


def test_drift_shrinks_with_width():
    cfg = lab.LabConfig(lr=0.05, steps=600)
    sw = lab.sweep(cfg, [16, 64, 256], [0, 1, 2])
    drift = [r["drift"] for r in sw.rows]
    assert drift[0] > drift[1] > drift[2], drift
    assert drift[0] / drift[2] >= 4.0, drift
    assert sw.slopes["drift"]["slope"] < -0.3
    assert sw.rows[0]["disagreement"] > sw.rows[2]["disagreement"]


@pytest.mark.slow
def test_lab_cli_writes_png_and_gif(capsys, tmp_path):
    from PIL import Image

    code, out, _ = run(capsys, "ntk", "lab", "--width", "16", "--steps", "200", "--frames", "8", "--out", str(tmp_path))
    assert code == 0, out
    assert "same start: max |f - f_lin| at step 0 = 0" in out
    assert "NTK drift" in out
    gif = tmp_path / "lab.gif"
    assert gif.stat().st_size <= 5 * 1024 * 1024
    with Image.open(gif) as im:
        assert im.info.get("loop") == 0
        sizes = set()
        for i in range(im.n_frames):
            im.seek(i)
            sizes.add(im.size)
        assert im.n_frames >= 5 and len(sizes) == 1
    summary = json.loads((tmp_path / "lab.json").read_text())
    assert summary["loss_end"] < summary["loss_start"]


def test_sweep_cli_prints_slopes(capsys, tmp_path):
    code, out, _ = run(capsys, "ntk", "lab", "--widths", "8,16,...,64", "--steps", "100", "--sweep-seeds", "1", "--out", str(tmp_path))
    assert code == 0, out
    assert "log-log slope of NTK drift vs width" in out
    assert json.loads((tmp_path / "sweep.json").read_text())["widths"] == [8, 16, 32, 64]


# ------------------------------------------------------------------ audit
@pytest.mark.slow
def test_audit_passes_and_exits_0(capsys):
    code, out, _ = run(capsys, "ntk", "audit")
    assert code == 0, out
    assert "12/12 checks pass" in out


@pytest.mark.slow
def test_broken_gradient_fails_the_finite_difference_check():
    def broken(theta, x):
        f, J = lab.forward_jacobian(theta, x)
        J = J.copy()
        J[:, 2 * theta.shape[1]:] *= 1.01  # 1% error in d f / d b
        return f, J

    checks = {c.name: c for c in run_audit(lab.LabConfig(steps=300), jacobian=broken)}
    fd = next(c for n, c in checks.items() if n.startswith("finite-difference"))
    assert not fd.passed and fd.value > 1e-4
    assert all(c.passed for n, c in checks.items() if not n.startswith("finite-difference"))


def test_failed_audit_exits_1(capsys, monkeypatch):
    from lazylab.experiments import ntk as exp
    from lazylab.ntk.checks import Check

    monkeypatch.setattr(exp, "run_audit", lambda: [Check("x", 1.0, 0.0, False)])
    code, out, _ = run(capsys, "ntk", "audit")
    assert code == 1 and "0/1 checks pass" in out


# ------------------------------------------------------------------ CLI input errors
@pytest.mark.parametrize("argv", [
    ["lab", "--width", "-3"], ["lab", "--steps", "0"], ["lab", "--steps", "-5"], ["lab", "--lr", "0"],
    ["lab", "--bump", "nan"], ["lab", "--bump", "inf"], ["lab", "--noise", "-1"], ["lab", "--widths", "8,16,...,1000"],
    ["lab", "--lr", "1000", "--steps", "100", "--no-gif"],  # diverges: a one-line error naming the step
    ["scalar", "--w0", "0"], ["scalar", "--w0", "1"], ["scalar", "--times", "2,1"], ["scalar", "--times", "0,0.5"],
    ["scalar", "--offset", "0"],
    ["arm", "--arm", "yat-trained", "--width", "-1"], ["arm", "--arm", "nope", "--width", "4"],
    ["arm", "--arm", "yat-trained", "--width", "4", "--probe", "0"],
])
def test_bad_values_are_one_line_errors(capsys, memo_dir, argv):
    code, _, err = run(capsys, "ntk", *argv)
    lines = [l for l in err.strip().splitlines() if l.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err


# ------------------------------------------------------------------ empirical NTK
def _explicit_ntk(model, x, filt):
    """Brute force: the full Jacobian of the flattened parameter vector by jacrev, then J J^T."""
    from jax.flatten_util import ravel_pytree

    graphdef, params, rest = nnx.split(model, filt, ...)
    flat, unravel = ravel_pytree(params)
    J = jax.jacrev(lambda v: nnx.merge(graphdef, unravel(v), rest)(jnp.asarray(x)).reshape(-1))(flat)
    J = np.asarray(J, np.float64)
    return J @ J.T


@pytest.fixture(scope="module")
def tiny_x():
    return np.random.default_rng(0).random((600, 784)).astype(np.float32)


@pytest.mark.slow
@pytest.mark.parametrize("arm_name", ["yat-trained", "gaussian-trained", "relu-trained", "yat-frozen"])
def test_empirical_ntk_equals_explicit_jjt(arm_name, tiny_x):
    from lazylab.arms import get_arm
    from lazylab.experiments.ntk import trainable_filter
    from lazylab.model import build_model

    arm = get_arm(arm_name)
    model = build_model(arm, 4, 0, tiny_x)  # the shapes of the arm test below: compiled programs are shared
    x = tiny_x[:4]
    ref = _explicit_ntk(model, x, trainable_filter(arm))
    scale = np.abs(ref).max()
    for method in ("structured", "jacobian", "rows") if arm_name == "yat-trained" else ("structured",):
        K = kernels.empirical_ntk(model, x, trainable_filter(arm), method, limit=200_000 if method == "rows" else None)
        np.testing.assert_allclose(K.matrix(), ref, rtol=0, atol=1e-5 * scale, err_msg=method)
        M = K.matrix()
        assert np.max(np.abs(M - M.T)) <= 1e-6 * scale
        assert np.linalg.eigvalsh(M)[0] >= -1e-5 * scale
    assert kernels.empirical_ntk(model, x, trainable_filter(arm)).method == "structured"


class MixingBank(nnx.Module):
    """Each feature depends on every prototype row: the structured path must notice."""

    def __init__(self, W):
        self.W = nnx.Param(jnp.asarray(W))

    def __call__(self, x):
        h = jnp.tanh(x @ self.W[...].T)
        return h + jnp.roll(h, 1, axis=-1) ** 2


@pytest.mark.slow
def test_structured_ntk_detects_a_mixing_bank(tiny_x):
    from lazylab.model import Model

    W = np.random.default_rng(1).normal(size=(4, 784)).astype(np.float32) * 0.05
    model = Model(MixingBank(W), 4, jax.random.key(0))
    x = tiny_x[:3]
    K = kernels.empirical_ntk(model, x, nnx.Param, "structured")
    assert "per-unit: -" in K.notes and "shared: W" in K.notes
    ref = _explicit_ntk(model, x, nnx.Param)
    np.testing.assert_allclose(K.matrix(), ref, rtol=0, atol=1e-5 * np.abs(ref).max())


@pytest.mark.slow
def test_full_jacobian_is_refused_over_its_limit(tiny_x):
    from lazylab.arms import get_arm
    from lazylab.model import build_model

    model = build_model(get_arm("yat-trained"), 4, 0, tiny_x)
    with pytest.raises(kernels.NTKTooLarge):
        kernels.empirical_ntk(model, tiny_x[:4], nnx.Param, "jacobian", limit=1000)


@pytest.mark.slow
def test_ntk_arm_cli_matches_brute_force_on_a_tiny_case(capsys, memo_dir, tmp_path):
    from lazylab.arms import get_arm
    from lazylab.experiments import Workspace
    from lazylab.experiments import ntk as exp
    from lazylab.model import build_model

    argv = ["ntk", "arm", "--arm", "yat-trained", "--width", "4", "--probe", "4", "--epochs", "1",
            "--train-size", "256", "--out", str(tmp_path), "--cache-dir", str(memo_dir)]
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    assert "NTK drift" in out and "network vs linearization" in out
    rec = json.loads((tmp_path / "arm-yat-trained-m4-p4.json").read_text())
    assert rec["drift"] > 0 and rec["kernel_init"]["asym"] <= 1e-6

    # the same kernels by brute force: init, and the trained parameters kept in the memo
    ws = Workspace(None, memo_dir)
    arm = get_arm("yat-trained")
    d = ws.data.subset(train_size=256)
    model = build_model(arm, 4, 0, d.x_train)
    x = d.x_test[:4]
    K0 = _explicit_ntk(model, x, nnx.Param)
    stored = ws.memo.get_arrays(memo_key("ntkarm-train", {"run": rec["config"]["run"], "ntk_schema": exp.NTK_SCHEMA}) + "-p")
    graphdef, p0, rest = nnx.split(model, nnx.Param, ...)
    pT = exp._restore(p0, {k[4:]: v for k, v in stored.items() if k.startswith("net/")})
    KT = _explicit_ntk(nnx.merge(graphdef, pT, rest), x, nnx.Param)
    tr = lambda K: np.einsum("icjc->ij", K.reshape(4, 10, 4, 10))
    rec_key = memo_key("ntkarm", {"run": rec["config"]["run"], "ntk_schema": exp.NTK_SCHEMA, "probe": 4, "method": "auto"})
    arrays = ws.memo.get_arrays(rec_key + "-k")
    np.testing.assert_allclose(arrays["K0_trace"], tr(K0), rtol=0, atol=1e-5 * np.abs(tr(K0)).max())
    np.testing.assert_allclose(arrays["KT_trace"], tr(KT), rtol=0, atol=1e-5 * np.abs(tr(KT)).max())
    assert abs(rec["drift"] - np.linalg.norm(KT - K0) / np.linalg.norm(K0)) <= 1e-4 * rec["drift"]

    code, out2, _ = run(capsys, *argv)
    assert code == 0 and "from the memo" in out2
