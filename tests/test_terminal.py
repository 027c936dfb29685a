"""Issue 49, point 6: terminal manners.

$COLUMNS honoured in a pipe (tables fit, in ASCII rules); the suggestions for ``--quick`` and a long option
with one dash; a bare unit name answered with its arms; an unknown arm refused before any unit is imported;
a ladder without a frozen/trained pair naming the arm to add. Nothing trained.
"""

from __future__ import annotations

import os
import subprocess
import sys

from cli_helpers import assert_one_line_error, run

from lazylab.analysis import partners_to_add
from lazylab.cli.options import could_be_arm
from lazylab.cli.output import exchange_parts


def test_columns_sets_the_width_of_tables_in_a_pipe(capsys, memo_dir, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    code, wide, _ = run(capsys, "arms")
    assert code == 0 and max(map(len, wide.splitlines())) > 60  # a log keeps the table's rows whole
    monkeypatch.setenv("COLUMNS", "60")
    code, narrow, _ = run(capsys, "arms")
    assert code == 0
    rows = narrow.splitlines()
    assert max(len(r.encode()) for r in rows) <= 60, narrow  # bytes: awk counts them
    assert rows[1].startswith("+") and all(r.isascii() for r in rows if r.startswith(("+", "|")))
    first_column = {r.split("|")[1].strip() for r in rows if r.startswith("|")}
    for arm in ("yat-frozen", "relu-trained", "gaussian-frozen"):  # whole: the table comes in parts, not cut
        assert arm in first_column, narrow
    assert "(part 2 of 2)" in narrow


def test_a_preset_name_given_as_an_option_suggests_the_preset(capsys, memo_dir):
    code, _, err = run(capsys, "ladder", "--quick")
    assert_one_line_error(code, err, "'--quick'", "did you mean '--preset quick'?")
    code, _, err = run(capsys, "ladder", "--paper", "--dry-run")
    assert_one_line_error(code, err, "did you mean '--preset paper'?")


def test_a_long_option_with_one_dash_is_told_it_needs_two(capsys, memo_dir):
    code, _, err = run(capsys, "ladder", "-preset", "quick")
    line = assert_one_line_error(code, err, "'-preset'", "two dashes (--preset)")
    assert "'-p'" not in line
    code, _, err = run(capsys, "ladder", "-preset=quick")
    assert_one_line_error(code, err, "(--preset)")
    code, _, err = run(capsys, "ladder", "--prset", "quick")  # two dashes, mistyped: click's own suggestion
    assert_one_line_error(code, err, "'--prset'", "--preset")


def test_a_bare_unit_name_is_answered_with_its_arms(capsys, memo_dir):
    code, _, err = run(capsys, "ladder", "--arms", "yat", "--dry-run")
    line = assert_one_line_error(code, err, "unknown arm 'yat': yat is a unit")
    assert line.endswith("its arms are yat-frozen, yat-trained, yat-data-frozen, yat-data-trained")
    code, _, err = run(capsys, "gram", "--arm", "relu", "--dry-run")
    assert_one_line_error(code, err, "relu-frozen, relu-trained")


def test_arm_names_of_an_arm_form():
    units = ("yat", "relu")
    assert could_be_arm("yat-frozen", units) and could_be_arm("yat-data-trained", units)
    assert not could_be_arm("yat-frozn", units) and not could_be_arm("gauss-frozen", units)
    assert not could_be_arm("yat", units) and not could_be_arm("yat-data", units)


def test_an_unknown_arm_is_refused_before_any_unit_is_imported(memo_dir):
    """In a fresh interpreter, as typed, beside a memo holding results: one line, exit 2, and jax (a unit's
    import, seconds) never imported. (Its time, 0.4-0.6 s on quiet cores, is not asserted here: a test beside
    busy cores cannot time it.)"""
    from lazylab.cache import Memo

    memo = Memo(memo_dir)
    memo.put_record("convex-" + "0" * 32, {"config": {"arm": "yat-frozen"}})  # a listing would load the units
    memo.close()
    probe = ("import sys; from lazylab.cli import main\n"
             "try:\n    main(['ladder', '--arms', 'yat-frozn'])\n"
             "except SystemExit as e:\n    print(e.code, 'jax' in sys.modules, file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=os.environ)
    *said, verdict = proc.stderr.strip().splitlines()
    assert len(said) == 1 and said[0].startswith("error: unknown arm 'yat-frozn' (did you mean 'yat-frozen'?)"), said
    assert said[0].endswith("available: gaussian-frozen, gaussian-trained, relu-frozen, relu-trained, rff-frozen, "
                            "rff-trained, yat-frozen, yat-trained, and arms of other inits (lazylab arms lists every arm)")
    assert verdict.split() == ["2", "False"]


def test_the_arm_to_add_when_no_pair_shares_unit_and_init():
    assert partners_to_add(["yat-frozen", "relu-frozen"]) == ["yat-trained", "relu-trained"]
    assert partners_to_add(["yat-data-trained"]) == ["yat-data-frozen"]
    assert partners_to_add(["yat-frozen", "yat-trained", "relu-frozen"]) == []  # a pair already
    line, = exchange_parts(None, ["yat-frozen", "relu-frozen"])
    assert line.endswith("add yat-trained or relu-trained to --arms (--arms yat-frozen,relu-frozen,yat-trained) "
                         "for an answer")


def test_results_in_a_pipe_are_spelt_in_ascii_and_fit_in_bytes():
    """A table in a pipe: ASCII rules, ``±`` as ``+/-`` before rich lays it out, so no line passes the width in bytes."""
    import io

    from rich.table import Table

    from lazylab.cli.output import ResultsConsole

    sink = io.StringIO()
    console = ResultsConsole(file=sink, width=40, highlight=False)
    table = Table(title="brackets: mean ± seed std")
    table.add_column("arm")
    table.add_column("rates")
    table.add_row("yat-frozen", "0.03: 78.04 ± 0.56, 0.1: 81.47 ± 0.28, 0.3: 82.94 ± 0.26")
    console.print(table)
    console.print("R² † exact")
    text = sink.getvalue()
    assert text.isascii() and "+/-" in text and "R^2 + exact" in text
    assert max(len(line.encode()) for line in text.splitlines()) <= 40
    cell = "".join(line.split("|")[2] for line in text.splitlines()[3:-1] if line.startswith("|"))
    assert cell.replace(" ", "") == "0.03:78.04+/-0.56,0.1:81.47+/-0.28,0.3:82.94+/-0.26"  # folded, every digit kept


def test_every_help_page_fits_80_columns(capsys, monkeypatch):
    """``COLUMNS=80 lazylab verify --help`` printed two example lines of 87 and 89 characters (click wraps the
    text, never a ``\\b`` block of examples); every command's page, every line."""
    import click

    from lazylab.cli import cli

    def commands(group, path):
        yield path
        for name, sub in getattr(group, "commands", {}).items():
            yield from commands(sub, [*path, name])

    monkeypatch.setenv("COLUMNS", "80")
    pages = list(commands(cli, []))
    assert ["verify"] in pages and ["render", "report"] in pages and len(pages) > 20
    for path in pages:
        code, out, err = run(capsys, *path, "--help")
        assert code == 0 and out, (path, err)
        assert [line for line in out.splitlines() if len(line) > 80] == [], path


def test_runs_leaves_out_columns_rather_than_cut_every_cell_at_80_columns(tmp_path, capsys, monkeypatch):
    """``COLUMNS=80 lazylab runs`` fitted 80 characters by cutting every cell: ``yat-froz``, ``m`` empty."""
    import json

    from lazylab.cache import Memo
    from lazylab.config import code_identity
    from lazylab.memo_disk import _seal
    from lazylab.reference import load_reference

    memo = Memo(tmp_path / "memo")
    for record in load_reference()["payload"]["convex"]["runs"][-6:]:  # the widest arms and widths
        memo._cache.set(record["key"], _seal(json.dumps(record).encode(), record["key"]), tag=code_identity())
    memo.close()
    shown = {}
    for columns in ("80", "300"):
        monkeypatch.setenv("COLUMNS", columns)
        code, shown[columns], err = run(capsys, "runs", "--cache-dir", tmp_path / "memo")
        assert code == 0, err
    narrow, wide = shown["80"].splitlines(), shown["300"].splitlines()
    assert max(map(len, narrow)) <= 80, shown["80"]
    rows = sorted(tuple(c.strip() for c in line.split("|")[2:5]) for line in narrow if line.startswith("| convex"))
    assert rows == sorted((r["config"]["arm"], str(r["config"]["width"]), str(r["config"]["seed"]))  # whole, not cut
                          for r in load_reference()["payload"]["convex"]["runs"][-6:]), shown["80"]
    assert "columns left out to fit 80 characters: " in shown["80"] and "detail" in shown["80"]
    assert "left out" not in shown["300"] and "| detail" in shown["300"] and "| stored (UTC)" in shown["300"]


def test_the_shipped_answer_tables_fit_80_columns_without_breaking_a_word():
    """Every table the ladder prints for the shipped reference, in a pipe at 80 columns: no line is wider, every
    arm name and number is whole on one line (rich alone shrank the widest columns below their longest word:
    ``yat-f`` / ``rozen``, ``(900-1,40…``), and a table too wide for 80 columns comes in parts that each repeat
    the arm and width."""
    import io
    import json
    import re
    from pathlib import Path

    from lazylab.cli.output import ResultsConsole, analysis_tables, answer_parts, fair_parts, wall_tables

    doc = json.loads((Path(__file__).parents[1] / "lazylab" / "reference" / "paper.json").read_text())
    analysis, plan = doc["payload"]["analysis"], doc["payload"]["plan"]
    parts = (fair_parts(analysis["fair"]) + exchange_parts(analysis["exchange"]) + wall_tables(analysis["wall"])
             + answer_parts(analysis["answer"], plan["widths"]) + analysis_tables(analysis))
    cells = [c for p in parts if not isinstance(p, str) for col in p.columns for c in col.cells]
    sink = io.StringIO()
    console = ResultsConsole(file=sink, width=80, highlight=False)
    for part in parts:
        console.print(part)
    text = sink.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 80
    rows = [line for line in text.splitlines() if line.startswith("|")]
    words = {w for line in rows for cell in line.split("|") for w in cell.split()}
    for cell in cells:  # each word of each cell shows whole somewhere (a wrapped cell moves words, never cuts them)
        for word in str(cell).replace("±", "+/-").replace("…", "...").split():
            assert word in words, (word, cell)
    assert "..." not in "".join(rows)
    wall = [line for line in rows if re.match(r"\| yat-frozen +\| +\d+ \|", line)]
    assert len(wall) >= 20 and len({line.split("|")[2].strip() for line in wall}) == 10  # both parts carry arm and m
    order = [int(line.split("|")[2]) for line in wall[:10]]
    assert order == sorted(order), order  # widths in numeric order


def test_a_table_in_parts_repeats_the_columns_that_name_a_row_and_keeps_unwrapped_cells_whole():
    """``fit_table``: a column that may not wrap keeps its longest line (a date is never cut to ``2026-12-06 1``),
    each part repeats the marked key columns, and the table given is printed unchanged on a wider console."""
    import io

    from rich.table import Table

    from lazylab.cli.output import ResultsConsole
    from lazylab.cli.table_fit import keyed

    table = keyed(Table(title="t"), 0, 2)
    for name in ("arm", "value", "frozen", "stored", "detail"):
        table.add_column(name, no_wrap=name == "stored")
    for i in range(3):
        table.add_row("yat-trained", f"{i}.5", f"frozen-bank-{i}", "2026-12-06 11:09", "a long free text " * 3)

    def show(width):
        sink = io.StringIO()
        ResultsConsole(file=sink, width=width, highlight=False).print(table)
        return sink.getvalue()

    narrow = show(50)
    rows = [line for line in narrow.splitlines() if line.startswith("|") and "yat-trained" in line]
    assert max(map(len, narrow.splitlines())) <= 50
    assert "(part 2 of" in narrow and "2026-12-06 11:09" in narrow
    assert all("frozen-bank-" in line for line in rows), narrow  # the key columns in every part
    wide = show(200)
    assert "part" not in wide and any("2026-12-06 11:09" in line and "a long free text a long" in line
                                      for line in wide.splitlines())  # laid out afresh: no width left behind


def test_narrowing_a_table_keeps_short_cells_on_one_line_and_wraps_the_long_text():
    """Only the free text wraps when a table is narrowed: a short cell (``failed 2``) keeps its line."""
    from lazylab.cli.table_fit import _share

    ranges = [(8, 10), (6, 40), (3, 5)]  # (longest word, longest line) per column, with padding
    widths = _share(ranges, 20)
    assert widths == [10, 22, 5] and sum(widths) == sum(low for low, _ in ranges) + 20
    assert _share(ranges, 0) == [8, 6, 3]
