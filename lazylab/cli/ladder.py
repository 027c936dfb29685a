"""``lazylab ladder`` (the width ladder, its laws and the convex wall) and ``lazylab redundancy``."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from lazylab.cli.options import (IntList, arms_option, backend_options, cache_limit_option, choices, data_options,
                                 default_out, epochs_option, fan_in_option, finite, json_option, list_option,
                                 lr_option, make_backend, out_option, parse_arms, seeds_option, train_size_option,
                                 width_option, widths_option)
from lazylab.cli.output import (warn, analysis_tables, answer_parts, backend_note, bracket_table, count, edge_note, exchange_parts, fair_parts, ladder_table, law_table, num, out, wrap_lines,
                                wall_tables, write_csv, write_json)
from lazylab.bracket import DEFAULT_RULE, RULES
from lazylab.cli.plan import dry_run_option, plan_first, yes_option
from lazylab.cli.progress import Display, ProgressReporter, sweep
from lazylab.errors import LazylabError
from lazylab.paths import writable_dir, writable_file


def _lambdas(value: str | None) -> tuple[float, ...] | None:
    """``--lambdas``: comma-separated distinct penalties (``convex_solve.lambda_path``), largest first; None when
    not given."""
    from lazylab.experiments.convex_solve import lambda_path

    if value is None:
        return None
    try:
        given = [float(v) for v in value.split(",")]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated numbers, got {value!r}", param_hint="--lambdas") from None
    try:
        return lambda_path(given)
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint="--lambdas") from None


@click.command()
@click.option("--preset", type=click.Choice(["paper", "quick"]), default="paper", show_default=True,
              help="Values of every option not given (the table above).")
@arms_option()
@widths_option()
@seeds_option()
@epochs_option(None)
@lr_option("Fixed learning rate for every arm (skips bracketing) [default: each arm's rate bracketed at m=256 "
           "over its grid, --bracket].")
@click.option("--bracket", "bracket_rule", type=click.Choice(RULES), default=DEFAULT_RULE, show_default=True,
              help="How the rate is chosen at m=256: 1se runs seeds 0,1,2, excludes unstable rates, extends a grid "
                   "whose best is at its end and takes the smallest rate within one standard error of the best; "
                   "argmax is SPEC section 5 as published (seed 0, best best_acc). docs/ladder.md.")
@train_size_option(None)
@fan_in_option
@click.option("--readout", type=click.Choice(["adamw", "convex", "both"]), default="adamw", show_default=True,
              help="Frozen heads: the protocol's AdamW epochs, the convex optimum of the same objective "
                   "(L-BFGS, frozen arms only), or both with the wall table (docs/convex.md).")
@list_option("--lambdas", help="Convex readout: the L2 penalty path walked at each width, largest first, until "
             "held-out training accuracy stops improving, each from 1.2e-38 to 1e36 "
             "[default: 1e-2,1e-4,1e-6,1e-8,1e-10,1e-12].")
@list_option("--climb-widths", type=IntList(1),
             help="Fit every arm's ladder law on these widths instead of its climbing region.")
@click.option("--climb-gain", type=click.FloatRange(min=0), default=0.1, show_default=True, callback=finite,
              help="Climbing region: from the smallest width while each next width gains more than this (points).")
@click.option("--redundancy-sample", type=click.Choice(["first-n", "held-out", "with-seeds"]), default="first-n",
              show_default=True, help="Images of the redundancy measurement: the first n, or for a data-seeded bank "
              "those that seed no unit, or n that include every seed image (docs/results.md).")
@json_option("the full results (plan, summaries, analysis, every run record)")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False, path_type=Path), default=None, metavar="PATH",
              help="Write every run as one CSV row to PATH [default: next to --json as <name>.csv, else "
                   "<out>/runs.csv].")
@out_option("ladder", "accuracy.{png,svg}, movement.{png,svg} and runs.csv")
@click.option("--no-figures", is_flag=True, help="Draw no figures.")
@click.option("--report", is_flag=True,
              help="Train nothing: re-print, re-write and re-draw everything from the memo (exit 2 if a run is missing).")
@dry_run_option
@yes_option
@backend_options
@cache_limit_option
@data_options
def ladder(preset, arms_, widths, seeds, epochs, lr, bracket_rule, train_size, fan_in, readout, lambdas, climb_widths, climb_gain,
           redundancy_sample, json_path, csv_path, out_dir, no_figures, report, dry_run, backend, address, task_cpus,
           task_gpus, cache_limit, data_dir, cache_dir):
    """The width ladder: bracket each arm's rate at m=256 (--bracket), then train every width x seed.

    Prints best_acc per arm and width, the laws of SPEC section 6 and the exchange rate (how
    many frozen units match a trained one); every run is memoized, so an interrupted ladder
    resumes where it stopped. Each option not given takes the preset's value:

    \b
    preset  arms                           widths          seeds  epochs  runs
    paper   yat, yat-data, relu, gaussian  16,32,...,8192  0,1,2  12      300-348
            x frozen, trained (8 arms)
    quick   yat-frozen, relu-frozen,       16,64,256,1024  0      3       57-81
            gaussian-frozen, yat-trained
    Both train on all 60000 training images. Runs: the brackets (every grid
    rate x seeds 0,1,2 at m=256) and the cells; the more when brackets extend
    their grids (up to 2 rates x 3 seeds per arm). --dry-run prices a ladder
    on this machine.

    \b
    Examples:
      lazylab ladder --preset quick --dry-run    # the plan and its estimated cost
      lazylab ladder --arms yat-frozen,relu-frozen --widths 16,32,...,1024 \\
        --seeds 0-2
      lazylab ladder --preset paper --json results.json --backend ray
    """
    from lazylab.experiments import Workspace
    from lazylab.experiments.convex import LAMBDAS
    from lazylab.experiments.ladder import preset_plan, run_ladder
    from lazylab.experiments.laws import analyse_ladder, missing_message, runs_table

    backend = make_backend(backend, address, task_cpus, task_gpus)
    plan = preset_plan(preset, parse_arms(arms_) if arms_ is not None else None, widths, seeds, epochs, train_size,
                       lr, fan_in, bracket_rule)
    stray = [w for w in climb_widths or () if w not in plan.widths]
    if stray:  # a law fitted on widths the ladder never ran would fit nothing, silently
        raise click.BadParameter(f"{stray[0]} is not among the ladder's widths "
                                 f"({','.join(map(str, plan.widths))})", param_hint="--climb-widths")
    if lambdas is not None and readout == "adamw":
        raise click.BadParameter("applies to the convex readout: add --readout convex or both", param_hint="--lambdas")
    lambdas = _lambdas(lambdas) or LAMBDAS
    if readout != "adamw" and all(a.trained for a in plan.arms):
        raise LazylabError(f"--readout {readout} reads out frozen banks and this ladder has none "
                           f"({', '.join(a.name for a in plan.arms)})")
    trained = [a.name for a in plan.arms if a.trained]
    if readout == "convex" and trained:  # refused before --dry-run too, so the plan is the run's
        raise LazylabError(f"--readout convex fits frozen banks' heads, not trained ones ({', '.join(trained)}): "
                           "use --readout both, or drop them")
    ws = Workspace(data_dir, cache_dir, cache_limit=cache_limit)
    ws.backend = backend
    est = plan_first(dry_run, json_path, "ladder", ws, plan=plan, readout=readout, backend=backend, lambdas=lambdas)
    if est is None:
        return
    if csv_path is not None:
        writable_file(csv_path, "--csv")
    out_dir = None if no_figures else writable_dir(out_dir or default_out() / "ladder", "--out")
    if readout == "convex":
        _convex_ladder(ws, plan, lambdas, report, json_path, climb_widths, climb_gain, est)
        return
    if report:
        ws.memo_only = True
        result = run_ladder(ws, plan)
    else:
        result, reporter = sweep(backend, run_ladder, ws, plan, "ladder", est)
    healthy = tuple(a for a in plan.arms if a.name not in ws.failures)
    analysis = analyse_ladder(ws, result, healthy, climb_widths=climb_widths, min_gain=climb_gain,
                              redundancy_sample=redundancy_sample)
    shown = _echo_problems(ws)
    if report and ws.missing:
        raise LazylabError(missing_message(ws, plan, result))
    plan_json = result.plan
    seeds = plan_json["seeds"]
    over = f"mean ± std over seeds {','.join(map(str, seeds))}" if len(seeds) > 1 else f"seed {seeds[0]}"
    out.print(f"best_acc (%) on the test set, {over}; {count(plan_json['epochs'], 'epoch')} on "
              f"{plan_json['train_size']} training images")
    out.print(ladder_table(result))
    brackets = bracket_table(result.to_json()["arms"])
    if brackets is not None:
        out.print(brackets)
    if report:
        out.print(f"runs: {len(result.runs)} from the memo at {ws.memo.directory} (report: nothing trained)")
    else:
        out.print(f"runs: {reporter.summary()} at {ws.memo.directory}" + backend_note(backend))
    for part in analysis_tables(analysis):
        out.print(part)
    payload = {**result.to_json(), "analysis": analysis}
    parts = exchange_parts(analysis.get("exchange"), [a.name for a in plan.arms])
    if readout == "both":
        import dataclasses

        from lazylab.experiments.convex_wall import with_convex

        frozen = dataclasses.replace(plan, arms=tuple(a for a in healthy if not a.trained))
        convex = _convex_phase(ws, frozen, lambdas, report, est)
        with_convex(payload, result, convex, healthy, climb_widths, climb_gain)
        _optimum_phase(ws, payload, result, convex, plan, healthy, report, est)
        # The fair answer first, then the protocol's exchange rate, the wall and the answer at both readouts.
        parts = fair_parts(payload["analysis"].get("fair")) + parts + wall_tables(payload["analysis"]["wall"]) + \
            answer_parts(payload["analysis"]["answer"], list(plan.widths))
        _echo_problems(ws, shown)  # what the readouts met in the memo
    for part in parts:
        out.print(escape(part) if isinstance(part, str) else part, soft_wrap=isinstance(part, str) and not wrap_lines())
    for line in analysis.get("warnings") or []:  # one line each, never wrapped
        warn(line)
    write_json(json_path, payload)
    if csv_path is None and json_path is not None and str(json_path) != "-":
        csv_path = json_path.with_suffix(".csv")
    elif csv_path is None and out_dir is not None:
        csv_path = out_dir / "runs.csv"
    if csv_path is not None:
        header, rows = runs_table(result)
        write_csv(csv_path, header, rows, "--csv")
        out.print(f"wrote {csv_path} ({count(len(rows), 'run')})")
    if out_dir is not None:
        from lazylab.render.figures import ladder_figures

        paths = ladder_figures(payload, out_dir)
        if paths:
            out.print(f"wrote {', '.join(str(p) for p in paths)}")
    if ws.failures:  # after every table and file: one line per failed arm, exit 2
        raise LazylabError("\nerror: ".join(f"{msg}; the other runs of {arm} were skipped"
                                             for arm, msg in ws.failures.items()))


def _echo_problems(ws, start: int = 0) -> int:
    """Print the memo's one-line problems from the ``start``-th on, on stderr; returns how many it holds."""
    for line in ws.memo.problems[start:]:
        click.echo(line, err=True)
    return len(ws.memo.problems)


def _convex_phase(ws, plan, lambdas, report: bool, est=None) -> dict:
    """``run_convex_ladder`` under a progress bar, its time left from the plan's estimate ``est`` (memo only
    with ``report``); exit 2 if ``report`` lacks a run."""
    from lazylab.experiments.convex import run_convex_ladder

    if report:
        ws.memo_only = True
        convex = run_convex_ladder(ws, plan, lambdas)
        lacking = [k for k in ws.missing if k.startswith("convex-")]
        if lacking:
            raise LazylabError(f"--report: the memo at {ws.memo.directory} lacks {count(len(lacking), 'convex readout')}"
                               "; run the same command without --report to compute them")
        out.print(f"convex readouts: {len(convex['runs'])} from the memo (report: nothing computed)")
    else:
        with Display() as display:
            reporter = ProgressReporter(display, "convex readouts", est, convex=True)
            convex = run_convex_ladder(ws, plan, lambdas, reporter)
        out.print(f"convex readouts: {reporter.summary()} at {ws.memo.directory}")
    chosen = "; ".join(f"{arm} {_lambda_runs(a['lambdas'])}" for arm, a in convex["arms"].items())
    out.print(f"lambda per width, chosen on seed {convex['lambda_seed']}'s bank by held-out accuracy: {chosen}",
              soft_wrap=not wrap_lines())
    return convex


def _optimum_phase(ws, payload, result, convex, plan, arms, report: bool, est=None) -> None:
    """``with_optimum`` for the trained arms among ``arms`` at the plan's widths up to ``optimum.MAX_WIDTH``, under a
    progress bar (memo only with ``report``; exit 2 if ``report`` lacks a run)."""
    from lazylab.experiments.optimum import with_optimum

    if not any(a.trained for a in arms):
        return
    if report:
        ws.memo_only = True
        with_optimum(ws, payload, result, convex, plan, arms)
        lacking = [k for k in ws.missing if k.startswith("optimum-")]
        if lacking:
            raise LazylabError(f"--report: the memo at {ws.memo.directory} lacks {count(len(lacking), 'trained-optimum run')}"
                               "; run the same command without --report to compute them")
        optimum = payload["optimum"]
        out.print(f"trained optimum: {len(optimum['runs']) + len(optimum['fits'])} runs from the memo "
                  "(report: nothing computed)")
        return
    with Display() as display:
        reporter = ProgressReporter(display, "trained optimum", est, optimum=True)
        with_optimum(ws, payload, result, convex, plan, arms, reporter)
    out.print(f"trained optimum: {reporter.summary()} at {ws.memo.directory}")


def _lambda_runs(lambdas: dict) -> str:
    """``{"16": 1e-06, "32": 1e-06, "64": 1e-08}`` as ``1e-06 (m = 16-32), 1e-08 (m = 64)`` (None: not chosen)."""
    runs: list[list] = []
    for w, lam in sorted(lambdas.items(), key=lambda kv: int(kv[0])):
        if runs and runs[-1][0] == lam:
            runs[-1][2] = w
        else:
            runs.append([lam, w, w])
    return ", ".join(f"{'?' if lam is None else f'{lam:g}'} (m = {a}{'' if a == b else f'-{b}'})" for lam, a, b in runs)


def _convex_ladder(ws, plan, lambdas, report, json_path, climb_widths, climb_gain, est=None) -> None:
    """``ladder --readout convex``: every frozen arm's convex optimum per width, its table and law."""
    from lazylab.experiments.convex_wall import convex_file, lambda_at_edge

    convex = _convex_phase(ws, plan, lambdas, report, est)
    _echo_problems(ws)
    document = convex_file(plan, convex, climb_widths, climb_gain)
    widths = list(plan.widths)
    table = Table()
    table.add_column("arm")
    for w in widths:
        table.add_column(f"m={w}", justify="right")
    for arm, a in convex["arms"].items():
        cells = [a["cells"][str(w)] for w in widths]
        table.add_row(arm, *[num(c["mean"]) + (f" ± {c['std']:.2f}" if c["n"] > 1 else "") for c in cells])
    out.print(f"convex readout: test accuracy (%) at the optimum of cross-entropy + L2 (lambda chosen on the last "
              f"{convex['holdout_fraction']} of the training images), mean ± std over seeds "
              f"{','.join(map(str, plan.seeds))}")
    out.print(table)
    for note in edge_note(lambda_at_edge(convex)):  # below, not a caption: a narrow table would wrap it
        out.print(note, soft_wrap=not wrap_lines())
    out.print(law_table("ladder law of the convex readout: err = floor + c m^-alpha",
                        document["analysis"]["convex_law"]))
    write_json(json_path, document)



@click.command()
@arms_option("yat-frozen,yat-data-frozen", "arms whose initial banks are measured (one row set per bank)")
@width_option(256)
@click.option("--images", type=click.IntRange(2, 60000), default=4000, show_default=True,
              help="Training images n the correlations are measured on.")
@seeds_option("0,1,2")
@list_option("--fan-in", "fan_ins", default="unit,d", show_default=True,
             help="Comma-separated random-init fan-ins: unit (as the ladder), d.")
@list_option("--sample", "samples", default="first-n,held-out,with-seeds", show_default=True,
             help="Comma-separated image samples: first-n, held-out (images that seed no unit), "
                  "with-seeds (the n images include every seed image).")
@train_size_option(60000, "Banks are seeded from the first N training images.")
@json_option("the rows")
@dry_run_option
@yes_option
@data_options
def redundancy(arms_, width, images, seeds, fan_ins, samples, train_size, json_path, dry_run, data_dir, cache_dir):
    """Redundancy of initial banks (mean |corr|, participation ratio) for each fan-in x image sample.

    \b
    Examples:
      lazylab redundancy  # the 2 x 3 x 2 table of docs/results.md
      lazylab redundancy --arms relu-frozen --fan-in unit --sample first-n
    """
    from lazylab.experiments import Workspace
    from lazylab.experiments.laws import SAMPLES, redundancy_grid

    arms = parse_arms(arms_)
    fan_ins = choices(fan_ins, ("unit", "d"), "--fan-in")
    samples = choices(samples, SAMPLES, "--sample")
    if images > train_size:
        raise click.BadParameter(f"{images} images exceed --train-size {train_size}", param_hint="--images")
    if width < 2:
        raise click.BadParameter("a correlation needs at least 2 units", param_hint="--width")
    ws = Workspace(data_dir, cache_dir)
    if plan_first(dry_run, json_path, "redundancy", ws, arms=arms, width=width, n=images, seeds=seeds,
                  fan_ins=fan_ins, samples=samples, train_size=train_size) is None:
        return
    with Display() as display:
        task = display.task("redundancy")
        rows = redundancy_grid(ws, arms, width, images, seeds, fan_ins, samples, train_size,
                               progress=lambda done, total: display.update(task, done=done, total=total))
    for line in ws.memo.problems:
        click.echo(line, err=True)
    table = Table(title=f"redundancy of the initial bank, m = {width}, n = {images}, mean ± std over seeds "
                        f"{','.join(map(str, seeds))}", title_justify="left")
    for col in ("bank", "fan-in", "sample", "mean |corr| off-diag", "participation ratio"):
        table.add_column(col, justify="left" if col in ("bank", "fan-in", "sample") else "right")
    for r in rows:
        c, p = r["mean_abs_corr"], r["participation_ratio"]
        spread = len(seeds) > 1
        table.add_row(r["bank"], r["fan_in"], r["sample"], f"{c['mean']:.3f}" + (f" ± {c['std']:.3f}" if spread else ""),
                      f"{p['mean']:.1f}" + (f" ± {p['std']:.1f}" if spread else ""))
    out.print(table)
    out.print("fan-in applies to random-init banks only; the samples differ for data-seeded banks only")
    write_json(json_path, {"width": width, "images": images, "seeds": list(seeds), "train_size": train_size,
                           "rows": rows})

