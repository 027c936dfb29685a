"""lazylab.api and lazylab.runs on real data: a tiny ladder (2 arms x 2 widths x 1 seed x 1 epoch, 512 images)."""

from __future__ import annotations

import csv
import dataclasses
import json
import time
from datetime import datetime, timezone

import numpy as np
import pytest

from cli_helpers import lines

from lazylab import api
from lazylab.cache import Memo, default_dir, legacy_note
from lazylab.config import code_identity
from lazylab.errors import LazylabError
from lazylab.runs import FIELDS, KINDS, list_runs

ARMS, WIDTHS = ["yat-frozen", "relu-frozen"], [16, 32]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """``(ladder, memo dir, start time)``: the tiny ladder computed once into a fresh memo (fixed rate: no bracket)."""
    memo = tmp_path_factory.mktemp("api-memo")
    t0 = time.time()
    seen = []
    lad = api.ladder(arms=ARMS, widths=WIDTHS, seeds=[0], epochs=1, train_size=512, lr=0.1, cache_dir=memo,
                     on_run=lambda run, cached: seen.append((run.arm, run.width, cached)))
    assert sorted(seen) == sorted((a, w, False) for a in ARMS for w in WIDTHS)
    return lad, memo, t0


@pytest.mark.slow
def test_ladder_cells_and_runs_are_the_memo_records(tiny):
    lad, memo_dir, t0 = tiny
    assert (lad.arms, lad.widths, lad.seeds, lad.epochs, lad.train_size, lad.lr) == (ARMS, WIDTHS, [0], 1, 512, 0.1)
    assert len(lad.cells) == 4 and len(lad.runs) == 4
    memo = Memo(memo_dir)
    try:
        for run in lad.runs:
            rec = memo.get_record(run.key)  # the stored record, read independently
            assert rec["config"]["arm"] == run.arm and rec["config"]["width"] == run.width
            assert run.best_acc == rec["best_acc"] and run.final_acc == rec["final_acc"]
            assert run.best_acc == max(rec["curve"])  # one epoch: best is the only one
            assert run.code == code_identity() and run.lr == 0.1 and run.epochs == 1 and run.train_size == 512
            # One seed: a cell's mean is its run's best_acc, its std 0.
            cell = lad.cell(run.arm, run.width)
            assert cell.mean == run.best_acc and cell.std == 0.0 and cell.n == 1 and cell.seeds == [0]
    finally:
        memo.close()
    with pytest.raises(LazylabError, match="no cell yat-frozen at m = 64"):
        lad.cell("yat-frozen", 64)
    # Two widths: no law (the power law needs 3), said in skipped, not a number.
    law = lad.law("yat-frozen")
    assert law.floor is None and "at least 3" in law.skipped


@pytest.mark.slow
def test_run_rows_match_the_ladder_records(tiny):
    lad, memo_dir, t0 = tiny
    rows = api.runs(kind="run", cache_dir=memo_dir)
    assert {r.key: r.best_acc for r in rows} == {r.key: r.best_acc for r in lad.runs}
    assert {r.key: (r.final_acc, r.seconds) for r in rows} == {r.key: (r.final_acc, r.seconds) for r in lad.runs}
    for r in rows:  # stored during the fixture: a datetime in UTC
        assert isinstance(r.stored, datetime) and r.stored.tzinfo == timezone.utc
        assert t0 - 1 <= r.stored.timestamp() <= time.time() + 1
    assert {r.key: r.stored for r in rows} == {r.key: r.stored for r in lad.runs}
    # Sorted by kind, arm, width, seed.
    assert [(r.arm, r.width) for r in rows] == [("relu-frozen", 16), ("relu-frozen", 32),
                                                ("yat-frozen", 16), ("yat-frozen", 32)]


@pytest.mark.slow
def test_filters_select_exactly_the_right_rows(tiny):
    lad, memo_dir, _ = tiny
    every = api.runs(cache_dir=memo_dir, kind=None)  # None: every kind
    # 4 runs and the redundancy of the 2 banks (m = 256, seed 0, on all 512 images).
    assert sorted(r.kind for r in every) == ["redundancy"] * 2 + ["run"] * 4
    # One kind per call by default: the training runs.
    assert [r.key for r in api.runs(cache_dir=memo_dir)] == [r.key for r in every if r.kind == "run"]
    red = api.runs(kind="redundancy", cache_dir=memo_dir)
    assert len(red) == 2 and {r.width for r in red} == {256} and all(r.arm is None for r in red)
    assert {r.detail.split(",")[0] for r in red} == {"bank yat", "bank relu"}
    assert all(", n 512," in r.detail for r in red)
    yat = api.runs(arm="yat-frozen", cache_dir=memo_dir)
    assert [(r.kind, r.arm, r.width) for r in yat] == [("run", "yat-frozen", 16), ("run", "yat-frozen", 32)]
    w32 = api.runs(width=32, cache_dir=memo_dir)
    assert [(r.arm, r.width) for r in w32] == [("relu-frozen", 32), ("yat-frozen", 32)]
    assert [r.key for r in api.runs(arm=["yat-frozen"], width=[16], seed=[0], cache_dir=memo_dir)] == \
        [r.key for r in lad.runs if (r.arm, r.width) == ("yat-frozen", 16)]
    assert api.runs(seed=1, cache_dir=memo_dir) == []
    assert api.runs(kind=["convex", "trajectory"], cache_dir=memo_dir) == []


@pytest.mark.slow
@pytest.mark.parametrize("kwargs, words", [
    (dict(kind="ladders"), "unknown kind 'ladders'; kinds: " + ", ".join(KINDS)),
    (dict(arm="yat-frozn"), "unknown arm 'yat-frozn': not installed and not in the memo"),
    (dict(width=0), "width: expected integers >= 1"),
    (dict(seed=-1), "seed: expected integers >= 0"),
    (dict(width=[16, 16]), "given more than once"),
])
def test_bad_filters_are_one_line_errors(tiny, kwargs, words):
    _, memo_dir, _ = tiny
    with pytest.raises(LazylabError) as exc:
        api.runs(cache_dir=memo_dir, **kwargs)
    assert words in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.slow
def test_csv_has_one_row_per_run(tiny, capsys, tmp_path):
    from cli_helpers import run

    _, memo_dir, _ = tiny
    listing = list_runs(memo_dir, arms=["yat-frozen"])
    code, _, err = run(capsys, "runs", "--arm", "yat-frozen", "--csv", tmp_path / "r.csv", "--cache-dir", memo_dir)
    assert code == 0, err
    rows = list(csv.DictReader((tmp_path / "r.csv").open()))
    assert len(rows) == 2 and list(rows[0]) == list(FIELDS)
    assert [float(r["best_acc"]) for r in rows] == [r.best_acc for r in listing.runs]
    assert [r["key"] for r in rows] == [r.key for r in listing.runs]
    assert {r["kind"] for r in rows} == {"run"} and {r["width"] for r in rows} == {"16", "32"}


@pytest.mark.slow
def test_results_of_other_code_are_hidden_unless_asked(tiny, tmp_path, monkeypatch):
    """An entry whose code identity (diskcache tag) is not this lazylab's is counted, not listed, by default."""
    from lazylab import config

    lad, memo_dir, _ = tiny
    mine = tmp_path / "memo"
    memo = Memo(mine)
    rec = dict(Memo(memo_dir).get_record(lad.runs[0].key))
    monkeypatch.setattr(config, "CODE", "lazylab 0.1.0 numerics 0")
    old_key = "run-" + "0" * 32
    memo.put_record(old_key, {**rec, "key": old_key})
    monkeypatch.undo()
    memo.put_record(rec["key"], rec)
    memo.close()
    listing = list_runs(mine)
    assert [r.key for r in listing.runs] == [rec["key"]] and listing.other_code == 1 and listing.entries == 2
    both = list_runs(mine, any_code=True)
    assert {r.key: r.code for r in both.runs} == {rec["key"]: code_identity(), old_key: "lazylab 0.1.0 numerics 0"}
    assert both.other_code == 0


def test_a_folder_without_a_memo_lists_nothing_and_is_not_created(tmp_path):
    listing = list_runs(tmp_path / "nothing-here")
    assert listing.runs == [] and not (tmp_path / "nothing-here").exists()


def test_reference_ladder_is_the_shipped_file():
    from lazylab.reference import reference_path

    doc = json.loads(reference_path().read_text())
    payload = doc["payload"]
    ref = api.reference()
    want = next(a for a in payload["arms"] if a["arm"] == "yat-frozen")
    cell = ref.cell("yat-frozen", 512)
    assert cell.mean == want["cells"]["512"]["mean"] and cell.lr == want["lr"] == 1.0
    # The cell is the mean of its seeds' best_acc, recomputed here from the run rows.
    seeds = [r.best_acc for r in ref.runs if (r.arm, r.width, r.lr) == ("yat-frozen", 512, cell.lr)]
    assert len(seeds) == 3 and cell.mean == pytest.approx(np.mean(seeds), abs=1e-12)
    assert cell.std == pytest.approx(np.std(seeds, ddof=1), abs=1e-12)
    assert len(ref.runs) == doc["provenance"]["runs"] == len(payload["runs"])
    assert len(ref.cells) == 8 * 10 and ref.provenance == doc["provenance"]
    law = ref.law("yat-frozen")
    assert law.floor == payload["analysis"]["ladder_law"]["yat-frozen"]["floor"]
    assert ref.exchange_sentence == payload["analysis"]["exchange"]["sentence"]
    first = ref.exchange[0]
    assert (first.trained, first.frozen, first.width, first.method) == ("yat-trained", "yat-frozen", 16, "extrapolated")
    interpolated = [r for r in ref.exchange if r.method == "interpolated"]
    assert interpolated and all(r.note.startswith("between m = ") for r in interpolated)


@pytest.mark.slow
def test_to_dataframe_shape_and_the_hint_without_pandas(tiny, monkeypatch):
    pd = pytest.importorskip("pandas")
    lad, memo_dir, _ = tiny
    frame = api.runs(cache_dir=memo_dir, kind=None).to_dataframe()
    assert frame.shape == (6, len(FIELDS) + 1)  # the FIELDS and config
    assert list(frame.columns[: len(FIELDS)]) == list(FIELDS)
    cells = lad.to_dataframe()
    assert cells.shape == (4, len(dataclasses.fields(api.Cell)))  # one row per cell, one column per field
    assert cells.set_index(["arm", "width"]).loc[("yat-frozen", 16), "mean"] == lad.cell("yat-frozen", 16).mean
    assert isinstance(api.reference().exchange.to_dataframe(), pd.DataFrame)
    monkeypatch.setitem(__import__("sys").modules, "pandas", None)  # `import pandas` now raises ImportError
    with pytest.raises(LazylabError, match=r"^to_dataframe needs pandas: pip install 'lazylab\[pandas\]'$"):
        lad.cells.to_dataframe()


def test_memo_only_on_an_empty_memo_is_one_line(tmp_path):
    with pytest.raises(LazylabError) as exc:
        api.ladder(arms="yat-frozen", widths=[16], seeds=[0], epochs=1, train_size=512, lr=0.1,
                   cache_dir=tmp_path / "memo", memo_only=True)
    msg = str(exc.value)
    assert msg.startswith("memo_only: nothing has been computed yet for this ladder: none of its 1 runs")
    assert "call ladder() without memo_only" in msg and "\n" not in msg


@pytest.mark.parametrize("kwargs, words", [
    (dict(preset="fast"), "unknown preset 'fast'; presets: paper, quick"),
    (dict(arms="yat-frozen", widths=[0]), "widths: expected integers >= 1"),
    (dict(arms="yat-frozen", epochs=0), "epochs: expected an integer from 1 to 1000"),
    (dict(arms="nope-frozen"), "unknown arm 'nope-frozen'"),
])
def test_bad_ladder_arguments_are_one_line(kwargs, words, tmp_path):
    with pytest.raises(LazylabError, match=words):
        api.ladder(cache_dir=tmp_path / "memo", **kwargs)


def test_default_memo_is_the_user_cache_folder(tmp_path):
    home = str(tmp_path / "home")
    assert default_dir({"HOME": home}) == tmp_path / "home" / ".cache" / "lazylab" / "memo"
    assert default_dir({"HOME": home, "XDG_CACHE_HOME": "/xdg"}).as_posix() == "/xdg/lazylab/memo"
    # A relative XDG_CACHE_HOME is invalid (XDG base directory specification): ignored.
    assert default_dir({"HOME": home, "XDG_CACHE_HOME": "rel"}) == tmp_path / "home" / ".cache" / "lazylab" / "memo"
    assert default_dir({"HOME": home, "XDG_CACHE_HOME": "/xdg", "LAZYLAB_CACHE": "/m"}).as_posix() == "/m"
    assert default_dir({"LAZYLAB_CACHE": "~/m", "HOME": home}) == tmp_path / "home" / "m"
    # The compiled-program cache sits beside it: <XDG_CACHE_HOME>/lazylab/{memo,xla/<cpu>}.
    from lazylab.xla_cache import cache_dir

    env = {"XDG_CACHE_HOME": str(tmp_path / "x"), "HOME": home}
    assert cache_dir(env).parent.parent == default_dir(env).parent == tmp_path / "x" / "lazylab"


def test_an_old_memo_in_the_working_directory_is_pointed_out(tmp_path):
    (tmp_path / "cache").mkdir()
    new = tmp_path / "home" / ".cache" / "lazylab" / "memo"
    assert legacy_note(new, cwd=tmp_path) is None  # no memo there
    (tmp_path / "cache" / "cache.db").write_bytes(b"")
    note = legacy_note(new, cwd=tmp_path)
    assert note.startswith(f"note: {tmp_path / 'cache'} holds a memo from an earlier lazylab")
    assert "--cache-dir cache" in note and str(new) in note
    assert legacy_note(tmp_path / "cache", cwd=tmp_path) is None  # it is the memo in use


# --------------------------------------------------------------------------- lazylab runs
@pytest.fixture
def lazylab_runs():
    """``run(capsys, ...)``: ``lazylab`` in this process."""
    from cli_helpers import run

    return run


@pytest.mark.slow
def test_runs_command_csv_has_one_row_per_run_of_the_arm(tiny, lazylab_runs, capsys, tmp_path):
    lad, memo_dir, _ = tiny
    code, out, err = lazylab_runs(capsys, "runs", "--arm", "yat-frozen", "--csv", tmp_path / "runs.csv",
                                  "--cache-dir", memo_dir)
    assert code in (0, None) and err == "", err
    rows = list(csv.DictReader((tmp_path / "runs.csv").open()))
    want = {r.key: r.best_acc for r in lad.runs if r.arm == "yat-frozen"}
    assert len(rows) == len(want) == 2 and {r["key"]: float(r["best_acc"]) for r in rows} == want
    assert "2 results (run: 2) matching in the memo at" in out and f"wrote {tmp_path / 'runs.csv'}" in out
    assert out.count("yat-frozen") == 2 and "relu-frozen" not in out


@pytest.mark.slow
def test_runs_command_json_to_stdout_alone(tiny, lazylab_runs, capsys):
    lad, memo_dir, _ = tiny
    code, out, err = lazylab_runs(capsys, "runs", "--json", "-", "--kind", "run", "--width", "32",
                                  "--cache-dir", memo_dir)
    assert code in (0, None)
    doc = json.loads(out)  # stdout is the JSON and nothing else
    assert doc["count"] == 2 and doc["filters"] == {"arm": [], "width": [32], "seed": [], "kind": ["run"]}
    assert {r["key"]: r["best_acc"] for r in doc["runs"]} == {r.key: r.best_acc for r in lad.runs if r.width == 32}
    assert all(r["config"]["width"] == 32 and r["config"]["code"] == code_identity() for r in doc["runs"])
    assert lines(err) == []  # the table is left out: stdout holds the JSON alone


@pytest.mark.slow
@pytest.mark.parametrize("argv, needle", [
    (["--kind", "ladders"], "unknown kind 'ladders'; kinds: run, convex"),
    (["--arm", "yat-frozn"], "unknown arm 'yat-frozn'"),
    (["--width", "0"], "0 is below the minimum 1"),
    (["--seed", "0", "--seed", "0"], "0 is given more than once"),
    (["--csv", "-"], "--csv -: this command writes files only"),
])
def test_runs_command_bad_input_is_one_line(tiny, lazylab_runs, capsys, argv, needle):
    from cli_helpers import assert_one_line_error

    _, memo_dir, _ = tiny
    code, _, err = lazylab_runs(capsys, "runs", *argv, "--cache-dir", memo_dir)
    assert_one_line_error(code, err, needle)


def test_runs_command_on_an_empty_memo(lazylab_runs, capsys, tmp_path):
    code, out, err = lazylab_runs(capsys, "runs", "--cache-dir", tmp_path / "memo")
    assert code in (0, None) and err == ""
    assert out.strip() == f"0 results: the memo at {tmp_path / 'memo'} is empty (nothing computed yet)"


def test_runs_command_points_out_an_old_memo_in_one_line(lazylab_runs, capsys, tmp_path, monkeypatch):
    (tmp_path / "cache").mkdir()
    Memo(tmp_path / "cache").close()  # a real (empty) memo where earlier versions kept it
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LAZYLAB_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    code, out, err = lazylab_runs(capsys, "runs")
    assert code in (0, None)
    assert err.splitlines() == [legacy_note(tmp_path / "xdg" / "lazylab" / "memo", cwd=tmp_path)]
    assert f"the memo at {tmp_path / 'xdg' / 'lazylab' / 'memo'} is empty" in out
