"""The shipped reference results (lazylab/reference/paper.json), their loader and their export script.

``check_reference`` holds every check of a reference file against its own records; it runs on the
shipped file (which must be the whole paper ladder: 300 runs and the brackets' extensions) and on one exported here from a tiny
real ladder (2 arms, 2 widths, 1 epoch on 512 real Fashion-MNIST images, rates bracketed: seconds).
"""

from __future__ import annotations

import importlib.util
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from lazylab.errors import LazylabError
from lazylab.experiments import Workspace
from lazylab.experiments import render as xr
from lazylab.experiments.ladder import PAPER_ARMS, PAPER_WIDTHS
from lazylab.experiments.render import build_reference
from lazylab.reference import KIND, PROVENANCE_KEYS, REFERENCE_SCHEMA, dump_reference, load_reference, reference_path

ROOT = Path(__file__).resolve().parents[1]
TINY_PLAN = dict(arms=["yat-frozen", "yat-trained"], widths=[8, 16], seeds=[0], epochs=1, train_size=512, lr=None)


def _export_script():
    spec = importlib.util.spec_from_file_location("export_reference", ROOT / "scripts" / "export_reference.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def check_reference(doc: dict) -> None:
    """Every number of a reference document agrees with its own run records (see the module docstring)."""
    assert doc["kind"] == KIND and set(PROVENANCE_KEYS) <= set(doc["provenance"])
    p = doc["payload"]
    plan, runs = p["plan"], p["runs"]
    prov = doc["provenance"]
    assert prov["runs"] == len(runs) and len({r["key"] for r in runs}) == len(runs)
    assert plan["data"] == prov["data"]
    assert all(r["config"]["code"] == prov["code"] for r in runs), "a run computed by another code identity"
    assert prov["lazylab"] in prov["code"]
    seeds = plan["seeds"]
    expected = 0
    for a in p["arms"]:
        assert not a.get("failed"), a["arm"]
        if plan["lr"] is None:
            expected += _check_bracket(a, plan, runs)
        expected += len(plan["widths"]) * len(seeds)
        for w in plan["widths"]:
            cell = a["cells"][str(w)]
            mine = [r for r in runs if r["config"]["arm"] == a["arm"] and r["config"]["width"] == w
                    and r["config"]["lr"] == a["lr"] and r["config"]["seed"] in seeds]
            assert sorted(r["config"]["seed"] for r in mine) == sorted(seeds) == sorted(cell["seeds"])
            accs = [r["best_acc"] for r in mine if r["best_acc"] is not None]
            assert cell["n"] == len(mine) and cell["diverged"] == sum(r["diverged"] is not None for r in mine)
            if accs:
                assert math.isclose(cell["mean"], float(np.mean(accs)), abs_tol=1e-9), (a["arm"], w)
            else:
                assert cell["mean"] is None
            if "unstable" in cell:
                assert cell["unstable"] == sum(bool(r.get("unstable")) for r in mine), (a["arm"], w)
            for r in mine:
                assert r["config"]["epochs"] == plan["epochs"] and r["config"]["train_size"] == plan["train_size"]
                assert len(r["curve"]) == len(r["train_loss"]) <= plan["epochs"]
                if r["best_acc"] is not None:
                    assert r["best_acc"] == max(r["curve"]) and r["best_epoch"] == int(np.argmax(r["curve"])) + 1
    assert len(runs) == expected
    law = p["analysis"]["ladder_law"]
    assert set(law) == set(plan["arms"])
    if "convex" in p:
        _check_convex(p)
    if "optimum" in p:
        _check_optimum(p)


def _check_convex(p: dict) -> None:
    """The convex part (``run_convex_ladder``) agrees with its own records: each arm's lambda at each width is
    where its choice's walk down the path stopped (every lambda fitted but the last beat the best before it, the
    last did not or ended the path) and the best of those it fitted, every cell of that width is fitted at it, the
    cell means and the wall are the records' means (its count of choices not bracketed by lower held-out
    scores too), and the answer is what ``answer_rows`` computes from the records."""
    from lazylab.arms import get_arm
    from lazylab.exchange import answer_rows
    from lazylab.experiments.convex_wall import lambda_at_edge
    from lazylab.model import seed_indices

    plan, c = p["plan"], p["convex"]
    widths = (c.get("partial") or {}).get("widths") or plan["widths"]
    choices = {(ch["config"]["arm"], ch["config"]["width"]): ch for ch in c["choices"]}
    refined = {(r["config"]["arm"], r["config"]["width"]): r for r in c.get("refinements", [])}
    assert {arm for arm, _ in choices} == set(c["arms"])
    # every width of the frontier is refined, or its cells sit at the walk's lambda and it is listed as unrefined
    assert sorted(map(tuple, c.get("unrefined", []))) == sorted(k for k in choices if k not in refined
                                                                  and k[1] in widths)
    for arm, a in c["arms"].items():
        for w in widths:
            walk = choices[(arm, w)]
            _check_walk(walk, c["lambda_seed"])
            ch = refined.get((arm, w), walk)
            if (arm, w) in refined:
                _check_refinement(ch, walk)
            assert ch["lambda"] == a["lambdas"][str(w)]
            seeds = seed_indices(w, ch["config"]["seed"], plan["train_size"]) if get_arm(arm).init == "data" else []
            unseen = np.setdiff1d(np.arange(plan["train_size"] - ch["config"]["holdout"], plan["train_size"]), seeds)
            assert ch["holdout_scored"] == len(unseen), (arm, w)  # held-out images that seed a unit are not scored
            mine = [r for r in c["runs"] if r["config"]["arm"] == arm and r["config"]["width"] == w]
            assert sorted(r["config"]["seed"] for r in mine) == sorted(plan["seeds"]), (arm, w)
            assert all(r["lambda"] == r["config"]["lam"] == ch["lambda"] and r["stop"] and r["grad_norm"] >= 0
                       and r["config"]["train_size"] == plan["train_size"] and r["config"]["data"] == plan["data"]
                       for r in mine)
            cell = a["cells"][str(w)]
            assert cell["n"] == len(mine)
            assert math.isclose(cell["mean"], float(np.mean([r["test_acc"] for r in mine])), abs_tol=1e-9), (arm, w)
            row = p["analysis"]["wall"]["arms"][arm][str(w)]
            assert math.isclose(row["convex_acc"], cell["mean"], abs_tol=1e-9)
    assert len(c["runs"]) == len(c["arms"]) * len(widths) * len(plan["seeds"])
    assert p["analysis"]["wall"]["lambda_at_edge"] == lambda_at_edge(c)
    # readouts finished at a partial frontier's other widths: beyond its widths, each at its own width's choice
    pending = c.get("pending") or {"runs": [], "choices": []}
    later = {(ch["config"]["arm"], ch["config"]["width"]): ch for ch in pending["choices"]}
    for ch in later.values():
        assert ch["config"]["width"] not in widths and ch["config"]["arm"] in c["arms"]
        _check_walk(ch, c["lambda_seed"])
    for r in pending.get("refinements", []):
        _check_refinement(r, later[(r["config"]["arm"], r["config"]["width"])])
        later[(r["config"]["arm"], r["config"]["width"])] = r
    for r in pending["runs"]:
        assert r["lambda"] == r["config"]["lam"] == later[(r["config"]["arm"], r["config"]["width"])]["lambda"]
    frozen: dict = {}
    for r in c["runs"]:
        frozen.setdefault(r["config"]["arm"], {}).setdefault(r["config"]["width"], []).append(r["test_acc"])
    rates = {a["arm"]: a["lr"] for a in p["arms"]}
    trained = {}
    for arm in dict.fromkeys(r["trained"] for r in p["analysis"]["answer"]["rows"]):  # in the answer's order
        per: dict = {}
        for r in p["runs"]:
            cfg = r["config"]
            if cfg["arm"] == arm and cfg["lr"] == rates[arm] and cfg["width"] in plan["widths"] \
                    and cfg["seed"] in plan["seeds"] and r["best_acc"] is not None:
                per.setdefault(cfg["width"], []).append(r["best_acc"])
        trained[arm] = per
    pairs = {r["trained"]: r["frozen"] for r in p["analysis"]["exchange"]["rows"]}
    expected = answer_rows(trained, frozen, pairs, widths)
    got = [{k: v for k, v in r.items() if k != "protocol"} for r in p["analysis"]["answer"]["rows"]]
    assert got == json.loads(json.dumps(expected))


def _check_refinement(r: dict, walk: dict) -> None:
    """A refinement starts from its walk's choice, fits half-decade rungs beside it (and on, while each step
    gains, until the best is bracketed by fitted neighbours), and keeps a penalty whose held-out accuracy is
    within the gain (0.1 point) of the best over walk and refinement; a refined penalty replaces the walk's
    only by gaining at least that."""
    from lazylab.experiments.convex import REFINE_GAIN, REFINE_VERSION

    arm, w = r["config"]["arm"], r["config"]["width"]
    assert r["config"]["version"] == REFINE_VERSION, (arm, w)
    assert r["coarse"] == r["config"]["coarse"] == walk["lambda"], (arm, w)
    assert [list(x) for x in r["config"]["walk"]] == sorted(([float(k), v] for k, v in walk["selection"].items()),
                                                            reverse=True)
    rungs = {float(k) for k in r["selection"]}
    assert {float(f"{walk['lambda'] * 10 ** 0.5:.3g}"), float(f"{walk['lambda'] / 10 ** 0.5:.3g}")} <= rungs, (arm, w)
    every = {**walk["selection"], **r["selection"]}
    assert r["best"] == pytest.approx(max(every.values()))
    # version 2: the best is bracketed, some best penalty having both half-decade neighbours fitted (past an end
    # of the path the refinement may stop at its limit of ``beyond`` steps instead)
    fitted = sorted(float(k) for k in every)
    tops = [i for i, lam in enumerate(fitted) if every[repr(lam)] == r["best"]]
    beyond = r["config"]["beyond"]
    assert any(0 < i < len(fitted) - 1 and fitted[i + 1] / fitted[i] < 3.2 and fitted[i] / fitted[i - 1] < 3.2
               or len(r["selection"]) == 2 + beyond for i in tops), (arm, w, every)
    chosen = every[repr(r["lambda"])]
    assert chosen >= r["best"] - REFINE_GAIN - 1e-9, (arm, w, chosen, r["best"])
    if r["lambda"] != walk["lambda"]:
        assert chosen >= walk["selection"][repr(walk["lambda"])] + REFINE_GAIN - 1e-9, (arm, w)


def _check_optimum(p: dict) -> None:
    """The trained optimum (``run_optimum``) agrees with its own records: each arm and width's rate and epochs are
    what ``choose`` picks from its selection runs, and stay so with every test curve reversed (no choice reads
    the test set); the refits ran at that rate for those epochs; the cell's test accuracy is the refits' mean;
    and the fair answer's trained accuracies are those means."""
    from lazylab.experiments.optimum import MAX_EXTEND, choose

    o = p["optimum"]
    runs = [r for r in o["runs"] + o.get("pending", {}).get("runs", [])]
    fits = {(r["config"]["arm"], r["config"]["width"], r["config"]["seed"]): r for r in o["fits"]}
    fair = {(r["trained"], r["width"]): r for r in p["analysis"]["fair"]["answers"]["fair"]}
    for arm, a in o["arms"].items():
        for w, cell in a["cells"].items():
            mine = [r for r in runs if r["config"]["arm"] == arm and r["config"]["width"] == int(w)]
            if not cell["n"]:
                assert (arm, int(w)) not in fair
                continue
            chosen = choose(mine)
            assert chosen == choose([{**r, "test_curve": r["test_curve"][::-1]} for r in mine]), (arm, w)
            assert chosen["lr"] == cell["lr"], (arm, w)
            # an end of the rates tried is chosen only once the grid (3 rates) has been extended as far as it may
            assert chosen["edge"] is None or len(cell["rates"]) == 3 + MAX_EXTEND, (arm, w)
            assert [chosen["epochs"][s] for s in p["plan"]["seeds"]] == cell["epochs"], (arm, w)
            accs = []
            for s in p["plan"]["seeds"]:
                f = fits[(arm, int(w), s)]
                assert f["config"]["lr"] == cell["lr"] and f["config"]["epochs"] == chosen["epochs"][s] == f["epochs"]
                assert f["config"]["train_size"] == p["plan"]["train_size"] and "test_curve" not in f
                accs.append(f["test_acc"])
            assert cell["test_acc"] == pytest.approx(np.mean(accs)) == pytest.approx(fair[(arm, int(w))]["trained_acc"])
            for r in mine:  # a selection run stopped for a stated reason, its best epoch the first best held-out
                assert r["stop"] in ("patience", "budget", "diverged")
                assert r["diverged"] is not None or r["best_epoch"] == int(np.argmax(r["held_out"])) + 1


def _check_walk(ch: dict, lambda_seed: int) -> None:
    """A lambda choice is where its walk down the path stopped: every lambda fitted but the last beat the best
    before it, the last did not or ended the path, and the choice is the best of those fitted."""
    arm, w = ch["config"]["arm"], ch["config"]["width"]
    path = ch["config"]["lambdas"]
    fitted = sorted((float(k) for k in ch["selection"]), reverse=True)  # the memo stores keys sorted as text
    acc = [ch["selection"][repr(lam)] for lam in fitted]
    assert fitted == path[: len(fitted)] and ch["config"]["seed"] == lambda_seed, (arm, w)
    assert all(acc[i + 1] > max(acc[: i + 1]) for i in range(len(acc) - 2)), (arm, w)  # each gained but the last
    assert len(fitted) == len(path) or acc[-1] <= max(acc[:-1]), (arm, w)  # which stopped the walk
    assert ch["lambda"] == max(fitted, key=lambda lam: (ch["selection"][repr(lam)], lam)), (arm, w)


def _check_bracket(a: dict, plan: dict, runs: list[dict]) -> int:
    """The arm's chosen rate is what its rule (``lazylab.bracket``) picks from the file's own bracket runs, every
    rate tried has a run per bracket seed, and a choice or best at an end of the rates tried says why.
    Returns: the number of bracket runs that are not also ladder cells."""
    from lazylab.bracket import BRACKET_WIDTH, Bracket, RateScore

    rule = (plan.get("bracket") or {}).get("rule", "argmax")  # files from before the rule was recorded: argmax
    bseeds = (plan.get("bracket") or {}).get("seeds", [0])
    sel = a.get("selection") or {}
    b = Bracket(rule=rule, grid=sel.get("grid") or [float(lr) for lr in a["bracket"]])
    for lr in (float(k) for k in a["bracket"]):
        recs = sorted((r for r in runs if r["config"]["arm"] == a["arm"] and r["config"]["width"] == BRACKET_WIDTH
                       and r["config"]["lr"] == lr and r["config"]["seed"] in bseeds), key=lambda r: r["config"]["seed"])
        assert [r["config"]["seed"] for r in recs] == sorted(bseeds), (a["arm"], lr)
        b.scores[lr] = RateScore.of(lr, recs)
        mean = a["bracket"][repr(lr)]
        assert (mean is None) if b.scores[lr].mean is None else math.isclose(mean, b.scores[lr].mean, abs_tol=1e-9)
    assert a["lr"] == b.chosen(), f"{a['arm']}: the chosen rate is not what the {rule} rule picks from the runs"
    if sel:
        assert sel["chosen"] == a["lr"] and sel["rule"] == rule and sel["edge"] == b.edge()
        assert b.wants_extension() is None, f"{a['arm']}: the bracket stopped before its grid was extended"
        ends = (b.rates[0], b.rates[-1])
        if a["lr"] in ends or b.best().lr in ends:  # an edge is never silent
            assert sel["edge"], a["arm"]
    overlap = len(set(bseeds) & set(plan["seeds"])) if BRACKET_WIDTH in plan["widths"] else 0
    return len(b.scores) * len(bseeds) - overlap


def test_the_shipped_reference_is_the_whole_paper_ladder_and_agrees_with_its_records():
    path = reference_path()
    if not path.is_file():
        pytest.fail(f"{path} is not in this tree: export it with `python scripts/export_reference.py --cache-dir MEMO` "
                    "from a memo holding the whole paper ladder (docs/render.md)")
    # the selection runs' per-epoch curves (50 epochs, held-out and test) are most of it
    assert path.stat().st_size < 2_500_000, "the reference file should stay under a few MB"
    doc = load_reference()
    plan = doc["payload"]["plan"]
    assert doc["preset"] == "paper"
    assert (plan["arms"], plan["widths"], plan["seeds"], plan["epochs"], plan["train_size"], plan["lr"]) == \
        (list(PAPER_ARMS), list(PAPER_WIDTHS), [0, 1, 2], 12, 60000, None)
    # the brackets' grid extensions come on top of the plan's runs (300 before any)
    assert len(doc["payload"]["runs"]) >= xr._plan("paper").n_runs() == 300
    assert plan["bracket"] == {"rule": "1se", "width": 256, "seeds": [0, 1, 2]}
    check_reference(doc)
    assert doc["provenance"]["where"] and doc["provenance"]["when"][:2] == "20"
    # the paper ladder measures every published point, and its analysis holds the redundancy grid
    from lazylab.published import compare

    assert len(compare(doc["payload"])) == 8
    assert len(doc["payload"]["analysis"]["redundancy_grid"]) == 12


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A tiny real ladder in a fresh memo, and its reference document."""
    from lazylab.experiments.ladder import run_ladder

    import dataclasses

    from lazylab.experiments.convex import run_convex_ladder

    memo = tmp_path_factory.mktemp("refmemo")
    ws = Workspace(cache_dir=memo)
    plan = xr._plan(None, TINY_PLAN)
    run_ladder(ws, plan)
    run_convex_ladder(ws, dataclasses.replace(plan, arms=tuple(a for a in plan.arms if not a.trained)))
    doc = build_reference(ws, plan, "tiny", where="test machine", when="2026-01-02")
    path = tmp_path_factory.mktemp("ref") / "tiny.json"
    path.write_text(dump_reference(doc))
    return {"memo": memo, "doc": doc, "path": path, "plan": plan}


def test_an_exported_reference_reads_back_and_agrees_with_its_records(tiny):
    doc = load_reference(tiny["path"])
    assert doc == json.loads(json.dumps(tiny["doc"]))
    assert len(doc["payload"]["convex"]["runs"]) == 2 and doc["payload"]["analysis"]["answer"]["rows"]
    check_reference(doc)
    assert len(doc["payload"]["runs"]) == 4 + 4 + 3 and doc["provenance"]["when"] == "2026-01-02"
    assert doc["provenance"]["command"] == "lazylab ladder --preset tiny"
    # what `lazylab ladder --report --json` writes for the same plan
    accs = {r["key"]: r["best_acc"] for r in doc["payload"]["runs"]}
    assert all(0 < a <= 100 for a in accs.values())


def test_a_payload_from_before_the_unstable_field_gets_it_from_its_loss_curves(tiny):
    from lazylab.reference import check_payload

    payload = json.loads(json.dumps(tiny["doc"]["payload"]))
    want_runs = [r["unstable"] for r in payload["runs"]]
    want_cells = [c["unstable"] for a in payload["arms"] for c in a["cells"].values()]
    run = payload["runs"][0]
    run["train_loss"][run["best_epoch"] - 1] = 7.5  # above ln 10 at its best epoch: now unstable
    for r in payload["runs"]:
        del r["unstable"]
    for a in payload["arms"]:
        for c in a["cells"].values():
            del c["unstable"]
    check_payload(payload)
    assert payload["runs"][0]["unstable"] and "ln 10" in payload["runs"][0]["unstable"]
    assert [r["unstable"] for r in payload["runs"][1:]] == want_runs[1:]
    cells = [c["unstable"] for a in payload["arms"] for c in a["cells"].values()]
    assert sum(cells) == sum(want_cells) + (not want_runs[0] and run["config"]["lr"] ==
                                            next(a["lr"] for a in payload["arms"] if a["arm"] == run["config"]["arm"]))


def test_a_changed_record_breaks_the_check(tiny):
    doc = json.loads(json.dumps(tiny["doc"]))
    doc["payload"]["runs"][0]["best_acc"] += 1.0
    with pytest.raises(AssertionError):
        check_reference(doc)


def _nudge_first_mean(text: str) -> str:
    """The file with the last digit of its first cell mean changed: still a valid accuracy, another number."""
    return re.sub(r'("mean": \d+\.\d*?)(\d)(?=[,}])', lambda m: m[1] + str((int(m[2]) + 1) % 10), text, count=1)


@pytest.mark.parametrize("damage, needle", [
    (lambda t: "{not json", "not JSON"),
    (lambda t: t.replace(KIND, "something else"), "not a lazylab reference file"),
    (lambda t: t.replace(f'"schema": {REFERENCE_SCHEMA}', '"schema": 99'), "schema 99"),
    (lambda t: t.replace('"where":', '"wear":'), "field provenance.where: Field required"),
    (lambda t: t.replace('"digest":', '"digits":'), "field provenance.digest: Field required"),
    (lambda t: t.replace('"runs": 11', '"runs": 12'), "12 runs"),
    (lambda t: t.replace('"widths": [8, 16]', '"widths": [8, "x"]'),
     "field payload.plan.widths[1]: Input should be a valid integer"),
    (lambda t: t.replace('"arm": "yat-trained"', '"arm": "other"', 1), "'arms' does not hold"),
    (_nudge_first_mean, "its digest does not match its contents (changed after export?)"),
    (lambda t: t.replace('"ladder_law": {', '"ladder_law": {"zz-extra": 7, ', 1),
     "field payload.analysis.ladder_law.zz-extra: Input should be"),
])
def test_a_bad_reference_file_is_one_line(tiny, tmp_path, damage, needle):
    bad = tmp_path / "bad.json"
    bad.write_text(damage(tiny["path"].read_text()))
    with pytest.raises(LazylabError) as exc:
        load_reference(bad)
    assert needle in str(exc.value) and "\n" not in str(exc.value)
    with pytest.raises(LazylabError, match="no such file"):
        load_reference(tmp_path / "absent.json")
    with pytest.raises(LazylabError, match="is a folder, not a regular file"):
        load_reference(tmp_path)


def test_the_export_script_refuses_an_incomplete_memo_in_one_line(tiny, tmp_path, capsys):
    code = _export_script().main(["--cache-dir", str(tiny["memo"]), "--out", str(tmp_path / "paper.json")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error: ") and "paper ladder" in err[0], err
    assert not (tmp_path / "paper.json").exists()
    code = _export_script().main(["--cache-dir", str(tmp_path / "nowhere"), "--out", str(tmp_path / "paper.json")])
    assert code == 2 and "not a directory" in capsys.readouterr().err


def test_the_reference_is_package_data():
    text = (ROOT / "pyproject.toml").read_text()
    assert '"lazylab.reference" = ["*.json"]' in text


def test_the_results_page_holds_the_reference_s_tables():
    """docs/results.md's tables are what scripts/results_tables.py writes from the shipped reference."""
    spec = importlib.util.spec_from_file_location("results_tables", ROOT / "scripts" / "results_tables.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--check"]) == 0
