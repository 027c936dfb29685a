"""Reliability (issue 10): nothing lost, nothing trusted blindly.

Interruption, corruption, concurrency, trust, divergence, bad data, failing
disks and determinism, driven through the real ``lazylab`` command on tiny
slices of the real Fashion-MNIST. Subprocesses are used only where a signal,
a second process or a resource limit is the point. docs/reliability.md maps
each guarantee to the test here that proves it.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import math
import os
import re
import shutil
import signal
import sqlite3
import stat
import struct
import subprocess
import sys
import time
from pathlib import Path

import diskcache
import numpy as np
import pytest

from lazylab import data
from lazylab.cache import Memo
from lazylab.cli import main
from lazylab.config import CACHE_SCHEMA, RunConfig
from cli_helpers import run, assert_one_line_error, lines

pytestmark = pytest.mark.skipif(
    not all((data.DEBIAN_DIR / n).is_file() for n in data.FILES.values()),
    reason="Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)",
)

# One tiny ladder, reused everywhere so that jax compiles each shape once per session:
# yat-frozen at a fixed rate, 2 epochs on 2,048 images, 4 widths x 3 seeds = 12 runs
# (four groups: each width's seeds train as one program, so a signal can land between them).
# No feature store: these tests are about run records (tests/test_feature_cache.py has the rest),
# and a 2 MiB tmpfs holds records, not feature matrices.
LADDER = ["ladder", "--arms", "yat-frozen", "--epochs", "2", "--train-size", "2048", "--lr", "0.1", "--no-figures",
          "--cache-limit", "0"]
WIDTHS, SEEDS, N_RUNS = "8,16,32,64", "0,1,2", 12
PROTOCOL = dict(epochs=2, batch=256, train_size=2048, fan_in="unit")
CLI = [sys.executable, "-m", "lazylab.cli"]
WAIT_S = 240  # bound on any wait for a subprocess (a loaded 2-core CI box is slow)


# --------------------------------------------------------------------------- helpers


@pytest.fixture(autouse=True, scope="module")
def _outputs_in_tmp(tmp_path_factory):
    """Nothing a command writes by default may land in the repository."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LAZYLAB_OUT", str(tmp_path_factory.mktemp("out")))
        mp.delenv("LAZYLAB_CACHE", raising=False)
        mp.delenv("LAZYLAB_DATA", raising=False)
        yield





def spawn(tmp_path: Path, *argv, file_size_limit: int | None = None) -> subprocess.Popen:
    """``lazylab argv`` in a fresh process (text pipes), optionally under RLIMIT_FSIZE."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    cmd = [*CLI, *map(str, argv)]
    if file_size_limit is not None:
        # A trampoline sets the limit and execs lazylab (no preexec_fn: forking a jax process is unsafe).
        # SIGXFSZ is ignored so that a write past the limit fails with EFBIG instead of killing.
        cmd = [sys.executable, "-c", "import os, resource, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
               "n = int(sys.argv[1]); resource.setrlimit(resource.RLIMIT_FSIZE, (n, n)); os.execv(sys.executable, sys.argv[2:])",
               str(file_size_limit), *cmd]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def without_timing(run: dict) -> dict:
    return {k: v for k, v in run.items() if k != "seconds"}


def runs_of(json_path: Path) -> dict[str, str]:
    """Run records of a ``ladder --json`` file by key, as canonical JSON text without timing.

    Text, not floats, is compared: bit-identical means identical ``repr`` of every
    number (and a NaN loss compares equal to itself).
    """
    doc = json.loads(Path(json_path).read_text())
    return {r["key"]: json.dumps(without_timing(r), sort_keys=True) for r in doc["runs"]}


def run_keys(memo_dir: Path) -> list[str]:
    """Keys of ladder runs in the memo, read straight from its sqlite file (safe while another process writes)."""
    db = Path(memo_dir) / "cache.db"
    if not db.exists():
        return []
    con = sqlite3.connect(db, timeout=30)
    try:
        return sorted(k for (k,) in con.execute("SELECT key FROM Cache") if str(k).startswith("run-"))
    except sqlite3.OperationalError:
        return []  # the table is not created yet
    finally:
        con.close()


def assert_memo_sound(memo_dir: Path) -> list[str]:
    """sqlite's integrity check passes and every run entry reads back whole, under its own key."""
    con = sqlite3.connect(Path(memo_dir) / "cache.db")
    try:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        con.close()
    keys = run_keys(memo_dir)
    memo = Memo(memo_dir)
    try:
        for key in keys:
            record = memo.get_record(key)
            assert record is not None, key
            assert record["key"] == key
            assert RunConfig(**record["config"]).key() == key
            assert record["best_acc"] is not None and len(record["curve"]) == PROTOCOL["epochs"]
        assert memo.problems == []
    finally:
        memo.close()
    return keys


def wait_for_first_run(proc: subprocess.Popen, memo_dir: Path) -> None:
    deadline = time.monotonic() + WAIT_S
    while not run_keys(memo_dir):
        if proc.poll() is not None:
            pytest.fail(f"ladder ended before storing a run: {proc.communicate()}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("no run stored within the time limit")
        time.sleep(0.05)


def cell_configs(memo_dir: Path, arm: str, widths, seeds, lr: float = 0.1) -> list[RunConfig]:
    """The run configurations the tiny ladder looks up (same data fingerprint, same protocol)."""
    from lazylab.arms import get_arm
    from lazylab.experiments import Workspace

    ws = Workspace(None, memo_dir)
    try:
        return [ws.config(get_arm(arm), w, s, lr, **PROTOCOL) for w in widths for s in seeds]
    finally:
        ws.memo.close()


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, str]:
    """The tiny ladder run once, uninterrupted, on a fresh memo: its run records by key."""
    d = tmp_path_factory.mktemp("reference")
    with pytest.raises(SystemExit) as exc:
        main([*LADDER, "--widths", WIDTHS, "--seeds", SEEDS, "--cache-dir", str(d / "memo"), "--json", str(d / "r.json")])
    assert exc.value.code == 0
    runs = runs_of(d / "r.json")
    assert len(runs) == N_RUNS
    return runs


def resume_and_compare(capsys, memo_dir: Path, kept: int, reference: dict, tmp_path: Path) -> None:
    """Re-run the ladder: it computes only what is missing and matches the uninterrupted run."""
    out_json = tmp_path / "resumed.json"
    code, out, err = run(capsys, *LADDER, "--widths", WIDTHS, "--seeds", SEEDS, "--cache-dir", memo_dir, "--json", out_json)
    assert code == 0, err
    assert f"runs: {N_RUNS - kept} computed, {kept} from the memo" in out
    assert runs_of(out_json) == reference


# --------------------------------------------------------------------------- 1. interruption


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["SIGINT", "SIGKILL"])
def test_interrupted_ladder_keeps_finished_runs_and_resumes_identically(sig, reference, tmp_path, capsys):
    memo_dir = tmp_path / "memo"
    # A shell starts background jobs with SIGINT ignored, and the child would inherit that:
    # give it Python's default (reset to SIG_DFL by exec) while it is spawned.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        proc = spawn(tmp_path, *LADDER, "--widths", WIDTHS, "--seeds", SEEDS, "--cache-dir", memo_dir)
    finally:
        signal.signal(signal.SIGINT, previous)
    wait_for_first_run(proc, memo_dir)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=WAIT_S)
    kept = assert_memo_sound(memo_dir)
    assert 1 <= len(kept) < N_RUNS, f"the signal must land mid-ladder; stderr: {err}"
    if sig == signal.SIGINT:
        assert proc.returncode == 130, err
        assert "Traceback" not in err
        assert len(lines(err)) == 1, err
        said = re.fullmatch(r"interrupted: (\d+) (runs?) kept in the memo \((\d+) computed now, 0 already there\); "
                            r"run the same command to resume", lines(err)[0])
        assert said, err
        n = int(said.group(1))
        assert (said.group(2) == "run") == (n == 1), err  # "1 run", "2 runs"
        # The count is of runs reported done; a put that finished just before the
        # interrupt (its report not yet made) is kept too.
        assert n >= 1 and n <= len(kept) <= n + 1
    else:
        assert proc.returncode == -signal.SIGKILL
    resume_and_compare(capsys, memo_dir, len(kept), reference, tmp_path)


# --------------------------------------------------------------------------- 2. corruption


def test_truncated_and_garbage_entries_are_reported_and_recomputed(reference, tmp_path, capsys):
    memo_dir, first, again = tmp_path / "memo", tmp_path / "a.json", tmp_path / "b.json"
    argv = [*LADDER, "--widths", "8,16", "--seeds", "0,1", "--cache-dir", memo_dir]
    code, _, err = run(capsys, *argv, "--json", first)
    assert code == 0, err
    truncated, garbage = run_keys(memo_dir)[:2]
    con = sqlite3.connect(memo_dir / "cache.db")
    with con:
        con.execute("UPDATE Cache SET value = substr(value, 1, length(value) / 2) WHERE key = ?", (truncated,))
        con.execute("UPDATE Cache SET value = ? WHERE key = ?", (os.urandom(300), garbage))
    con.close()

    code, out, err = run(capsys, *argv, "--json", again)
    assert code == 0, err
    assert "Traceback" not in err
    reported = [line for line in lines(err) if line.startswith("memo entry")]
    assert len(reported) == 2, err
    assert any(truncated in line and "corrupt" in line for line in reported)
    assert any(garbage in line and "corrupt" in line for line in reported)
    assert "runs: 2 computed, 2 from the memo" in out
    assert runs_of(again) == runs_of(first)
    assert all(reference[k] == v for k, v in runs_of(again).items())

    code, out, err = run(capsys, *argv)  # the recomputed entries were stored whole
    assert code == 0 and "runs: 0 computed, 4 from the memo" in out
    assert not [line for line in lines(err) if line.startswith("memo entry")]
    assert_memo_sound(memo_dir)


def test_truncated_array_file_is_detected(tmp_path):
    """Values over diskcache's inline limit live in files; a truncated one reads as missing, reported once."""
    memo = Memo(tmp_path / "m")
    big = np.arange(50_000, dtype=np.float32)  # 200 kB: stored as a file, not inline
    memo.put_arrays("big", {"phi": big})
    files = [p for p in (tmp_path / "m").rglob("*.val")]
    assert len(files) == 1
    blob = files[0].read_bytes()
    files[0].write_bytes(blob[: len(blob) // 3])
    assert memo.get_arrays("big") is None
    assert len(memo.problems) == 1 and "corrupt" in memo.problems[0]
    memo.put_arrays("big", {"phi": big})
    np.testing.assert_array_equal(memo.get_arrays("big")["phi"], big)


@pytest.mark.parametrize("route", ["absolute", "dotdot", "symlinked folder"])
def test_planted_row_naming_a_file_outside_the_memo_is_neither_read_nor_deleted(tmp_path, route):
    victim = tmp_path / "outside" / "precious.txt"
    victim.parent.mkdir()
    victim.write_text("keep me")
    memo = Memo(tmp_path / "m")
    memo.put_record("r", {"x": 1})
    (tmp_path / "m" / "ab").symlink_to(victim.parent, target_is_directory=True)  # a folder inside, pointing out
    name = {"absolute": str(victim), "dotdot": "../outside/precious.txt", "symlinked folder": "ab/precious.txt"}[route]
    con = sqlite3.connect(tmp_path / "m" / "cache.db")
    with con:  # mode 2 = diskcache's MODE_BINARY: "the value is in this file"
        con.execute("UPDATE Cache SET mode = 2, value = NULL, filename = ? WHERE key = 'r'", (name,))
    con.close()
    assert memo.get_record("r") is None
    assert "outside the memo" in memo.problems[0]
    assert victim.read_text() == "keep me"
    memo.put_record("r", {"x": 2})  # replacing the row deletes its old file: not this one
    memo.clear()
    assert victim.read_text() == "keep me"


def test_damaged_memo_database_is_one_line_error(tmp_path, capsys):
    memo_dir = tmp_path / "memo"
    Memo(memo_dir).close()
    (memo_dir / "cache.db").write_bytes(b"this is not an sqlite database" * 100)
    code, _, err = run(capsys, *LADDER, "--widths", "8", "--seeds", "0", "--cache-dir", memo_dir)
    assert_one_line_error(code, err, "cannot open the memo", str(memo_dir))
    code, _, err = run(capsys, "cache", "info", "--cache-dir", memo_dir)
    assert_one_line_error(code, err, "cannot open the memo")


def test_older_cache_schema_is_never_misread(reference, tmp_path, capsys):
    """Old-schema entries live under other keys; one misfiled under a current key is caught by the key it names."""
    from lazylab.experiments import json_config

    memo_dir = tmp_path / "memo"
    cells = cell_configs(memo_dir, "yat-frozen", (8, 16), (0, 1))
    memo = Memo(memo_dir)

    def stale(cfg):  # what an older lazylab would have left for this cell: a plausible, wrong record
        old = dataclasses.replace(cfg, schema=CACHE_SCHEMA - 1)
        return old, {"key": old.key(), "config": json_config(old), "best_acc": 12.5, "final_acc": 12.5,
                     "curve": [12.5, 12.5], "train_loss": [1.0, 1.0], "diverged": None, "seconds": 0.0}

    for cfg in cells:
        old, record = stale(cfg)
        assert old.key() != cfg.key()  # the schema is part of the key
        memo.put_record(old.key(), record)
    memo.put_record(cells[0].key(), stale(cells[0])[1])  # misfiled: an old record under a current key
    memo.close()

    out_json = tmp_path / "r.json"
    code, out, err = run(capsys, *LADDER, "--widths", "8,16", "--seeds", "0,1", "--cache-dir", memo_dir, "--json", out_json)
    assert code == 0, err
    assert "runs: 4 computed, 0 from the memo" in out
    reported = [line for line in lines(err) if line.startswith("memo entry")]
    assert reported == [f"memo entry {cells[0].key()} is corrupt (its record names the key "
                        f"{stale(cells[0])[0].key()!r}: a value moved from another key); recomputing"]
    runs = runs_of(out_json)
    assert all(reference[k] == v for k, v in runs.items()) and len(runs) == 4
    assert "12.5" not in out


def test_records_of_older_code_are_never_reused_and_the_ladder_says_so(reference, tmp_path, capsys, monkeypatch):
    """A memo written by an earlier lazylab (its code identity forged here) is recomputed, with one line saying why."""
    from lazylab import config

    memo_dir, out_json = tmp_path / "memo", tmp_path / "r.json"
    argv = [*LADDER, "--widths", "8", "--seeds", "0,1", "--cache-dir", memo_dir]
    current = config.CODE
    monkeypatch.setattr(config, "CODE", "lazylab 0.1.0 numerics 0")
    code, out, err = run(capsys, *argv)
    assert code == 0 and "runs: 2 computed, 0 from the memo" in out, err
    monkeypatch.undo()

    code, out, err = run(capsys, *argv, "--json", out_json)
    assert code == 0, err
    assert "runs: 2 computed, 0 from the memo" in out
    # 3 entries: the 2 runs and the ladder's redundancy analysis, all of them recomputed.
    assert lines(err) == ["note: the memo holds 3 entries computed by other code (3 by lazylab 0.1.0 numerics 0); "
                          f"they are never reused, so those results are recomputed by {current} "
                          "(`lazylab cache prune` removes them)"]
    runs = runs_of(out_json)
    assert len(runs) == 2 and all(reference[k] == v for k, v in runs.items())
    assert {json.loads(v)["config"]["code"] for v in runs.values()} == {current}

    code, out, err = run(capsys, *argv)  # nothing left to compute: nothing to say
    assert code == 0 and "runs: 0 computed, 2 from the memo" in out and lines(err) == []
    code, out, _ = run(capsys, "cache", "info", "--cache-dir", memo_dir)
    assert code == 0
    assert f"  3 by {current} (current)" in out
    assert "  3 by lazylab 0.1.0 numerics 0 (never reused; 'lazylab cache prune' removes them)" in out
    code, out, _ = run(capsys, "cache", "prune", "--cache-dir", memo_dir)
    assert code == 0 and f"removed 3 entries computed by other code than {current}" in out
    code, out, err = run(capsys, *argv)
    assert code == 0 and "runs: 0 computed, 2 from the memo" in out and lines(err) == []


# --------------------------------------------------------------------------- 3. concurrency


def test_two_ladders_on_one_memo_agree_and_leave_it_sound(reference, tmp_path):
    memo_dir = tmp_path / "memo"
    # The same cells walked in opposite orders, so that the two processes meet in the middle.
    a = spawn(tmp_path, *LADDER, "--widths", "8", "--seeds", "0,1,2", "--cache-dir", memo_dir, "--json", tmp_path / "a.json")
    b = spawn(tmp_path, *LADDER, "--widths", "8", "--seeds", "2,1,0", "--cache-dir", memo_dir, "--json", tmp_path / "b.json")
    (_, err_a), (_, err_b) = a.communicate(timeout=WAIT_S), b.communicate(timeout=WAIT_S)
    assert (a.returncode, b.returncode) == (0, 0), (err_a, err_b)
    for err in (err_a, err_b):
        assert "Traceback" not in err and "corrupt" not in err and "error" not in err
    runs_a, runs_b = runs_of(tmp_path / "a.json"), runs_of(tmp_path / "b.json")
    assert len(runs_a) == 3 and runs_a == runs_b
    assert all(reference[k] == v for k, v in runs_a.items())  # and both match a run in this process
    assert len(assert_memo_sound(memo_dir)) == 3


# --------------------------------------------------------------------------- 4. trust


class _Payload:
    """Unpickling this runs ``exec``: what an attacker would plant."""

    def __init__(self, flag: Path):
        self.flag = flag

    def __reduce__(self):
        return (exec, (f"open({str(self.flag)!r}, 'w').write('pwned')",))


def test_memo_created_private(tmp_path, capsys):
    memo_dir = tmp_path / "deeper" / "memo"
    code, _, err = run(capsys, "cache", "info", "--cache-dir", memo_dir)
    assert code == 0, err
    assert stat.S_IMODE(memo_dir.stat().st_mode) == 0o700


def test_planted_pickle_under_a_real_run_key_never_executes(reference, tmp_path, capsys):
    memo_dir, flag = tmp_path / "memo", tmp_path / "pwned"
    (cfg,) = cell_configs(memo_dir, "yat-frozen", (8,), (0,))
    plain = diskcache.Cache(str(memo_dir))  # a writer that pickles, as an attacker would
    plain.set(cfg.key(), _Payload(flag))
    plain.close()
    out_json = tmp_path / "r.json"
    code, out, err = run(capsys, *LADDER, "--widths", "8", "--seeds", "0", "--cache-dir", memo_dir, "--json", out_json)
    assert code == 0, err
    assert not flag.exists()
    assert f"memo entry {cfg.key()} is corrupt (pickled value refused); recomputing" in lines(err)
    assert "runs: 1 computed, 0 from the memo" in out
    assert runs_of(out_json)[cfg.key()] == reference[cfg.key()]


def test_nothing_is_unpickled_on_the_ladder_path(reference, tmp_path, capsys, monkeypatch):
    """Compute and re-read a ladder with every pickle loader booby-trapped; and no loader is ever asked to unpickle."""
    import pickle

    def trap(*args, **kwargs):
        raise AssertionError("something tried to unpickle")

    monkeypatch.setattr(pickle, "load", trap)
    monkeypatch.setattr(pickle, "loads", trap)
    monkeypatch.setattr(pickle, "Unpickler", trap)
    argv = [*LADDER, "--widths", "8", "--seeds", "0,1", "--cache-dir", tmp_path / "memo"]
    assert run(capsys, *argv)[0] == 0
    code, out, _ = run(capsys, *argv)
    assert code == 0 and "runs: 0 computed, 2 from the memo" in out
    package = Path(__file__).resolve().parents[1] / "lazylab"
    sources = "\n".join(p.read_text() for p in package.rglob("*.py"))
    assert "allow_pickle=True" not in sources
    assert not re.search(r"^\s*(import pickle|from pickle import)", sources, re.M)


# --------------------------------------------------------------------------- 5. divergence


def test_diverging_rate_is_recorded_and_shown(tmp_path, capsys):
    out_json = tmp_path / "d.json"
    code, out, err = run(capsys, "ladder", "--arms", "gaussian-trained", "--widths", "8", "--seeds", "0", "--epochs", "2",
                         "--train-size", "2048", "--lr", "1e3", "--no-figures", "--cache-dir", tmp_path / "memo",
                         "--json", out_json)
    assert code == 0, err
    row = next(line for line in out.splitlines() if "gaussian-trained" in line)
    assert "diverged" in row
    (record,) = json.loads(out_json.read_text())["runs"]
    div = record["diverged"]
    assert set(div) == {"epoch", "step", "loss"}
    assert div["epoch"] >= 1 and div["step"] >= 0 and not math.isfinite(float(div["loss"]))
    assert record["best_acc"] is None and record["final_acc"] is None


def test_choose_rate_never_picks_a_diverged_run():
    from lazylab.experiments.ladder import choose_rate

    assert choose_rate({1e3: None, 1e-2: 80.0, 3e-2: 79.5}) == 1e-2
    assert choose_rate({1e3: None, 1e-2: None}) is None
    assert choose_rate({3e-2: 70.0, 1e-2: 70.0}) == 3e-2  # ties go to the first


def test_bracketing_skips_a_diverging_rate_and_table_says_diverged(tmp_path):
    """The real bracket (m = 256, seed 0) over a grid holding a rate that blows gaussian-trained up."""
    from rich.console import Console

    from lazylab.arms import get_arm
    from lazylab.cli.output import ladder_table
    from lazylab.experiments import Workspace
    from lazylab.experiments.ladder import LadderPlan, run_ladder

    base = get_arm("gaussian-trained")

    def with_grid(*rates):
        return dataclasses.replace(base, unit=dataclasses.replace(base.unit, lr_grids={"trained": rates}))

    ws = Workspace(None, tmp_path / "memo")
    plan = LadderPlan(arms=(with_grid(1e3, 1e-2),), widths=(8,), seeds=(0,), epochs=1, train_size=2048,
                      bracket="argmax")  # SPEC section 5 as published: one seed, the grid as given
    (summary,) = run_ladder(ws, plan).arms
    assert summary.bracket["1000.0"] is None and summary.bracket["0.01"] is not None
    assert summary.lr == 1e-2

    result = run_ladder(ws, dataclasses.replace(plan, arms=(with_grid(1e3),)))  # every rate diverges
    assert result.arms[0].lr is None and result.arms[0].cells == {}
    assert all(r["diverged"] is not None for r in result.runs)
    console = Console(record=True, width=120)
    console.print(ladder_table(result))
    row = next(line for line in console.export_text().splitlines() if "gaussian-trained" in line)
    assert row.count("diverged") == 2  # the width's cell and the rate column


# --------------------------------------------------------------------------- 6. bad data through the CLI


def _idx(array: np.ndarray, magic: int) -> bytes:
    return gzip.compress(struct.pack(f">i{array.ndim}i", magic, *array.shape) + array.tobytes(), compresslevel=1)


def _labels() -> np.ndarray:
    return data.read_idx(data.DEBIAN_DIR / "t10k-labels-idx1-ubyte.gz", data.LABELS_MAGIC)


DEFECTS = {
    # name: (file replaced or removed, how to make its bytes (None: remove it), words the error must contain)
    "truncated-gzip": ("t10k-images-idx3-ubyte.gz",
                       lambda: (data.DEBIAN_DIR / "t10k-images-idx3-ubyte.gz").read_bytes()[:100_000],
                       ("truncated or corrupt gzip",)),
    "wrong-magic": ("t10k-labels-idx1-ubyte.gz", lambda: _idx(_labels(), data.IMAGES_MAGIC),
                    ("wrong IDX magic number 2051", "expected 2049")),
    "count-mismatch": ("t10k-labels-idx1-ubyte.gz", lambda: _idx(_labels()[:9999], data.LABELS_MAGIC),
                       ("10000 images", "9999 labels")),
    "missing-file": ("t10k-labels-idx1-ubyte.gz", None, ("lacks",)),
    "zero-images": ("train-images-idx3-ubyte.gz", lambda: _idx(np.zeros((0, 28, 28), np.uint8), data.IMAGES_MAGIC),
                    ("the header says 0 images",)),
}


@pytest.fixture(scope="module")
def bad_data(tmp_path_factory):
    """One data directory per defect: symlinks to the real files, one file damaged or gone."""
    dirs = {}
    for name, (target, make, _) in DEFECTS.items():
        d = tmp_path_factory.mktemp(name)
        for f in data.FILES.values():
            if f != target:
                (d / f).symlink_to(data.DEBIAN_DIR / f)
            elif make is not None:
                (d / f).write_bytes(make())
        dirs[name] = d
    return dirs


@pytest.mark.parametrize("command", ["ladder", "data-info"])
@pytest.mark.parametrize("defect", list(DEFECTS))
def test_bad_data_is_one_line_naming_file_and_problem(defect, command, bad_data, tmp_path, capsys):
    target, _, words = DEFECTS[defect]
    where = ["--data-dir", bad_data[defect], "--cache-dir", tmp_path / "memo"]
    if command == "ladder":
        argv = [*LADDER, "--widths", "8", "--seeds", "0", *where]
    else:
        argv = ["data", "info", *where]
    code, out, err = run(capsys, *argv)
    assert_one_line_error(code, err, target, *words)
    assert out.strip() == ""


@pytest.mark.parametrize("damage", ["flipped byte", "shifted labels"])
def test_damaged_parsed_data_copy_is_one_line_and_reparsed(damage, reference, tmp_path, capsys):
    """The memo's parsed .npy copy of the data is checked against its SHA-256 before any run uses it."""
    memo_dir = tmp_path / "memo"
    code, _, err = run(capsys, *LADDER, "--widths", "8", "--seeds", "0", "--cache-dir", memo_dir)
    assert code == 0, err
    (copy,) = (memo_dir / "data").iterdir()
    if damage == "flipped byte":
        target = copy / "train_images.npy"
        raw = bytearray(target.read_bytes())
        raw[len(raw) // 2] ^= 0x01
        target.write_bytes(bytes(raw))
    else:
        target = copy / "train_labels.npy"
        np.save(target, np.roll(np.load(target), 1))
    out_json = tmp_path / "r.json"
    code, out, err = run(capsys, *LADDER, "--widths", "8", "--seeds", "1,2", "--cache-dir", memo_dir, "--json", out_json)
    assert code == 0, err
    assert lines(err) == [f"parsed data copy {copy} is damaged ({target.stem}.npy do not match their SHA-256); "
                          "parsing the .gz files again"]
    runs = runs_of(out_json)
    assert "runs: 2 computed, 0 from the memo" in out and len(runs) == 2
    assert all(reference[k] == v for k, v in runs.items())  # the real data's numbers, not the damaged copy's
    code, _, err = run(capsys, *LADDER, "--widths", "16", "--seeds", "0", "--cache-dir", memo_dir)
    assert code == 0 and lines(err) == []  # the copy was rewritten whole (progress lines aside)


def test_swapped_compiled_programs_are_removed_and_compiled_again(reference, tmp_path, capsys):
    """jax loads a cache entry unchecked; one holding another program's executable is caught by its SHA-256."""
    import jax

    from lazylab import xla_cache

    folder = xla_cache.cache_dir()  # this session's cache (conftest): it holds the tiny ladder's programs
    xla_cache.record_entries(folder)  # what the end of the process that wrote them does
    entries = sorted(folder.glob("jit__epoch-*-cache"))  # the training epochs, of every shape compiled so far
    assert len(entries) >= 2
    blobs = [e.read_bytes() for e in entries]
    for entry, blob in zip(entries, blobs[1:] + blobs[:1]):  # each now holds another shape's program
        entry.write_bytes(blob)
    jax.clear_caches()  # so that this process loads its programs from the folder again, as a new one would
    code, out, err = run(capsys, *LADDER, "--widths", "8", "--seeds", "0", "--cache-dir", tmp_path / "memo",
                         "--json", tmp_path / "r.json")
    assert code == 0, err
    assert lines(err) == [f"note: {len(entries)} compiled programs in {folder} did not match the SHA-256 recorded "
                          "when they were stored; removed, compiled again and stored"]
    runs = runs_of(tmp_path / "r.json")
    assert len(runs) == 1 and all(reference[k] == v for k, v in runs.items())


def test_an_unwritable_home_adds_nothing_to_stderr(tmp_path):
    """matplotlib logs two warnings when it cannot make its folder under HOME, then works from a temporary one."""
    env = {**os.environ, "HOME": "/proc", "XDG_CONFIG_HOME": "", "XDG_CACHE_HOME": "", "MPLCONFIGDIR": "",
           "LAZYLAB_CACHE": str(tmp_path / "memo"), "LAZYLAB_XLA_CACHE": "0"}
    proc = subprocess.run([*CLI, "ntk", "scalar", "--out", tmp_path / "ntk"], env=env, capture_output=True, text=True,
                          timeout=WAIT_S)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert (tmp_path / "ntk" / "scalar.png").stat().st_size > 1000


# --------------------------------------------------------------------------- 7. disk


@pytest.mark.parametrize("option", ["--json", "--csv", "--out"])
def test_full_disk_on_an_output_file_is_one_line_and_leaves_no_temporary(option, tmpfs, reference, tmp_path, capsys):
    """A real ENOSPC on the results written after the runs: exit 2, one line, the runs kept, no .tmp left."""
    memo_dir = tmp_path / "memo"
    argv = [*LADDER, "--widths", "8", "--seeds", "0", "--cache-dir", memo_dir]
    outputs = {"--json": tmpfs / "r.json", "--csv": tmpfs / "r.csv", "--out": tmpfs / "figures"}
    if option == "--out":
        argv.remove("--no-figures")
        argv += ["--csv", tmp_path / "r.csv"]  # (its default is inside --out)
    else:
        argv += ["--out", tmp_path / "figures"]
    argv += [option, outputs[option]]
    (tmpfs / "figures").mkdir()
    with open(tmpfs / "filler", "wb") as f:  # fill the tmpfs: empty files still fit, their bytes do not
        with pytest.raises(OSError):
            while True:
                f.write(b"\0" * 65536)
                f.flush()
    code, _, err = run(capsys, *argv)
    assert_one_line_error(code, err, option, "No space left on device")
    assert not [p.name for p in tmpfs.rglob("*") if p.name.startswith(".")]  # no temporary left
    assert len(run_keys(memo_dir)) == 1  # the run itself was kept
    (tmpfs / "filler").unlink()
    code, out, err = run(capsys, *argv)
    assert code == 0 and "runs: 0 computed, 1 from the memo" in out, err


def test_full_disk_on_write_is_one_line_error_and_keeps_every_finished_run(reference, tmp_path, capsys):
    """RLIMIT_FSIZE makes every file the process writes stop at 100 kB: sqlite's log soon cannot grow."""
    memo_dir = tmp_path / "memo"
    Memo(memo_dir).close()  # an existing memo (its creation alone writes more than the limit)
    proc = spawn(tmp_path, *LADDER, "--widths", WIDTHS, "--seeds", SEEDS, "--cache-dir", memo_dir,
                 file_size_limit=100_000)
    _, err = proc.communicate(timeout=WAIT_S)
    assert_one_line_error(proc.returncode, err, "cannot write to the memo", str(memo_dir), "finished runs are kept")
    kept = assert_memo_sound(memo_dir)  # no partial entry
    assert 1 <= len(kept) < N_RUNS
    resume_and_compare(capsys, memo_dir, len(kept), reference, tmp_path)


def _mount(*args) -> bool:
    return shutil.which("mount") is not None and subprocess.run(["mount", *map(str, args)], capture_output=True).returncode == 0


def _umount(path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True)


@pytest.fixture
def tmpfs(tmp_path):
    """A 2 MiB tmpfs (needs mount rights: root with CAP_SYS_ADMIN; skipped elsewhere)."""
    where = tmp_path / "tmpfs"
    where.mkdir()
    if not _mount("-t", "tmpfs", "-o", "size=2m", "tmpfs", where):
        pytest.skip("cannot mount a tmpfs here (needs CAP_SYS_ADMIN)")
    yield where
    _umount(where)


def test_disk_filling_up_mid_ladder_is_one_line_error_and_keeps_every_finished_run(tmpfs, reference, tmp_path, capsys):
    """A real ENOSPC: once the first run is stored, the test fills the tmpfs the memo lives on."""
    memo_dir = tmpfs / "memo"
    proc = spawn(tmp_path, *LADDER, "--widths", WIDTHS, "--seeds", SEEDS, "--cache-dir", memo_dir)
    wait_for_first_run(proc, memo_dir)
    filler = tmpfs / "filler"
    with open(filler, "wb", buffering=0) as f:
        try:
            while f.write(b"\0" * 4096):
                pass
        except OSError:
            pass  # full
    assert os.statvfs(tmpfs).f_bavail == 0
    _, err = proc.communicate(timeout=WAIT_S)
    assert_one_line_error(proc.returncode, err, "cannot write to the memo", str(memo_dir), "full", "finished runs are kept")
    filler.unlink()
    kept = assert_memo_sound(memo_dir)
    assert 1 <= len(kept) < N_RUNS
    resume_and_compare(capsys, memo_dir, len(kept), reference, tmp_path)


@pytest.fixture
def read_only(tmp_path):
    """Make a directory read-only for this process: chmod for a normal user, a read-only bind mount for root."""
    made = []

    def make(path: Path) -> Path:
        if os.geteuid() != 0:
            path.chmod(0o500)
            made.append(("chmod", path))
        elif _mount("--bind", path, path) and _mount("-o", "remount,ro,bind", path):
            made.append(("mount", path))
        else:
            _umount(path)
            pytest.skip("root without mount rights: no honest way to make a directory read-only")
        return path

    yield make
    for how, path in reversed(made):
        if how == "chmod":
            path.chmod(0o700)
        else:
            _umount(path)


def test_read_only_memo_is_one_line_error(read_only, reference, tmp_path, capsys):
    parent = tmp_path / "ro"
    memo_dir = parent / "memo"
    code, _, _ = run(capsys, *LADDER, "--widths", "8", "--seeds", "0", "--cache-dir", memo_dir)
    assert code == 0
    read_only(parent)
    with pytest.raises(OSError):
        (parent / "probe").write_text("x")  # the directory really is read-only
    for target in (memo_dir, parent / "new-memo"):
        code, out, err = run(capsys, *LADDER, "--widths", "8", "--seeds", "0", "--cache-dir", target)
        assert_one_line_error(code, err, "cannot open the memo", str(target), "not writable")
        assert out.strip() == ""


# --------------------------------------------------------------------------- 9. determinism


def test_same_configuration_twice_gives_bit_identical_records(reference, tmp_path, capsys):
    code, _, err = run(capsys, *LADDER, "--widths", WIDTHS, "--seeds", SEEDS, "--cache-dir", tmp_path / "m1",
                       "--json", tmp_path / "frozen.json")
    assert code == 0, err
    assert runs_of(tmp_path / "frozen.json") == reference  # a fresh memo, the same bits
    trained = ["ladder", "--arms", "yat-trained", "--widths", "8", "--seeds", "0,1", "--epochs", "2",
               "--train-size", "2048", "--lr", "0.01", "--no-figures"]
    for name in ("t1", "t2"):
        code, _, err = run(capsys, *trained, "--cache-dir", tmp_path / name, "--json", tmp_path / f"{name}.json")
        assert code == 0, err
    first, second = runs_of(tmp_path / "t1.json"), runs_of(tmp_path / "t2.json")
    assert len(first) == 2 and first == second


# --------------------------------------------------------------------------- 8. no traceback, even for a bug


@pytest.mark.parametrize("exc, code, words", [
    (RuntimeError("boom\nsecond line"), 1, ("error: internal error: RuntimeError: boom second line",
                                            "set LAZYLAB_DEBUG=1 for the traceback")),
    (MemoryError(), 2, ("error: out of memory", "--widths")),
])
def test_unexpected_exception_is_one_line_and_debug_shows_it(exc, code, words, capsys, monkeypatch, tmp_path):
    """A bug still ends in one line, with status 1 so that tests and scripts notice; LAZYLAB_DEBUG re-raises."""
    import lazylab.cache

    def broken(*args, **kwargs):
        raise exc

    monkeypatch.setattr(lazylab.cache, "Memo", broken)
    got, out, err = run(capsys, "cache", "info", "--cache-dir", tmp_path / "memo")
    assert got == code
    assert "Traceback" not in err and len(lines(err)) == 1, err
    for w in words:
        assert w in err
    monkeypatch.setenv("LAZYLAB_DEBUG", "1")
    with pytest.raises(type(exc)):
        main(["cache", "info", "--cache-dir", str(tmp_path / "memo")])


def test_declined_confirmation_is_not_an_interrupt(capsys, tmp_path, monkeypatch):
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))
    code, _, err = run(capsys, "cache", "clear", "--cache-dir", tmp_path / "memo")
    assert code == 1 and lines(err)[-1] == "aborted: nothing was changed"


def test_an_interrupt_turned_into_another_error_by_native_code_still_exits_130(capsys, monkeypatch):
    """A ^C inside numpy/jax C code can surface as SystemError ("returned a result with an
    exception set"); once the SIGINT handler has run, that is an interrupt, not a bug."""
    from lazylab import cli
    from lazylab.cli import progress

    def interrupted_in_native_code(*args, **kwargs):
        try:
            progress.on_sigint(signal.SIGINT, None)
        except KeyboardInterrupt as exc:
            raise SystemError("<function __numpy_dtype__> returned a result with an exception set") from exc

    monkeypatch.setattr(cli.cli, "main", interrupted_in_native_code)
    code, _, err = run(capsys, "arms")
    assert code == 130 and err.startswith("interrupted:"), err

    def plain_bug(*args, **kwargs):
        raise SystemError("a bug")

    monkeypatch.setattr(cli.cli, "main", plain_bug)
    code, _, err = run(capsys, "arms")  # main resets the flag: a later bug is still a bug
    assert code == 1 and "internal error: SystemError: a bug" in err, err
