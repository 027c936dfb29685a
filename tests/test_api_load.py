"""``lazylab.api.load`` reads back every ``--json`` file the real commands write, ``api.runs`` gives one kind per
call, and ``examples/api_tour.py`` runs against a memo that holds convex readouts (issue 31, item 3).

One module fixture runs the real command line once on tiny settings (about a minute on 2 cores): a
``ladder --readout both`` (training runs and convex readouts in one memo), a ``ladder --readout convex``
on the same cells, ``gram``, ``readout``, ``trajectory``, ``ntk scalar`` and ``ntk audit``.
"""

from __future__ import annotations

import copy
import json
from datetime import datetime
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lazylab import api, data
from lazylab.cli import main
from lazylab.errors import LazylabError

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not all((data.DEBIAN_DIR / n).is_file() for n in data.FILES.values()),
                       reason="Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)"),
]

ROOT = Path(__file__).resolve().parent.parent
LADDER = ["--arms", "yat-frozen", "--widths", "16", "--seeds", "0", "--epochs", "1", "--train-size", "1024",
          "--lr", "0.1", "--no-figures"]
COMMANDS = {  # kind -> the command that writes it (tiny settings: seconds each)
    "ladder": ["ladder", *LADDER, "--readout", "both"],
    "convex": ["ladder", *LADDER, "--readout", "convex"],
    "gram": ["gram", "--max-units", "8", "--frames", "3", "--ref-units", "32", "--per-class", "2"],
    "readout": ["readout", "--widths", "4,8", "--train-size", "256", "--steps", "2", "--eval-every", "1"],
    "trajectory": ["trajectory", "--arms", "yat-trained", "--width", "4", "--epochs", "1", "--snapshots", "2",
                   "--train-size", "256", "--lr", "0.03"],
    "ntk": ["ntk", "scalar", "--times", "0,1"],
    "ntk-audit": ["ntk", "audit"],
}


@pytest.fixture(scope="module")
def place(tmp_path_factory):
    """``{"root", "memo", "files", "docs"}``: one memo and the ``--json`` file each command wrote into it."""
    root = tmp_path_factory.mktemp("apiload")
    memo = root / "memo"
    files = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LAZYLAB_OUT", str(root / "out"))
        mp.setenv("LAZYLAB_CACHE", str(memo))
        for kind, argv in COMMANDS.items():
            files[kind] = root / f"{kind}.json"
            memo_args = [] if kind.startswith("ntk") else ["--cache-dir", str(memo)]
            try:
                main([*argv, "--json", str(files[kind]), *memo_args])
            except SystemExit as exc:
                assert exc.code in (0, None), (kind, exc.code)
    return {"root": root, "memo": memo, "files": files,
            "docs": {k: json.loads(p.read_text()) for k, p in files.items()}}


# ------------------------------------------------------------------------------------------ api.load
def test_a_ladder_file_is_the_ladder_the_memo_gives(place):
    """Round trip: `ladder --readout both --json` read back equals `api.ladder` on the same memo."""
    doc, path = place["docs"]["ladder"], place["files"]["ladder"]
    got = api.load(path)
    assert isinstance(got, api.Ladder) and got.source == f"ladder --json file {path}" and got.provenance is None
    mine = api.ladder(arms=["yat-frozen"], widths=[16], seeds=[0], epochs=1, train_size=1024, lr=0.1,
                      cache_dir=place["memo"], memo_only=True)
    assert got.cells == mine.cells and got.laws == mine.laws and got.rates == mine.rates
    assert [(r.key, r.best_acc, r.lr) for r in got.runs] == [(r.key, r.best_acc, r.lr) for r in mine.runs]
    assert all(r.stored is None for r in got.runs) and all(r.stored for r in mine.runs)
    assert (got.arms, got.widths, got.seeds, got.epochs, got.train_size, got.lr) == (["yat-frozen"], [16], [0], 1,
                                                                                     1024, 0.1)
    # The convex readout and the wall table, typed.
    cell = doc["convex"]["arms"]["yat-frozen"]["cells"]["16"]
    [convex] = got.convex
    assert (convex.arm, convex.width, convex.n, convex.mean, convex.lambdas) == ("yat-frozen", 16, 1, cell["mean"],
                                                                                 cell["lambdas"])
    [wall] = got.wall
    want = doc["analysis"]["wall"]["arms"]["yat-frozen"]["16"]
    assert (wall.arm, wall.width, wall.best_acc, wall.convex_acc, wall.gap) == (
        "yat-frozen", 16, want["best_acc"], want["convex_acc"], want["gap"])
    assert wall.best_acc == got.cell("yat-frozen", 16).mean and wall.convex_acc == convex.mean
    assert mine.convex == [] and mine.wall == []  # the default readout (adamw) reads out no convex optimum
    # readout="both", as --readout both: the same convex cells, wall table and document as the command's file.
    both = api.ladder(arms=["yat-frozen"], widths=[16], seeds=[0], epochs=1, train_size=1024, lr=0.1,
                      cache_dir=place["memo"], memo_only=True, readout="both")
    assert both.convex == got.convex and both.wall == got.wall and both.cells == got.cells
    assert both.to_dict() == doc  # what the command wrote, field for field
    assert [r.readout for r in both.records] == ["adamw", "convex"] and both.records == got.records
    run, readout = both.records
    assert (run.best_acc, run.cell_mean, run.bracket) == (both.runs[0].best_acc, both.cell("yat-frozen", 16).mean, False)
    assert (readout.best_acc, readout.penalty, readout.cell_mean) == (convex.mean, convex.lambdas[0], convex.mean)
    assert got.rates[0].colour == "#0072B2" and got.rates[0].plugin.startswith("lazylab ")  # yat's, as drawn


def test_a_ladder_round_trips_through_its_json_text(place):
    mine = api.ladder(arms=["yat-frozen"], widths=[16], seeds=[0], epochs=1, train_size=1024, lr=0.1,
                      cache_dir=place["memo"], memo_only=True, readout="both")
    back = api.load(mine.to_json())
    assert isinstance(back, api.Ladder) and back.source == "ladder --json JSON text"
    for name in ("arms", "widths", "seeds", "rates", "cells", "laws", "movement", "gaps", "exchange", "convex", "wall",
                 "records", "analysis", "exchange_sentence", "warnings"):
        assert getattr(back, name) == getattr(mine, name), name
    assert [(r.key, r.best_acc) for r in back.runs] == [(r.key, r.best_acc) for r in mine.runs]
    assert back.to_json() == mine.to_json()
    paper = api.reference()  # a reference file keeps its provenance
    assert api.load(paper.to_json()).provenance == paper.provenance and api.load(paper.to_json()).cells == paper.cells
    # Rows and the runs listing read back too, typed.
    assert api.load(mine.cells.to_json()) == mine.cells and api.load(mine.rates.to_json()) == mine.rates
    listing = api.runs(kind=None, cache_dir=place["memo"])
    assert api.load(listing.to_json()) == listing and isinstance(listing[0].stored, datetime)
    with pytest.raises(LazylabError, match="to_json: rows of one class only"):
        api.Rows([*mine.cells, *mine.rates]).to_json()


def test_a_convex_ladder_file_is_a_result_of_convex_cells(place, capsys):
    doc = place["docs"]["convex"]
    got = api.load(place["files"]["convex"])
    assert isinstance(got, api.Result) and got.kind == "convex" and got.config == doc["plan"]
    assert got.rows == api.load(place["files"]["ladder"]).convex  # the same memo entry, read by both commands
    mine = api.ladder(arms=["yat-frozen"], widths=[16], seeds=[0], epochs=1, train_size=1024, lr=0.1,
                      cache_dir=place["memo"], memo_only=True, readout="convex")
    assert mine.kind == "convex" and mine.rows == got.rows and mine.data == doc
    assert api.load(mine.to_json()).rows == got.rows
    with pytest.raises(LazylabError, match="readout 'convex' reads out frozen banks; trained arms: yat-trained"):
        api.ladder(arms=["yat-trained"], widths=[16], seeds=[0], readout="convex", cache_dir=place["memo"])
    # The command's runs listing reads back as the rows api.runs gives.
    code = _main(["runs", "--json", str(place["root"] / "runs.json"), "--cache-dir", str(place["memo"])])
    assert code == 0 and api.load(place["root"] / "runs.json") == api.runs(kind=None, cache_dir=place["memo"])


def _main(argv) -> int:
    try:
        main(argv)
    except SystemExit as exc:
        return exc.code
    return 0


def test_gram_readout_trajectory_and_ntk_files_become_typed_rows(place):
    docs = place["docs"]
    gram = api.load(place["files"]["gram"])
    assert gram.kind == "gram" and gram.config == docs["gram"]["config"] and gram.data == docs["gram"]
    assert [f.width for f in gram.rows] == docs["gram"]["widths"]
    assert [f.distance for f in gram.rows] == docs["gram"]["distance_to_reference"]
    assert [f.block_contrast for f in gram.rows] == docs["gram"]["block_contrast"]

    readout = api.load(place["files"]["readout"])
    curves = docs["readout"]["curves"]
    assert readout.kind == "readout" and readout.config["widths"] == [4, 8] and readout.config["steps"] == 2
    assert len(readout.rows) == sum(len(c["steps"]) for c in curves)
    for c in curves:
        mine = [p for p in readout.rows if p.width == c["config"]["width"]]
        assert [p.step for p in mine] == c["steps"] and [p.test_acc for p in mine] == c["test_acc"]
        assert max(p.test_acc for p in mine) == c["best_acc"]

    traj = api.load(place["files"]["trajectory"])
    rec = docs["trajectory"]["arms"][0]["record"]
    assert traj.kind == "trajectory" and traj.config == docs["trajectory"]["plan"]
    assert [(e.arm, e.epoch, e.accuracy, e.w_move_rel) for e in traj.rows] == [
        ("yat-trained", e, a, w) for e, a, w in zip(rec["epochs"], rec["accuracy"], rec["w_move_rel"])]

    ntk = api.load(place["files"]["ntk"])
    assert ntk.kind == "ntk" and ntk.config == {"w0": docs["ntk"]["w0"], "dt": docs["ntk"]["dt"]}
    assert [(c.name, c.passed, c.expect) for c in ntk.rows] == [(c["name"], c["passed"], c["expect"])
                                                               for c in docs["ntk"]["checks"]]
    assert ntk.data["table"]["t"] == [0.0, 1.0]
    audit = api.load(place["files"]["ntk-audit"])
    assert audit.kind == "ntk-audit" and [c.name for c in audit.rows] == [c["name"] for c in docs["ntk-audit"]]
    pd = pytest.importorskip("pandas")
    assert isinstance(readout.to_dataframe(), pd.DataFrame) and readout.to_dataframe().shape == (len(readout.rows), 4)


def _mutate(doc, where, value):
    *parents, last = where
    for p in parents:
        doc = doc[p]
    if value is KeyError:
        del doc[last]
    else:
        doc[last] = value


@pytest.mark.parametrize("kind, where, value, field", [
    ("ladder", ("runs", 0, "config", "seed"), 2**40, "field runs[0].config.seed"),
    ("ladder", ("plan",), KeyError, "no 'plan' object"),
    ("ladder", ("convex", "arms", "yat-frozen", "cells", "16", "n"), "one", "field convex.arms"),
    ("convex", ("convex",), [], "field convex"),
    ("gram", ("config", "seed"), -1, "field config.seed"),
    ("gram", ("widths",), [1], "field widths"),
    ("readout", ("curves", 0, "config", "lr"), 0, "field curves[0].config.lr"),
    ("readout", ("curves", 1, "test_acc"), ["x", 1.0], "field curves"),
    ("trajectory", ("plan", "width"), 0.5, "field plan.width"),
    ("ntk", ("w0",), "0.01", "field w0"),
    ("ntk-audit", (1, "passed"), "yes", "field passed"),
])
def test_a_bad_file_is_one_line_naming_the_file_and_the_field(place, tmp_path, kind, where, value, field):
    doc = copy.deepcopy(place["docs"][kind])
    _mutate(doc, where, value)
    path = tmp_path / f"{kind}.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(LazylabError) as exc:
        api.load(path)
    msg = str(exc.value)
    assert msg.startswith(f"load: {path}") and field in msg and "\n" not in msg, msg


@pytest.mark.parametrize("content, words", [
    (None, "cannot be read: No such file"),
    ("{", "not JSON"),
    (json.dumps({"width": 256, "images": 10, "rows": []}), "not a document lazylab.api.load reads; it reads the --json output of ladder"),
    (json.dumps([1, 2]), "not a document lazylab.api.load reads; it reads the --json output of ladder"),
    (json.dumps({"arm": "yat-trained", "ntk": {}, "drift": 0.1}), "not a document lazylab.api.load reads (an `ntk arm` "
                                                                  "file: not read back); it reads"),
])
def test_a_file_that_is_none_of_them_is_one_line(tmp_path, content, words):
    path = tmp_path / "x.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(LazylabError) as exc:
        api.load(path)
    assert str(exc.value).startswith(f"load: {path}") and words in str(exc.value) and "\n" not in str(exc.value)


def test_load_reads_the_reference_file_and_reference_points_to_load(place):
    from lazylab.reference import reference_path

    ref = api.load(reference_path())
    assert ref.provenance == api.reference().provenance and ref.cells == api.reference().cells
    with pytest.raises(LazylabError, match=r"not a lazylab reference file .*; api\.load\(path\) reads"):
        api.reference(place["files"]["ladder"])


# ------------------------------------------------------------------------------------------ api.runs
def test_runs_gives_one_kind_per_call(place):
    memo = place["memo"]
    every = api.runs(kind=None, cache_dir=memo)
    assert {"run", "convex"} <= {r.kind for r in every}
    runs = api.runs(cache_dir=memo)
    assert runs and {r.kind for r in runs} == {"run"} and all(r.lr is not None for r in runs)
    convex = api.runs(kind="convex", cache_dir=memo)
    assert [(r.arm, r.width, r.seed, r.lr) for r in convex] == [("yat-frozen", 16, 0, None)]
    assert "lambda" in convex[0].detail
    both = api.runs(kind=["run", "convex"], arm="yat-frozen", cache_dir=memo)
    assert sorted(r.key for r in both) == sorted(r.key for r in every if r.kind in ("run", "convex")
                                                 and r.arm == "yat-frozen")


# ------------------------------------------------------------------------------------------ the tour
def test_the_api_tour_runs_against_a_memo_with_convex_readouts(place):
    """examples/api_tour.py crashed (TypeError at lr={r.lr:g}) once the memo held a `--readout both` result:
    `api.runs(arm="yat-frozen", width=[16, 64, 256], seed=0)` then held the convex row at m = 16 (lr None)."""
    memo = place["memo"]
    assert api.runs(arm="yat-frozen", width=16, seed=0, kind="convex", cache_dir=memo)  # what used to crash it
    env = {**os.environ, "LAZYLAB_CACHE": str(memo)}
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "api_tour.py")], cwd=place["root"], env=env,
                          check=False, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    out = proc.stdout
    assert "convex yat-frozen m=16 seed=0 train=1024: test " in out
    assert "1 convex readouts of yat-frozen in the memo" in out
    assert "run yat-frozen m=16 lr=0.1 epochs=1 train=1024" in out  # the CLI's training run, listed with its rate
    assert "api.load: 80 cells" in out
