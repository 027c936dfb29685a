"""Issue 51 item 4: plugins loaded when used. Entry points are listed without importing; a unit's
module is imported when an arm of it is needed (or by ``lazylab arms``), for at most
``LAZYLAB_IMPORT_TIMEOUT`` seconds; what a plugin raises on import (SystemExit and KeyboardInterrupt
included) or while building a bank is its failure, in one line, with its own traceback under
``LAZYLAB_DEBUG=1``; with ``--json -`` stdout holds the JSON alone whatever a plugin writes.

Fake plugins are tiny distributions (``cli_helpers.write_dist``) in a temporary directory put on
``sys.path`` (in-process) or ``PYTHONPATH`` (a subprocess, for writes to file descriptor 1).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from cli_helpers import lines, pinned, run, write_dist
from lazylab.arms import registry, reset_registry

TINY = ["--widths", "8", "--seeds", "0", "--train-size", "512", "--epochs", "1", "--lr", "0.1", "--no-figures"]

SLEEPER = "import time\ntime.sleep(600)\n"
RAISERS = '''
import sys
from lazylab.arms import Unit
from lazylab.arms.relu import ReluBank

if "exit" in __name__:
    sys.exit(3)
if "interrupt" in __name__:
    raise KeyboardInterrupt
if "valueerror" in __name__:
    raise ValueError("bad configuration at import")
'''
INTERRUPTING_BANK = '''
from lazylab.arms import Unit


def bank(W, x_ref=None):
    raise KeyboardInterrupt


UNIT = Unit(name="interruptbank", bank=bank)
'''


@pytest.fixture
def plugins(tmp_path, monkeypatch, memo_dir):
    """Install fake plugins: ``install({unit: source})`` -> the LAZYLAB_ARMS pins them beside lazylab's own."""
    def install(units: dict[str, str]) -> None:
        for unit, source in units.items():
            module = f"lazylab_{unit}_{tmp_path.name[-6:].replace('-', '_')}"  # unique: a module imports once
            write_dist(tmp_path / unit, f"lazylab-{unit}", "0.1", {unit: f"{module}:UNIT"}, {f"{module}.py": source})
            monkeypatch.syspath_prepend(str(tmp_path / unit))
        monkeypatch.setenv("LAZYLAB_ARMS", pinned(*(f"lazylab-{u}:{u}" for u in units)))
        reset_registry()

    monkeypatch.delenv("LAZYLAB_STRICT_PLUGINS", raising=False)
    yield install
    reset_registry()


def test_a_plugin_that_sleeps_on_import_is_never_imported_for_other_arms_and_abandoned_by_arms(
        plugins, capsys, monkeypatch):
    import importlib

    # The other units imported first: on a loaded machine their first import (jax's) can take over the 1 s bound,
    # which is the sleeper's alone here.
    for module in ("lazylab.arms.yat", "lazylab.arms.relu", "lazylab.arms.gaussian", "lazylab_rff"):
        importlib.import_module(module)
    plugins({"sleeper": SLEEPER})
    monkeypatch.setenv("LAZYLAB_IMPORT_TIMEOUT", "1")
    assert set(registry().entries) >= {"sleeper", "yat"} and registry().units == {}  # listed, nothing imported
    code, out, err = run(capsys, "ladder", "--arms", "yat-frozen", *TINY)
    assert code == 0 and lines(err) == [], err  # as without it: no warning, no wait
    assert "sleeper" not in registry().units and "sleeper" not in registry().errors
    reset_registry()
    start = time.perf_counter()
    code, out, err = run(capsys, "arms", "--json", "-")
    seconds = time.perf_counter() - start
    assert code == 0 and seconds < 30, seconds  # the bound (1 s) plus the other units' imports
    (warning,) = lines(err)
    assert warning.startswith("warning: plugin unit 'sleeper' (lazylab-sleeper 0.1) did not load: importing ")
    assert "took longer than 1 s and was abandoned (LAZYLAB_IMPORT_TIMEOUT sets the bound)" in warning
    listing = json.loads(out)
    assert [e["unit"] for e in listing["errors"]] == ["sleeper"] and "yat-frozen" in {a["arm"] for a in listing["arms"]}
    monkeypatch.setenv("LAZYLAB_IMPORT_TIMEOUT", "soon")
    reset_registry()
    code, _, err = run(capsys, "arms")
    assert code == 2 and lines(err) == ["error: LAZYLAB_IMPORT_TIMEOUT='soon': expected a number of seconds > 0"]


def test_what_a_plugin_raises_on_import_is_its_failure_in_one_line(plugins, capsys, monkeypatch):
    plugins({"exit": RAISERS, "interrupt": RAISERS, "valueerror": RAISERS})
    code, out, err = run(capsys, "arms", "--json", "-")
    assert code == 0, err  # not exit 3, not the interrupt's 130
    errors = {e["unit"]: e["status"] for e in json.loads(out)["errors"]}
    assert errors["exit"] == "SystemExit(3) raised by the plugin's own code while it was imported"
    assert errors["interrupt"] == "KeyboardInterrupt() raised by the plugin's own code while it was imported"
    assert errors["valueerror"] == "ValueError: bad configuration at import"
    assert len(lines(err)) == 3 and "Traceback" not in err
    # LAZYLAB_DEBUG=1: the plugin's own traceback, down to its file and line.
    monkeypatch.setenv("LAZYLAB_DEBUG", "1")
    reset_registry()
    code, _, err = run(capsys, "ladder", "--arms", "valueerror-frozen", *TINY)
    assert code == 2
    assert "Traceback" in err and 'valueerror' in err and ', line 11, in <module>' in err
    assert 'raise ValueError("bad configuration at import")' in err
    assert lines(err)[-1].startswith("error: unknown arm 'valueerror-frozen'; unit 'valueerror' did not load")


def test_a_keyboard_interrupt_raised_by_a_bank_is_the_units_failure_not_ctrl_c(plugins, capsys, monkeypatch):
    plugins({"interruptbank": INTERRUPTING_BANK})
    monkeypatch.setenv("XDG_CACHE_HOME", str(registry and os.environ["XDG_CACHE_HOME"]))
    code, out, err = run(capsys, "ladder", "--arms", "interruptbank-frozen,relu-frozen", *TINY)
    assert code == 2, err  # not 130
    (line,) = [l for l in lines(err) if l.startswith("error: ")]
    assert "unit 'interruptbank' (lazylab-interruptbank 0.1+src." in line and "building its bank (KeyboardInterrupt" in line
    assert "relu-frozen" in out  # the other arm ran


PRINTER = '''
import os
import sys

import jax.numpy as jnp
from flax import nnx
from lazylab.arms import Unit

print("printer: hello from import")
os.write(1, b"printer: a raw write to descriptor 1\\n")
sys.__stdout__.write("printer: through sys.__stdout__\\n")
sys.__stdout__.flush()


class Bank(nnx.Module):
    def __init__(self, W, x_ref=None):
        print("printer: building a bank of", W.shape[0])
        self.W = nnx.Param(jnp.asarray(W, jnp.float32))

    def __call__(self, x):
        return jnp.maximum(x @ self.W[...].T, 0.0)


UNIT = Unit(name="printer", bank=Bank, fan_in="d")
'''


@pytest.mark.slow
def test_json_dash_parses_whatever_a_plugin_prints_on_import_and_while_building_banks(tmp_path):
    """A real process (the descriptor-level guard): the plugin prints, writes to descriptor 1 and to
    ``sys.__stdout__`` on import, and prints while its banks are built (its conformance checks, the run)."""
    write_dist(tmp_path / "site", "lazylab-printer", "0.1", {"printer": "lazylab_printer:UNIT"},
               {"lazylab_printer.py": PRINTER})
    env = {k: v for k, v in os.environ.items() if k != "LAZYLAB_STRICT_PLUGINS"}
    env.update(PYTHONPATH=str(tmp_path / "site"), LAZYLAB_ARMS=pinned("lazylab-printer:printer"),
               LAZYLAB_CACHE=str(tmp_path / "memo"))
    proc = subprocess.run([sys.executable, "-m", "lazylab.cli", "ladder", "--arms", "printer-frozen", *TINY,
                           "--json", "-"], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)  # the JSON alone
    assert result["arms"][0]["arm"] == "printer-frozen" and 0 < result["arms"][0]["cells"]["8"]["mean"] < 100
    for said in ("hello from import", "a raw write to descriptor 1", "through sys.__stdout__", "building a bank of 8"):
        assert f"printer: {said}" in proc.stderr


def test_a_plugin_error_is_shown_with_its_control_characters_escaped():
    from lazylab.arms import plugin_error

    line = plugin_error(ValueError("bad \x1b[2J name \x9b and \u202e reversed\nsecond line"), "import: ")
    assert line == "import: ValueError: bad \\x1b[2J name \\x9b and \\u202e reversed"
