"""Issue 50 item 3: a plugin in one command. ``lazylab new-unit NAME`` writes a package that installs
and passes lazylab's conformance suite as written, one pytest item per check, and whose arms run.

The package is made importable the way ``pip install -e`` makes it: its folder on ``PYTHONPATH`` and
a ``.dist-info`` with its entry point (``cli_helpers.write_dist``), in a subprocess, so that the test
environment's installed distributions are left as they are.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys

import pytest

from cli_helpers import lines, pinned, run, write_dist
from lazylab import testing


def test_new_unit_refuses_a_bad_name_a_registered_one_and_an_existing_folder(tmp_path, capsys):
    code, _, err = run(capsys, "new-unit", "Bad-Name", "--dir", tmp_path)
    assert code == 2 and lines(err) == ["error: unit name 'Bad-Name' must be lowercase letters, digits and '_', "
                                        "starting with a letter (arm names are built from it: <name>-frozen)"]
    code, _, err = run(capsys, "new-unit", "relu", "--dir", tmp_path)
    assert code == 2 and "unit name 'relu' is already registered by lazylab " in err
    (tmp_path / "taken").mkdir()
    code, _, err = run(capsys, "new-unit", "taken", "--dir", tmp_path)
    assert code == 2 and f"{tmp_path / 'taken'} already exists" in err
    assert list(tmp_path.iterdir()) == [tmp_path / "taken"]  # nothing written


@pytest.mark.slow
def test_the_written_package_passes_its_tests_unedited_and_its_arm_runs(tmp_path, capsys):
    code, out, err = run(capsys, "new-unit", "demo", "--dir", tmp_path)
    assert code == 0, err
    root = tmp_path / "demo"
    written = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    assert written == ["README.md", "lazylab_demo/__init__.py", "pyproject.toml", "tests/test_demo.py"]
    assert 'demo = "lazylab_demo:UNIT"' in (root / "pyproject.toml").read_text()
    # The entry point as pip would register it.
    site = write_dist(tmp_path / "site", "lazylab-demo", "0.1.0", {"demo": "lazylab_demo:UNIT"})
    spec = importlib.util.spec_from_file_location("lazylab_demo", root / "lazylab_demo" / "__init__.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    items = len(testing.unit_checks(module.UNIT)) + 1  # one per check, and the arms' own test
    env = {k: v for k, v in os.environ.items() if k not in ("LAZYLAB_ARMS", "LAZYLAB_STRICT_PLUGINS")}
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(root)])
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(root)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert re.search(rf"\b{items} passed\b", proc.stdout) and items >= 13, proc.stdout[-500:]
    # Its arm runs through a ladder beside a built-in one (vetted first: it passes every check).
    env["LAZYLAB_ARMS"] = pinned("lazylab-demo:demo")
    env["LAZYLAB_CACHE"] = str(tmp_path / "memo")
    proc = subprocess.run([sys.executable, "-m", "lazylab.cli", "ladder", "--arms", "demo-frozen,yat-frozen",
                           "--widths", "16", "--seeds", "0", "--epochs", "1", "--train-size", "512", "--lr", "0.1",
                           "--no-figures", "--json", "-"], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and "conformance" not in proc.stderr, proc.stderr[-3000:]
    arms = {a["arm"]: a for a in json.loads(proc.stdout)["arms"]}
    assert arms["demo-frozen"]["plugin"].startswith("lazylab-demo 0.1.0+src.") and "checks_failed" not in arms["demo-frozen"]
    assert 0 < arms["demo-frozen"]["cells"]["16"]["mean"] <= 100
