"""The one formatting module of the command line: consoles, rich tables, JSON and CSV writing.

No science here: every number comes from ``lazylab.experiments`` or ``lazylab.analysis``. Notes
go below a table (its caption), never in a column, so tables stay as narrow as their numbers.
"""

from __future__ import annotations

import csv
import io
import json
import os
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from lazylab.cli.table_fit import fit_table, keyed
from lazylab.paths import write_text_atomically
from lazylab.text import printable

class DataConsole(Console):
    """A rich Console that prints each text argument with its control characters escaped, line by line
    (``lazylab.text.printable``): the paths, names and notes in lazylab's lines come from outside (files, the
    memo, plugins). Renderables (tables) escape their own cells."""

    def print(self, *objects, **kwargs) -> None:
        super().print(*(printable(o, keep_newlines=True) if isinstance(o, str) else o for o in objects), **kwargs)


LOG_WIDTH = 160  # stdout into a file or pipe with no $COLUMNS: a log keeps a wide table on one line per row


def asked_width() -> int | None:
    """``$COLUMNS`` when it holds a positive integer (the width a user asked for, in a pipe too), else None."""
    text = os.environ.get("COLUMNS", "").strip()
    return int(text) if text.isdigit() and int(text) > 0 else None


def wrap_lines() -> bool:
    """Whether sentences wrap at the console's width: when ``$COLUMNS`` asks for one. Otherwise each sentence,
    warning and progress line stays one line (``soft_wrap``), however long, so that a log can be searched."""
    return asked_width() is not None


def _width(stream) -> int | None:
    """The console width for ``stream``: ``$COLUMNS`` if given, else the terminal's (None: rich asks it), else
    ``LOG_WIDTH``."""
    asked = asked_width()
    if asked is not None:
        return asked
    try:
        return None if stream.isatty() else LOG_WIDTH
    except (ValueError, OSError):  # a closed stream
        return LOG_WIDTH


# What the results' text spells outside ASCII, and its ASCII spelling in a log or a pipe.
ASCII_SPELLING = {"±": "+/-", "†": "+", "−": "-", "—": "-", "→": "->", "²": "^2", "×": "x", "…": "..."}


def ascii_text(text: str) -> str:
    """``text`` with ``ASCII_SPELLING``'s characters spelt in ASCII (``±`` as ``+/-``)."""
    for char, spelling in ASCII_SPELLING.items():
        text = text.replace(char, spelling)
    return text


class ResultsConsole(DataConsole):
    """rich's Console, printing results for a terminal, or, when its output is not one, in ASCII: tables with
    ASCII rules (``+--+``, ``|``) and text and cells spelt in ASCII (``ascii_text``), so that a log or a pipe holds
    one byte per column, as ``awk``, ``cut`` and ``grep`` count them. A cell too wide for its column folds onto
    the next line instead of being cut with an ellipsis: a table narrower than its numbers shows every digit."""

    def print(self, *objects, **kwargs):
        plain = not self.is_terminal
        for table in (o for o in objects if isinstance(o, Table)):
            for column in table.columns:
                column.overflow = "fold"
                if plain:  # rich measures the cells as given: spell them before it lays the table out
                    column._cells = [ascii_text(c) if isinstance(c, str) else c for c in column._cells]
                    column.header = ascii_text(column.header) if isinstance(column.header, str) else column.header
            if plain:
                table.title = ascii_text(table.title) if isinstance(table.title, str) else table.title
                table.caption = ascii_text(table.caption) if isinstance(table.caption, str) else table.caption
        if plain:
            objects = tuple(ascii_text(o) if isinstance(o, str) else o for o in objects)
        fitted = [part for o in objects for part in (fit_table(o, self) if isinstance(o, Table) else [o])]
        super().print(*fitted, **kwargs)

    @property
    def options(self):
        options = super().options
        if not self.is_terminal:
            options.encoding = "ascii"  # options.ascii_only: rich swaps every table's box for box.ASCII (Box.substitute)
        return options


out = ResultsConsole(width=_width(sys.stdout), highlight=False)  # results: stdout (quiet under --json -)
err = DataConsole(stderr=True, width=asked_width(), highlight=False)  # progress, warnings


def reset() -> None:
    """Before each command: results print on stdout again, at the width ``$COLUMNS`` asks for now."""
    release_stdout()
    out.quiet = False
    width, asked = _width(sys.stdout), asked_width()
    if width is not None:
        out.width = width
    if asked is not None:
        err.width = asked


class _Guard:
    """What ``guard_stdout`` replaced: the original ``sys.stdout``, its stand-in, and the saved descriptor 1."""

    def __init__(self, original, stand_in, results, saved_fd: int | None):
        self.original, self.stand_in, self.results, self.saved_fd = original, stand_in, results, saved_fd


_guard: _Guard | None = None


def guard_stdout() -> None:
    """For ``--json -``, from now until ``release_stdout``: stdout holds the JSON alone.

    ``sys.stdout`` becomes stderr, so whatever else prints (a plugin's ``print`` while it is imported
    or builds a bank) goes there; where ``sys.stdout`` is the process's descriptor 1, that descriptor
    is pointed at stderr too (a plugin's raw ``os.write(1, ...)``), the real stdout kept on a copy of
    it. ``write_json`` writes to the real stdout. Idempotent.
    """
    global _guard
    if _guard is not None:
        return
    original, saved = sys.stdout, None
    try:
        if original is sys.__stdout__ and original.fileno() == 1:
            original.flush()
            saved = os.dup(1)
            os.dup2(sys.stderr.fileno(), 1)
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        saved = None
    results = os.fdopen(saved, "w", encoding="utf-8") if saved is not None else original
    _guard = _Guard(original, sys.stderr, results, saved)
    sys.stdout = sys.stderr


def release_stdout() -> None:
    """Undo ``guard_stdout`` (nothing if it is not in force): descriptor 1 and ``sys.stdout`` are stdout again
    (``sys.stdout`` only if nothing else replaced it meanwhile, as click's test runner does)."""
    global _guard
    guard, _guard = _guard, None
    if guard is None:
        return
    try:
        sys.stderr.flush()
        if guard.saved_fd is not None:
            guard.original.flush()  # what a plugin wrote through it went to stderr
            guard.results.flush()
            os.dup2(guard.saved_fd, 1)
            guard.results.close()
    except (OSError, ValueError):
        pass
    if sys.stdout is guard.stand_in:
        sys.stdout = guard.original


def json_stdout(ctx, param, value):
    """``--json`` option callback: ``-`` guards stdout (``guard_stdout``) before the command imports any plugin."""
    if value is not None and str(value) == "-":
        guard_stdout()
    return value



def prepare_json(path: Path | None) -> None:
    """Check a ``--json PATH`` before any work: a writable file, or ``-`` for stdout, in which case
    the tables and lines the command would print are left out so that stdout holds the JSON alone
    (progress, warnings and errors still go to stderr)."""
    from lazylab.paths import writable_file

    if path is None:
        return
    if str(path) == "-":
        out.quiet = True
    else:
        writable_file(path, "--json")


def warn(line: str) -> None:
    """One ``warning:`` line with the results, never wrapped; on stderr when stdout holds JSON alone."""
    from rich.markup import escape

    (err if out.quiet else out).print(f"[yellow]warning:[/yellow] {escape(printable(line))}", soft_wrap=not wrap_lines())


def escape_warnings() -> None:
    """Have Python's warnings (a plugin's, matplotlib's about a glyph an arm name lacks) printed with their control
    characters escaped (``lazylab.text.printable``): ``warnings.formatwarning`` is what every printer of a warning
    formats it with. Installed once."""
    import warnings

    if getattr(warnings.formatwarning, "lazylab_printable", False):
        return
    plain = warnings.formatwarning

    def formatwarning(message, category, filename, lineno, line=None):
        return printable(plain(message, category, filename, lineno, line).rstrip("\n"), keep_newlines=True) + "\n"

    formatwarning.lazylab_printable = True
    warnings.formatwarning = formatwarning


def write_json(path: Path | None, payload, option: str = "--json") -> None:
    """Write ``payload`` as JSON to ``path`` (atomically), or to stdout for ``-``; nothing for None."""
    if path is None:
        return
    text = json.dumps(payload, indent=1)
    if str(path) == "-":
        stream = _guard.results if _guard is not None else sys.stdout
        stream.write(text + "\n")
        stream.flush()
        return
    write_text_atomically(path, text, option)
    out.print(f"wrote {path}")


def write_csv(path: Path, header: list, rows: list, option: str) -> None:
    """Write ``rows`` (lists, or dicts keyed by ``header``) as CSV to ``path``, atomically."""
    text = io.StringIO(newline="")
    if rows and isinstance(rows[0], dict):
        writer = csv.DictWriter(text, fieldnames=list(header))
        writer.writeheader()
    else:
        writer = csv.writer(text)
        writer.writerow(header)
    writer.writerows(rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomically(path, text.getvalue(), option)


def ladder_table(result) -> Table:
    """Arm x width table of mean ± std of best_acc (%) over seeds, with the chosen rate; unstable seeds counted;
    cells of a unit that failed marked ``failed``, and an arm whose unit failed its conformance checks marked."""
    widths = result.plan["widths"]
    table = Table()
    table.add_column("arm")
    for w in widths:
        table.add_column(f"m={w}", justify="right")
    table.add_column("lr", justify="right")
    for a in result.arms:
        cells = []
        for w in widths:
            c = a.cells.get(w)
            if (c is None and a.failed) or (c is not None and c.get("failed")):
                cells.append("[red]failed[/red]")  # the unit failed here or before: below the table, why
            elif c is None or c["mean"] is None:
                cells.append("diverged")
            else:
                text = f"{c['mean']:.2f}" + (f" ± {c['std']:.2f}" if c["n"] > 1 else "")
                text += f" ({c['diverged']} div)" if c["diverged"] else ""
                cells.append(text + (f" [yellow]({c['unstable']} unstable)[/yellow]" if c.get("unstable") else ""))
        name = a.arm + (" [red](failed checks)[/red]" if a.checks_failed else "")
        table.add_row(name, *cells, f"{a.lr:g}" if a.lr is not None else "failed" if a.failed else "diverged")
    return table


def count(n: int, noun: str) -> str:
    """``"1 epoch"``, ``"3 epochs"``: a count with its noun in the right number."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def num(v, fmt=".2f") -> str:
    """``v`` formatted, or ``-`` for a missing value."""
    return "-" if v is None else format(v, fmt)


def bracket_table(arms: list[dict]) -> Table | None:
    """The rate brackets of a ladder JSON's arms (``lazylab.bracket.bracket_rows``), None without any."""
    from lazylab.bracket import BRACKET_HEADER, bracket_rows

    rows = bracket_rows(arms)
    if not rows:
        return None
    table = Table(title="rate brackets (docs/ladder.md): the margin is read against the seed std", title_justify="left")
    for col in BRACKET_HEADER[:-1]:
        table.add_column(col, justify="left" if col in ("arm", "rule", BRACKET_HEADER[2]) else "right")
    for row in rows:
        table.add_row(*row[:-1])
    add_notes(table, [f"{row[0]}: {row[-1]}" for row in rows if row[-1]])
    return table


def analysis_tables(analysis: dict) -> list:
    """Rich renderables for the ladder's laws (``experiments.laws.analyse_ladder``), in SPEC section 6 order."""
    parts: list = []
    laws = analysis["ladder_law"]
    law = law_table("ladder law: err = 100 - mean acc = floor + c m^-alpha", laws, "arm")
    parts.append(law)
    if analysis["movement"]:
        widths = sorted({int(w) for per in analysis["movement"].values() for w in per})
        mv = Table(title="movement: w_move_rel = ||W_end - W0||_F / ||W0||_F, mean over seeds; "
                         "law: log w_move_rel = intercept + slope log m", title_justify="left")
        mv.add_column("arm")
        for w in widths:
            mv.add_column(f"m={w}", justify="right")
        for col in ("slope", "R^2"):
            mv.add_column(col, justify="right")
        skipped = []
        for arm, per in analysis["movement"].items():
            f = analysis["movement_law"].get(arm, {})
            cells = [num(per.get(str(w), {}).get("mean"), ".4g") for w in widths]
            mv.add_row(arm, *cells, num(f.get("slope"), ".3f"), num(f.get("r2"), ".4f"))
            if f.get("skipped"):
                skipped.append(f"{arm}: law not fitted: {f['skipped']}")
        add_notes(mv, skipped)
        parts.append(mv)
    if analysis["gap"]:
        widths = sorted({int(w) for g in analysis["gap"].values() for w in g["per_width"]})
        gp = Table(title="gap: trained - frozen mean accuracy (points)", title_justify="left")
        gp.add_column("pair")
        for w in widths:
            gp.add_column(f"m={w}", justify="right")
        gp.add_column("largest at", justify="right")
        gp.add_column("smallest at", justify="right")
        for name, g in analysis["gap"].items():
            gp.add_row(name, *[num(g["per_width"].get(str(w)), "+.2f") for w in widths],
                       str(g["largest_at"]), str(g["smallest_at"]))
        parts.append(gp)
    if analysis["redundancy"]:
        sample = analysis["settings"].get("redundancy_sample", "first-n")
        rd = Table(title=f"redundancy of the initial bank (seed 0) on n training images ({sample})", title_justify="left")
        for col in ("bank", "m", "n", "mean |corr| off-diag", "participation ratio", "constant units"):
            rd.add_column(col, justify="left" if col == "bank" else "right")
        for bank, r in analysis["redundancy"].items():
            rd.add_row(bank, str(r["m"]), str(r["n"]), f"{r['mean_abs_corr']:.4f}", f"{r['participation_ratio']:.2f}",
                       str(r["constant_units"]))
        parts.append(rd)
    trained = {a: v for a, v in analysis["scalars"].items() if a.endswith("-trained")}
    if trained:
        widths = sorted({int(w) for v in trained.values() for per in v.values() for w in per})
        sc = Table(title="learned scalars of trained arms, start -> end, mean over seeds "
                         "(frozen arms keep their start values)", title_justify="left")
        sc.add_column("arm")
        sc.add_column("scalar")
        for w in widths:
            sc.add_column(f"m={w}", justify="right")
        for arm, v in trained.items():
            for name, per in v.items():
                cells = [f"{num(per[str(w)]['start'], '.3g')} -> {num(per[str(w)]['end'], '.3g')}" if str(w) in per
                         else "-" for w in widths]
                sc.add_row(arm, name, *cells)
        parts.append(sc)
    return parts


def exchange_parts(exchange: dict | None, arm_names=()) -> list:
    """The exchange-rate table (``experiments.laws.exchange_table``) and its sentence; without a pair, one note
    line naming the arms to add to ``arm_names`` (the ladder's) for an answer (``analysis.partners_to_add``)."""
    from lazylab.analysis import partners_to_add
    from lazylab.exchange import at_smallest_width

    if not exchange or not exchange.get("rows"):
        add = partners_to_add(arm_names)
        hint = (f"; add {' or '.join(add)} to --arms (--arms {','.join([*arm_names, add[0]])}) for an answer"
                if add else "")
        return ["exchange rate: no trained arm in this ladder has a frozen arm of the same unit and init" + hint]
    table = Table(title="exchange rate: the frozen width of the same unit matching a trained arm's mean accuracy "
                        "(interpolated on log m, or extrapolated from the frozen ladder law)", title_justify="left")
    for col in ("trained arm", "m", "trained acc (%)", "frozen arm", "matching frozen width", "how"):
        table.add_column(col, justify="right" if col in ("m", "trained acc (%)", "matching frozen width") else "left")
    notes: list[str] = []
    shown = at_smallest_width(exchange["rows"])
    for r in shown:  # the width as the analysis wrote it ("text"); how, from the row's fields
        width, _, kind = r["text"].partition(" (")  # "1109 (law only: ...)": the width; the kind goes to "how"
        if r["method"] == "interpolated":
            how = f"interpolated {r['between'][0]}-{r['between'][1]}"
        elif r["method"] == "extrapolated":
            how = ("law only" if "law only" in kind else "law") + f", floor {100 - r['floor_acc']:.2f} % err"
        else:
            how = kind.rstrip(")") or r["method"]
        note = r.get("note") or r.get("why")
        if note:
            if note not in notes:
                notes.append(note)
            how += " " + "*" * (notes.index(note) + 1)
        table.add_row(r["trained"], str(r["width"]), num(r["trained_acc"]), r["frozen"], width, how)
    folded = len(exchange["rows"]) - len(shown)
    add_notes(table, ["interpolated a-b: linearly in log m between two measured widths; law: the frozen ladder law "
                      "solved for the trained error; law only: the measured curve peaked and fell short"]
              + [f"{'*' * (i + 1)} {n}" for i, n in enumerate(notes)]
              + ([f"each trained arm at its smallest width; {folded} more row{'s' * (folded != 1)} (every trained width) in --json "
                  "(analysis.exchange.rows) and the report"] if folded else []))
    return [table, exchange["sentence"]]


def answer_parts(answer: dict | None, sweep: list[int]) -> list:
    """The answer at both readouts (``experiments.convex_wall.answer``): one row per trained arm at its smallest
    width, and its sentence."""
    from lazylab.exchange import at_smallest_width, protocol_words

    if not answer or not answer.get("rows"):
        return []
    table = Table(title="the answer: frozen units matching a trained arm, read out at the optimum (convex) and by "
                        "the protocol (AdamW); 95 % seed interval in brackets", title_justify="left")
    for col in ("trained arm", "m", "trained acc (%)", "same unit, optimum", "cheapest, optimum", "same unit, protocol"):
        table.add_column(col, justify="left" if col == "trained arm" else "right")
    shown = at_smallest_width(answer["rows"])
    for r in shown:
        same, best, proto = r.get("same"), r.get("cheapest"), r.get("protocol")
        table.add_row(r["trained"], str(r["width"]), num(r["trained_acc"]),
                      f"{same['text']} {same['frozen']}" if same else "-",
                      f"{best['text']} {best['frozen']}" if best else "none in the sweep",
                      protocol_words(proto, sweep, short=True) if proto else "-")
    folded = len(answer["rows"]) - len(shown)
    add_notes(table, ["optimum: measured crossings only (linear in log m between swept widths); '> m' lies beyond "
                      "the sweep; the protocol column may read the frozen ladder law beyond it"]
              + ([f"{folded} more row{'s' * (folded != 1)} (every trained width) in --json (analysis.answer.rows)"] if folded else []))
    return [table, answer["sentence"]]


ANSWER_NAMES = {"fair": "fair (held-out optimum)", "test_selected": "trained side chosen on test",
                "trained_protocol": "trained side read by the protocol", "protocol": "protocol (AdamW, best epoch on test)"}


def fair_parts(fair: dict | None) -> list:
    """The fair answer (``experiments.optimum.fair_answer``): its sentence, one row per trained arm, width and
    frozen arm (matching width, interval, frozen units per trained unit), the answers (``ANSWER_NAMES``) side by
    side for the first trained arm's smallest width (one column per answer, one row per frozen bank), and the
    method in one paragraph."""
    from lazylab.exchange import per_unit_words, unit_name

    if not fair or not fair["answers"].get("fair"):
        return []
    parts: list = ["the fair answer: " + fair["sentence"]]
    table = keyed(Table(title="frozen units matching a trained network, both at their held-out optimum (95 % interval)",
                        title_justify="left"), 0, 1, 3)  # trained arm, width and frozen arm name a row
    for col in ("trained", "m", "acc (%)", "frozen", "matching width", "per unit"):
        table.add_column(col, justify="right" if col in ("m", "acc (%)", "per unit") else "left")
    for r in fair["answers"]["fair"]:
        for f, hit in r["matches"].items():
            table.add_row(r["trained"], str(r["width"]), num(r["trained_acc"]), f, hit["text"],
                          per_unit_words(hit) or "-")
    add_notes(table, [f"{arm}: {n} of {total} readouts stop at the iteration cap, so its accuracies are lower bounds "
                      "and its matching widths upper bounds" for arm, (n, total) in fair.get("capped", {}).items() if n]
              + ([f"lambda not refined yet (the walk's choice) at {len(fair['unrefined'])} "
                  f"arm-width{'s' * (len(fair['unrefined']) != 1)}, from "
                  f"{fair['unrefined'][0][0]} m={fair['unrefined'][0][1]}"] if fair.get("unrefined") else []))
    parts.append(table)
    first = fair["answers"]["fair"][0]
    # One column per answer, one row per frozen bank: four answers fit 80 columns, an interval under its width.
    answers = {name: next((r for r in rows if (r["trained"], r["width"]) == (first["trained"], first["width"])), None)
               for name, rows in fair["answers"].items()}
    answers = {name: row for name, row in answers.items() if row is not None}
    side = Table(title=f"how the choices move it: the frozen units matching {first['width']} trained "
                       f"{unit_name(first['trained'])} units, by how each side is chosen", title_justify="left")
    side.add_column("")
    for name in answers:
        side.add_column(ANSWER_NAMES[name], justify="right")
    side.add_row("trained acc (%)", *[num(row["trained_acc"]) for row in answers.values()])
    for f in first["matches"]:
        side.add_row(f, *[row["matches"][f]["text"].replace(" (", "\n(") if f in row["matches"] else "-"
                          for row in answers.values()])
    parts += [side, "method: " + fair["method"]]
    return parts


def law_table(title: str, laws: dict, first: str = "curve") -> Table:
    """One row per curve: widths fitted, floor, c, alpha, R^2; why a law was not fitted, and
    an alpha at its search bound, as notes below the table."""
    law = Table(title=title, title_justify="left")
    for col in (first, "widths fitted", "floor (%)", "c", "alpha", "R^2"):
        law.add_column(col, justify="left" if col in (first, "widths fitted") else "right")
    notes = []
    for name, f in laws.items():
        used = ",".join(map(str, f.get("widths", []))) or "-"
        if "skipped" in f:
            law.add_row(name, used, "-", "-", "-", "-")
            notes.append(f"{name}: not fitted: {f['skipped']}")
            continue
        law.add_row(name, used, f"{f['floor']:.2f}", f"{f['c']:.3g}", f"{f['alpha']:.3f}" + (" *" if f.get("at_bound") else ""),
                    f"{f['r2']:.4f}" + (" †" if f.get("dof") == 0 else ""))
    if any(f.get("at_bound") for f in laws.values()):
        notes.append("* alpha at its search bound")
    if any(f.get("dof") == 0 for f in laws.values() if "skipped" not in f):
        notes.append("† exact: 3 points for 3 parameters")
    add_notes(law, notes)
    return law


def add_notes(table: Table, notes: list[str]) -> None:
    """Put ``notes`` below ``table``, one per line, left-aligned."""
    if notes:
        table.caption = "\n".join(notes)
        table.caption_justify = "left"


def edge_note(at_edge: list[int]) -> list[str]:
    """The note on readouts whose lambda is not bracketed by lower held-out scores
    (``experiments.convex_wall.lambda_at_edge``), if any."""
    edge, total = at_edge
    return [f"lambda: in {edge} of {total} readouts the held-out accuracy was not seen to fall on both sides of the "
            "chosen penalty: the best may lie beyond (--lambdas extends the path)"] if edge else []


def wall_tables(w: dict) -> list:
    """The wall table (``experiments.convex_wall.wall``) and both curves' ladder laws, as rich tables."""
    table = Table(title="the wall: protocol (AdamW) readout against the convex optimum, mean over seeds",
                  title_justify="left")
    for col in ("arm", "m", "best_acc", "final_acc", "convex", "gap (pts)", "train loss: protocol",
                "optimum", "gap (nats)", "grad norm"):
        table.add_column(col, justify="left" if col == "arm" else "right")
    for arm, rows in w["arms"].items():
        for width, r in sorted(rows.items(), key=lambda kv: int(kv[0])):  # JSON keys are strings, in no numeric order
            table.add_row(arm, width, num(r["best_acc"]), num(r["final_acc"]), num(r["convex_acc"]),
                          num(r["gap"], "+.2f"), num(r["protocol_loss"], ".4f"), num(r["convex_loss"], ".4f"),
                          num(r["loss_gap"], "+.4f"), f"{r['grad_norm']:.1e}" + ("" if r["converged"] else " *"))
    notes = []
    if any(not r["converged"] for rows in w["arms"].values() for r in rows.values()):
        notes.append("* stopped by the objective-change rule or the iteration cap, not the gradient rule (docs/convex.md)")
    add_notes(table, notes + edge_note(w["lambda_at_edge"]))
    laws = {f"{arm} {curve}": f for arm, fits in w["law"].items() for curve, f in fits.items()}
    return [table, law_table("ladder law of both curves: err = floor + c m^-alpha", laws)]


def write_results(out_dir: Path, stem: str, payload: dict) -> None:
    """``<stem>.json`` (``payload``) and ``<stem>.csv`` (``payload["rows"]`` popped out) in ``out_dir``."""
    rows = payload.pop("rows")
    write_text_atomically(out_dir / f"{stem}.json", json.dumps(payload, indent=1), "--out")
    write_csv(out_dir / f"{stem}.csv", list(rows[0]), rows, "--out")


def backend_note(backend) -> str:
    """``"; N Ray tasks on <where>"`` for the Ray backend, else nothing."""
    tasks = getattr(backend, "tasks", None)
    return "" if tasks is None else f"; {tasks} Ray task{'s' * (tasks != 1)} on {backend.where()}"


def gif_facts(info) -> dict:
    """A written GIF's facts for JSON: path, frames, bytes, size, dpi."""
    return {"path": str(info.path), "frames": info.frames, "bytes": info.bytes, "size": list(info.size), "dpi": info.dpi}


def gif_line(info) -> str:
    """``path (N frames, WxH px, S MiB)`` of a written GIF."""
    return f"{info.path} ({info.frames} frames, {info.size[0]}x{info.size[1]} px, {info.bytes / 2**20:.2f} MiB)"

