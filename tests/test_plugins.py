"""Plugins (SPEC section 8, issue 8): the example package lazylab-rff end to end,
uninstalling it, broken and contract-breaking plugins, LAZYLAB_ARMS and
LAZYLAB_STRICT_PLUGINS, and plugin versions in memo keys.

Needs lazylab-rff installed (``scripts/setup.sh`` does ``pip install -e
plugins/lazylab-rff``). Fake plugins are real distributions: a ``.dist-info``
with an ``entry_points.txt`` in a temporary directory put on the path.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import distribution
from pathlib import Path

import pytest

from lazylab.arms import registry, reset_registry
from lazylab.cli import main
from cli_helpers import lines, pinned, run, write_dist

TINY = ["--train-size", "2048", "--epochs", "1", "--lr", "0.1", "--seeds", "0"]
RFF_VERSION = distribution("lazylab-rff").version
ACCEPTANCE = ["ladder", "--arms", "rff-frozen,relu-frozen", "--widths", "64,512", "--seeds", "0"]



def one_line(err: str) -> str:
    """The one error line (plugin-load ``warning: `` lines aside)."""
    lines = [l for l in err.strip().splitlines() if l.strip() and not l.startswith("warning: ")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.fixture
def fresh_registry(monkeypatch):
    """The registry re-read from the (patched) environment, and forgotten afterwards."""
    monkeypatch.setenv("LAZYLAB_ARMS", pinned())
    monkeypatch.delenv("LAZYLAB_STRICT_PLUGINS", raising=False)
    reset_registry()
    yield
    reset_registry()


def clean_env(**extra) -> dict:
    """This environment without strict mode or PYTHONPATH, the pinned units, and ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in ("LAZYLAB_STRICT_PLUGINS", "PYTHONPATH")}
    env.update({"LAZYLAB_ARMS": pinned(), **{k: str(v) for k, v in extra.items()}})
    return env


BROKEN = {"lazylab_broken.py": "import a_dependency_that_is_not_installed  # noqa\n"}


# ------------------------------------------------------------ acceptance
@pytest.fixture(scope="module")
def acceptance(tmp_path_factory):
    """``lazylab ladder --arms rff-frozen,relu-frozen --widths 64,512 --seeds 0`` on the real data,
    the full protocol (each arm's rate bracketed at m = 256 over its grid, 12 epochs, 60k images)."""
    root = tmp_path_factory.mktemp("acceptance")
    memo, out_json = root / "memo", root / "ladder.json"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LAZYLAB_CACHE", str(memo))
        reset_registry()
        with pytest.raises(SystemExit) as exc:
            main([*ACCEPTANCE, "--json", str(out_json)])
        reset_registry()
    assert exc.value.code == 0
    return memo, json.loads(out_json.read_text())


def test_rff_arms_are_listed_with_the_plugin_version(capsys, fresh_registry):
    code, out, _ = run(capsys, "arms", "--json", "-")
    assert code == 0
    listing = json.loads(out)
    arms = {a["arm"]: a for a in listing["arms"]}
    for name in ("rff-frozen", "rff-trained"):
        assert (arms[name]["distribution"], arms[name]["version"], arms[name]["status"]) == ("lazylab-rff", RFF_VERSION, "ok")
    units = {u["unit"]: u for u in listing["units"]}
    assert units["rff"]["arms"] == ["rff-frozen", "rff-trained"]
    assert units["yat"]["arms"] == ["yat-frozen", "yat-trained", "yat-data-frozen", "yat-data-trained"]
    assert listing["errors"] == [] and listing["contract"] >= 2
    code, out, _ = run(capsys, "arms")  # the table names the plugin too
    assert code == 0 and f"lazylab-rff {RFF_VERSION}" in out


@pytest.mark.slow
def test_rff_ladder_on_real_data_reaches_80_percent_at_512(acceptance):
    _, result = acceptance
    arms = {a["arm"]: a for a in result["arms"]}
    assert set(arms) == {"rff-frozen", "relu-frozen"}
    assert arms["rff-frozen"]["plugin"].startswith(f"lazylab-rff {RFF_VERSION}+src.")
    assert result["plan"]["epochs"] == 12 and result["plan"]["train_size"] == 60000
    assert set(arms["rff-frozen"]["bracket"]) == {"0.001", "0.003", "0.01", "0.03"}  # the plugin's own grid
    rff = arms["rff-frozen"]["cells"]
    assert rff["512"]["mean"] >= 80.0, rff
    assert rff["512"]["mean"] > rff["64"]["mean"]
    assert arms["relu-frozen"]["cells"]["512"]["mean"] >= 80.0


@pytest.mark.slow
def test_uninstalling_the_plugin_removes_its_arms_and_nothing_else(acceptance, tmp_path, capsys, fresh_registry):
    """The same interpreter and site-packages minus exactly the files the plugin's RECORD lists
    (what ``pip uninstall lazylab-rff`` removes), in a subprocess."""
    memo, installed = acceptance
    code, out, _ = run(capsys, "arms", "--json", "-")
    assert code == 0
    with_plugin = json.loads(out)

    dist = distribution("lazylab-rff")
    site_dir = Path(dist.locate_file(""))
    owned = {Path(str(f)).parts[0] for f in dist.files} - {"__pycache__", ".."}
    assert any(o.endswith(".dist-info") for o in owned)
    farm = tmp_path / "site-packages"
    farm.mkdir()
    for entry in site_dir.iterdir():
        if entry.name not in owned:
            (farm / entry.name).symlink_to(entry)
    script = (
        "import contextlib, importlib.util, io, json, site, sys\n"
        "site.addsitedir(sys.argv[1])\n"
        "from lazylab.cli import main\n"
        "results = []\n"
        "for argv in json.loads(sys.argv[2]):\n"
        "    o, e = io.StringIO(), io.StringIO()\n"
        "    with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):\n"
        "        try:\n"
        "            main(argv)\n"
        "        except SystemExit as x:\n"
        "            code = x.code\n"
        "    results.append({'code': code, 'out': o.getvalue(), 'err': e.getvalue()})\n"
        "print(json.dumps({'results': results, 'rff': importlib.util.find_spec('lazylab_rff') is not None}))\n"
    )
    relu_json = tmp_path / "relu.json"
    commands = [
        ["arms", "--json", "-"],
        ["ladder", "--arms", "relu-frozen", "--widths", "64,512", "--seeds", "0", "--json", str(relu_json)],
        ACCEPTANCE,
    ]
    # -S: no site-packages but the filtered copy.
    proc = subprocess.run([sys.executable, "-S", "-c", script, str(farm), json.dumps(commands)],
                          env=clean_env(LAZYLAB_CACHE=memo), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    listing, relu, rff = report["results"]
    assert report["rff"] is False  # really gone: not importable

    assert listing["code"] == 0, listing["err"]
    without = json.loads(listing["out"])
    assert without["arms"] == [a for a in with_plugin["arms"] if a["unit"] != "rff"]
    assert [u for u in without["units"] if u["distribution"] != "-"] == [u for u in with_plugin["units"] if u["unit"] != "rff"]
    assert with_plugin["errors"] == []
    # The tests pin lazylab-rff:rff in LAZYLAB_ARMS: once uninstalled it is named as not installed.
    assert [(e["unit"], e["status"]) for e in without["errors"]] == [("rff", "not installed from lazylab-rff (named in LAZYLAB_ARMS)")]

    # Every other arm's memo keys and results are unchanged: nothing is recomputed.
    assert relu["code"] == 0, relu["err"]
    assert "0 computed, " in relu["out"] and " from the memo" in relu["out"]  # nothing recomputed
    relu_before = next(a for a in installed["arms"] if a["arm"] == "relu-frozen")
    assert json.loads(relu_json.read_text())["arms"] == [relu_before]

    assert rff["code"] == 2
    assert "unknown arm 'rff-frozen'" in one_line(rff["err"])


@pytest.mark.slow
def test_gram_and_readout_take_the_plugin_arm(capsys, memo_dir, tmp_path, fresh_registry):
    """`lazylab gram --arm rff-frozen` and `lazylab readout --arm rff-frozen`, small, on the real data."""
    code, out, err = run(capsys, "gram", "--arm", "rff-frozen", "--max-units", "32", "--frames", "4",
                         "--ref-units", "256", "--per-class", "3", "--out", str(tmp_path / "gram"))
    assert code == 0, err
    assert f"gram: rff-frozen (lazylab-rff {RFF_VERSION}+src." in out
    gram = json.loads((tmp_path / "gram" / "gram.json").read_text())
    assert gram["distance_to_reference"][-1] < gram["distance_to_reference"][0]  # the kernel settles as the bank grows
    code, out, err = run(capsys, "readout", "--arm", "rff-frozen", "--widths", "8,16", "--train-size", "500",
                         "--steps", "4", "--eval-every", "2", "--out", str(tmp_path / "readout"))
    assert code == 0, err
    assert f"readout: rff-frozen (lazylab-rff {RFF_VERSION}+src." in out
    assert (tmp_path / "readout" / "readout.gif").stat().st_size > 0


# --------------------------------------------------------- broken plugins
@pytest.mark.slow
def test_a_plugin_that_fails_to_import_is_reported_and_skipped(tmp_path):
    """A real (tiny) distribution on PYTHONPATH whose module raises ImportError; `lazylab arms` in a subprocess."""
    write_dist(tmp_path, "lazylab-broken", "0.3", {"broken": "lazylab_broken:UNIT"}, BROKEN)
    proc = subprocess.run([sys.executable, "-m", "lazylab.cli", "arms", "--json", "-"],
                          env=clean_env(PYTHONPATH=tmp_path, LAZYLAB_ARMS=pinned("lazylab-broken:broken")), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    listing = json.loads(proc.stdout)
    (error,) = listing["errors"]
    assert (error["unit"], error["distribution"], error["version"]) == ("broken", "lazylab-broken", "0.3")
    assert error["status"].startswith("ModuleNotFoundError") and "a_dependency_that_is_not_installed" in error["status"]
    assert "\n" not in error["status"]
    arms = {a["arm"] for a in listing["arms"]}
    assert {"yat-frozen", "relu-frozen", "gaussian-frozen", "rff-frozen"} <= arms
    assert not any(a.startswith("broken") for a in arms)


@pytest.mark.slow
def test_builtin_arms_still_run_beside_a_broken_plugin_and_strict_mode_refuses(
    tmp_path, monkeypatch, capsys, memo_dir, fresh_registry
):
    monkeypatch.syspath_prepend(str(write_dist(tmp_path, "lazylab-broken", "0.3", {"broken": "lazylab_broken:UNIT"}, BROKEN)))
    monkeypatch.setenv("LAZYLAB_ARMS", pinned("lazylab-broken:broken"))
    reset_registry()
    code, out, err = run(capsys, "ladder", "--arms", "relu-frozen", "--widths", "8", *TINY)
    assert code == 0, err
    assert "relu-frozen" in out and "1 computed" in out
    assert lines(err) == []  # the broken plugin is not imported by a command that does not use it
    code, out, err = run(capsys, "arms")
    (warning,) = lines(err)  # a command that imports it says it did not load, once
    assert warning.startswith("warning: plugin unit 'broken' (lazylab-broken 0.3) did not load: ModuleNotFoundError")
    code, _, err = run(capsys, "ladder", "--arms", "broken-frozen", "--widths", "8", *TINY)
    assert code == 2
    line = one_line(err)
    assert "broken-frozen" in line and "did not load" in line and "a_dependency_that_is_not_installed" in line
    assert "did you mean" not in line  # the reason, not another unit's arm

    monkeypatch.setenv("LAZYLAB_STRICT_PLUGINS", "1")
    for argv in (["arms"], ["ladder", "--arms", "broken-frozen", "--widths", "8", *TINY]):
        reset_registry()
        code, _, err = run(capsys, *argv)
        assert code == 2
        line = one_line(err)
        assert "'broken'" in line and "lazylab-broken 0.3" in line and "ModuleNotFoundError" in line
        assert "LAZYLAB_ARMS=name,... loads only the named units" in line
    # Strict mode is scoped to the arms in use: a relu-only ladder runs beside the broken plugin.
    reset_registry()
    code, out, err = run(capsys, "ladder", "--arms", "relu-frozen", "--widths", "8", *TINY)
    assert code == 0 and lines(err) == [], err

    # LAZYLAB_ARMS leaves the broken plugin unloaded, so strict mode is satisfied.
    monkeypatch.setenv("LAZYLAB_ARMS", "relu,rff")
    reset_registry()
    code, out, err = run(capsys, "arms", "--json", "-")
    assert code == 0, err
    listing = json.loads(out)
    assert {a["arm"] for a in listing["arms"]} == {"relu-frozen", "relu-trained", "rff-frozen", "rff-trained"}
    assert listing["errors"] == []


BAD_UNITS = '''
import jax.numpy as jnp
from flax import nnx

from lazylab.arms import Unit
from lazylab.arms.relu import ReluBank


class Transposed(nnx.Module):
    """Maps (n, d) to (m, n): the wrong orientation."""

    def __init__(self, W, x_ref=None):
        self.W = nnx.Param(jnp.asarray(W))

    def __call__(self, x):
        return self.W[...] @ x.T


NOT_A_UNIT = {"name": "notunit"}
WRONG_NAME = Unit(name="other", bank=ReluBank)
BAD_INITS = Unit(name="badinits", bank=ReluBank, inits=("random", "pretrained"))
NOT_CALLABLE = Unit(name="nocall", bank=42)
FUTURE = Unit(name="future", bank=ReluBank, contract=99)
HYPHEN = Unit(name="bad-name", bank=ReluBank)
BAD_GRID = Unit(name="badgrid", bank=ReluBank, lr_grids={"frozen": (0.1, -1.0)})
TRANSPOSED = Unit(name="transposed", bank=Transposed)
'''


@pytest.mark.slow
def test_contract_violations_are_reported_by_name_and_skipped(tmp_path, monkeypatch, capsys, memo_dir, fresh_registry):
    eps = {"notunit": "lazylab_bad:NOT_A_UNIT", "wrongname": "lazylab_bad:WRONG_NAME", "badinits": "lazylab_bad:BAD_INITS",
           "nocall": "lazylab_bad:NOT_CALLABLE", "future": "lazylab_bad:FUTURE", "bad-name": "lazylab_bad:HYPHEN",
           "badgrid": "lazylab_bad:BAD_GRID", "transposed": "lazylab_bad:TRANSPOSED"}
    monkeypatch.syspath_prepend(str(write_dist(tmp_path, "lazylab-bad", "1.0", eps, {"lazylab_bad.py": BAD_UNITS})))
    monkeypatch.setenv("LAZYLAB_ARMS", pinned(*(f"lazylab-bad:{n}" for n in eps)))
    reset_registry()
    reg = registry()
    assert reg.errors == {}  # listed only: nothing imported, nothing known broken yet
    reg.load_all()
    errors = reg.errors
    expected = {"notunit": "not a lazylab.arms.Unit", "wrongname": "differs from entry point", "badinits": "inits",
                "nocall": "not callable", "future": "contract version 99", "bad-name": "lowercase letters",
                "badgrid": "lr_grids['frozen']"}
    assert set(errors) == set(expected)
    for name, needle in expected.items():
        assert errors[name].distribution == "lazylab-bad" and errors[name].message.startswith("ContractError")
        assert needle in errors[name].message, errors[name].message

    # Static checks pass for 'transposed'; the bank's shape is checked when built.
    code, out, err = run(capsys, "arms", "--json", "-", "--check")
    assert code == 2 and "error: unit 'transposed' (lazylab-bad 1.0) fails its check" in one_line(err)
    status = {u["unit"]: u["status"] for u in json.loads(out)["units"]}
    assert status["transposed"].startswith("contract: random-bank: bank maps (3, 784) to float32 (8, 3)")
    assert status["relu"] == status["yat"] == status["gaussian"] == status["rff"] == "ok"
    code, _, err = run(capsys, "ladder", "--arms", "transposed-frozen", "--widths", "8", *TINY)
    assert code == 2
    line = one_line(err)
    assert "'transposed' (lazylab-bad 1.0+src." in line and "breaks the lazylab.arms contract" in line and "expected float (3, 8)" in line


# ---------------------------------------------------------------- memo keys
def test_bumping_the_plugin_version_changes_the_memo_key(tmp_path, monkeypatch, memo_dir, fresh_registry):
    """The same code registered by lazylab-rff at another version (a dist-info shadowing the installed one)."""
    from lazylab.experiments import Workspace

    ws = Workspace(None, memo_dir)

    def keys():
        reset_registry()
        reg = registry()
        return {name: ws.config(reg.arm(name), 64, 0, 0.01).key() for name in ("rff-frozen", "rff-trained", "relu-frozen")}

    before = keys()
    assert registry().arm("rff-frozen").plugin.startswith(f"lazylab-rff {RFF_VERSION}+src.")
    monkeypatch.syspath_prepend(str(write_dist(tmp_path, "lazylab-rff", "99.0", {"rff": "lazylab_rff:UNIT"})))
    after = keys()
    assert registry().arm("rff-frozen").plugin.startswith("lazylab-rff 99.0+src.")
    assert after["rff-frozen"] != before["rff-frozen"] and after["rff-trained"] != before["rff-trained"]
    assert after["relu-frozen"] == before["relu-frozen"]


def test_lazylab_arms_restricts_loading(monkeypatch, capsys, memo_dir, fresh_registry):
    monkeypatch.setenv("LAZYLAB_ARMS", "relu, rff ,nosuchunit")
    reset_registry()
    reg = registry()
    assert set(reg.entries) == {"relu", "rff"} and reg.units == {}  # listed, nothing imported yet
    assert reg.errors["nosuchunit"].message == "not installed (named in LAZYLAB_ARMS)"
    code, _, err = run(capsys, "ladder", "--arms", "yat-frozen")
    assert code == 2 and "unknown arm 'yat-frozen'" in one_line(err)
