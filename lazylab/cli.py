"""The ``lazylab`` command line: parse options, call one experiment, print with rich.

No science here. Every user error ends as one line on stderr and exit status 2;
an interrupt exits 130 after saying that finished runs are kept in the memo.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from lazylab.errors import LazylabError

out = Console(width=None if sys.stdout.isatty() else 160, highlight=False)
err = Console(stderr=True, highlight=False)


class IntList(click.ParamType):
    """Comma-separated integers, each at least ``minimum``."""

    name = "ints"

    def __init__(self, minimum: int):
        self.minimum = minimum

    def convert(self, value, param, ctx):
        if isinstance(value, tuple):
            return value
        items = [v.strip() for v in str(value).split(",")]
        if not any(items):
            self.fail("expected a comma-separated list of integers, got nothing", param, ctx)
        try:
            ints = tuple(int(v) for v in items)
        except ValueError:
            self.fail(f"expected comma-separated integers, got {value!r}", param, ctx)
        bad = [i for i in ints if i < self.minimum]
        if bad:
            self.fail(f"{bad[0]} is below the minimum {self.minimum}", param, ctx)
        return ints


def parse_arms(value: str | None) -> tuple:
    """Resolve a comma-separated arm list; an empty or unknown name is a LazylabError."""
    from lazylab.arms import get_arm

    names = [n.strip() for n in (value or "").split(",")]
    if not any(names):
        raise click.BadParameter("expected at least one arm name", param_hint="'--arms'")
    return tuple(get_arm(n) for n in names if n)


def data_options(f):
    """``--data-dir`` and ``--cache-dir``, shared by every command that touches data or the memo."""
    f = click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
                     help="Memo directory [default: $LAZYLAB_CACHE or ./cache].")(f)
    f = click.option("--data-dir", type=click.Path(path_type=Path), default=None,
                     help="Fashion-MNIST directory [default: $LAZYLAB_DATA or /usr/share/datasets/fashion-mnist].")(f)
    return f


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="lazylab")
def cli():
    """lazylab: how many random neurons buy a trained one? (Fashion-MNIST)"""


# --------------------------------------------------------------------- arms
@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def arms(as_json):
    """List the arms and the plugin each comes from."""
    from lazylab.arms import registry

    reg = registry()
    rows = [
        {"arm": a.name, "unit": a.unit.name, "init": a.init, "bank": "trained" if a.trained else "frozen",
         "distribution": a.distribution, "version": a.version, "status": "ok"}
        for a in reg.arms().values()
    ]
    broken = [{"unit": name, "status": msg} for name, msg in sorted(reg.errors.items())]
    if as_json:
        click.echo(json.dumps({"arms": rows, "errors": broken}, indent=2))
        return
    table = Table("arm", "unit", "init", "bank", "plugin", "status")
    for r in rows:
        table.add_row(r["arm"], r["unit"], r["init"], r["bank"], f"{r['distribution']} {r['version']}", r["status"])
    for b in broken:
        table.add_row("-", b["unit"], "-", "-", "-", f"[red]{b['status']}[/red]")
    out.print(table)


# --------------------------------------------------------------------- data
@cli.group()
def data():
    """Locate, verify and fetch Fashion-MNIST."""


@data.command("info")
@data_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def data_info(data_dir, cache_dir, as_json):
    """Where the data was found, the counts and the files' SHA-256."""
    from lazylab import data as fmnist
    from lazylab.cache import default_dir

    info = fmnist.info(data_dir, cache_dir=cache_dir or default_dir())
    if as_json:
        click.echo(json.dumps(info, indent=2))
        return
    out.print(f"directory: {info['directory']}")
    out.print(f"train: {info['train']}  test: {info['test']}  image: {info['image_shape'][0]}x{info['image_shape'][1]}  fingerprint: {info['fingerprint']}")
    table = Table("file", "bytes", "sha256", "verified")
    for name, f in info["files"].items():
        table.add_row(name, str(f["bytes"]), f["sha256"], "yes" if f["verified"] else "[red]NO[/red]")
    out.print(table)


@data.command("fetch")
@click.option("--dest", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where to put the files [default: $LAZYLAB_DATA or ./data/fashion-mnist].")
@click.option("--base-url", default=None, help="Mirror base URL [default: the dataset's public mirror].")
@click.option("--timeout", type=click.FloatRange(min=0.1), default=30.0, show_default=True, help="Seconds per request.")
def data_fetch(dest, base_url, timeout):
    """Download the four files with SHA-256 verification."""
    from lazylab import data as fmnist

    dest = dest or Path(os.environ.get("LAZYLAB_DATA") or "data/fashion-mnist")
    paths = fmnist.fetch(dest, base_url=base_url or fmnist.MIRROR, timeout=timeout)
    for p in paths:
        out.print(f"ok {p}")
    out.print(f"set LAZYLAB_DATA={dest} (or pass --data-dir) to use them")


# -------------------------------------------------------------------- cache
@cli.group()
def cache():
    """Inspect or clear the memo."""


@cache.command("info")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), default=None)
def cache_info(cache_dir):
    """Entries and bytes in the memo."""
    from lazylab.cache import Memo

    memo = Memo(cache_dir)
    out.print(f"{memo.directory}: {len(memo)} entries, {memo.volume() / 2**20:.1f} MiB")


@cache.command("clear")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), default=None)
@click.option("--yes", is_flag=True, help="Do not ask.")
def cache_clear(cache_dir, yes):
    """Remove every memo entry."""
    from lazylab.cache import Memo

    memo = Memo(cache_dir)
    if not yes:
        click.confirm(f"remove {len(memo)} entries from {memo.directory}?", abort=True)
    out.print(f"removed {memo.clear()} entries")


# ------------------------------------------------------------------- ladder
class ProgressReporter:
    """Renders experiment progress as a rich bar on stderr."""

    def __init__(self, progress):
        self.progress = progress
        self.task = progress.add_task("ladder", total=None)
        self.computed = 0
        self.cached = 0

    def plan(self, total):
        self.progress.update(self.task, total=total)

    def start(self, cfg):
        self.progress.update(self.task, description=f"{cfg.arm} m={cfg.width} seed={cfg.seed} lr={cfg.lr:g}")

    def epoch(self, cfg, epoch, acc):
        self.progress.update(self.task, description=f"{cfg.arm} m={cfg.width} seed={cfg.seed} lr={cfg.lr:g} epoch {epoch}/{cfg.epochs} {acc:.2f}%")

    def done(self, cfg, record, cached):
        self.cached += cached
        self.computed += not cached
        self.progress.advance(self.task)


def ladder_table(result) -> Table:
    """Arm x width table of mean ± std of best_acc (%) over seeds, with the chosen rate."""
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
            if c is None or c["mean"] is None:
                cells.append("diverged")
            else:
                text = f"{c['mean']:.2f}" + (f" ± {c['std']:.2f}" if c["n"] > 1 else "")
                cells.append(text + (f" ({c['diverged']} div)" if c["diverged"] else ""))
        table.add_row(a.arm, *cells, "diverged" if a.lr is None else f"{a.lr:g}")
    return table


@cli.command()
@click.option("--arms", "arms_", default=None, help="Comma-separated arms [default: the preset's].")
@click.option("--widths", type=IntList(1), default=None, help="Comma-separated widths m [default: the preset's].")
@click.option("--seeds", type=IntList(0), default=None, help="Comma-separated seeds [default: the preset's].")
@click.option("--epochs", type=click.IntRange(min=1), default=None, help="Epochs per run [default: the preset's].")
@click.option("--lr", type=click.FloatRange(min=0, min_open=True), default=None, help="Fixed learning rate (skips bracketing).")
@click.option("--train-size", type=click.IntRange(min=256, max=60000), default=None, help="First N training images [default: 60000].")
@click.option("--fan-in", type=click.Choice(["unit", "d"]), default="unit", show_default=True,
              help="Random init: each unit's own lecun convention, or fan-in d for all.")
@click.option("--preset", type=click.Choice(["paper", "quick"]), default="paper", show_default=True,
              help="Defaults for every option not given.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the full results (plan, summaries, every run record) as JSON.")
@data_options
def ladder(arms_, widths, seeds, epochs, lr, train_size, fan_in, preset, json_path, data_dir, cache_dir):
    """The width ladder: bracket each arm's rate at m=256, then train every width x seed."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from lazylab.experiments import Workspace
    from lazylab.experiments.ladder import PRESETS, LadderPlan, run_ladder

    p = PRESETS[preset]
    plan = LadderPlan(
        arms=parse_arms(arms_) if arms_ is not None else parse_arms(",".join(p["arms"])),
        widths=widths or p["widths"],
        seeds=seeds or p["seeds"],
        epochs=epochs or p["epochs"],
        train_size=train_size or p["train_size"],
        lr=lr,
        fan_in=fan_in,
    )
    if json_path is not None and json_path.parent and not json_path.parent.is_dir():
        raise LazylabError(f"--json: directory {json_path.parent} does not exist")
    ws = Workspace(data_dir, cache_dir)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err, transient=True) as progress:
        reporter = ProgressReporter(progress)
        result = run_ladder(ws, plan, reporter)
    for line in ws.memo.problems:
        click.echo(line, err=True)
    plan = result.plan
    out.print(f"best_acc (%) on the test set, mean ± std over seeds {','.join(map(str, plan['seeds']))}; "
              f"{plan['epochs']} epochs on {plan['train_size']} training images")
    out.print(ladder_table(result))
    out.print(f"runs: {reporter.computed} computed, {reporter.cached} from the memo at {ws.memo.directory}")
    if json_path is not None:
        json_path.write_text(json.dumps(result.to_json(), indent=1))
        out.print(f"wrote {json_path}")


# --------------------------------------------------------------------- main
def main(argv=None) -> None:
    """Console entry point: one-line errors (exit 2), interrupts (exit 130)."""
    try:
        rv = cli.main(args=argv, prog_name="lazylab", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:
        click.echo(exc.ctx.get_help())
        sys.exit(0)
    except click.ClickException as exc:
        click.echo(f"error: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code)
    except LazylabError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except (KeyboardInterrupt, click.exceptions.Abort):
        click.echo("interrupted: every finished run is kept in the memo; run the same command to resume", err=True)
        sys.exit(130)
    sys.exit(rv if isinstance(rv, int) else 0)


if __name__ == "__main__":
    main()
