"""``lazylab trajectory``, ``lazylab gram`` and ``lazylab readout``: the pictures' experiments."""

from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table

from lazylab.cli.options import (MAX_WIDTH, arm_option, arms_option, backend_options, data_options, default_out, epochs_option,
                                 fan_in_option, json_option, list_option, lr_option, make_backend, out_option,
                                 parse_arms, seed_option, train_size_option, width_option, widths_option)
from lazylab.cli.output import backend_note, count, gif_facts, gif_line, out, write_json, write_results
from lazylab.cli.plan import dry_run_option, plan_first, yes_option
from lazylab.cli.progress import Display, stage_ticker, sweep
from lazylab.errors import LazylabError
from lazylab.limits import (GRAM_MAX_FRAMES, GRAM_MAX_PER_CLASS, GRAM_MAX_REF_UNITS, GRAM_MAX_REPEATS, GRAM_MAX_SEED,
                            GRAM_MIN_PER_CLASS, READOUT_MAX_STEPS)
from lazylab.paths import writable_dir


def _scalars_text(start: dict, end: dict) -> str:
    return ", ".join(f"{k} {start.get(k, float('nan')):.3g}->{v:.3g}" for k, v in end.items()) or "-"


@click.command()
@arms_option("yat-trained,yat-data-trained,gaussian-trained", "trained arms")
@width_option(64)
@epochs_option(24, "Epochs per arm.")
@click.option("--snapshots", type=click.IntRange(min=1), default=16, show_default=True,
              help="Prototypes kept at every epoch (the first N of the bank).")
@seed_option()
@lr_option("Rate for every arm [default: each arm's ladder bracket, m=256 seed 0 12 epochs, memoized].")
@train_size_option(60000)
@fan_in_option
@out_option("trajectory", "the GIFs and PNGs")
@json_option("the per-epoch records (no snapshot arrays)")
@click.option("--prototype-scale", type=click.Choice(["per-image", "shared"]), default="per-image", show_default=True,
              help="Prototype picture: each image on its own symmetric colour scale, or one scale for all.")
@dry_run_option
@yes_option
@backend_options
@data_options
def trajectory(arms_, width, epochs, snapshots, seed, lr, train_size, fan_in, out_dir, json_path, prototype_scale,
               dry_run, data_dir, cache_dir, backend, address, task_cpus, task_gpus):
    """Watch trained prototypes travel: snapshots, travel and accuracy per epoch, and two GIFs.

    \b
    Examples:
      lazylab trajectory  # 3 trained arms, m=64, 24 epochs
      lazylab trajectory --arms yat-trained --epochs 4 --train-size 4096
      lazylab trajectory --json - | jq '.arms[].final'
    """
    from lazylab.experiments import Workspace
    from lazylab.experiments.trajectory import TrajectoryPlan, run_trajectory, validate
    from lazylab.render.trajectory import render_trajectory

    backend = make_backend(backend, address, task_cpus, task_gpus)
    plan = TrajectoryPlan(arms=parse_arms(arms_), width=width, epochs=epochs, snapshots=snapshots, seed=seed,
                          lr=lr, train_size=train_size, fan_in=fan_in)
    validate(plan)
    ws = Workspace(data_dir, cache_dir)
    ws.backend = backend
    est = plan_first(dry_run, json_path, "trajectory", ws, plan=plan, backend=backend)
    if est is None:
        return
    out_dir = writable_dir(out_dir or default_out() / "trajectory", "--out")
    result, reporter = sweep(backend, run_trajectory, ws, plan, "trajectory", est)
    for line in ws.memo.problems:
        click.echo(line, err=True)
    out.print(f"trajectories: m={width}, {count(epochs, 'epoch')} on {train_size} training images, seed {seed}; "
              f"travel = per-unit ||w_t - w_0|| / ||w_0|| over all {width} units; accuracy (%) on the test set")
    table = Table("arm", "init", "lr", "median travel", "max travel", "final acc", "best acc", "scalars (start->end)", "source")
    for a in result.arms:
        f = a.final()
        table.add_row(a.arm, a.init, f"{a.lr:g} ({a.rate_source})", f"{f['travel_median']:.4f}", f"{f['travel_max']:.4f}",
                      f"{f['accuracy']:.2f}", "-" if f["best_acc"] is None else f"{f['best_acc']:.2f}",
                      _scalars_text(a.record["scalars"][0], f["scalars"]), "memo" if a.cached else "computed")
    out.print(table)
    out.print(f"runs: {reporter.summary()} at {ws.memo.directory}{backend_note(backend)}")
    rendered = render_trajectory(result, out_dir, prototype_scale)
    for note in result.notes + rendered["notes"]:
        out.print(f"note: {note}")
    for name, f in rendered["files"].items():
        frames = f" ({f['frames']} frames)" if f["frames"] > 1 else ""
        out.print(f"wrote {f['path']}{frames}, {f['bytes'] / 1024:.0f} KiB")
    if rendered["colour_scale"] is not None:
        out.print(f"prototype colour scale: [-{rendered['colour_scale']:g}, {rendered['colour_scale']:g}] for every row and frame")
    elif rendered["image_scales"] is not None:
        lo, hi = rendered["image_scales"]
        out.print(f"prototype colour scale: per image, [-max|w|, max|w|] of each image (max|w| from {lo:.3g} to {hi:.3g}); "
                  "--prototype-scale shared for one scale")
    write_json(json_path, {**result.to_json(), "pictures": rendered})
    if ws.failures:  # after every table and file: one line per failed arm, exit 2
        raise LazylabError("\nerror: ".join(f"{msg}; the other runs of {arm} were skipped"
                                             for arm, msg in ws.failures.items()))


def _compute_then_draw(ws, compute, draw, path: Path):
    """``compute(tick)`` then ``draw(result, path)`` under one progress display; memo problems go to stderr.

    The GIF is not drawn again when the JSON written beside it last time (``<stem>.json``) says it
    was drawn from the same result by the same drawing code (``gif.drawn_from``) and the file is still
    the one written then (its SHA-256): a memoized ``gram``/``readout`` costs its lookups alone.
    Returns ``(result, info, facts, drawn)``: ``info`` what ``draw`` returns (or the kept GIF's), ``facts``
    the GIF's facts for the JSON (``gif_facts`` with ``sha256`` and ``drawn_from``), ``drawn`` whether it
    was drawn now.
    """
    with Display() as display:
        result = compute(stage_ticker(display))
        drawn_from = _drawn_from(result, draw)
        info = _kept_gif(path, drawn_from)
        drawn = info is None
        if drawn:
            task = display.task(f"drawing {path.name}")
            info = draw(result, path)
            display.finish(task)
    for line in ws.memo.problems:
        click.echo(line, err=True)
    return result, info, {**gif_facts(info), "sha256": _sha256(info.path), "drawn_from": drawn_from}, drawn


def _sha256(path: Path) -> str:
    """SHA-256 of a regular file (the bounded reader: a FIFO or a device is refused, not waited on)."""
    import hashlib

    from lazylab.schemas import read_bytes

    return hashlib.sha256(read_bytes(path, "GIF")).hexdigest()


def _drawn_from(result, draw) -> str:
    """A digest of what a GIF shows: the result's JSON and the drawing code's version (``RENDER_SCHEMA``)."""
    import hashlib
    import json

    from lazylab.render.report import RENDER_SCHEMA

    what = json.dumps([draw.__name__, RENDER_SCHEMA, result.to_json()], sort_keys=True, default=str)
    return hashlib.sha256(what.encode()).hexdigest()[:16]


def _kept_gif(path: Path, drawn_from: str):
    """The GIF at ``path`` as a GifInfo when ``<stem>.json`` beside it records the same ``drawn_from`` and
    the file's SHA-256; else None (absent, changed, or drawn from something else)."""
    from lazylab.render.gifs import GifInfo
    from lazylab.schemas import read_json

    try:
        if not path.with_suffix(".json").exists():
            return None
        facts = read_json(path.with_suffix(".json"), "GIF facts", max_bytes=2**24).get("gif") or {}
        if facts.get("drawn_from") != drawn_from or Path(facts["path"]).resolve() != path.resolve() \
                or _sha256(path) != facts.get("sha256"):
            return None
        size = facts["size"]
        numbers = [facts["frames"], facts["bytes"], facts["dpi"], *size]
        if len(size) != 2 or not all(type(v) is int and 0 < v < 2**31 for v in numbers) \
                or facts["bytes"] != path.stat().st_size:
            return None  # facts lazylab did not write: draw again
        return GifInfo(path, facts["frames"], facts["bytes"], tuple(size), facts["dpi"])
    except (LazylabError, OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None


@click.command()
@arm_option("yat-frozen", "A frozen arm (plugins included).")
@click.option("--max-units", type=click.IntRange(min=1, max=MAX_WIDTH), default=2000, show_default=True,
              help="Width of the grown bank (the last frame).")
@click.option("--frames", type=click.IntRange(min=1, max=GRAM_MAX_FRAMES), default=40, show_default=True,
              help="Log-spaced widths from 1 to --max-units (distinct integers; at most --max-units).")
@list_option("--images", "classes", default="0,1,7", show_default=True,
             help="Comma-separated classes, indices or names (e.g. 'tshirt,trouser,sneaker').")
@click.option("--per-class", type=click.IntRange(min=GRAM_MIN_PER_CLASS, max=GRAM_MAX_PER_CLASS), default=10, show_default=True,
              help="Images per class: the first N of the class in the test set.")
@seed_option(f"Seed of the grown bank (at most {GRAM_MAX_SEED}: the reference banks take the seeds above).",
             GRAM_MAX_SEED)
@click.option("--ref-units", type=click.IntRange(min=1, max=GRAM_MAX_REF_UNITS), default=None,
              help="Reference bank width [default: max(32 x max-units, 50000); data-seeded arms: every training image].")
@click.option("--fit-min", type=click.IntRange(min=1, max=MAX_WIDTH), default=10, show_default=True,
              help="Smallest width in the log-log slope fit.")
@click.option("--repeats", type=click.IntRange(min=1, max=GRAM_MAX_REPEATS), default=1, show_default=True,
              help="Independent banks (seeds seed..seed+N-1) for an ensemble (RMS) slope; the first is shown.")
@out_option("gram", "gram.gif, gram.json and gram.csv")
@json_option("the kernels' summary, slopes and per-width rows (as gram.json)")
@dry_run_option
@yes_option
@data_options
def gram(arm_name, max_units, frames, classes, per_class, seed, ref_units, fit_min, repeats, out_dir, json_path,
         dry_run, data_dir, cache_dir):
    """The random-feature kernel crystallizing: normalised Gram of 30 test images as a bank grows.

    \b
    Examples:
      lazylab gram  # yat-frozen, 1..2000 units, 40 frames
      # an ensemble slope over 8 banks
      lazylab gram --arm relu-frozen --repeats 8
      lazylab gram --json - | jq .fit.slope
    """
    from lazylab.cli.options import get_arm
    from lazylab.data import CLASS_NAMES
    from lazylab.experiments import Workspace
    from lazylab.experiments.gram import gram_config, parse_classes, require_frozen, run_gram
    from lazylab.render.gifs import gram_gif

    arm = get_arm(arm_name.strip())
    require_frozen(arm, "gram")
    class_ids = parse_classes(classes)
    ws = Workspace(data_dir, cache_dir)
    cfg = gram_config(ws, arm, max_units=max_units, frames=frames, classes=class_ids, per_class=per_class,
                      seed=seed, ref_units=ref_units, fit_min=fit_min, repeats=repeats)
    est = plan_first(dry_run, json_path, "gram", ws, arm=arm, cfg=cfg)
    if est is None:
        return
    out_dir = writable_dir(out_dir or default_out() / "gram", "--out")
    result, info, facts, drawn = _compute_then_draw(ws, lambda tick: run_gram(ws, arm, cfg, tick), gram_gif,
                                             out_dir / "gram.gif")
    payload = {**result.to_json(), "gif": facts}
    write_results(out_dir, "gram", {**payload, "rows": result.rows()})
    names = ", ".join(CLASS_NAMES[c] for c in cfg.classes)
    ref = (f"every one of the {cfg.ref_units:,} training images" if arm.init == "data" else
           f"{cfg.ref_units:,} units ({cfg.ref_units // cfg.max_units} independent {cfg.max_units}-wide banks)")
    out.print(f"gram: {arm.name} ({arm.plugin}), {len(result.labels)} test images ({per_class} each of {names}), "
              f"one bank of {cfg.max_units} units (seed {seed}), {len(result.widths)} widths; reference: {ref}")
    fit = result.fit
    if fit["slope"] is None:
        out.print(f"distance-to-reference slope: not fitted (fewer than 3 widths >= {fit['min_width']})")
    else:
        out.print(f"distance-to-reference slope: {fit['slope']:.3f} (log-log least squares over widths "
                  f"{fit['widths'][0]}..{fit['widths'][1]}, {fit['n']} points, R^2 {fit['r2']:.3f}; Monte Carlo predicts -0.5)")
    raw = result.raw_fit
    if raw["slope"] is not None:
        out.print(f"raw estimator K = Phi Phi^T/m, relative distance ||K_m - K_ref||_F/||K_ref||_F: slope {raw['slope']:.3f} "
                  f"(same widths, R^2 {raw['r2']:.3f})")
    if result.ensemble is not None:
        ens = result.ensemble
        out.print(f"ensemble of {repeats} banks (seeds {seed}..{seed + repeats - 1}), root-mean-square distance: slope "
                  f"{ens['fit']['slope']:.3f} (normalised G), {ens['raw_fit']['slope']:.3f} (raw K)"
                  if ens["fit"]["slope"] is not None and ens["raw_fit"]["slope"] is not None else
                  f"ensemble of {repeats} banks: slope not fitted (fewer than 3 widths >= {fit_min})")
    w, c, dist = result.widths, result.contrast, result.distance
    out.print(f"block contrast (within - cross class): {c[0]:.4f} at m={w[0]}, {c[-1]:.4f} at m={w[-1]}; "
              f"reference bank {result.reference_contrast:.4f}")
    out.print(f"distance to reference: {dist[0]:.4f} at m={w[0]}, {dist[-1]:.4f} at m={w[-1]}")
    out.print(f"{'wrote' if drawn else 'kept (drawn from the same result)'} {gif_line(info)}; "
              f"wrote {out_dir / 'gram.json'}, {out_dir / 'gram.csv'}")
    source = "everything from the memo" if result.cached else f"computed: {', '.join(result.computed)}"
    out.print(f"{source} ({ws.memo.directory}); {result.seconds:.1f} s")
    write_json(json_path, payload)


@click.command()
@arm_option("yat-frozen", "A frozen arm (plugins included).")
@widths_option("64,512", "bank widths m; the widest judges the garments")
@train_size_option(10000)
@click.option("--steps", type=click.IntRange(min=1, max=READOUT_MAX_STEPS), default=300, show_default=True, help="Adam steps (full batch).")
@lr_option("Adam rate (random features are small, so the readout needs a large one; see docs/gram_readout.md).", 0.3)
@click.option("--eval-every", type=click.IntRange(min=1), default=5, show_default=True,
              help="Steps between test evaluations (one GIF frame each).")
@seed_option("Seed of the banks, the readouts and the garments shown.")
@out_option("readout", "readout.gif, readout.json and readout.csv")
@json_option("the curves and garments (as readout.json)")
@dry_run_option
@yes_option
@data_options
def readout(arm_name, widths, train_size, steps, lr, eval_every, seed, out_dir, json_path, dry_run, data_dir, cache_dir):
    """The readout race: linear readouts on frozen banks of two widths, test accuracy through Adam steps.

    \b
    Examples:
      lazylab readout  # yat-frozen, m = 64 and 512, 300 Adam steps
      lazylab readout --arm relu-frozen --widths 16,128,1024
      lazylab readout --json - | jq '.curves[].final_acc'
    """
    from lazylab.cli.options import get_arm
    from lazylab.experiments import Workspace
    from lazylab.experiments.gram import require_frozen
    from lazylab.experiments.readout import readout_configs, run_readout
    from lazylab.render.gifs import readout_gif

    arm = get_arm(arm_name.strip())
    require_frozen(arm, "readout")
    ws = Workspace(data_dir, cache_dir)
    configs = readout_configs(ws, arm, widths, seed=seed, lr=lr, steps=steps, eval_every=eval_every,
                              train_size=train_size)
    est = plan_first(dry_run, json_path, "readout", ws, arm=arm, configs=configs)
    if est is None:
        return
    out_dir = writable_dir(out_dir or default_out() / "readout", "--out")
    result, info, facts, drawn = _compute_then_draw(ws, lambda tick: run_readout(ws, arm, configs, tick), readout_gif,
                                             out_dir / "readout.gif")
    payload = {**result.to_json(), "gif": facts}
    write_results(out_dir, "readout", {**payload, "rows": result.rows()})
    out.print(f"readout: {arm.name} ({arm.plugin}), nnx.Linear(m, 10) by full-batch Adam lr {lr:g}, {steps} steps "
              f"on {train_size:,} training images; test accuracy (%) on the full test set every {eval_every} steps")
    table = Table("width m", "step 0", "final", "best (step)", "source")
    for c in result.curves:
        best = int(c.acc.argmax())
        table.add_row(str(c.width), f"{c.acc[0]:.2f}", f"{c.final_acc:.2f}", f"{c.acc[best]:.2f} ({int(c.steps[best])})",
                      "memo" if c.cached else "computed")
    out.print(table)
    right = int((result.widest.preds[-1, result.show_index] == result.show_labels).sum())
    out.print(f"garments shown: test images {', '.join(map(str, result.show_index.tolist()))}; "
              f"m={result.widest.width} gets {right}/{len(result.show_index)} right at the end")
    out.print(f"{'wrote' if drawn else 'kept (drawn from the same result)'} {gif_line(info)}; "
              f"wrote {out_dir / 'readout.json'}, {out_dir / 'readout.csv'}")
    source = "everything from the memo" if result.cached else f"computed: {', '.join(result.computed)}"
    out.print(f"{source} ({ws.memo.directory}); {result.seconds:.1f} s")
    write_json(json_path, payload)


