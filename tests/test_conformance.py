"""Issue 50 items 1 and 2: checks that catch what breaks a study, and the results of a failing unit kept
marked. Three broken units, one bug each — features standardised over the batch they are given, NaN
only in a bank wider than the 784 pixels (whitened prototypes), ``jax_enable_x64`` switched on when
the plugin is imported — each fail a named check before their first run; the check ids are one public
list with a nearest-id suggestion; ``arms --check`` keeps its verdicts; without strict mode a failing
unit's results carry its failures in the memo record, ``--json``, ``runs`` and the report.

The broken units are one tiny distribution in a temporary directory put on ``sys.path``
(``cli_helpers.write_dist``); commands run in-process on tiny slices of the real data.
"""

from __future__ import annotations

import json

import jax
import pytest

from cli_helpers import lines, run, vetted_plugin
from lazylab import testing, vetting
from lazylab.arms import ContractError, registry, reset_registry
from lazylab.arms.relu import UNIT as RELU

TINY = ["--widths", "8", "--seeds", "0", "--train-size", "512", "--epochs", "1", "--lr", "0.1", "--no-figures"]

BROKEN_SCIENCE = '''
import jax
import jax.numpy as jnp
from flax import nnx
from lazylab.arms import Unit


class Standardised(nnx.Module):
    """ReLU features standardised over the batch they are given: an image's features depend on its batch."""

    def __init__(self, W, x_ref=None):
        self.W = nnx.Param(jnp.asarray(W, jnp.float32))

    def __call__(self, x):
        z = jnp.maximum(x @ self.W[...].T, 0.0)
        return (z - z.mean(0)) / (z.std(0) + 1.0)


class Whitened(nnx.Module):
    """ReLU features whitened by the prototypes' Cholesky factor: W W^T is singular once m > d (NaN)."""

    def __init__(self, W, x_ref=None):
        self.W = nnx.Param(jnp.asarray(W, jnp.float32))

    def __call__(self, x):
        W = self.W[...]
        z = jnp.maximum(x @ W.T, 0.0)
        return jax.scipy.linalg.solve_triangular(jnp.linalg.cholesky(W @ W.T), z.T, lower=True).T


BATCHSTD = Unit(name="batchstd", bank=Standardised, fan_in="d")
WHITENED = Unit(name="whitened", bank=Whitened, fan_in="d")
'''
FLIPX64 = '''
import jax
from lazylab.arms import Unit
from lazylab.arms.relu import ReluBank

jax.config.update("jax_enable_x64", True)  # "for accuracy": every arm of the process would compute in float64

FLIPX64 = Unit(name="flipx64", bank=ReluBank, fan_in="d")
'''
UNITS = {"batchstd": "random-batch_invariant", "whitened": "random-wide", "flipx64": "settings"}
MODULES = {"batchstd": "lazylab_broken_science", "whitened": "lazylab_broken_science", "flipx64": "lazylab_flipx64"}


@pytest.fixture
def broken_science(tmp_path, monkeypatch):
    """The three units installed as lazylab-broken-science 0.1 (the x64 switch in a module of its own); a fresh
    cache home (no kept verdicts) and memo."""
    with vetted_plugin(monkeypatch, tmp_path, "lazylab-broken-science", "0.1",
                       {u: f"{MODULES[u]}:{u.upper()}" for u in UNITS},
                       {"lazylab_broken_science.py": BROKEN_SCIENCE, "lazylab_flipx64.py": FLIPX64},
                       tuple(f"lazylab-broken-science:{u}" for u in UNITS)) as root:
        yield root
    assert jax.config.jax_enable_x64 is False  # the plugin's switch never outlives its import


def stored_runs(capsys, *flags) -> list[dict]:
    code, out, err = run(capsys, "runs", "--kind", "run", "--json", "-", *flags)
    assert code == 0, err
    return json.loads(out)["runs"]


@pytest.mark.slow
def test_each_broken_unit_fails_its_named_check_before_its_first_run(broken_science, capsys, monkeypatch):
    monkeypatch.setenv("LAZYLAB_STRICT_PLUGINS", "1")
    for unit, check in UNITS.items():
        code, _, err = run(capsys, "ladder", "--arms", f"relu-frozen,{unit}-frozen", *TINY)
        (line,) = lines(err)
        assert code == 2 and line.startswith(f"error: plugin unit {unit!r} (lazylab-broken-science 0.1+src."), err
        assert f"fails its conformance checks: " in line and f" {check}: " in line and "refused [LAZYLAB_STRICT_PLUGINS is set]" in line
        assert jax.config.jax_enable_x64 is False
    assert "jax_enable_x64: False -> True" in line  # the settings check names what the import changed
    assert stored_runs(capsys) == []  # not even the ReLU arm's: every unit is vetted before any run
    # The units that pass their checks: lazylab's own and the example plugin (its verdict kept, not re-checked).
    assert vetting.verdict(registry().arm("rff-frozen")) == []


def test_check_ids_are_one_public_list_with_a_nearest_id_suggestion(capsys):
    ids = [cid for cid, _ in testing.unit_checks(RELU)]
    assert ids[:2] == ["contract", "settings"] and set(ids) < set(testing.CHECKS)
    assert {"random-batch_invariant", "random-order_invariant", "random-wide", "data-wide"} <= set(testing.CHECKS)
    with pytest.raises(ValueError) as exc:
        testing.parametrize_with_checks([RELU], {"random-batch_invariance": "a typo"})
    msg = str(exc.value)
    assert "does not have: ['random-batch_invariance'] (did you mean 'random-batch_invariant'?)" in msg
    assert msg.endswith("its checks: " + ", ".join(ids))
    code, out, _ = run(capsys, "arms", "--check", "--list", "--json", "-")
    assert code == 0 and [c["id"] for c in json.loads(out)["checks"]] == list(testing.CHECKS)
    code, _, err = run(capsys, "arms", "--list")
    assert code == 2 and "--list lists the checks of --check" in err


def test_the_plugin_docs_name_every_check_and_the_settings_check_sees_a_switch():
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "plugins.md").read_text()
    for cid in ["contract", "settings", *(f"<init>-{name}" for name in testing.INIT_CHECKS)]:
        assert f"[`{cid}`" in text, cid
    # A unit imported directly (a plugin's own tests): its switch is seen against the settings lazylab first read.
    check = dict(testing.unit_checks(RELU))["settings"]
    check(RELU)
    before = jax.config.jax_default_matmul_precision
    jax.config.update("jax_default_matmul_precision", "bfloat16")
    try:
        with pytest.raises(ContractError, match=f"jax_default_matmul_precision: {before} -> bfloat16"):
            check(RELU)
    finally:
        jax.config.update("jax_default_matmul_precision", before)


def test_a_forgotten_takes_key_is_named(capsys):
    from dataclasses import replace

    import jax.numpy as jnp
    from flax import nnx

    class Phased(nnx.Module):
        def __init__(self, W, x_ref=None, key=None):
            self.W = nnx.Param(jnp.asarray(W, jnp.float32))
            self.b = nnx.Variable(jax.random.uniform(key, (W.shape[0],)))

        def __call__(self, x):
            return jnp.cos(x @ self.W[...].T + self.b[...])

    unit = replace(RELU, name="phased", bank=Phased, prefix_stable=False)
    check = dict(testing.unit_checks(unit))["random-bank"]
    with pytest.raises(ContractError, match="unexpected PRNG key type .*the bank takes key= but the unit does not "
                                            "declare takes_key=True"):
        check(unit)
    # A bank that requires key= without the flag is refused by the static contract, before anything runs.
    def required(W, x_ref, key):
        return Phased(W, x_ref, key)

    with pytest.raises(ContractError, match="bank requires key= but the unit does not declare takes_key=True"):
        dict(testing.unit_checks(unit))["contract"](replace(unit, bank=required))


@pytest.mark.slow
def test_arms_check_keeps_its_verdicts_and_a_failing_units_results_carry_them(broken_science, capsys, monkeypatch):
    code, out, err = run(capsys, "arms", "--check")
    assert code == 2 and "verdicts kept for the runs that follow" in out
    kept = vetting.kept_verdicts()
    batch = vetting.identity(registry().arm("batchstd-frozen"))
    assert kept[batch]["failures"][0].startswith("random-batch_invariant: not batch-invariant: image 0, unit ")
    assert kept[vetting.identity(registry().arm("rff-frozen"))]["failures"] == []
    # The first run reads the kept verdict: the suite does not run again.
    reset_registry()
    vetting._known.clear()
    monkeypatch.setattr(testing, "check_unit", lambda *a, **k: pytest.fail("checked again"))
    code, out, err = run(capsys, "ladder", "--arms", "batchstd-frozen", *TINY, "--json", "-")
    assert code == 0, err
    (warning,) = [l for l in lines(err) if "conformance checks" in l]
    assert "random-batch_invariant" in warning and "are marked" in warning
    result = json.loads(out)
    (arm,) = result["arms"]
    assert arm["checks_failed"] == kept[batch]["failures"] and arm["cells"]["8"]["mean"] is not None
    assert result["runs"][0]["checks_failed"] == kept[batch]["failures"]  # the memo record carries them
    (row,) = stored_runs(capsys)
    assert row["checks"] == kept[batch]["failures"]
    code, out, _ = run(capsys, "runs", "--kind", "run")
    assert f"failed {len(row['checks'])}" in out and "1 result computed while its unit failed conformance checks" in out
    # The report: a mark beside the arm and a line below its table saying why.
    from lazylab.render.ladder_sections import _ladder_section
    from lazylab.render.report import _payload_data

    html = _ladder_section({"data": {**_payload_data(result), "name": "yours"}, "spec": {}, "key": "k"})
    assert "batchstd-frozen <span class=\"fail\"" in html and "✗ checks" in html
    assert "its unit failed its conformance checks, so its results may not be reproducible" in html


@pytest.mark.slow
def test_cells_computed_before_a_wider_width_failed_keep_their_values(broken_science, capsys, tmp_path):
    """The whitened unit runs at m = 8 and fails at m = 1024 (its warning says it failed its checks)."""
    code, out, err = run(capsys, "ladder", "--arms", "whitened-frozen", "--widths", "8,1024", *TINY[2:],
                         "--json", tmp_path / "l.json")
    assert code == 2
    (error,) = [l for l in lines(err) if l.startswith("error: ")]
    assert "produced non-finite features" in error and "whitened-frozen m=1024 seed 0" in error
    (arm,) = json.loads((tmp_path / "l.json").read_text())["arms"]
    assert arm["cells"]["8"]["mean"] > 0 and "failed" not in arm["cells"]["8"]  # computed before: kept
    assert arm["cells"]["1024"] == {**arm["cells"]["1024"], "failed": 1, "mean": None} and arm["failed"] in error
    row = next(l for l in out.splitlines() if l.lstrip("|│ ").startswith("whitened-frozen"))  # ASCII in a pipe
    assert f"{arm['cells']['8']['mean']:.2f}" in row and "failed" in row
    assert arm["checks_failed"][0].startswith("random-wide: a bank of 1024 units (wider than d = 784) gave non-finite")
