"""Issue 31 item 1: plugins checked before they run (lazylab.vetting), one pytest item per
conformance check (lazylab.testing.parametrize_with_checks), Gram frames of units that are not
prefix-stable built as real sub-banks (lazylab.experiments.gram.frame_features).

Fake plugins are tiny distributions in a temporary directory put on ``sys.path``; commands run
in-process on tiny slices of the real data (2,048 training images, width 8, 1 epoch).
"""

from __future__ import annotations

import json
import sys

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from cli_helpers import lines, pinned, run, vetted_plugin, write_dist
from lazylab import calibration, testing, vetting
from lazylab.arms import ContractError, Unit, registry, reset_registry
from lazylab.arms.gaussian import UNIT as GAUSSIAN
from lazylab.arms.relu import UNIT as RELU
from lazylab.arms.yat import UNIT as YAT

TINY = ["--widths", "8", "--seeds", "0", "--train-size", "2048", "--epochs", "1", "--lr", "0.1", "--no-figures"]

NOISY_SOURCE = '''
import jax.numpy as jnp
import numpy as np
from flax import nnx
from lazylab.arms import Unit


class NoisyBank(nnx.Module):
    """ReLU features times a scale drawn from numpy's global generator: not reproducible."""

    def __init__(self, W, x_ref=None):
        self.W = nnx.Param(jnp.asarray(W, jnp.float32))
        self.scale = nnx.Variable(jnp.asarray(np.random.rand(W.shape[0]) + 0.5, jnp.float32))

    def __call__(self, x):
        return jnp.maximum(x @ self.W[...].T, 0.0) * self.scale[...]


UNIT = Unit(name="noisy", bank=NoisyBank)
'''


class CrossNormalised(nnx.Module):
    """ReLU features divided by their mean over the bank's units: unit j reads every W[k]."""

    def __init__(self, W, x_ref=None):
        self.W = nnx.Param(jnp.asarray(W, jnp.float32))

    def __call__(self, x):
        h = jnp.maximum(x @ self.W[...].T, 0.0)
        return h / (jnp.mean(h, axis=1, keepdims=True) + 1e-3)


_noisy_module: dict = {}
exec(NOISY_SOURCE, _noisy_module)  # the plugin's own unit, here too (for the per-check items)
NOISY = _noisy_module["UNIT"]
CROSS = Unit(name="crossnorm", bank=CrossNormalised, fan_in="d")


@pytest.fixture
def noisy_plugin(tmp_path, monkeypatch):
    """The noisy unit installed as lazylab-noisy 0.1, a fresh cache home (no kept verdicts), a fresh memo."""
    with vetted_plugin(monkeypatch, tmp_path, "lazylab-noisy", "0.1", {"noisy": "lazylab_noisy:UNIT"},
                       {"lazylab_noisy.py": NOISY_SOURCE}, ("lazylab-noisy:noisy",)) as root:
        yield root


def memo_results(capsys) -> int:
    code, out, err = run(capsys, "runs", "--kind", "run", "--json", "-")
    assert code == 0, err
    return len(json.loads(out)["runs"])


def test_strict_mode_refuses_a_nondeterministic_unit_before_any_run_is_stored(noisy_plugin, capsys, monkeypatch):
    monkeypatch.setenv("LAZYLAB_STRICT_PLUGINS", "1")
    code, out, err = run(capsys, "ladder", "--arms", "relu-frozen,noisy-frozen", *TINY)
    assert code == 2 and "Traceback" not in err
    (line,) = lines(err)
    assert line.startswith("error: plugin unit 'noisy' (lazylab-noisy 0.1+src.")
    assert "random-deterministic: not deterministic" in line and "takes_key=True" in line and line.endswith("[LAZYLAB_STRICT_PLUGINS is set]")
    assert memo_results(capsys) == 0  # not even the ReLU arm's run: every unit is vetted first


def test_without_strict_mode_it_runs_with_one_warning_and_the_verdict_is_kept(noisy_plugin, capsys, monkeypatch):
    code, out, err = run(capsys, "ladder", "--arms", "noisy-frozen", *TINY)
    assert code == 0, err
    warnings = [l for l in lines(err) if "conformance checks" in l]
    assert len(warnings) == 1 and warnings[0].startswith("warning: plugin unit 'noisy' (lazylab-noisy 0.1+src.")
    assert "LAZYLAB_STRICT_PLUGINS=1 refuses it" in warnings[0]
    assert memo_results(capsys) == 1
    kept = vetting.kept_verdicts()
    (key,) = kept
    assert key == vetting.identity(registry().arm("noisy-frozen")) and "not deterministic" in kept[key]["failures"][0]

    # Kept: another process (here: a forgotten in-process verdict) reads it instead of checking again.
    vetting._known.clear()
    monkeypatch.setattr(testing, "check_unit", lambda *a, **k: pytest.fail("checked twice"))
    assert vetting.verdict(registry().arm("noisy-frozen"), np.zeros((16, 784), np.float32)) == kept[key]["failures"]

    # An edit in place is another identity: checked again, and kept beside the first.
    monkeypatch.undo()
    monkeypatch.setenv("LAZYLAB_ARMS", pinned("lazylab-noisy:noisy"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(noisy_plugin.parent / "home"))
    monkeypatch.setenv("LAZYLAB_CACHE", str(noisy_plugin.parent / "memo"))
    monkeypatch.syspath_prepend(str(noisy_plugin))
    with open(noisy_plugin / "lazylab_noisy.py", "a") as f:
        f.write("\n# edited\n")
    sys.modules.pop("lazylab_noisy", None)
    reset_registry()
    code, _, err = run(capsys, "ladder", "--arms", "noisy-frozen", *TINY)
    assert code == 0, err
    assert len(vetting.kept_verdicts()) == 2


def test_builtin_units_are_not_vetted_and_a_passing_plugin_runs_silently(noisy_plugin, capsys):
    code, _, err = run(capsys, "ladder", "--arms", "relu-frozen,rff-frozen", *TINY)
    assert code == 0, err
    assert not [l for l in lines(err) if "conformance" in l]
    kept = vetting.kept_verdicts()
    assert list(kept) == [vetting.identity(registry().arm("rff-frozen"))] and kept[next(iter(kept))]["failures"] == []


def test_a_damaged_verdict_file_is_checked_again(noisy_plugin, capsys):
    path = noisy_plugin.parent / "home" / "lazylab" / vetting.VERDICTS
    path.write_text('{"noisy x": {"failures": 3}, "y": [1]')
    assert vetting.kept_verdicts() == {}
    arm = registry().arm("noisy-frozen")
    assert "not deterministic" in vetting.verdict(arm, testing.real_images())[0]
    assert list(vetting.kept_verdicts()) == [vetting.identity(arm)]


# ------------------------------------------------------- one pytest item per check
@testing.parametrize_with_checks([YAT, RELU, GAUSSIAN])
def test_builtin_units_pass_every_check(unit, check):
    check(unit)


@testing.parametrize_with_checks([NOISY], expected_failed_checks={"random-deterministic": "numpy's global generator"})
def test_a_noisy_unit_fails_its_determinism_check_alone(unit, check):
    check(unit)


def test_each_check_is_its_own_item_with_its_fix():
    ids = [cid for cid, _ in testing.unit_checks(YAT)]
    assert ids[0] == "contract" and "random-prefix_stable" in ids and "data-deterministic" in ids
    assert "data-prefix_stable" not in [cid for cid, _ in testing.unit_checks(GAUSSIAN)]  # not declared
    mark = testing.parametrize_with_checks([NOISY], {"random-deterministic": "why"})
    (xfail,) = [p for p in mark.args[1] if p.marks]
    assert xfail.id == "noisy-random-deterministic" and xfail.marks[0].kwargs["strict"] is True
    with pytest.raises(ValueError, match="does not have: \\['random-prefix_stable'\\]"):
        testing.parametrize_with_checks([NOISY], {"random-prefix_stable": "not declared"})
    check = dict(testing.unit_checks(NOISY))["random-deterministic"]
    with pytest.raises(ContractError, match="declare takes_key=True"):
        check(NOISY)


def test_features_are_checked_on_512_images_and_in_magnitude():
    """A unit finite on the first 16 images, huge on a later one: the checks read all 512."""

    class LateBlowUp(nnx.Module):
        def __init__(self, W, x_ref=None):
            self.W = nnx.Param(jnp.asarray(W, jnp.float32))

        def __call__(self, x):
            h = jnp.maximum(x @ self.W[...].T, 0.0)
            return h * jnp.where(jnp.arange(x.shape[0])[:, None] == 300, 1e20, 1.0).astype(jnp.float32)

    with pytest.raises(ContractError, match="random-finite: feature .* at image 300, unit \\d exceeds 1e\\+12"):
        testing.check_unit(Unit(name="late", bank=LateBlowUp, fan_in="d"))


# ------------------------------------------------------- Gram frames
def test_gram_frames_of_a_unit_normalised_across_units_are_real_sub_banks(fmnist):
    from lazylab.arms import Arm
    from lazylab.experiments.gram import BankFeatures, frame_features, make_bank

    x, x_train = fmnist.x_test[:40], fmnist.x_train
    widths = np.array([4, 16, 64])
    for unit, prefix in ((CROSS, False), (RELU, True), (GAUSSIAN, True)):
        arm = Arm(f"{unit.name}-frozen", unit, unit.inits[0], False, "test", "0")
        bank = make_bank(arm, 0, x_train, width=64)
        evaluator = BankFeatures(bank)
        phi = evaluator(bank, x)
        frames = frame_features(arm, 0, phi, evaluator, x, x_train, widths)
        W = np.asarray(bank.W[...])
        for m, f in zip(widths, frames):
            own = evaluator(make_bank(arm, 0, x_train, W=W[:m]), x)
            np.testing.assert_allclose(f, own, rtol=1e-5, atol=1e-6)  # each frame is the bank of its own prototypes
            assert np.allclose(phi[:, :m], own, rtol=1e-5, atol=1e-6) == (prefix or m == 64), (unit.name, m)


def test_strict_mode_refuses_a_failing_unit_whose_runs_are_in_the_memo(noisy_plugin, capsys, monkeypatch):
    code, _, err = run(capsys, "ladder", "--arms", "noisy-frozen", *TINY)
    assert code == 0, err
    monkeypatch.setenv("LAZYLAB_STRICT_PLUGINS", "1")
    code, _, err = run(capsys, "ladder", "--arms", "noisy-frozen", *TINY)  # every run in the memo
    (line,) = lines(err)
    assert code == 2 and "fails its conformance checks" in line and "refused" in line


BROKEN_BANKS = '''
import sys
from lazylab.arms import Unit


def raising(W, x_ref=None):
    raise RuntimeError("boom")


def exiting(W, x_ref=None):
    sys.exit(0)


RAISING = Unit(name="raising", bank=raising)
EXITING = Unit(name="exiting", bank=exiting)
'''


def test_a_bank_that_raises_or_exits_is_the_units_failure_in_one_line(tmp_path, monkeypatch, capsys, memo_dir):
    root = write_dist(tmp_path / "site", "lazylab-broken-banks", "0.1",
                      {"raising": "lazylab_broken_banks:RAISING", "exiting": "lazylab_broken_banks:EXITING"},
                      {"lazylab_broken_banks.py": BROKEN_BANKS})
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setenv("LAZYLAB_ARMS", pinned("lazylab-broken-banks:raising", "lazylab-broken-banks:exiting"))
    session_calibration = calibration.calibration_path()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home"))  # no kept verdicts
    calibration.save(calibration.read(session_calibration))
    reset_registry()
    vetting._known.clear()
    try:
        for unit in ("raising", "exiting"):
            code, out, err = run(capsys, "ladder", "--arms", f"{unit}-frozen,relu-frozen", *TINY)
            errors = [l for l in lines(err) if l.startswith("error: ")]
            assert code == 2 and len(errors) == 1, err
            assert f"unit '{unit}' (lazylab-broken-banks 0.1+src." in errors[0] and "building its bank" in errors[0]
            assert "relu-frozen" in out  # the other arm still ran and printed its table
    finally:
        reset_registry()
        vetting._known.clear()
