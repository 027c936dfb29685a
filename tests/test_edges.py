"""The smaller edges of issue 51: each field report, and what now holds instead."""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from cli_helpers import assert_one_line_error, lines, run, write_idx_dir
from lazylab import calibration
from lazylab.cache import Memo, parse_size
from lazylab.config import code_identity

LADDER = ["ladder", "--arms", "yat-frozen", "--widths", "8", "--seeds", "0", "--epochs", "1", "--train-size", "2048",
          "--lr", "0.1", "--no-figures"]


def test_a_bloated_calibration_is_removed_and_measured_again(tmp_path, monkeypatch, capsys):
    """A valid calibration padded with 10 million keys was read by every command (a memoised ladder 3.3 s -> 26 s)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home"))
    good = dataclasses.replace(calibration.REFERENCE, code=code_identity(), cores=os.cpu_count() or 1,
                               measured_at="kept")
    path = calibration.save(good)
    doc = {**dataclasses.asdict(good), **{f"pad{i}": i for i in range(20_000)}}
    path.write_text(json.dumps(doc))
    assert path.stat().st_size > calibration.MAX_BYTES
    measured = dataclasses.replace(good, measured_at="measured again")
    monkeypatch.setattr(calibration, "measure", lambda: measured)
    assert calibration.calibration() == measured
    err = capsys.readouterr().err
    assert f"bytes, more than the {calibration.MAX_BYTES} this reader accepts; removed, measuring" in err
    assert not path.with_name(path.name + ".bad").exists()  # not kept: it would hold the disk for nothing
    assert calibration.read(path) == measured and path.stat().st_size < 1024  # rebuilt small


def test_an_interrupt_in_a_garbage_collector_callback_is_not_printed():
    """jax's gc callback met the Ctrl-C: Python printed "Exception ignored in ... KeyboardInterrupt" (6 of 17)."""
    from lazylab.cli import progress

    seen = []
    hook = progress.quiet_interrupts(seen.append)

    class Unraisable:
        def __init__(self, exc):
            self.exc_value = exc

    hook(Unraisable(KeyboardInterrupt()))
    hook(Unraisable(ValueError("a real one")))
    assert [type(u.exc_value) for u in seen] == [ValueError]


def test_a_ctrl_c_during_an_import_is_delivered_once_the_import_is_over(tmp_path, monkeypatch):
    """A Ctrl-C while jaxlib's native modules initialised (0.7 s into a ladder) raised KeyboardInterrupt inside
    their initialisation: the process died of SIGSEGV or SIGABRT and said nothing. The module here interrupts
    itself half-way through its import; the import finishes, and the interrupt comes right after."""
    import importlib

    from lazylab.cli import progress

    (tmp_path / "lazylab_interrupted_import.py").write_text(
        "import os, signal, time\n"
        "os.kill(os.getpid(), signal.SIGINT)\n"
        "time.sleep(0.3)  # the handler runs here, inside the import\n"
        "FINISHED = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(progress, "interrupted", False)
    imported = []
    previous = signal.signal(signal.SIGINT, progress.on_sigint)
    try:
        with pytest.raises(KeyboardInterrupt):
            module = importlib.import_module("lazylab_interrupted_import")
            imported.append(module.FINISHED and progress.interrupted)  # whole, the interrupt remembered
            time.sleep(5)  # delivered again meanwhile
        assert imported == [True], "interrupted inside the import"
    finally:
        signal.signal(signal.SIGINT, previous)
        sys.modules.pop("lazylab_interrupted_import", None)


@pytest.mark.slow  # starts the console script five times
def test_a_ctrl_c_in_the_first_seconds_is_one_quiet_line(tmp_path):
    env = {**os.environ, "LAZYLAB_CACHE": str(tmp_path / "memo")}
    script = Path(sys.executable).with_name("lazylab")
    for delay in (0.3, 0.8, 1.5, 2.5, 4.0):
        proc = subprocess.Popen([str(script), *LADDER], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True)
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=300)
        assert proc.returncode in (130, 0), (delay, proc.returncode, err)
        assert "Traceback" not in err and "Exception ignored" not in err, (delay, err)
        if proc.returncode == 130:
            assert lines(err)[-1].startswith("interrupted: "), (delay, err)


def test_a_warning_is_formatted_with_its_control_characters_escaped():
    """matplotlib's warning about a glyph an arm name lacks carried the raw escape bytes (every printer of a Python
    warning formats it with ``warnings.formatwarning``, which ``lazylab.cli.main`` sets)."""
    from lazylab.cli.output import escape_warnings

    plain = warnings.formatwarning
    try:
        escape_warnings()
        escape_warnings()  # once
        text = warnings.formatwarning("Glyph 27 (\x1b[2J) missing from font(s) DejaVu Sans, \u202e", UserWarning,
                                      "figures.py", 7)
    finally:
        warnings.formatwarning = plain
    assert text == "figures.py:7: UserWarning: Glyph 27 (\\x1b[2J) missing from font(s) DejaVu Sans, \\u202e\n"


def test_a_unit_name_is_bounded_in_length():
    """A 100,000-character arm name took 102 s and wrote an 8 MB SVG."""
    from lazylab.arms import ContractError, Unit, UNIT_NAME_MAX, _check_contract
    from lazylab.arms.relu import ReluBank

    longest = "a" * UNIT_NAME_MAX
    assert _check_contract(Unit(name=longest, bank=ReluBank), longest).name == longest
    with pytest.raises(ContractError, match=f"at most {UNIT_NAME_MAX} characters"):
        _check_contract(Unit(name=longest + "a", bank=ReluBank), longest + "a")


def test_a_100000_character_arm_name_is_refused_at_once_in_one_short_line(capsys, memo_dir):
    """It was refused after the memo's listing was read, in a 100 kB line that echoed the whole name."""
    from lazylab.arms import ARM_NAME_MAX, get_arm
    from lazylab.errors import LazylabError

    assert ARM_NAME_MAX == len("a" * 64 + "-random-trained")  # the longest a unit can make
    name = "a" * 100_000 + "-frozen"
    start = time.perf_counter()
    code, out, err = run(capsys, "ladder", "--arms", f"yat-frozen,{name}", "--widths", "8", "--dry-run")
    assert time.perf_counter() - start < 10
    line = assert_one_line_error(code, err, f"unknown arm {'a' * 40 + '...'!r}: 100,007 characters, longer than any "
                                            f"arm name (at most {ARM_NAME_MAX}")
    assert len(line) < 300 and out == "", line
    with pytest.raises(LazylabError, match="100,007 characters"):
        get_arm(name)  # the API's lookup too


def test_a_feature_write_tries_again_when_another_process_removes_its_folder(tmp_path, monkeypatch):
    """8 processes sharing a memo lost 13 and 6 of 3,600 feature writes, with a stray "No such file or directory"."""
    from lazylab import memo_disk

    memo = Memo(tmp_path / "m")
    arrays = {"train": np.arange(12, dtype=np.float32).reshape(3, 4), "test": np.ones((2, 4), np.float32)}
    removed = []

    def racing_open(path, mode="r", *a, **kw):
        if mode == "xb" and len(removed) < 3:  # the folder made for it is removed by another process, three times
            os.rmdir(os.path.dirname(path))
            removed.append(path)
        return open(path, mode, *a, **kw)

    monkeypatch.setattr(memo_disk, "open", racing_open, raising=False)
    assert memo.put_features("k", arrays) is True and len(removed) == 3
    assert memo.problems == []
    monkeypatch.undo()
    got = memo.get_features("k")
    assert all(np.array_equal(got[k], arrays[k]) for k in arrays)


def test_ntk_arm_is_priced_from_its_kernels():
    """``ntk arm --dry-run`` priced 8.4 s for a run of 37 min: only its training was priced."""
    from lazylab.cli.plan import ANNOUNCE_S
    from lazylab.ntk.price import ntk_kernel_s

    small, double = (ntk_kernel_s("structured", n, 1024, 784, True, 2**28) for n in (128, 256))
    assert double == pytest.approx(4 * small)  # N^2
    assert ntk_kernel_s("rows", 512, 1024, 784, True, 2**28) > ANNOUNCE_S  # the question over 10 minutes comes
    assert ntk_kernel_s("jacobian", 64, 64, 784, True, 2**28) == pytest.approx(6e-11 * 640**2 * (64 * 795 + 10))


@pytest.mark.slow  # loads the data and prices the plan
def test_ntk_arm_dry_run_prices_a_long_run_over_ten_minutes(capsys, memo_dir):
    from lazylab.cli.plan import ANNOUNCE_S

    code, out, err = run(capsys, "ntk", "arm", "--arm", "relu-trained", "--width", "1024", "--probe", "512",
                         "--method", "rows", "--dry-run", "--json", "-")
    assert code == 0, err
    assert json.loads(out)["seconds"] > ANNOUNCE_S


@pytest.mark.parametrize("argv", [
    ["ladder", "--arms", "yat-data-frozen", "--widths", "4096", "--seeds", "0", "--train-size", "2048", "--lr", "0.1"],
    ["trajectory", "--arms", "yat-data-trained", "--width", "512", "--train-size", "256", "--lr", "0.01"],
])
def test_a_dry_run_refuses_what_the_run_refuses(argv, capsys, memo_dir):
    """``ladder --dry-run`` planned a data-seeded width above the training set that the run then refused."""
    for extra in (["--dry-run"], []):
        code, out, err = run(capsys, *argv, *extra)
        assert_one_line_error(code, err, "exceeds the", "training images available for data seeding")


def test_a_training_set_too_small_names_the_option_and_the_data(tmp_path, capsys, memo_dir):
    """``train_size=256 ... must be between 1 and 3`` named an internal parameter."""
    folder = write_idx_dir(tmp_path / "small")
    code, _, err = run(capsys, "ladder", "--arms", "yat-frozen", "--widths", "8", "--seeds", "0", "--epochs", "1",
                       "--train-size", "256", "--lr", "0.1", "--no-figures", "--data-dir", folder)
    assert_one_line_error(code, err, f"train_size (--train-size) 256 is out of range: the data in {folder} holds 12 "
                                     "training images")


def test_gunzipped_idx_files_are_named_in_the_error(tmp_path, capsys):
    folder = write_idx_dir(tmp_path / "raw")
    for gz in folder.glob("*.gz"):
        gz.with_suffix("").write_bytes(gzip.decompress(gz.read_bytes()))
        gz.unlink()
    code, _, err = run(capsys, "data", "info", "--data-dir", folder)
    assert_one_line_error(code, err, "holds train-images-idx3-ubyte uncompressed, not train-images-idx3-ubyte.gz",
                          "gzip -k")


@pytest.mark.parametrize("text, size", [("0.5", None), ("3.0", None), ("2.5b", None), ("0.0001KiB", None),
                                        ("0.5GiB", 2**29), ("12", 12), ("0", 0), ("1.5kB", 1500)])
def test_a_cache_limit_is_a_unit_or_a_whole_number_of_bytes(text, size, capsys, memo_dir):
    """``--cache-limit 0.5`` silently meant 0 bytes."""
    if size is not None:
        assert parse_size(text) == size
        return
    with pytest.raises(ValueError):
        parse_size(text)
    code, _, err = run(capsys, *LADDER, "--cache-limit", text, "--dry-run")
    assert_one_line_error(code, err, "--cache-limit")


@pytest.mark.slow  # two integrations of the scalar model
def test_ntk_scalar_checks_its_start_at_t_0_whatever_times_it_reports(capsys, tmp_path):
    """``ntk scalar --times 2,5`` compared the first reported time, failed its own check (0.307) and exited 1."""
    checks = {}
    for times in ("2,5", "0,2,5"):
        code, out, err = run(capsys, "ntk", "scalar", "--times", times, "--out", tmp_path, "--json", "-")
        assert code == 0, err
        checks[times] = {c["name"]: c for c in json.loads(out)["checks"]}
    for name in ("matched start |f_lin(0) - f(0)|", "control 1, offset start: matched start |f_lin(0) - f(0)|"):
        assert checks["2,5"][name] == checks["0,2,5"][name]
    assert all(c["ok"] for c in checks["2,5"].values())


@pytest.mark.parametrize("value", [1e308, -1e308])
def test_a_payload_number_near_the_float_limit_is_one_line_not_an_overflow(value):
    """A ladder file's 1e308 passed the schema and printed numpy's overflow warnings where the report averaged it."""
    import copy

    from lazylab.errors import LazylabError
    from lazylab.reference import load_reference
    from lazylab.schemas.ladder import check_ladder_payload

    payload = copy.deepcopy(load_reference()["payload"])
    check_ladder_payload(payload, "--from F")
    payload["runs"][0]["train_loss"][0] = value
    with pytest.raises(LazylabError, match=r"^--from F: field runs\[0\]\.train_loss\[0\]: Input should be"):
        check_ladder_payload(payload, "--from F")
