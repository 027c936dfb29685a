"""Ladder files and the shipped reference read back like options (issue 32): their schema, their digest, and what
``lazylab render`` does with a damaged one.

* The shipped ``lazylab/reference/paper.json`` carries the SHA-256 of its payload; a changed number is reported by
  ``render report`` in one line and the page is drawn without the reference (exit 0).
* A property test mutates a small valid ladder ``--json`` file (a trimmed copy of the shipped reference's payload,
  with a wall added) and runs ``lazylab render report --from`` on it with only the ladder's job (its figures and its
  sections of the page): exit 0 with the file's ladder drawn, or exit 2 with one ``error:`` line; never exit 1,
  never a hang, never a memo record.

Every command runs in this process through ``lazylab.cli.main``; nothing is trained.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from cli_helpers import fuzz, lines, no_hang, run
from lazylab.cli import main
from lazylab.errors import LazylabError
from lazylab.reference import REFERENCE_FILE, check_payload, dump_reference, load_reference, payload_digest

ARMS = ("yat-frozen", "yat-trained")
WIDTHS = (16, 256, 1024)
CASE_S = 300  # one command, drawn or refused: far above a case on a loaded 2-core machine; a hang never ends


@pytest.fixture
def only_jobs(monkeypatch):
    """``render`` runs only the named jobs (the others' computations are not what these tests check)."""
    import lazylab.render.report as report

    def keep(*names):
        monkeypatch.setattr(report, "GIF_JOBS", ())
        monkeypatch.setattr(report, "DATA_JOBS", ())
        monkeypatch.setattr(report, "FIGURE_JOBS", tuple(names))

    return keep


# --------------------------------------------------------------- the shipped reference and its digest
def test_the_shipped_reference_carries_the_digest_of_its_payload():
    text = REFERENCE_FILE.read_text()
    doc = json.loads(text)
    digest = doc["provenance"]["digest"]
    assert re.fullmatch(r"[0-9a-f]{64}", digest)
    assert digest == payload_digest(doc["payload"]) == load_reference()["provenance"]["digest"]
    assert dump_reference(doc) == text  # the file is exactly what the export writes


def test_the_digest_covers_every_value_of_the_payload_and_not_its_layout():
    doc = json.loads(REFERENCE_FILE.read_text())
    p = doc["payload"]
    base = payload_digest(p)
    assert payload_digest(json.loads(json.dumps(p, indent=3))) == base  # another layout, the same numbers
    changed = copy.deepcopy(p)
    changed["arms"][0]["cells"]["512"]["mean"] += 1e-9
    assert payload_digest(changed) != base
    changed = copy.deepcopy(p)
    changed["runs"][-1]["curve"][0] = 10.0
    assert payload_digest(changed) != base


def _with_changed_mean(tmp_path: Path, points: float = 1.0) -> tuple[Path, float, float]:
    """A copy of the shipped reference whose yat-frozen m = 512 cell mean is ``points`` higher; its digest as shipped."""
    text = REFERENCE_FILE.read_text()
    old = json.loads(text)["payload"]["arms"][0]["cells"]["512"]["mean"]
    new = old + points
    cell = '"512": {"diverged": 0, "final_mean": '
    at = text.index(cell)  # the first arm's m = 512 cell
    end = text.index("}", at)
    assert text[at:end].count(f'"mean": {json.dumps(old)}') == 1
    path = tmp_path / "paper.json"
    path.write_text(text[:at] + text[at:end].replace(f'"mean": {json.dumps(old)}', f'"mean": {json.dumps(new)}') + text[end:])
    assert json.loads(path.read_text())["payload"]["arms"][0]["cells"]["512"]["mean"] == new
    return path, old, new


def test_a_changed_cell_mean_is_refused_in_one_line(tmp_path):
    path, _, _ = _with_changed_mean(tmp_path)
    with pytest.raises(LazylabError) as exc:
        load_reference(path)
    assert str(exc.value) == (f"reference results {path}: its digest does not match its contents "
                              "(changed after export?)")


def test_render_report_says_a_changed_reference_is_unavailable_and_draws_the_page_without_it(
        tmp_path, monkeypatch, only_jobs, capsys):
    """The paper ladder's job reads the reference (the memo holds no paper ladder); with one cell mean changed by a
    point it is reported in one line and the page says the paper ladder is not shown, exit 0."""
    import lazylab.reference as reference

    only_jobs("paper")
    path, old, new = _with_changed_mean(tmp_path)
    monkeypatch.setattr(reference, "reference_path", lambda: path)
    memo = tmp_path / "memo"
    code, out, err = run(capsys, "render", "report", "--out", tmp_path / "out", "--cache-dir", memo)
    assert code == 0, err
    said = [line for line in lines(out + err) if "digest does not match" in line]
    assert len(said) == 1, out + err
    assert said[0].startswith("paper ladder: none (") and str(path) in said[0]
    assert "the reference results are unavailable" in said[0]
    page = (tmp_path / "out" / "report.html").read_text()
    assert "No paper ladder to show" in page and "digest does not match its contents" in page
    assert "Shipped reference results" not in page and f"{new:.2f}" not in page
    assert not (tmp_path / "out" / "paper_accuracy.png").exists()
    # the same file as shipped is shown: the fallback above is the digest's doing
    path.write_text(REFERENCE_FILE.read_text())
    code, out, err = run(capsys, "render", "report", "--out", tmp_path / "out2", "--cache-dir", memo)
    assert code == 0, err
    assert "paper ladder: reference" in out and "digest" not in out + err
    page = (tmp_path / "out2" / "report.html").read_text()
    assert "Shipped reference results" in page and f"{old:.2f}" in page
    assert (tmp_path / "out2" / "paper_accuracy.png").is_file()


@pytest.mark.parametrize("damage, needle", [
    (lambda t: t[: len(t) // 2], "not JSON"),
    (lambda t: t.replace('"payload": {', '"payload": [', 1), "not JSON"),
    (lambda t: t.replace('"n": 3', '"n": "3"', 1), "field payload.arms[0].cells"),
])
def test_render_report_falls_back_from_a_malformed_reference_in_one_line(tmp_path, monkeypatch, only_jobs, capsys,
                                                                          damage, needle):
    import lazylab.reference as reference

    only_jobs("paper")
    path = tmp_path / "paper.json"
    path.write_text(damage(REFERENCE_FILE.read_text()))
    monkeypatch.setattr(reference, "reference_path", lambda: path)
    code, out, err = run(capsys, "render", "report", "--out", tmp_path / "out", "--cache-dir", tmp_path / "memo")
    assert code == 0, err
    said = [line for line in lines(out + err) if str(path) in line]
    assert len(said) == 1 and needle in said[0] and "reference results are unavailable" in said[0], out + err


# ------------------------------------------------------------------------- a small ladder file
def small_payload() -> dict:
    """A valid ladder payload: the shipped reference's yat-frozen and yat-trained at m = 16, 256 and 1024, their seed-0
    runs at the chosen rate, every analysis section trimmed to them, and a wall (``ladder --readout both``) added."""
    p = copy.deepcopy(json.loads(REFERENCE_FILE.read_text())["payload"])
    keep = {str(w) for w in WIDTHS}
    p["plan"] = {**p["plan"], "arms": list(ARMS), "widths": list(WIDTHS)}
    p["arms"] = [{**a, "cells": {w: c for w, c in a["cells"].items() if w in keep}} for a in p["arms"] if a["arm"] in ARMS]
    lr = {a["arm"]: a["lr"] for a in p["arms"]}
    p["runs"] = [r for r in p["runs"] if r["config"]["arm"] in ARMS and str(r["config"]["width"]) in keep
                 and r["config"]["seed"] == 0 and r["config"]["lr"] == lr[r["config"]["arm"]]]
    a = p["analysis"]
    a["ladder_law"] = {k: v for k, v in a["ladder_law"].items() if k in ARMS}
    a["movement"] = {k: {w: s for w, s in v.items() if w in keep} for k, v in a["movement"].items() if k in ARMS}
    a["movement_law"] = {k: v for k, v in a["movement_law"].items() if k in ARMS}
    a["gap"] = {k: {**g, "per_width": {w: v for w, v in g["per_width"].items() if w in keep},
                    "se": {w: v for w, v in g["se"].items() if w in keep}} for k, g in a["gap"].items() if g["frozen"] in ARMS}
    a["redundancy"] = {k: v for k, v in a["redundancy"].items() if k == "yat"}
    a["scalars"] = {k: {n: {w: s for w, s in per.items() if w in keep} for n, per in v.items()}
                    for k, v in a["scalars"].items() if k in ARMS}
    a["exchange"]["rows"] = [r for r in a["exchange"]["rows"] if r["trained"] in ARMS and str(r["width"]) in keep]
    a["warnings"] = a["warnings"][:2]
    a["redundancy_grid"] = a["redundancy_grid"][:2]
    row = {"seeds": 3, "final_acc": 80.0, "gap": 2.5, "loss_gap": 0.12, "protocol_loss": 0.5, "convex_loss": 0.38,
           "grad_norm": 3e-6, "converged": True}
    a["wall"] = {"arms": {"yat-frozen": {"16": {**row, "best_acc": 75.0, "convex_acc": 77.5},
                                         "256": {**row, "best_acc": 83.0, "convex_acc": 85.5, "converged": False}}},
                 "law": {"yat-frozen": {"protocol": {"widths": [16, 256], "rule": "climbing", "skipped": "2 widths"}}},
                 "lambda_at_edge": [0, 2]}
    return p


def test_the_small_payload_and_the_shipped_one_pass_their_schema():
    p = small_payload()
    assert check_payload(copy.deepcopy(p), "small") == p
    assert len(p["runs"]) == 6 and [a["arm"] for a in p["arms"]] == list(ARMS)
    shipped = json.loads(REFERENCE_FILE.read_text())["payload"]
    assert check_payload(copy.deepcopy(shipped), "shipped") == shipped


def test_an_older_payload_without_the_newer_fields_still_reads():
    """What the first ladder --json files held: no unstable marks, selection, exchange, warnings, bracket rule, wall."""
    p = small_payload()
    for r in p["runs"]:
        del r["unstable"]
    for a in p["arms"]:
        del a["selection"]
        for c in a["cells"].values():
            del c["unstable"], c["final_mean"]
    for k in ("exchange", "warnings", "wall", "redundancy_grid", "scalars", "settings", "redundancy"):
        del p["analysis"][k]
    del p["plan"]["bracket"], p["plan"]["batch"], p["plan"]["fan_in"]
    checked = check_payload(p, "old")
    assert all("unstable" in r for r in checked["runs"])  # derived from the loss curves
    assert all("unstable" in c for a in checked["arms"] for c in a["cells"].values())


@pytest.mark.parametrize("path, value, needle", [
    (("plan", "seeds"), [0, 2**32], "field plan.seeds[1]: Input should be less than or equal to 4294967295"),
    (("plan", "widths"), [16, 16], "field plan.widths: Value error, 16 is given more than once"),
    (("plan", "epochs"), 1001, "field plan.epochs: Input should be less than or equal to 1000"),
    (("plan", "train_size"), 255, "field plan.train_size: Input should be greater than or equal to 256"),
    (("plan", "lr"), 0.0, "field plan.lr: Input should be greater than 0"),
    (("plan", "lr"), 1e300, "field plan.lr: Input should be less than or equal to 1000000"),
    (("runs", 0, "config", "seed"), 4294967296, "field runs[0].config.seed: Input should be less than or equal to"),
    (("runs", 0, "config", "width"), "16", "field runs[0].config.width: Input should be a valid integer"),
    (("runs", 0, "config", "batch"), 128, "field runs[0].config.batch: Input should be greater than or equal to 256"),
    (("runs", 0, "best_acc"), 1e308, "field runs[0].best_acc: Input should be less than or equal to 100"),
    (("runs", 0, "train_loss", 0), float("nan"), "field runs[0].train_loss[0]: Input should be a finite number"),
    (("arms", 0, "cells", "16", "mean"), float("inf"), "field arms[0].cells.16.mean: Input should be a finite number"),
    (("arms", 0, "cells", "16", "std"), -1.0, "field arms[0].cells.16.std: Input should be greater than or equal to 0"),
    (("arms", 0, "cells", "16", "std"), None, "field arms[0].cells.16: Value error, a mean over n = 3 seeds needs its std"),
    (("arms", 0, "bracket"), {"fast": 80.0}, "field arms[0].bracket.fast.[key]: Value error, 'fast' is not a rate"),
    (("analysis", "ladder_law", "yat-frozen", "floor"), "12", "field analysis.ladder_law.yat-frozen.floor"),
    (("analysis", "movement", "yat-trained"), {"016": {"mean": 1.0}}, "field analysis.movement.yat-trained.016.[key]"),
    (("analysis", "movement_law", "yat-trained", "n"), None, "field analysis.movement_law.yat-trained.n"),
    (("analysis", "exchange", "rows", 0, "between"), [16], "field analysis.exchange.rows[0].between"),
    (("analysis", "wall", "arms", "yat-frozen", "16", "grad_norm"), None, "field analysis.wall.arms.yat-frozen.16.grad_norm"),
    (("analysis", "redundancy_grid", 0, "mean_abs_corr", "mean"), None, "field analysis.redundancy_grid[0].mean_abs_corr.mean"),
    (("analysis", "gap", "yat-trained - yat-frozen", "se"), None, "field analysis.gap.yat-trained - yat-frozen.se"),
    (("analysis", "warnings"), [["nested"]], "field analysis.warnings[0]: Input should be a valid string"),
    # every reading of the fair answer is written, so a file without one is refused (the fuzz found it)
    (("analysis", "fair", "answers"), {"protocol": []}, "field analysis.fair.answers.fair: Field required"),
    (("arms", 1, "arm"), "relu-trained", "'arms' does not hold one summary per arm of the plan"),
    (("arms", 0, "cells", "512"), {"n": 1, "mean": 80.0, "std": 0.0}, "field arms[0].cells.512: not a width of the plan"),
    (("runs", 0, "config", "arm"), "relu-frozen", "field runs[0].config.arm: 'relu-frozen' is not in the plan"),
])
def test_a_value_the_command_line_refuses_is_refused_from_a_file_in_one_line(path, value, needle):
    p = small_payload()
    *parents, last = path
    node = p
    for k in parents:
        node = node[k]
    node[last] = value
    with pytest.raises(LazylabError) as exc:
        check_payload(p, "--from x.json")
    text = str(exc.value)
    assert text.startswith("--from x.json: ") and needle in text and "\n" not in text, text


@pytest.mark.parametrize("empty", [False, True])
def test_a_fair_answer_without_rows_is_left_out_of_the_report(empty, tmp_path, only_jobs, capsys):
    """A memo-only ``ladder --readout both --json`` that found none of the trained optimum's fits writes the fair
    answer with no rows: the report is drawn without its fair table (it used to stop on ``rows[0]``)."""
    only_jobs("ladder")
    p = small_payload()
    if empty:
        p["analysis"]["fair"]["answers"]["fair"] = []
    path, out_dir = tmp_path / "ladder.json", tmp_path / "out"
    path.write_text(json.dumps(p))
    with pytest.raises(SystemExit) as exc:
        main(["render", "report", "--from", str(path), "--out", str(out_dir), "--cache-dir", str(tmp_path / "memo")])
    assert exc.value.code == 0, capsys.readouterr().err[-2000:]
    assert ("fair-table" in (out_dir / "report.html").read_text()) is not empty


def test_an_arm_without_its_rate_is_drawn_as_diverged(tmp_path, only_jobs, capsys):
    """``ArmSummary.lr`` may be absent (its schema's default is None): the ladder table says "diverged" for it
    rather than stopping the report on a KeyError (a find of the property test below)."""
    only_jobs("ladder")
    p = small_payload()
    del p["arms"][0]["lr"]
    path, out_dir = tmp_path / "ladder.json", tmp_path / "out"
    path.write_text(json.dumps(p))
    with pytest.raises(SystemExit) as exc:
        main(["render", "report", "--from", str(path), "--out", str(out_dir), "--cache-dir", str(tmp_path / "memo")])
    assert exc.value.code == 0, capsys.readouterr().err[-2000:]
    page = (out_dir / "report.html").read_text()
    table = page[page.index('id="ladder-table"'):]
    row = table[table.index(f"<td class=l>{p['arms'][0]['arm']}</td>"):][:200]
    assert "<td>diverged</td>" in row, row


def test_a_payload_nested_past_the_bound_is_one_line():
    p = small_payload()
    deep: list = []
    for _ in range(200):
        deep = [deep]
    p["analysis"]["extra"] = deep  # an unknown field: ignored by the schema, still walked by whatever reads on
    with pytest.raises(LazylabError, match=r"^--from x.json: nested more than 32 levels deep"):
        check_payload(p, "--from x.json")


# ------------------------------------------------------------------------- the property test
DEEP = "__deeply_nested__"


def _json_values(depth: int = 2):
    scalars = st.one_of(
        st.none(), st.booleans(), st.sampled_from(["", "x", "16", "1e3", "yat-frozen", "run-" + "0" * 32]),
        st.integers(-3, 3), st.sampled_from([2**31, 2**32, 2**63, 10**30, -(2**32), 65537, 60001, 1001]),
        st.floats(allow_nan=True, allow_infinity=True),
        st.sampled_from([float("nan"), float("inf"), float("-inf"), 1e308, -1e308, 5e-324, 100.0000001, -0.0]),
        st.just(DEEP),
    )
    if depth == 0:
        return scalars
    return st.one_of(scalars, st.lists(_json_values(depth - 1), max_size=3),
                     st.dictionaries(st.sampled_from(["mean", "n", "std", "16", "x", "skipped", "slope"]),
                                     _json_values(depth - 1), max_size=3))


def _paths(doc, prefix=()):
    """Every path into ``doc`` (dict keys, and the first two indices of a list: the rest are alike), the root excluded."""
    out = []
    items = doc.items() if isinstance(doc, dict) else list(enumerate(doc))[:2] if isinstance(doc, list) else ()
    for k, v in items:
        out.append(prefix + (k,))
        out += _paths(v, prefix + (k,))
    return out


def _like(value):
    """Values of ``value``'s own type at the ends of their ranges (the schema may accept them: the readers must too)."""
    if isinstance(value, bool):
        return st.booleans()
    if isinstance(value, int):
        return st.sampled_from([0, 1, 2, 3, 255, 256, 1000, 60000, 65536, 2**32 - 1, -1])
    if isinstance(value, float):
        return st.one_of(st.sampled_from([0.0, -0.0, 5e-324, 1e-300, 1e-9, 1.0, 99.999, 100.0, 1e6, 1e300, 1.7e308,
                                          -1e-9, -1.0, -1e300]), st.floats(-1e308, 1e308))
    if isinstance(value, str):
        return st.sampled_from(["", " ", "<b>&amp;</b>", "é" * 3, "x" * 5000, "\n", "{}", "1e3", "run-" + "f" * 32])
    if isinstance(value, list):
        return st.sampled_from([[], value[:1], value * 2, value[::-1]])
    return st.just({})


BASE = None
PATHS = None


def _base():
    global BASE, PATHS
    if BASE is None:
        BASE = small_payload()
        PATHS = _paths(BASE)
    return BASE, PATHS


@st.composite
def mutated_files(draw):
    """The text of a small ladder file after one to three mutations: a value replaced (by one of another type, a
    non-finite or huge number, deep nesting, or one of its own type at the end of its range), a field removed, an
    unknown field added; or the text cut short."""
    base, paths = _base()
    doc = copy.deepcopy(base)
    what = []
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths))
        *parents, last = path
        node = doc
        try:
            for k in parents:
                node = node[k]
            node[last]
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation removed or replaced the way there
        kind = draw(st.sampled_from(["replace", "like", "like", "remove", "add"]))
        if kind == "replace":
            node[last] = draw(_json_values())
        elif kind == "like":
            node[last] = draw(_like(node[last]))
        elif kind == "remove":
            del node[last]
        elif isinstance(node[last], dict):
            node[last][draw(st.sampled_from(["extra", "mean", "n", "16", "unstable", "wall"]))] = draw(_json_values())
        elif isinstance(node[last], list):
            node[last].append(draw(_json_values()))
        else:
            continue
        what.append(f"{kind} {'.'.join(map(str, path[:4]))}")
    text = json.dumps(doc).replace(json.dumps(DEEP), "[" * 5000 + "]" * 5000, 1)
    if draw(st.integers(0, 9)) == 0:
        text = text[: draw(st.integers(0, len(text) - 1))]
        what.append("truncated")
    event(what[0].split()[0] if what else "unchanged")
    return text


@pytest.fixture(scope="module")
def fuzz_place(tmp_path_factory):
    return tmp_path_factory.mktemp("ladderfuzz")


@fuzz(40)
@given(text=mutated_files())
def test_a_mutated_ladder_file_is_drawn_or_refused_in_one_line(text, fuzz_place, only_jobs, capsys):
    from lazylab.cache import Memo

    only_jobs("ladder")
    path = fuzz_place / "ladder.json"
    path.write_text(text)
    memo, out_dir = fuzz_place / "memo", fuzz_place / "out"
    capsys.readouterr()
    with no_hang(CASE_S), pytest.raises(SystemExit) as exc:
        main(["render", "report", "--from", str(path), "--out", str(out_dir), "--cache-dir", str(memo)])
    code = exc.value.code
    captured = capsys.readouterr()
    event(f"exit {code}")
    assert "Traceback" not in captured.err + captured.out, captured.err
    assert code in (0, 2), (code, captured.err[-2000:])
    if code == 2:
        found = lines(captured.err)
        assert len(found) == 1 and found[0].startswith("error: ") and str(path) in found[0], captured.err
    else:  # drawn: the file's own ladder, as written
        payload = json.loads(text)
        entry = json.loads((out_dir / "manifest.json").read_text())["jobs"]["ladder"]
        assert json.dumps(entry["data"]["plan"], sort_keys=True) == json.dumps(payload["plan"], sort_keys=True)
        assert entry["spec"]["source"]["path"] == str(path)
        page = (out_dir / "report.html").read_text()
        for a in payload["arms"]:
            assert a["arm"] in page or "&" in a["arm"] or "<" in a["arm"] or '"' in a["arm"] or "'" in a["arm"]
        if any(c.get("mean") is not None for a in payload["arms"] for c in a["cells"].values()):
            assert (out_dir / "ladder_accuracy.png").is_file()
    # a file is shown as written: nothing is computed from it, so nothing is stored under any key
    assert not memo.exists() or len(Memo(memo)) == 0
