"""Plans before long jobs (issue 25): ``--dry-run`` and the line a long computing command starts with.

``estimate_for`` turns a command's parsed options into a ``lazylab.estimate.Estimate`` (the runs,
how many are in the memo, time, memory and disk on this machine) without computing anything;
``show_plan`` prints it for ``--dry-run``; ``announce`` prints one line on stderr before a command
estimated at over ``ANNOUNCE_S`` seconds starts.
"""

from __future__ import annotations

import click

from lazylab.cli import progress
from lazylab.cli.output import count, err, out, prepare_json, wrap_lines, write_json
from lazylab.cli.progress import duration

ANNOUNCE_S = 600.0  # a computing command estimated above this (10 minutes) says so first, and asks on a terminal
YES = "lazylab.yes"  # ctx.meta key: --yes was given

dry_run_option = click.option("--dry-run", is_flag=True,
                              help="Print the runs to compute, how many are in the memo, and the estimated time, "
                                   "memory and disk; compute nothing.")


def _remember_yes(ctx, param, value):
    if value:
        ctx.meta[YES] = True


yes_option = click.option("--yes", is_flag=True, expose_value=False, callback=_remember_yes,
                          help="Do not ask before a job estimated over 10 minutes (only asked on a terminal).")


def stdin_is_terminal() -> bool:
    """Whether someone can answer a question (tests replace this)."""
    import sys

    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (ValueError, OSError):  # closed or detached
        return False


def estimate_for(command: str, ws, measure: bool = True, **kw):
    """The ``Estimate`` of ``command`` with its parsed options ``kw``; nothing is trained.

    Commands and their keywords: ``"ladder"`` (plan, readout, backend, lambdas optional),
    ``"trajectory"`` (plan, backend), ``"gram"`` (arm, cfg), ``"readout"`` (arm, configs),
    ``"ntk-lab"`` (cfg, widths, seeds; ``ws`` may be None), ``"ntk-arm"`` (arm, width, probe, seed,
    lr, epochs, train_size, method), ``"redundancy"`` (arms, width, n, seeds, fan_ins, samples,
    train_size), ``"render"`` (settings, stages).
    ``backend`` is the command's backend object (Ray: priced as one worker per core here).
    ``measure``: whether this machine may be measured now when it never was (25-55 s, once,
    ``lazylab.calibration``); if not, the development machine's figures stand in, and say so.
    Raises: LazylabError for an unknown command or a failed measurement.
    """
    from lazylab import estimate as E
    from lazylab.calibration import calibration
    from lazylab.errors import LazylabError

    from lazylab.calibration import REFERENCE, calibration_path

    if measure and calibration(measure_now=False) is REFERENCE:  # never measured here: say why this takes a while
        err.print(f"measuring this machine once for estimates (about a minute; kept in {calibration_path()})",
                  soft_wrap=not wrap_lines())
    cal = calibration(measure_now=measure)
    limit = ws.memo.feature_limit if ws is not None else None
    address = getattr(kw.get("backend"), "address", None)
    backend = getattr(kw.get("backend"), "name", "local")
    if command in ("ladder", "trajectory"):
        est = (E.ladder_estimate(ws, kw["plan"], backend, limit, cal, readout=kw.get("readout", "adamw"),
                                 lambdas=kw.get("lambdas")) if command == "ladder"
               else E.trajectory_estimate(ws, kw["plan"], backend, cal))
        if address:
            est.notes.append(f"the Ray cluster at {address} is priced as a local Ray on this machine's cores")
        return est
    if command == "gram":
        return E.gram_estimate(ws, kw["arm"], kw["cfg"], cal)
    if command == "readout":
        return E.readout_estimate(ws, kw["arm"], kw["configs"], cal)
    if command == "ntk-lab":
        widths, seeds = tuple(kw.get("widths") or ()), tuple(kw.get("seeds") or ())
        sweep = len(widths) > 1
        return E.ntk_lab_estimate(ws, kw["cfg"], widths if sweep else (), seeds if sweep else (), cal=cal)
    if command == "redundancy":
        return E.redundancy_estimate(ws, kw["arms"], kw["width"], kw["n"], kw["seeds"], kw["fan_ins"], kw["samples"],
                                     kw["train_size"], cal)
    if command == "ntk-arm":
        return E.ntk_arm_estimate(ws, kw["arm"], kw["width"], kw["probe"], kw["seed"], kw["lr"], kw["epochs"],
                                  kw["train_size"], kw["method"], cal, kw.get("limit"))
    if command == "render":
        return E.render_estimate(ws, kw["settings"], tuple(kw.get("stages") or ("gifs", "figures", "report")),
                                 limit, cal)
    raise LazylabError(f"no estimate for {command!r}")


def size(nbytes: float) -> str:
    """``"12 KiB"``, ``"512 MiB"``, ``"3.1 GiB"``."""
    if nbytes >= 2**30:
        return f"{nbytes / 2**30:.1f} GiB"
    return f"{nbytes / 2**20:.0f} MiB" if nbytes >= 2**20 else f"{nbytes / 2**10:.0f} KiB"


def summary(est) -> str:
    """One sentence: runs, memo hits and the estimate on this machine."""
    how = "ray, one worker per core" if est.backend == "ray" else "local"
    high = est.runs_high or est.runs_total
    runs = count(est.runs_total, "run") if high == est.runs_total else f"{est.runs_total}-{high} runs"
    return (f"{est.command}: {runs} ({est.in_memo} in the memo, {est.to_compute} to compute); "
            f"estimate on this machine: {duration(est.seconds)} ({how}, {est.cores} cores), peak memory "
            f"{size(est.peak_bytes)}, disk up to {size(est.disk_bytes)}")


def show_plan(est, json_path=None) -> None:
    """``--dry-run``: the estimate as a readable block on stdout, or as JSON (``--json PATH``, ``-`` for stdout alone).

    The block: the summary line, the runs to compute (the brackets in one line, then each phase
    per arm) with their widths, seeds and estimated time, then the notes (assumptions, what
    cannot be known before the bracket runs) and where the calibration is kept.
    """
    if json_path is not None:
        if str(json_path) == "-":
            out.quiet = True
        write_json(json_path, est.to_json())
        return
    out.print(f"plan: {summary(est)}")
    groups: dict[tuple, list] = {}
    for r in est.runs:
        if not r["in_memo"]:  # a bracket is one line for every arm; other phases one line per arm
            groups.setdefault((r["phase"], None if r["phase"].endswith("bracket") else r["arm"]), []).append(r)
    for (phase, arm), rows in groups.items():
        out.print(f"  {phase}{' ' + arm if arm else ''}: {count(len(rows), 'run')}"
                  f"{' of ' + count(len({r['arm'] for r in rows}), 'arm') if arm is None else ''}, "
                  f"{_values('m', [r['width'] for r in rows])}, {_values('seed', [r['seed'] for r in rows])}; "
                  f"{duration(sum(r['seconds'] for r in rows))}")
    for note in est.notes:
        out.print(f"  note: {note}")
    cal = est.calibration
    if cal.get("measured_here"):
        out.print(f"  calibration: measured {cal['measured_at']} (load {cal['load']:g}), kept in {cal['path']}")


def _values(name: str, values: list) -> str:
    """``"m = 16, 64, 1024"``, ``"m = 16 ... 8192 (10 values)"``, ``"seeds 0, 1, 2"``."""
    v = sorted(set(values))
    text = ", ".join(map(str, v)) if len(v) <= 4 else f"{v[0]} ... {v[-1]} ({len(v)} values)"
    return f"m = {text}" if name == "m" else f"{name}{'s' if len(v) > 1 else ''} {text}"


def plan_first(dry_run: bool, json_path, command: str, ws, **kw):
    """What every computing command does before computing. With ``--dry-run``: print the plan
    (``show_plan``) and return None, the command stops there. Otherwise: check ``--json PATH``,
    print the one-line estimate of a job over 10 minutes, or on a terminal without ``--yes`` ask
    whether to start it (``announce``; this machine is not measured for it, see ``estimate_for``)
    and return the ``Estimate`` (the progress display's time left follows it)."""
    if dry_run:
        show_plan(estimate_for(command, ws, **kw), json_path)
        return None
    prepare_json(json_path)
    est = estimate_for(command, ws, measure=False, **kw)
    announce(est)
    return est


def announce(est) -> None:
    """When ``est`` is over ``ANNOUNCE_S`` seconds: on a terminal without ``--yes``, ask whether to
    start (no: click's Abort, "aborted: nothing was changed", exit 1); otherwise one line on stderr
    (nothing under ``-q``) saying what it will cost, and go on."""
    if est is None or est.seconds <= ANNOUNCE_S:
        return
    line = f"estimate: {summary(est)}; --dry-run shows the plan"
    ctx = click.get_current_context(silent=True)
    if not (ctx is not None and ctx.meta.get(YES)) and stdin_is_terminal():
        click.confirm(f"{line}. Start? (--yes does not ask)", abort=True, err=True)
    elif progress.verbosity != progress.QUIET:
        err.print(line, soft_wrap=not wrap_lines())
