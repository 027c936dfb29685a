"""scripts/seed_memo.py: the shipped reference's records, written into an empty memo, are found there under the
keys this code looks up, so the paper ladder and its frontier resume from them (and export again) on a fresh machine."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from lazylab.cache import Memo
from lazylab.experiments import Workspace
from lazylab.experiments import render as xr
from lazylab.experiments.render.ladders import _memo_extras, ladder_in_memo
from lazylab.reference import dump_reference, load_reference, payload_digest

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("seed_memo", ROOT / "scripts" / "seed_memo.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    memo = tmp_path_factory.mktemp("seeded")
    assert _script().main(["--cache-dir", str(memo)]) == 0
    return memo


def test_a_seeded_memo_holds_the_whole_paper_ladder_and_its_frontier(seeded, capsys):
    doc = load_reference()
    ws = Workspace(cache_dir=seeded)
    present, missing = ladder_in_memo(ws, xr._plan("paper"))
    assert (present, missing) == (len(doc["payload"]["runs"]), 0)  # brackets and their extensions included
    convex, _ = _memo_extras(ws, xr._plan("paper"))
    shipped = doc["payload"]["convex"]
    assert convex.get("partial") == shipped.get("partial") and convex.get("pending") == shipped.get("pending")
    for arm, a in shipped["arms"].items():
        assert convex["arms"][arm]["lambdas"] == a["lambdas"]
        assert {w: c["mean"] for w, c in convex["arms"][arm]["cells"].items()} == \
            {w: c["mean"] for w, c in a["cells"].items()}, arm
    # a second seeding writes nothing and keeps what is there
    assert _script().main(["--cache-dir", str(seeded)]) == 0
    assert "wrote 0 records" in capsys.readouterr().out


def test_readouts_at_a_width_still_incomplete_are_kept_as_pending(tmp_path):
    """Withhold one arm's widest shipped width: the frontier is partial one width earlier, and the other arms'
    records at that width travel as ``pending`` (and seed a memo again)."""
    doc = load_reference()
    shipped = doc["payload"]["convex"]
    widths = (shipped.get("partial") or {}).get("widths") or doc["payload"]["plan"]["widths"]
    widest = max(widths)
    held = lambda r: r["config"]["arm"] == "gaussian-frozen" and r["config"]["width"] == widest
    memo = Memo(tmp_path / "memo")
    for r in _script().reference_records(doc):
        if not held(r):
            memo.put_record(r["key"], r)
    memo.close()
    ws = Workspace(cache_dir=tmp_path / "memo")
    convex, _ = _memo_extras(ws, xr._plan("paper"))
    assert convex["partial"]["widths"] == [w for w in widths if w != widest]
    pending = convex["pending"]
    # the three other arms' readouts and choices at the withheld width, beside any the file already ships as pending
    expected = [r["key"] for r in shipped["runs"] if r["config"]["width"] == widest and not held(r)]
    assert len(expected) == 9
    already_runs = [r["key"] for r in (shipped.get("pending") or {}).get("runs", [])]
    assert sorted(r["key"] for r in pending["runs"]) == sorted(expected + already_runs)
    already = [r["key"] for r in (shipped.get("pending") or {}).get("choices", [])]
    expected_choices = [r["key"] for r in shipped["choices"] if r["config"]["width"] == widest and not held(r)]
    assert len(expected_choices) == 3
    assert sorted(r["key"] for r in pending["choices"]) == sorted(expected_choices + already)
    # a document carrying them seeds them again
    doc2 = json.loads(json.dumps(doc))
    doc2["payload"]["convex"] = json.loads(json.dumps(convex))
    doc2["provenance"]["digest"] = payload_digest(doc2["payload"])
    path = tmp_path / "ref.json"
    path.write_text(dump_reference(doc2))
    assert load_reference(path)["payload"]["convex"]["pending"]["runs"]
    assert _script().main(["--cache-dir", str(tmp_path / "again"), "--reference", str(path)]) == 0
    assert all(r["key"] in Memo(tmp_path / "again") for r in pending["runs"] + pending["choices"])


def test_a_reference_from_other_code_is_refused_in_one_line(tmp_path, capsys):
    doc = json.loads(json.dumps(load_reference()))
    doc["provenance"]["code"] = "lazylab 0.1.0 numerics 0"
    path = tmp_path / "old.json"
    path.write_text(dump_reference(doc))
    assert _script().main(["--cache-dir", str(tmp_path / "memo"), "--reference", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "would never be looked up" in err


def _altered(tmp_path, change) -> Path:
    """The shipped reference with ``change(doc)`` applied and its digest recomputed (a well-formed file)."""
    doc = json.loads(json.dumps(load_reference()))
    change(doc)
    doc["provenance"]["digest"] = payload_digest(doc["payload"])
    path = tmp_path / "altered.json"
    path.write_text(dump_reference(doc))
    return path


def _swap_key(doc):
    doc["payload"]["runs"][0]["key"] = doc["payload"]["runs"][1]["key"]


@pytest.mark.parametrize("change, needle", [
    (_swap_key, "is not stored under the hash of its configuration"),
    (lambda doc: doc["payload"]["runs"][0].pop("key"), "(no key)"),
    (lambda doc: doc["provenance"].update(data="0123456789abcdef"), "was computed on Fashion-MNIST 0123456789abcdef"),
])
def test_a_record_that_would_never_be_looked_up_is_refused_in_one_line(tmp_path, capsys, change, needle):
    path = _altered(tmp_path, change)
    assert _script().main(["--cache-dir", str(tmp_path / "memo"), "--reference", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and needle in err, err
    assert not (tmp_path / "memo").exists() or len(Memo(tmp_path / "memo")) == 0  # nothing half-written


def test_a_damaged_memo_is_one_line(seeded, tmp_path, capsys):
    import shutil

    memo = tmp_path / "damaged"
    shutil.copytree(seeded, memo)
    db = memo / "cache.db"
    raw = bytearray(db.read_bytes())
    mid = len(raw) // 2
    raw[mid: mid + 50_000] = b"\xff" * len(raw[mid: mid + 50_000])
    db.write_bytes(bytes(raw))
    for extra in memo.glob("cache.db-*"):
        extra.unlink()
    assert _script().main(["--cache-dir", str(memo)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "cannot read the memo" in err, err


def test_runs_lists_the_refinements_and_the_trained_optimum_with_what_chose_them(seeded):
    """``lazylab runs`` lists a refinement by the walk's lambda and the refined one, a selection run by its
    held-out best (no test accuracy: it is never read), a refit by its one test accuracy."""
    from lazylab.runs import list_runs

    doc = load_reference()
    optimum, refinements = doc["payload"]["optimum"], doc["payload"]["convex"]["refinements"]
    rows = list_runs(seeded, kinds=["convex-refine", "optimum-run", "optimum-fit"]).runs
    by_key = {r.key: r for r in rows}
    assert len(rows) == len(refinements) + len(optimum["runs"]) + len(optimum["fits"])
    for rec in refinements:
        row = by_key[rec["key"]]
        assert (row.arm, row.width) == (rec["config"]["arm"], rec["config"]["width"])
        assert row.detail.startswith(f"lambda {rec['coarse']} refined to {rec['lambda']} on held-out images")
    for rec in optimum["runs"]:
        row = by_key[rec["key"]]
        assert (row.kind, row.lr, row.epochs, row.best_acc) == ("optimum-run", rec["config"]["lr"], rec["epochs"], None)
        assert row.detail.startswith(f"held-out best {rec['held_out_best']:.2f} % at epoch {rec['best_epoch']}")
    for rec in optimum["fits"]:
        row = by_key[rec["key"]]
        assert (row.best_acc, row.epochs, row.lr) == (rec["test_acc"], rec["config"]["epochs"], rec["config"]["lr"])
