"""The caches lazylab reads back (issue 32): the calibration, memo rows and records, data-copy and feature metadata.

A cache that is bad is never an error: it is set aside or deleted, computed again, and said in
one line. The regression tests are the two cases found from outside (a calibration field that is
a string, null, NaN, Infinity or negative; a memo row in file mode with no file name) and
``lazylab cache check``; the property tests mutate valid files of each kind (wrong types,
non-finite and huge numbers, missing and extra fields, nesting, truncation) and require exit 0
with the right result, or exit 2 with one line; never exit 1, never a hang (each case under
``signal.alarm``), never an entry under a key the command line could not produce.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cli_helpers import fuzz, lines, mutated, no_hang, run, write_idx_dir
from lazylab import calibration as C
from lazylab import data
from lazylab.cache import Memo, _SealedReader, _seal
from lazylab.config import code_identity

pytestmark = pytest.mark.skipif(
    not all((data.DEBIAN_DIR / n).is_file() for n in data.FILES.values()),
    reason="Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)",
)

# Two runs of yat-frozen at m = 8 (seeds 0 and 1), one epoch on 2,048 real images: seconds.
TINY = ["ladder", "--arms", "yat-frozen", "--epochs", "1", "--train-size", "2048", "--lr", "0.1", "--no-figures",
        "--cache-limit", "0", "--widths", "8", "--seeds", "0,1"]
# What the test's stand-in measurement gives: distinct from the calibration the suite keeps (conftest).
MEASURED = dataclasses.replace(C.REFERENCE, code=code_identity(), cores=os.cpu_count() or 1, step_a=3e-4,
                               measured_at="measured by the test")
CASE_S = 300  # bound on one case of a property test: far above any on a loaded 2-core machine; a hang never ends


def runs_by_key(doc: dict) -> dict[str, str]:
    """A ladder JSON's run records by key, as canonical text without the wall time (``seconds``)."""
    return {r["key"]: json.dumps({k: v for k, v in r.items() if k != "seconds"}, sort_keys=True)
            for r in doc["runs"]}


def memo_rows(memo_dir: Path, where: str = "1") -> list[tuple]:
    """``(rowid, key, mode, filename)`` of the memo's main store, read with sqlite."""
    con = sqlite3.connect(memo_dir / "cache.db")
    try:
        return con.execute(f"SELECT rowid, key, mode, filename FROM Cache WHERE {where} ORDER BY rowid").fetchall()
    finally:
        con.close()


def sql(memo_dir: Path, statement: str, *params) -> None:
    con = sqlite3.connect(memo_dir / "cache.db")
    with con:
        con.execute(statement, params)
    con.close()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> tuple[Path, dict]:
    """The tiny ladder run once on a fresh memo: (its memo folder, its ladder JSON). Tests copy the memo."""
    d = tmp_path_factory.mktemp("tiny")
    with pytest.raises(SystemExit) as exc:
        from lazylab.cli import main

        main([*TINY, "--cache-dir", str(d / "memo"), "--json", str(d / "r.json")])
    assert exc.value.code == 0
    doc = json.loads((d / "r.json").read_text())
    assert len(doc["runs"]) == 2 and all(r["best_acc"] > 10 for r in doc["runs"])  # above chance: real training
    return d / "memo", doc


def copy_memo(tiny, dest: Path) -> Path:
    shutil.copytree(tiny[0], dest, symlinks=True)
    return dest


# --------------------------------------------------------------------------- calibration


@pytest.fixture
def cal_home(tmp_path, monkeypatch):
    """A cache home for the calibration, with ``measure`` replaced by a stand-in that counts its calls."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("LAZYLAB_RECALIBRATE", raising=False)
    calls = []
    monkeypatch.setattr(C, "measure", lambda: calls.append(1) or MEASURED)
    good = dataclasses.replace(C.REFERENCE, code=code_identity(), cores=os.cpu_count() or 1, measured_at="kept")
    path = C.save(good)
    return path, good, calls


@pytest.mark.parametrize("field, value", [("step_a", "fast"), ("compile_s", None), ("head_b", math.nan),
                                          ("feature_s", math.inf), ("step_a", -1.0), ("cores", 2.5),
                                          # within the first bounds, yet an estimate of 42,000 h; a forged line
                                          ("step_b", 60.0), ("measured_at", "2026\nFAKE LINE \x1b[31m")])
def test_a_bad_calibration_field_is_set_aside_and_measured_again(cal_home, tmp_path, capsys, field, value):
    """Issue 32: such a field made every --dry-run exit 1 and was never measured again; a negative one
    printed negative estimates. Now: exit 0, one note naming the file and the field, the file set
    aside as calibration.json.bad, this machine measured (here: a stand-in) and the estimate from it."""
    path, good, calls = cal_home
    text = json.dumps({**dataclasses.asdict(good), field: value})  # NaN and Infinity as JSON writes them
    path.write_text(text)
    code, out, err = run(capsys, *TINY, "--cache-dir", tmp_path / "memo", "--dry-run", "--json", "-")
    assert code == 0, err
    notes = [line for line in lines(err) if line.startswith("note:")]
    assert len(notes) == 1 and str(path) in notes[0] and f"field {field}" in notes[0], err
    assert f"set aside as {path}.bad" in notes[0]
    assert [line for line in lines(err) if not line.startswith(("note:", "measuring this machine once"))] == []
    assert (path.parent / "calibration.json.bad").read_text() == text
    assert calls == [1] and C.read(path) == MEASURED  # measured once and kept
    est = json.loads(out)
    assert est["calibration"]["measured_at"] == "measured by the test"
    assert est["seconds"] > 0 and all(r["seconds"] >= 0 for r in est["runs"])
    # Healed: the next dry run reads the new file, says nothing and measures nothing.
    code, out, err = run(capsys, *TINY, "--cache-dir", tmp_path / "memo", "--dry-run", "--json", "-")
    assert code == 0 and lines(err) == [] and calls == [1]


def test_a_bad_calibration_stands_in_as_the_reference_where_nothing_may_be_measured(cal_home, capsys):
    """A command that computes estimates only with what it has (``measure_now=False``): the bad file is
    treated as a missing one (the reference's figures), left in place, nothing said or measured."""
    path, good, calls = cal_home
    path.write_text(json.dumps({**dataclasses.asdict(good), "step_b": "Infinity"}))
    assert C.calibration(measure_now=False) is C.REFERENCE
    assert calls == [] and path.is_file() and capsys.readouterr().err == ""
    os.unlink(path)
    os.mkfifo(path)  # a FIFO read without care waits for a writer forever
    with no_hang(20):
        assert C.calibration(measure_now=False) is C.REFERENCE
        assert C.calibration() == MEASURED
    assert calls == [1] and "is a FIFO" in capsys.readouterr().err
    assert C.read(path) == MEASURED


@pytest.mark.slow  # the tiny ladder trains
def test_a_ladder_with_work_runs_when_the_calibration_is_bad(tiny, cal_home, tmp_path, capsys):
    """Issue 32: every ladder with runs to compute exited 1 on such a file. It estimates with the
    reference's figures instead (nothing is measured mid-command) and computes the same runs."""
    path, good, calls = cal_home
    path.write_text(json.dumps({**dataclasses.asdict(good), "step_a": None}))
    memo = copy_memo(tiny, tmp_path / "memo")
    sql(memo, "DELETE FROM Cache WHERE rowid = (SELECT min(rowid) FROM Cache WHERE key LIKE 'run-%')")
    code, out, err = run(capsys, *TINY, "--cache-dir", memo, "--json", tmp_path / "r.json")
    assert code == 0 and lines(err) == [] and calls == [], err
    assert "runs: 1 computed, 1 from the memo" in out
    assert runs_by_key(json.loads((tmp_path / "r.json").read_text())) == runs_by_key(tiny[1])


@given(case=mutated(dataclasses.asdict(dataclasses.replace(
    C.REFERENCE, code=code_identity(), cores=os.cpu_count() or 1, measured_at="kept"))))
@fuzz(30)
def test_property_any_calibration_file_gives_a_dry_run_from_it_or_from_a_new_measurement(
        case, cal_home, tmp_path, capsys):
    from lazylab.schemas.caches import CalibrationDoc

    how, raw = case
    path, good, calls = cal_home
    path.write_bytes(raw)
    calls.clear()
    try:
        sound = CalibrationDoc.model_validate(json.loads(raw)).model_dump()
    except (ValueError, RecursionError):  # pydantic's ValidationError is a ValueError
        sound = None
    with no_hang(CASE_S):
        code, out, err = run(capsys, *TINY, "--cache-dir", tmp_path / "memo", "--dry-run", "--json", "-")
    assert code == 0, (how, err)
    notes = [line for line in lines(err) if line.startswith("note:")]
    est = json.loads(out)
    if sound is not None:  # a file its schema accepts: used, or (another machine's) measured again silently
        assert notes == [], (how, err)
        here = (sound["code"], sound["version"], sound["cores"]) == (code_identity(), C.CALIBRATION_VERSION,
                                                                    os.cpu_count())
        assert est["calibration"]["measured_at"] == (sound["measured_at"] if here else "measured by the test")
    else:  # set aside (removed when over the reader's bound), measured, kept
        assert len(notes) == 1 and str(path) in notes[0], (how, err)
        if len(raw) > C.MAX_BYTES:
            assert "; removed, measuring" in notes[0], (how, err)
        else:
            assert (path.parent / "calibration.json.bad").read_bytes() == raw
        assert calls == [1] and C.read(path) == MEASURED
    assert all(math.isfinite(r["seconds"]) and r["seconds"] >= 0 for r in est["runs"])


# --------------------------------------------------------------------------- memo rows


@pytest.mark.slow  # the tiny ladder trains
def test_a_file_mode_row_without_its_file_is_one_corrupt_line_in_runs_and_the_ladder(tiny, tmp_path, capsys):
    """Issue 32: ``update Cache set mode=2 where rowid=1`` made ``runs`` and ``ladder`` exit 1 (TypeError).
    Now each says so in one line, deletes the row, and the ladder computes that run again, identically."""
    first = memo_rows(tiny[0], "key LIKE 'run-%'")[0]
    memo = copy_memo(tiny, tmp_path / "memo")
    sql(memo, "UPDATE Cache SET mode = 2 WHERE rowid = ?", first[0])
    code, out, err = run(capsys, "runs", "--cache-dir", memo, "--json", "-")
    assert code == 0, err
    assert lines(err) == [f"memo entry {first[1]} is corrupt (a row in file mode 2 whose file name is None, not a "
                          "value file's); recomputing"]
    listed = json.loads(out)["runs"]
    assert [r["key"] for r in listed if r["kind"] == "run"] == [k for k in runs_by_key(tiny[1]) if k != first[1]]
    assert first[1] not in [row[1] for row in memo_rows(memo)]  # deleted

    memo = copy_memo(tiny, tmp_path / "memo2")
    sql(memo, "UPDATE Cache SET mode = 2 WHERE rowid = ?", first[0])
    code, out, err = run(capsys, *TINY, "--cache-dir", memo, "--json", tmp_path / "r.json")
    assert code == 0, err
    assert lines(err) == [f"memo entry {first[1]} is corrupt (a row in file mode 2 whose file name is None, not a "
                          "value file's); recomputing"]
    assert "runs: 1 computed, 1 from the memo" in out
    assert runs_by_key(json.loads((tmp_path / "r.json").read_text())) == runs_by_key(tiny[1])


def plant_bad_rows(memo_dir: Path, good_run: dict) -> dict[str, str]:
    """Rows no reader can use, each of another kind, beside the good ones: ``{key: what is wrong}``."""
    memo = Memo(memo_dir)
    planted = {}

    def row(key, payload=b'{"x": 1}'):
        memo._put(key, payload)
        planted[key] = ""
        return key

    sql_rows = {
        "plant-file-mode": "UPDATE Cache SET mode = 2 WHERE key = ?",
        "plant-pickle": "UPDATE Cache SET mode = 4 WHERE key = ?",
        "plant-mode-9": "UPDATE Cache SET mode = 9 WHERE key = ?",
        "plant-outside": "UPDATE Cache SET mode = 2, value = NULL, filename = '../../etc/passwd' WHERE key = ?",
        "plant-int-value": "UPDATE Cache SET value = 42 WHERE key = ?",
    }
    for key in sql_rows:
        row(key)
    memo._cache.set("plant-seal", b"0" * 64 + b'\n{"x": 1}')  # a payload under another payload's seal
    planted["plant-seal"] = ""
    row("plant-not-json", b"{not json")
    row("plant-not-object", b"[1, 2]")
    row("plant-deep", b"[" * 100_000 + b"]" * 100_000)
    row("plant-npz", b"PK\x03\x04 not a zip")
    # A run record that breaks its schema, under a key a run could have: best_acc as text.
    row("run-" + "f" * 32, json.dumps({**good_run, "best_acc": "85.2"}).encode())
    row("run-" + "e" * 32, json.dumps({**good_run, "config": {**good_run["config"], "seed": 2**32}}).encode())
    # A value kept in a file (over 32 kB) whose file is replaced by a FIFO.
    row("plant-fifo", json.dumps({"pad": "x" * 40_000}).encode())
    # The feature store: a good entry and one whose sealed header is not a header.
    memo.put_features("feat-good", {"a": np.arange(12, dtype=np.float32).reshape(3, 4)})
    memo._feature_store(create=True).set("feat-bad", _SealedReader([memoryview(b'{"arrays": 5}\n')], "feat-bad"), read=True)
    memo.close()
    for key, statement in sql_rows.items():
        sql(memo_dir, statement, key)
    fifo = next(r[3] for r in memo_rows(memo_dir) if r[1] == "plant-fifo")
    os.unlink(memo_dir / fifo)
    os.mkfifo(memo_dir / fifo)
    sql(memo_dir, "UPDATE Cache SET key = 7 WHERE key = 'plant-int-value'")  # and a key that is not text
    planted[7] = planted.pop("plant-int-value")
    return {**planted, "feat-bad": ""}


@pytest.mark.slow  # the tiny ladder trains
def test_cache_check_removes_exactly_the_unreadable_rows_and_keeps_the_good_ones(tiny, tmp_path, capsys):
    memo_dir = copy_memo(tiny, tmp_path / "memo")
    before = Memo(memo_dir)
    good = {k: before.get_record(k) for k, _, _ in before.entries()}
    before.close()
    run_record = next(v for k, v in good.items() if k.startswith("run-"))
    planted = plant_bad_rows(memo_dir, run_record)
    with no_hang(CASE_S):
        code, out, err = run(capsys, "cache", "check", "--cache-dir", memo_dir, "--json", "-")
    assert code == 0, err
    doc = json.loads(out)
    assert (doc["removed"], doc["sound"]) == (len(planted), len(good) + 1)  # + the good feature entry
    removed = lines(err)
    assert len(removed) == len(planted) and all(line.endswith("; removed") for line in removed)
    assert sorted(line.split(":")[0] for line in removed) == sorted(
        f"{'feature' if k == 'feat-bad' else 'memo'} entry {k!r}" for k in planted)
    assert "field best_acc: Input should be a valid number" in " ".join(removed)
    assert "/etc/passwd" in " ".join(removed) and Path("/etc/passwd").exists()  # named, never deleted
    after = Memo(memo_dir)
    assert {k: after.get_record(k) for k, _, _ in after.entries()} == good and after.problems == []
    assert after.get_features("feat-good")["a"].tolist() == np.arange(12).reshape(3, 4).tolist()
    after.close()
    code, out, err = run(capsys, "cache", "check", "--cache-dir", memo_dir)
    assert code == 0 and lines(err) == [] and f"{len(good) + 1} sound entries, 0 unreadable entries removed" in out


@pytest.mark.slow  # the tiny ladder trains
def test_cache_prune_also_removes_unreadable_rows(tiny, tmp_path, capsys):
    memo_dir = copy_memo(tiny, tmp_path / "memo")
    n_good = len(memo_rows(memo_dir))
    memo = Memo(memo_dir)
    memo._cache.set("old", _seal(b'{"x": 1}', "old"), tag="lazylab 0.1.0 numerics 0")  # another code's entry
    memo._put("plant-file-mode", b'{"x": 1}')
    memo.close()
    sql(memo_dir, "UPDATE Cache SET mode = 2 WHERE key = 'plant-file-mode'")
    code, out, err = run(capsys, "cache", "prune", "--cache-dir", memo_dir)
    assert code == 0, err
    assert f"removed 1 entry computed by other code than {code_identity()}, 0 entries of plugin sources edited " \
           "since (stale source) and 1 unreadable entry; " \
           f"{n_good} sound entries kept" in out
    assert len(lines(err)) == 1 and "plant-file-mode" in err
    assert len(memo_rows(memo_dir)) == n_good


@pytest.mark.slow  # the tiny ladder trains
@given(case=st.data())
@fuzz(30)
def test_property_any_stored_record_gives_a_report_from_it_or_one_line(case, tiny, case_folder, capsys):
    """A run record or the redundancy record, mutated and sealed under its own key (as a hand-edited or
    foreign memo would hold it): ``runs`` and ``ladder --report`` (reads the memo, computes nothing)
    use it if its schema accepts it, else report it corrupt in one line and delete it; never exit 1,
    no key but the command line's in the memo or the results."""
    from lazylab.schemas.entries import record_model

    memo_dir, doc = tiny
    original = Memo(memo_dir)
    key = case.draw(st.sampled_from([k for k, _, _ in original.entries()]))  # two runs and the redundancy
    record = original.get_record(key)
    original.close()
    how, raw = case.draw(mutated(record))
    memo_dir = copy_memo(tiny, case_folder("m") / "memo")
    keys = sorted(str(r[1]) for r in memo_rows(memo_dir))
    memo = Memo(memo_dir)
    memo._put(key, raw)
    memo.close()
    try:
        sound = record_model(key).model_validate(json.loads(raw))
    except (ValueError, RecursionError):
        sound = None
    corrupt = f"memo entry {key} "  # is corrupt, or was written for another configuration
    with no_hang(CASE_S):
        code, out, err = run(capsys, "runs", "--all", "--cache-dir", memo_dir, "--json", "-")  # a bank's plugin too
    assert code == 0, (how, err)
    assert [line for line in lines(err) if not line.startswith(corrupt)] == [] and len(lines(err)) <= 1, (how, err)
    listed = {r["key"]: r for r in json.loads(out)["runs"]}
    if sound is not None:
        assert lines(err) == [] and key in listed, how
        assert listed[key]["best_acc"] == getattr(sound, "best_acc", None), how
    else:
        assert len(lines(err)) == 1 and key not in listed, (how, err)
    memo = Memo(memo_dir)
    memo._put(key, raw)  # again, for the ladder (runs deleted it if corrupt)
    memo.close()
    with no_hang(CASE_S):
        code, out, err = run(capsys, *TINY, "--cache-dir", memo_dir, "--report", "--json", "-")
    assert code in (0, 2), (how, err)
    errors = [line for line in lines(err) if line.startswith("error: ")]
    # Besides the entry's line and the error: the analysis's warnings (a planted loss can make a run unstable).
    assert [line for line in lines(err) if not line.startswith((corrupt, "error: ", "warning: "))] == [], (how, err)
    if code == 0:
        assert errors == [] and sound is not None, (how, err)
        result = json.loads(out)
        served = result["runs"]
        assert sorted(r["key"] for r in served) == sorted(runs_by_key(doc)), how  # only keys the CLI makes
        if key.startswith("run-"):
            mine = next(r for r in served if r["key"] == key)
            assert mine["best_acc"] == sound.best_acc and mine["config"] == record["config"], how
        else:
            (red,) = result["analysis"]["redundancy"].values()
            assert (red["key"], red["participation_ratio"]) == (key, sound.participation_ratio), how
    else:  # a result the report needs is missing: it says so in one error line (after the entry's)
        assert len(errors) == 1 and "--report" in errors[0], (how, err)
    assert sorted(str(r[1]) for r in memo_rows(memo_dir)) in (keys, sorted(set(keys) - {key})), how


# --------------------------------------------------------------------------- data copy and feature metadata


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory):
    """(data folder, memo folder holding its parsed copy, the loaded dataset, the copy's digests document)."""
    root = tmp_path_factory.mktemp("tinydata")
    folder = write_idx_dir(root / "fmnist")
    ds = data.load(folder, cache_dir=root / "memo")
    digests = json.loads((root / "memo" / "data" / ds.fingerprint / "sha256.json").read_text())
    return folder, root / "memo", ds, digests


@given(case=st.data())
@fuzz(40)
def test_property_any_data_copy_digests_give_the_data_or_one_line_and_a_reparse(case, tiny_data, case_folder):
    from lazylab.schemas.caches import DataCopyDigests

    folder, memo, ds, digests = tiny_data
    how, raw = case.draw(mutated(digests))
    mine = case_folder("d") / "memo"
    shutil.copytree(memo, mine)
    (mine / "data" / ds.fingerprint / "sha256.json").write_bytes(raw)
    try:
        sound = DataCopyDigests.model_validate(json.loads(raw)).model_dump() == DataCopyDigests.model_validate(
            digests).model_dump()
    except (ValueError, RecursionError):
        sound = False
    problems = []
    with no_hang(CASE_S):
        loaded = data.load(folder, cache_dir=mine, problems=problems)
    for field in ("x_train", "y_train", "x_test", "y_test"):
        assert np.array_equal(getattr(loaded, field), getattr(ds, field)), how
    assert problems == [] if sound else len(problems) == 1 and "parsing the .gz files again" in problems[0], (how, problems)
    # Re-parsed copies are written whole again: the next load is silent.
    problems = []
    data.load(folder, cache_dir=mine, problems=problems)
    assert problems == [], how


def test_a_fifo_in_a_data_copy_is_one_line_and_a_reparse(tiny_data, tmp_path):
    folder, memo, ds, _ = tiny_data
    mine = tmp_path / "memo"
    shutil.copytree(memo, mine)
    for name in ("sha256.json", "train_images.npy"):
        target = mine / "data" / ds.fingerprint / name
        backup = target.read_bytes()
        target.unlink()
        os.mkfifo(target)
        problems = []
        with no_hang(20):
            loaded = data.load(folder, cache_dir=mine, problems=problems)
        assert np.array_equal(loaded.x_train, ds.x_train)
        assert len(problems) == 1 and "is a FIFO" in problems[0], problems
        assert target.read_bytes() == backup  # written again as a file


@given(case=st.data())
@fuzz(40)
def test_property_any_feature_header_gives_the_arrays_or_one_line(case, case_folder):
    """A feature entry whose header line is mutated (and sealed again, as a forged entry would be): read
    back as exactly what its header says, or reported corrupt in one line and deleted."""
    from lazylab.schemas.caches import FeatureHeader

    arrays = {"train": np.arange(12, dtype=np.float32).reshape(3, 4), "test": np.arange(4, dtype=np.int32)}
    header = {"arrays": [{"name": k, "dtype": a.dtype.str, "shape": list(a.shape)} for k, a in arrays.items()]}
    how, raw = case.draw(mutated(header))
    memo = Memo(case_folder("f") / "memo")
    body = b"".join(a.tobytes() for a in arrays.values())
    memo._feature_store(create=True).set("k", _SealedReader([memoryview(raw.replace(b"\n", b" ") + b"\n"),
                                                             memoryview(body)], "k"), read=True)
    with no_hang(CASE_S):
        got = memo.get_features("k")
    if got is None:
        assert len(memo.problems) == 1 and "feature entry k is corrupt" in memo.problems[0], (how, memo.problems)
        assert memo.feature_stats()[0] == 0  # deleted
    else:  # a header its schema accepts, whose arrays fill the entry exactly: they read back as it says
        said = FeatureHeader.model_validate(json.loads(raw)).arrays
        assert memo.problems == [] and list(got) == [a.name for a in said], how
        assert [(got[a.name].dtype, list(got[a.name].shape)) for a in said] == [(np.dtype(a.dtype), a.shape) for a in said]
        assert b"".join(got[a.name].tobytes() for a in said) == body, how
    memo.close()
