"""``lazylab runs``: the memo's results as a table, CSV or JSON (``lazylab.runs``)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from lazylab.cli.options import (MAX_SEED, MAX_WIDTH, IntList, cache_dir_option, did_you_mean, json_option, known_arms,
                                 list_option)
from lazylab.cli.output import count, num, out, prepare_json, wrap_lines, write_csv, write_json
from lazylab.cli.table_fit import keyed, table_minimum
from lazylab.errors import LazylabError
from lazylab.text import printable
from lazylab.runs import FIELDS, KINDS


def _names(value: str | None, option: str) -> tuple[str, ...] | None:
    """A comma-separated name list (``--arms``, ``--kinds``): distinct, not empty; None when not given."""
    if value is None:
        return None
    names = [v.strip() for v in value.split(",")]
    if not all(names):
        raise click.BadParameter(f"expected comma-separated names, got {value!r}", param_hint=option)
    repeated = sorted(n for n, k in Counter(names).items() if k > 1)
    if repeated:
        raise click.BadParameter(f"{repeated[0]} is given more than once", param_hint=option)
    return tuple(names)


@click.command()
@list_option("--arms", "--arm", "arms_", help="Only these arms (yat-frozen,relu-frozen; lazylab arms lists them).")
@list_option("--widths", "--width", "widths", type=IntList(1, MAX_WIDTH),
             help="Only these bank widths m: 64,512, 16,32,...,1024 or 8-12.")
@list_option("--seeds", "--seed", "seeds", type=IntList(0, MAX_SEED), help="Only these seeds: 0,1,2 or 0-2.")
@list_option("--kinds", "--kind", "kinds", help=f"Only these kinds of result: {', '.join(KINDS)}.")
@click.option("--any-code", is_flag=True,
              help="Also list results computed by other code (another lazylab version or numerics); they are "
                   "never reused, and 'lazylab cache prune' removes them [default: this lazylab's only].")
@click.option("--all", "all_rows", is_flag=True,
              help="List every result: also those of other code (--any-code) and those whose plugin is not the "
                   "installed one (stale source, other version, not installed), marked [default: the results "
                   "this lazylab and the installed plugins would reuse].")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False, path_type=Path), default=None, metavar="PATH",
              help="Write the listed results to PATH, one CSV row each: " + ", ".join(FIELDS) + ".")
@json_option("the listed results (every field, with each result's stored configuration)")
@cache_dir_option
def runs(arms_, widths, seeds, kinds, any_code, all_rows, csv_path, json_path, cache_dir):
    """List the results stored in the memo: training runs, convex readouts, trajectories, ...

    One row per result, sorted by kind, arm, width and seed: its kind, arm, width m, seed,
    learning rate, epochs, training images, best and final test accuracy (%), seconds, when it
    was stored (UTC), the plugin that provided its unit, whether that unit failed its conformance
    checks when the result was computed (the checks column: such a result may not be reproducible)
    and what the kind adds (a run's instability, a convex readout's lambda, a redundancy's bank).
    Results whose plugin is not the installed one (an edit in place: "stale source"; "other
    version"; "not installed") are never reused and listed only with --all, marked. Nothing is
    computed. Filters combine (a row must pass each); a row without the field (a redundancy has
    no arm) never passes a filter on it. Gram and readout entries do not store their
    configuration: only their accuracies and key are listed. Each filter takes one value or
    a list, its option spelled in the singular or the plural (--arm or --arms).

    \b
    Examples:
      # one row per yat-frozen run
      lazylab runs --arm yat-frozen --csv runs.csv
      lazylab runs --kinds run --widths 16,32,...,1024 --seeds 0
      lazylab runs --all  # stale plugin rows and other code's too
      lazylab runs --json - | python -m json.tool
    """
    from lazylab.config import code_identity
    from lazylab.locations import check_memo_dir, default_dir
    from lazylab.paths import writable_file
    from lazylab.runs import list_runs

    # A location that is not a memo is refused as every other command refuses it, not listed as empty.
    check_memo_dir(Path(cache_dir).expanduser() if cache_dir else default_dir())
    prepare_json(json_path)
    if csv_path is not None:
        writable_file(csv_path, "--csv")
    arms, kind_list = _names(arms_, "'--arms'"), _names(kinds, "'--kinds'")
    any_code = any_code or all_rows
    try:
        listing = list_runs(cache_dir, arms=arms, widths=widths, seeds=seeds, kinds=kind_list, any_code=any_code,
                            include_stale=all_rows)
    except LazylabError as exc:  # a mistyped arm: say which installed one it is close to
        bad = next((a for a in arms or () if f"unknown arm {a!r}" in str(exc)), None)
        raise exc if bad is None else LazylabError(did_you_mean(str(exc), bad, known_arms())) from None
    for line in listing.problems:  # one line each, never wrapped
        click.echo(line, err=True)
    rows = listing.runs
    write_json(json_path, {
        "memo": str(listing.directory), "code": code_identity(), "any_code": any_code, "all": all_rows,
        "filters": {"arm": list(arms or []), "width": list(widths or []), "seed": list(seeds or []),
                    "kind": list(kind_list or [])},
        "count": len(rows), "other_code": listing.other_code, "stale": listing.stale,
        "runs": [r.to_json() for r in rows]})
    if csv_path is not None:
        write_csv(csv_path, list(FIELDS), [{k: ("" if v is None else v) for k, v in r.row().items()} for r in rows],
                  "--csv")
    if rows:
        table, left_out = _table(rows, any_code, any(r.checks for r in rows), out.width)
        out.print(table)
        if left_out:
            out.print(f"columns left out to fit {out.width} characters: {', '.join(left_out)} (a wider COLUMNS, "
                      "--csv or --json shows them)", soft_wrap=not wrap_lines())
    out.print(_summary(listing, filtered=any(v for v in (arms, widths, seeds, kind_list))), soft_wrap=not wrap_lines())
    if csv_path is not None:
        out.print(f"wrote {csv_path}")


# The columns ``_table`` leaves out first when the table is wider than the console: free text, then the least read.
NARROW_DROPS = ("detail", "code", "plugin", "checks", "stored (UTC)", "s", "final %", "train", "epochs")


def _table(rows, any_code: bool, checks: bool, width: int | None = None) -> tuple[Table, list[str]]:
    """The rich table and the names of the columns it leaves out: one row per result; the code column only when
    other code's results are listed, the checks column only when a listed result's unit failed its conformance
    checks. Where its rows would not fit ``width`` characters (the console's; None: no bound), columns are left
    out in ``NARROW_DROPS``'s order until they do (at ``COLUMNS=80`` every cell was cut to a few characters, the
    widths column to none); ``kind``, ``arm``, ``m``, ``seed``, ``lr`` and ``best %`` always stay, and a table
    still too wide comes in parts (``table_fit.fit_table``)."""

    text = lambda s: escape(printable(s))  # from the memo: markup and control characters are data
    columns = {  # name: (justify, no_wrap, cell of a row)
        "kind": ("left", True, lambda r: r.kind), "arm": ("left", True, lambda r: text(r.arm or "-")),
        "m": ("right", True, lambda r: num(r.width, "d")), "seed": ("right", True, lambda r: num(r.seed, "d")),
        "lr": ("right", True, lambda r: num(r.lr, "g")), "epochs": ("right", True, lambda r: num(r.epochs, "d")),
        "train": ("right", True, lambda r: num(r.train_size, "d")), "best %": ("right", True, lambda r: num(r.best_acc)),
        "final %": ("right", True, lambda r: num(r.final_acc)), "s": ("right", True, lambda r: num(r.seconds, ".1f")),
        "stored (UTC)": ("left", True, lambda r: text(r.stored.strftime("%Y-%m-%d %H:%M") if r.stored else "-"))}
    if any_code:
        columns["code"] = ("left", False, lambda r: text(r.code or "lazylab 0.1.0 (no code identity)"))
    columns["plugin"] = ("left", False, lambda r: text(r.plugin or "-") + (f" [red]({r.provenance})[/red]"
                                                                          if r.provenance else ""))
    if checks:
        columns["checks"] = ("left", False, lambda r: f"[red]failed {len(r.checks)}[/red]" if r.checks else "passed")
    columns["detail"] = ("left", False, lambda r: text(r.detail))
    cells = {name: [cell(r) for r in rows] for name, (_, _, cell) in columns.items()}

    def build(names: list[str]) -> Table:
        table = Table()
        for name in names:
            table.add_column(name, justify=columns[name][0], no_wrap=columns[name][1])
        for i in range(len(rows)):
            table.add_row(*(cells[name][i] for name in names))
        return keyed(table, 0, 1, 2, 3)  # kind, arm, m, seed name a row

    kept = list(columns)
    table = build(kept)
    for name in NARROW_DROPS:
        if width is None or table_minimum(table, out) <= width:
            break
        if name in kept:
            kept.remove(name)
            table = build(kept)
    return table, [name for name in columns if name not in kept]


def _summary(listing, filtered: bool) -> str:
    """The count line below the table: how many of each kind, from which memo, and what was left out."""
    kinds = Counter(r.kind for r in listing.runs)
    what = ", ".join(f"{k}: {n}" for k, n in sorted(kinds.items(), key=lambda kv: KINDS.index(kv[0])))
    line = f"{count(len(listing.runs), 'result')}" + (f" ({what})" if what else "")
    if not listing.entries:
        line += f": the memo at {listing.directory} is empty (nothing computed yet)"
    else:
        line += f"{' matching' if filtered else ''} in the memo at {listing.directory}"
    if listing.other_code:
        line += (f"; {count(listing.other_code, 'result')} by other code not shown (--any-code lists them, "
                 "'lazylab cache prune' removes them)")
    if listing.stale:
        line += (f"; {count(listing.stale, 'result')} of plugins other than the installed ones not shown (--all "
                 "lists them, 'lazylab cache prune' removes those of edited plugin sources)")
    failed = sum(bool(r.checks) for r in listing.runs)
    if failed:
        line += (f"; {count(failed, 'result')} computed while its unit failed conformance checks (the checks "
                 "column; --json lists them)")
    return line
