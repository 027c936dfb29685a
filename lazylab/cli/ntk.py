"""``lazylab ntk``: lazy versus rich, measured (the 1-D lab, the audit, the scalar model, an arm's NTK)."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.table import Table

from lazylab.cli.options import (MAX_AMPLITUDE, MAX_SEED, MAX_WIDTH, IntList, NtkTimes, arm_option, data_options, default_out,
                                 epochs_option, finite, json_option, list_option, lr_option, out_option, seed_option,
                                 train_size_option, width_option)
from lazylab.cli.output import out, prepare_json, write_json
from lazylab.cli.plan import dry_run_option, plan_first, yes_option
from lazylab.cli.progress import Display
from lazylab.limits import NTK_DT, NTK_W0
from lazylab.paths import writable_dir, write_text_atomically


def _ntk_out(out_dir: Path | None) -> Path:
    return writable_dir(out_dir or default_out() / "ntk", "--out")


def _ntk_checks_table(checks) -> Table:
    table = Table("check", "measured", "criterion", "result")
    for c in checks:
        verdict = ("[green]pass[/green]" if c.passed else "[red]FAIL[/red]") if c.expect else \
                  ("[green]fails, as it must[/green]" if not c.passed else "[red]PASSES (must fail)[/red]")
        table.add_row(c.name, f"{c.value:.3g}", c.note, verdict)
    return table


@click.group()
def ntk():
    """Lazy versus rich, measured: tangent kernels, their drift and the linearization (SPEC section 7).

    \b
    Examples:
      # drift and disagreement shrink with width
      lazylab ntk lab --widths 8,16,...,1024
      lazylab ntk audit  # every SPEC check, pass/fail
      lazylab ntk arm --arm yat-trained --width 64
    """


@ntk.command("lab")
@width_option(32, "Hidden units m (one run).", alias=False)
@lr_option("Gradient-descent rate [default: 0.5 for one run, 0.05 for a --widths sweep].")
@click.option("--steps", type=click.IntRange(min=1, max=1_000_000), default=2000, show_default=True, help="Full-batch GD steps.")
@click.option("--bump", type=click.FloatRange(min=-MAX_AMPLITUDE, max=MAX_AMPLITUDE), default=1.0, show_default=True,
              callback=finite, help="Amplitude of the local bump in the target.")
@click.option("--noise", type=click.FloatRange(min=0, max=MAX_AMPLITUDE), default=0.1, show_default=True, callback=finite,
              help="Label noise std.")
@seed_option("Initialization seed.", alias=False)
@click.option("--data-seed", type=click.IntRange(min=0, max=MAX_SEED), default=0, show_default=True, help="Seed of the training data.")
@click.option("--frames", type=click.IntRange(min=2, max=400), default=60, show_default=True, help="Snapshots (GIF frames), log-spaced in steps.")
@list_option("--widths", type=IntList(1, MAX_WIDTH, at_least=2),
             help="Run a width sweep instead: 8,16,...,1024 or 8,32,128.")
@click.option("--sweep-seeds", type=click.IntRange(min=1, max=100), default=5, show_default=True,
              help="Seeds averaged per width in a sweep (--seed, --seed+1, ...).")
@click.option("--no-gif", is_flag=True, help="Skip the GIF.")
@out_option("ntk", "lab.{png,gif,json} or sweep.{png,json}")
@json_option("the run's (or the sweep's) figures")
@dry_run_option
@yes_option
def ntk_lab(width, lr, steps, bump, noise, seed, data_seed, frames, widths, sweep_seeds, no_gif, out_dir, json_path,
            dry_run):
    """The 1-D tanh network and its linearization from one init; or a width sweep.

    \b
    Examples:
      lazylab ntk lab               # m = 32: the network leaves its linearization
      lazylab ntk lab --width 1024  # wide: it stays lazy
      lazylab ntk lab --widths 8,16,...,1024 --json - | jq .slopes
    """
    from lazylab.experiments.ntk import LabConfig, run_lab, sweep

    if widths:
        from lazylab.render.ntk import sweep_png

        cfg = LabConfig(width=widths[0], lr=0.05 if lr is None else lr, steps=steps, bump=bump, noise=noise, seed=seed,
                        data_seed=data_seed).validate()
        seeds = list(range(seed, seed + sweep_seeds))
        est = plan_first(dry_run, json_path, "ntk-lab", None, cfg=cfg, widths=widths, seeds=seeds)
        if est is None:
            return
        out_dir = _ntk_out(out_dir)
        with Display() as display:
            task = display.task("sweep", total=len(widths) * len(seeds))
            sw = sweep(cfg, widths, seeds, on_run=lambda w, s: display.update(task, advance=1, say=f"m={w} seed={s}"))
        write_text_atomically(out_dir / "sweep.json", json.dumps(sw.to_json(), indent=1), "--out")
        sweep_png(sw, out_dir / "sweep.png")
        out.print(f"width sweep: lr {cfg.lr:g}, {steps} steps, bump {bump:g}, noise {noise:g}; mean over seeds "
                  f"{','.join(map(str, seeds))}")
        table = Table("m", "NTK drift", "disagreement (RMS)", "movement net", "movement lin", "train MSE net", "train MSE lin")
        for r in sw.rows:
            table.add_row(str(r["width"]), f"{r['drift']:.4f} ± {r['drift_std']:.4f}",
                          f"{r['disagreement']:.4f} ± {r['disagreement_std']:.4f}", f"{r['move_net']:.4f}",
                          f"{r['move_lin']:.4f}", f"{r['train_mse']:.4f}", f"{r['train_mse_lin']:.4f}")
        out.print(table)
        for key, label in (("drift", "NTK drift"), ("disagreement", "net-vs-linearization disagreement"), ("move_net", "relative movement")):
            s = sw.slopes[key]
            out.print(f"log-log slope of {label} vs width: {s['slope']:.3f} (R^2 {s['r2']:.3f})")
        out.print(f"wrote {out_dir / 'sweep.png'}, {out_dir / 'sweep.json'}")
        write_json(json_path, sw.to_json())
        return

    from lazylab.render.ntk import lab_gif, lab_png

    cfg = LabConfig(width=width, lr=0.5 if lr is None else lr, steps=steps, bump=bump, noise=noise, seed=seed,
                    data_seed=data_seed, frames=frames).validate()
    est = plan_first(dry_run, json_path, "ntk-lab", None, cfg=cfg, widths=(width,), seeds=(seed,))
    if est is None:
        return
    out_dir = _ntk_out(out_dir)
    res = run_lab(cfg)
    s = res.summary()
    (out_dir / "lab.json").write_text(json.dumps({**s, "loss": res.loss.tolist(), "loss_lin": res.loss_lin.tolist(),
                                                   "snap_steps": res.snap_steps.tolist(), "drift_trace": res.drift.tolist()}))
    written = [str(lab_png(res, out_dir / "lab.png"))]
    if not no_gif:
        g = lab_gif(res, out_dir / "lab.gif")
        written.append(f"{g['path']} ({g['frames']} frames, {g['size'][0]}x{g['size'][1]} px, {g['bytes'] / 2**20:.2f} MiB)")
    out.print(f"1-D lab: m = {width}, lr {cfg.lr:g}, {steps} steps of full-batch GD on half-MSE, bump {bump:g}, "
              f"noise {noise:g}, seed {seed} (data seed {data_seed}); {cfg.n_train} training points, test MSE "
              f"against the noiseless target on {cfg.n_test} grid points")
    table = Table("model", "train MSE", "test MSE", "half-MSE start -> end", "relative movement")
    table.add_row("network", f"{s['train_mse']:.5f}", f"{s['test_mse']:.5f}", f"{s['loss_start']:.4f} -> {s['loss_end']:.5f}",
                  f"{s['move_net']:.4f}  (a {s['move_net_layers']['a']:.3f}, w {s['move_net_layers']['w']:.3f}, "
                  f"b {s['move_net_layers']['b']:.3f})")
    table.add_row("linearization", f"{s['train_mse_lin']:.5f}", f"{s['test_mse_lin']:.5f}",
                  f"{s['loss_lin_start']:.4f} -> {s['loss_lin_end']:.5f}", f"{s['move_lin']:.4f}  (displacement)")
    out.print(table)
    out.print(f"same start: max |f - f_lin| at step 0 = {s['start_gap']:g}")
    out.print(f"NTK drift ||K_T - K_0||_F / ||K_0||_F on the training inputs: {s['drift']:.4f}")
    out.print(f"network vs linearization at step {steps}: RMS {s['disagreement']:.4f} on the test grid "
              f"({s['disagreement_rel']:.3f} of the network's own change)")
    out.print(f"wrote {', '.join(written)}, {out_dir / 'lab.json'}")
    write_json(json_path, s)


@ntk.command("audit")
@json_option("the checks")
def ntk_audit(json_path):
    """Every SPEC check of the 1-D lab, pass/fail with its measured value; exit 1 if any fails.

    \b
    Examples:
      lazylab ntk audit
      lazylab ntk audit --json audit.json
    """
    from lazylab.experiments.ntk import run_audit

    prepare_json(json_path)
    checks = run_audit()
    failed = [c for c in checks if not c.ok]
    out.print(_ntk_checks_table(checks))
    out.print(f"{len(checks) - len(failed)}/{len(checks)} checks pass")
    write_json(json_path, [c.to_json() for c in checks])
    if failed:
        click.get_current_context().exit(1)


@ntk.command("scalar")
@click.option("--w0", type=click.FloatRange(min=NTK_W0[0], max=NTK_W0[1]), default=0.01, show_default=True, callback=finite,
              help="Initial output w0 = a0 b0 (balanced a0 = b0), at least 0.01 away from 1.")
@list_option("--times", type=NtkTimes(), default="0,0.5,1,2,3,5,10,20,50,100,200", show_default=True, help="Report times.")
@click.option("--dt", type=click.FloatRange(min=NTK_DT[0], max=NTK_DT[1]), default=1e-3, show_default=True, callback=finite,
              help="Largest RK4 step.")
@click.option("--offset", type=float, default=1e-3, show_default=True, callback=finite,
              help="Control 1: the linear model's mismatched start f_lin(0) - f(0) (1e-5 to 1 in size).")
@out_option("ntk", "scalar.csv and scalar.png")
@json_option("the table and checks")
def ntk_scalar(w0, times, dt, offset, out_dir, json_path):
    """The exact scalar model f = a b x: closed forms vs integration, controls, two-mode decay; exit 1 on a wrong verdict.

    \b
    Examples:
      lazylab ntk scalar                      # w0 = 0.01: the rich, slow start
      lazylab ntk scalar --w0 0.5 --times 0,1,10,100
    """
    from lazylab.experiments.ntk import run_scalar
    from lazylab.render.ntk import scalar_png

    from lazylab.ntk.scalar import setting_problem

    problem = setting_problem(w0, times, offset)
    if problem:
        raise click.UsageError(problem)
    if times[-1] / dt > 2e6:
        raise click.BadParameter(f"{times[-1]:g} / dt = {times[-1] / dt:.0f} steps is over 2,000,000; raise --dt", param_hint="'--times'")
    prepare_json(json_path)
    out_dir = _ntk_out(out_dir)
    res = run_scalar(w0=w0, times=times, dt=dt, offset=offset)
    (out_dir / "scalar.csv").write_text(res.csv())
    scalar_png(res, out_dir / "scalar.png")
    t = res.table
    out.print(f"scalar model f = a b x, x = y = 1, a0 = b0 = sqrt({w0:g}); RK4 step <= {dt:g}; |error| = |closed - integrated|")
    table = Table("t", "w(t)", "|err|", "f_lin(t)", "|err|", "kernel 2w", "|err|", "|θ-θ0| net", "|θ-θ0| lin", "frozen 2w(T)")
    for i in range(len(res.times)):
        table.add_row(f"{t['t'][i]:g}", f"{t['f_net_closed'][i]:.8f}", f"{abs(t['f_net_closed'][i] - t['f_net_int'][i]):.1e}",
                      f"{t['f_lin_closed'][i]:.8f}", f"{abs(t['f_lin_closed'][i] - t['f_lin_int'][i]):.1e}",
                      f"{t['kernel_net_closed'][i]:.6f}", f"{abs(t['kernel_net_closed'][i] - t['kernel_net_int'][i]):.1e}",
                      f"{t['dist_net_closed'][i]:.6f}", f"{t['dist_lin_closed'][i]:.6f}", f"{t['ctrl_frozen_final_f'][i]:.6f}")
    out.print(table)
    out.print(_ntk_checks_table(res.checks))
    out.print(f"two-mode decay: residual modes e^(-t) and e^(-0.01 t) at t = {t['t'][-1]:g}: "
              f"{t['mode1_closed'][-1]:.3e} and {t['mode2_closed'][-1]:.4f}")
    out.print(f"wrote {out_dir / 'scalar.csv'}, {out_dir / 'scalar.png'}")
    write_json(json_path, {"w0": w0, "dt": dt, "table": {k: v.tolist() for k, v in t.items()},
                           "checks": [c.to_json() for c in res.checks]})
    if not res.ok:
        click.get_current_context().exit(1)


@ntk.command("arm")
@arm_option(None, "Arm name, e.g. yat-trained (plugins included).")
@width_option(None, "Units m in the arm's bank.")
@click.option("--probe", type=click.IntRange(min=1, max=1024), default=256, show_default=True, help="First N test images for the NTK.")
@seed_option()
@lr_option("AdamW rate [default: the middle of the arm's bracketing grid].")
@epochs_option(3, "Epochs of AdamW before the final kernel.")
@train_size_option(60000)
@click.option("--method", type=click.Choice(["auto", "structured", "jacobian", "rows"]), default="auto", show_default=True,
              help="NTK contraction (docs/ntk.md).")
@click.option("--memory-mib", type=click.IntRange(min=1, max=1 << 20), default=256, show_default=True,
              help="Largest Jacobian-sized intermediate allowed.")
@out_option("ntk", "arm-<arm>-m<width>-p<probe>.{png,json}")
@json_option("the record")
@dry_run_option
@yes_option
@data_options
def ntk_arm(arm_name, width, probe, seed, lr, epochs, train_size, method, memory_mib, out_dir, json_path, dry_run,
            data_dir, cache_dir):
    """Empirical NTK of an arm on a probe slice: drift, disagreement with the linearization, movement.

    \b
    Examples:
      lazylab ntk arm --arm yat-trained --width 64
      lazylab ntk arm --arm relu-trained --width 1024 --epochs 1 --json - \\
        | jq .drift
    """
    from lazylab.cli.options import get_arm
    from lazylab.experiments import Workspace
    from lazylab.experiments.ntk import run_arm
    from lazylab.render.ntk import arm_png

    arm = get_arm(arm_name.strip())
    ws = Workspace(data_dir, cache_dir)
    if plan_first(dry_run, json_path, "ntk-arm", ws, arm=arm, width=width, probe=probe, seed=seed, lr=lr,
                  epochs=epochs, train_size=train_size, method=method, limit=memory_mib * 2**20) is None:
        return
    out_dir = _ntk_out(out_dir)
    with Display() as display:
        task = display.task("ntk arm")
        record, arrays = run_arm(ws, arm, width, probe=probe, seed=seed, lr=lr, epochs=epochs, train_size=train_size,
                                 method=method, limit_bytes=memory_mib * 2**20,
                                 progress=lambda s: display.update(task, say=s))
    for line in ws.memo.problems:
        click.echo(line, err=True)
    stem = f"arm-{arm.name}-m{width}-p{probe}"
    (out_dir / f"{stem}.json").write_text(json.dumps(record, indent=1))
    arm_png(record, arrays, out_dir / f"{stem}.png")
    r, k = record, record["ntk"]
    out.print(f"{arm.name} m = {width}: {epochs} epochs of AdamW lr {r['lr']:g} on {r['train_size']} images, seed {seed}; "
              f"NTK on the first {probe} test images over {k['n_params']:,} trained parameters")
    out.print(f"NTK: {k['method']} ({k['notes']}); a full Jacobian would be {k['jacobian_mib']:.0f} MiB; "
              f"{k['seconds'][0]:.1f} s + {k['seconds'][1]:.1f} s")
    out.print(f"NTK drift ||Θ_T - Θ_0||_F / ||Θ_0||_F: {r['drift']:.4g} (class trace: {r['drift_trace']:.4g}); "
              f"||Θ_0||_F {r['kernel_init']['fro']:.4g} -> ||Θ_T||_F {r['kernel_final']['fro']:.4g}")
    out.print(f"kernel symmetric (max asym {max(r['kernel_init']['asym'], r['kernel_final']['asym']):.1e}), "
              f"min/max eigenvalue {r['kernel_init']['min_over_max']:.1e} (init), {r['kernel_final']['min_over_max']:.1e} (final)")
    out.print(f"network vs linearization on the probe: RMS logit gap {r['disagreement_rms']:.4g} "
              f"({r['disagreement_rel']:.3g} of the network's own logit change, RMS {r['logit_move_rms']:.4g}); "
              f"argmax agreement {r['argmax_agreement']:.1f}%")
    out.print(f"test accuracy: network {r['acc_net']:.2f}%, linearization {r['acc_lin']:.2f}%")
    out.print(f"movement ||θ_T - θ_0|| / ||θ_0||: network {r['move_net']:.4f}, linearization {r['move_lin']:.4f}; "
              f"prototypes w_move_rel {r['prototypes']['w_move_rel']:.4f}")
    out.print(("from the memo" if r.get("cached") else f"computed in {r['seconds']:.1f} s") +
              f"; wrote {out_dir / (stem + '.png')}, {out_dir / (stem + '.json')}")
    write_json(json_path, record)



