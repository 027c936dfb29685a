"""``lazylab verify``: rerun a sample of the reference results on this machine (``lazylab.verify``, docs/verify.md)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from lazylab.cli.options import _refuse_unknown_arms_now, json_option, list_option, seeds_option, width_option
from lazylab.cli.output import add_notes, count, num, out, warn, wrap_lines, write_json
from lazylab.cli.plan import dry_run_option

STYLE = {"identical": "green", "within noise": "yellow", "diverged": "red"}


@click.command()
@list_option("--arms", "--arm", "arms_", check=_refuse_unknown_arms_now, help="Comma-separated arms to rerun (lazylab arms lists them) [default: every arm "
                                     "of the reference].")
@width_option(256, "Width of the runs to rerun: the reference's runs at this width, at every rate it holds there "
                   "(at m = 256: the rate brackets).")
@seeds_option("0")
@click.option("--reference", "reference", type=click.Path(dir_okay=False, path_type=Path), default=None,
              metavar="PATH", help="Reference results to check against [default: the shipped "
                                   "lazylab/reference/paper.json].")
@json_option("every row, each arm's outcome and the verdict")
@dry_run_option
@click.option("--data-dir", type=click.Path(path_type=Path), default=None,
              help="Fashion-MNIST directory [default: $LAZYLAB_DATA or /usr/share/datasets/fashion-mnist].")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Memo folder for the reruns, kept afterwards (a second verify reads them back) [default: a "
                   "throwaway folder, removed at the end; never your memo, which may hold runs from elsewhere].")
def verify(arms_, width, seeds, reference, json_path, dry_run, data_dir, cache_dir):
    """Check this machine: rerun a sample of the reference results here and compare them.

    XLA's CPU code differs between CPU models: stable runs reproduce bit for bit on
    another x86-64 CPU, unstable ones (large rates, loss spikes) need not. By default
    every arm's seed-0 runs at m = 256 at every rate of the reference's brackets are
    trained again (37 runs of the shipped reference; --dry-run prices them here) and each
    is identical (every number equal), within noise (best_acc within 2 x the reference's
    seed std at that rate) or diverged; so are the frozen arms' readouts at the optimum
    there (4 of the shipped reference), within 0.1 points. Exit 1 when a run stable in
    the reference is diverged; docs/verify.md.

    \b
    Examples:
      lazylab verify            # the whole sample
      # two frozen arms: under a minute
      lazylab verify --arms yat-frozen,relu-frozen
      lazylab verify --dry-run  # the runs and their estimated time
      lazylab verify --reference results.json --json verify.json
    """
    from lazylab import verify as V
    from lazylab.cli.options import parse_arms
    from lazylab.cli.output import prepare_json
    from lazylab.cli.plan import announce, show_plan
    from lazylab.cli.progress import Display, ProgressReporter
    from lazylab.experiments import Workspace
    from lazylab.reference import load_reference, machine_description, reference_path

    names = tuple(a.name for a in parse_arms(arms_)) if arms_ is not None else None
    doc = load_reference(reference)
    prepare_json(None if dry_run else json_path)
    memo = cache_dir or Path(tempfile.mkdtemp(prefix="lazylab-verify-"))
    try:
        # The throwaway memo stores no feature matrices: nothing would read them back.
        ws = Workspace(data_dir, memo, cache_limit=0 if cache_dir is None else None)
        sample = V.choose(doc, ws.fingerprint, names, width, seeds)
        est = V.estimate(ws, sample, _calibration(dry_run), doc, width, seeds)
        if dry_run:
            show_plan(est, json_path)
            return
        announce(est)
        try:
            with Display() as display:
                reporter = ProgressReporter(display, "verify", est)
                result = V.verify(ws, doc, width=width, seeds=seeds, reporter=reporter, sample=sample)
        finally:
            ws.backend.close()
        for line in ws.memo.problems:
            click.echo(line, err=True)
        for arm, message in ws.failures.items():  # a unit that failed here: its runs count as diverged
            warn(f"{message}; the other runs of {arm} were skipped")
        prov = doc["provenance"]
        where = reference or reference_path()
        payload = {"machine": machine_description(), "reference": {"path": str(where), **prov},
                   "width": width, "seeds": list(seeds), **result.to_json()}
        write_json(json_path, payload)
        out.print(f"this machine: {escape(machine_description())}", soft_wrap=not wrap_lines())
        out.print(f"reference: {escape(str(where))}, computed {prov['when']} on {escape(str(prov['where']))} "
                  f"({escape(str(prov['code']))})", soft_wrap=not wrap_lines())
        out.print(_table(result, doc, width, seeds))
        if result.convex:
            out.print(_convex_table(result.convex, width))
        out.print(f"runs: {reporter.summary()} at {ws.memo.directory}" if cache_dir is not None else
                  f"runs: {reporter.computed} computed, in a throwaway memo (removed)")
        for a in result.arms:
            out.print(escape(a["line"]), soft_wrap=not wrap_lines())
        out.print(escape(result.verdict), soft_wrap=not wrap_lines())
    finally:
        if cache_dir is None:
            shutil.rmtree(memo, ignore_errors=True)
    return result.exit_code


def _calibration(measure: bool):
    """This machine's calibration for the estimate; ``measure``: measure it now if it never was (``--dry-run``)."""
    from lazylab.calibration import REFERENCE, calibration, calibration_path
    from lazylab.cli.output import err

    if measure and calibration(measure_now=False) is REFERENCE:
        err.print(f"measuring this machine once for estimates (about a minute; kept in {calibration_path()})",
                  soft_wrap=not wrap_lines())
    return calibration(measure_now=measure)


def _table(result, doc: dict, width: int, seeds) -> Table:
    """One row per rerun: arm, rate, seed, both best_acc, their difference, the noise bound, stability, verdict."""
    plan = doc["payload"]["plan"]
    table = Table(title=f"best_acc (%) at m = {width}, seed{'s' * (len(seeds) > 1)} {','.join(map(str, seeds))}, "
                        f"{count(plan['epochs'], 'epoch')} on {plan['train_size']} training images: "
                        "the reference against this machine", title_justify="left")
    for col in ("arm", "lr", "seed", "reference", "this machine", "Δ", "noise bound", "reference run", "verdict"):
        table.add_column(col, justify="left" if col in ("arm", "reference run", "verdict") else "right")
    for r in result.rows:
        style = STYLE[r["verdict"]] if r["stable"] or r["verdict"] != "diverged" else "magenta"
        table.add_row(r["arm"], f"{r['lr']:g}", str(r["seed"]), num(r["reference_best"]), num(r["best"]),
                      num(r["delta"], "+.2f"), f"±{r['bound']:.2f}", "stable" if r["stable"] else "unstable",
                      f"[{style}]{r['verdict']}[/{style}]")
    add_notes(table, ["Δ: this machine - the reference, points; noise bound: 2 x the sample std of best_acc over the "
                      "reference's seeds at that rate (fewer than 2 seeds: at the arm's chosen rate)",
                      "identical: every number of the record equal (accuracies, curves, losses, movement, scalars); "
                      "unstable: the reference run is flagged unstable (docs/ladder.md) or diverged"])
    return table


def _convex_table(rows: list, width: int) -> Table:
    """One row per rerun convex readout: arm, seed, lambda, both test accuracies, their difference, both stop rules."""
    from lazylab.verify import CONVEX_TOLERANCE

    table = Table(title=f"convex readouts (test %) at m = {width}: the reference against this machine",
                  title_justify="left")
    for col in ("arm", "seed", "lambda", "reference", "this machine", "Δ", "stop", "verdict"):
        table.add_column(col, justify="left" if col in ("arm", "stop", "verdict") else "right")
    for r in rows:
        style = STYLE[r["verdict"]]
        stop = r["stop"][0] if r["stop"][0] == r["stop"][1] else " -> ".join(r["stop"])
        table.add_row(r["arm"], str(r["seed"]), f"{r['lambda']:g}", num(r["reference_acc"]), num(r["acc"]),
                      num(r["delta"], "+.2f"), stop, f"[{style}]{r['verdict']}[/{style}]")
    add_notes(table, [f"within noise: test accuracy within {CONVEX_TOLERANCE:g} points (another CPU's BLAS rounds "
                      "the products otherwise); identical: every number of the record equal"])
    return table
