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

from lazylab import xla_cache
from lazylab.errors import LazylabError
from lazylab.paths import writable_dir, writable_file, write_text_atomically

out = Console(width=None if sys.stdout.isatty() else 160, highlight=False)
err = Console(stderr=True, highlight=False)


MAX_SEED = 2**32 - 1  # jax keys hold 32 bits: a larger seed would silently repeat a smaller one
MAX_LR = 1e6  # far past every divergence; larger rates overflow float32 updates to inf
MAX_WIDTH = 65536  # 8x the protocol's widest bank; beyond this the features alone outgrow a workstation
MAX_AMPLITUDE = 1e6  # ntk lab's --bump and --noise: far past any useful target; 1e308 overflows its float64 squares
NAME_MAX = 255  # bytes in one path component on Linux file systems (ext4, xfs, btrfs, tmpfs)


class IntList(click.ParamType):
    """Comma-separated distinct integers, each at least ``minimum`` (and at most ``maximum`` if given)."""

    name = "ints"

    def __init__(self, minimum: int, maximum: int | None = None):
        self.minimum = minimum
        self.maximum = maximum

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
        bad = [i for i in ints if self.maximum is not None and i > self.maximum]
        if bad:
            self.fail(f"{bad[0]} is above the maximum {self.maximum}", param, ctx)
        repeated = sorted({i for i in ints if ints.count(i) > 1})
        if repeated:  # a repeated width or seed would double-count one run in the statistics
            self.fail(f"{repeated[0]} is given more than once", param, ctx)
        return ints


def list_option(*decls, type: click.ParamType | None = None, default: str | None = None, show_default=False, help=""):
    """A comma-separated list option; repeating it accumulates, the one convention of every list
    option (``--seeds 0 --seeds 1`` is ``--seeds 0,1``; ``--arms a --arms b`` is ``--arms a,b``).

    Each occurrence is converted by ``type`` (a list type such as ``IntList``, returning a tuple);
    repeats are joined and converted once more, so a value repeated across two flags is refused
    like one inside a list. None given: ``default`` (a string) converted, or None.
    """
    def callback(ctx, param, value):
        if not value:
            return None
        if type is None:
            return ",".join(value)
        if len(value) == 1:
            return value[0]
        return type.convert(",".join(str(v) for part in value for v in part), param, ctx)

    return click.option(*decls, type=type, multiple=True, callback=callback,
                        default=(default,) if default is not None else (), show_default=show_default,
                        help=help + " Repeating the option adds to the list.")


class ByteSize(click.ParamType):
    """A size in bytes such as ``8GiB``, ``500MB`` or ``0`` (``lazylab.cache.parse_size``)."""

    name = "size"

    def convert(self, value, param, ctx):
        from lazylab.cache import parse_size

        try:
            return parse_size(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


CACHE_LIMIT_DEFAULT = "8GiB"  # lazylab.cache.DEFAULT_CACHE_LIMIT, spelled for --help (a test checks they agree)


def cache_limit_option(f):
    """``--cache-limit``, on every command that computes frozen-bank features (``Workspace.bank_features``)."""
    return click.option(
        "--cache-limit", type=ByteSize(), default=CACHE_LIMIT_DEFAULT, show_default=True,
        help="Cap on the memo's feature store (frozen banks' feature matrices, kept when loading them back beats "
             "recomputing; least recently used evicted first; run records are never evicted). Sizes like 8GiB, "
             "500MB; 0 stores no features.")(f)


def backend_options(f):
    """``--backend``, ``--address``, ``--task-cpus`` and ``--task-gpus``, on the sweep commands (docs/scaling.md)."""
    f = click.option("--task-gpus", type=click.FloatRange(min=0, max=1024), default=None, callback=finite,
                     help="GPUs each Ray task claims (fractions share one) [default: 0; --backend ray only].")(f)
    f = click.option("--task-cpus", type=click.FloatRange(min=0, min_open=True, max=1024), default=None, callback=finite,
                     help="CPUs each Ray task claims: bounds the tasks running at once per node [default: 1; "
                          "--backend ray only].")(f)
    f = click.option("--address", default=None,
                     help="A running Ray cluster: auto, HOST:6379, or ray://HOST:10001 [default: start a local "
                          "instance; --backend ray only].")(f)
    f = click.option("--backend", type=click.Choice(["local", "ray"]), default="local", show_default=True,
                     help="Where missing runs are computed: in this process, or one Ray task per cell; only this "
                          "process writes the memo. Ray is the extra: pip install 'lazylab[ray]'.")(f)
    return f


def make_backend(backend: str, address: str | None, task_cpus: float | None, task_gpus: float | None):
    """The backend the options name; Ray options without ``--backend ray``, or Ray not installed, are one-line errors."""
    from lazylab.backends import LocalBackend, RayBackend

    if backend != "ray":
        given = [name for name, v in (("--address", address), ("--task-cpus", task_cpus), ("--task-gpus", task_gpus))
                 if v is not None]
        if given:
            raise click.UsageError(f"{given[0]} needs --backend ray")
        return LocalBackend()
    if address is not None and not address.strip():
        raise click.BadParameter("expected a Ray address such as auto or ray://HOST:10001", param_hint="'--address'")
    return RayBackend(address=address.strip() if address else None,
                      num_cpus=1.0 if task_cpus is None else task_cpus, num_gpus=0.0 if task_gpus is None else task_gpus)


def finite(ctx, param, value):
    """Option callback: refuse ``nan`` and ``inf`` (click's FloatRange lets them through)."""
    import math

    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a finite number")
    return value


def parse_arms(value: str | None) -> tuple:
    """Resolve a comma-separated arm list; an empty or unknown name is a LazylabError."""
    from lazylab.arms import get_arm

    names = [n.strip() for n in (value or "").split(",")]
    if not any(names):
        raise click.BadParameter("expected at least one arm name", param_hint="'--arms'")
    repeated = sorted({n for n in names if n and names.count(n) > 1})
    if repeated:  # one arm twice would train nothing new and print its row twice
        raise click.BadParameter(f"{repeated[0]} is given more than once", param_hint="'--arms'")
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
@click.option("--check", is_flag=True,
              help="Also run the conformance suite (lazylab.testing.check_unit) on each unit; exit 2 if any fails.")
def arms(as_json, check):
    """List every unit and arm with the plugin (distribution, version) it comes from.

    A plugin that fails to import or breaks the contract is listed with its
    error and skipped; LAZYLAB_STRICT_PLUGINS=1 makes that an error, and
    LAZYLAB_ARMS=name,... loads only the named units. See docs/plugins.md.
    """
    from rich.markup import escape

    from lazylab.arms import CONTRACT_VERSION, ENTRY_POINT_GROUP, ContractError, registry

    reg = registry()
    status = {}
    images = None
    for name, (unit, dist, version) in sorted(reg.units.items()):
        status[name] = "ok"
        if check:
            from lazylab.testing import check_unit, real_images

            images = real_images() if images is None else images
            try:
                check_unit(unit, images)
            except ContractError as exc:
                status[name] = f"contract: {exc}"
    failed = [f"unit {n!r} ({reg.units[n][1]} {reg.units[n][2]}) fails its check: {s}"
              for n, s in status.items() if s != "ok"]
    if failed and os.environ.get("LAZYLAB_STRICT_PLUGINS", "") not in ("", "0"):
        raise LazylabError("; ".join(failed) + " [LAZYLAB_STRICT_PLUGINS is set]")
    all_arms = reg.arms()
    rows = [
        {"arm": a.name, "unit": a.unit.name, "init": a.init, "bank": "trained" if a.trained else "frozen",
         "distribution": a.distribution, "version": a.version, "status": status[a.unit.name]}
        for a in all_arms.values()
    ]
    broken = [{"unit": e.unit, "distribution": e.distribution, "version": e.version, "status": e.message}
              for _, e in sorted(reg.errors.items())]
    units = [
        {"unit": name, "distribution": dist, "version": version, "status": status[name],
         "inits": list(unit.inits), "description": unit.description,
         "arms": [a.name for a in all_arms.values() if a.unit.name == name]}
        for name, (unit, dist, version) in sorted(reg.units.items())
    ] + [{**b, "inits": [], "description": "", "arms": []} for b in broken]
    if as_json:
        click.echo(json.dumps({"group": ENTRY_POINT_GROUP, "contract": CONTRACT_VERSION,
                               "units": units, "arms": rows, "errors": broken}, indent=2))
        if failed:
            raise LazylabError("\nerror: ".join(failed))
        return
    table = Table("arm", "unit", "init", "bank", "plugin", "status")
    for r in rows:
        ok = r["status"] == "ok"
        table.add_row(r["arm"], r["unit"], r["init"], r["bank"], f"{r['distribution']} {r['version']}",
                      r["status"] if ok else f"[red]{escape(r['status'])}[/red]")
    for b in broken:
        plugin = f"{b['distribution']} {b['version']}" if b["distribution"] != "-" else "-"
        table.add_row("-", b["unit"], "-", "-", plugin, f"[red]{escape(b['status'])}[/red]")
    out.print(table)
    if check:
        passed = len(status) - len(failed)
        out.print(f"conformance suite (lazylab.testing.check_unit) on real images: {passed} of "
                  f"{_count(len(status), 'unit')} passed")
    if failed:  # after the listing: every failing unit, one line each
        raise LazylabError("\nerror: ".join(failed))


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
@click.option("--timeout", type=click.FloatRange(min=0.1, max=86400), default=30.0, show_default=True, callback=finite,
              help="Seconds per request.")
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
    """Entries and bytes in the memo, in its feature store and in the compiled-program cache."""
    from lazylab.cache import Memo, format_size
    from lazylab.config import code_identity

    memo = Memo(cache_dir)
    out.print(f"{memo.directory}: {len(memo)} entries, {memo.volume() / 2**20:.1f} MiB")
    for code, n in memo.code_counts().items():
        usable = "current" if code == code_identity() else "never reused; 'lazylab cache prune' removes them"
        out.print(f"  {n} by {code or 'lazylab 0.1.0 (no code identity)'} ({usable})")
    entries, size = memo.feature_stats()
    out.print(f"{memo.feature_dir}: {entries} feature matrices, {format_size(size)} "
              f"(cap: --cache-limit, default {CACHE_LIMIT_DEFAULT})")
    folder = xla_cache.cache_dir()
    if folder is None:
        out.print(f"compiled programs: not kept (LAZYLAB_XLA_CACHE={os.environ['LAZYLAB_XLA_CACHE']})")
    elif not xla_cache.usable(folder):
        out.print(f"{folder}: cannot be written (jax locks it even to read), so compiled programs are not kept or used")
    else:
        programs, size = xla_cache.stats(folder)
        out.print(f"{folder}: {programs} compiled programs, {format_size(size)} (jax's compilation cache, "
                  "LAZYLAB_XLA_CACHE, 0 for none; not cleared by 'cache clear')")


@cache.command("clear")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), default=None)
@click.option("--yes", is_flag=True, help="Do not ask.")
def cache_clear(cache_dir, yes):
    """Remove every memo entry."""
    from lazylab.cache import Memo

    memo = Memo(cache_dir)
    if not yes:
        click.confirm(f"remove {len(memo) + memo.feature_stats()[0]} entries from {memo.directory}?", abort=True)
    out.print(f"removed {memo.clear()} entries")


@cache.command("prune")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), default=None)
def cache_prune(cache_dir):
    """Remove the entries computed by other code (another lazylab version or numerics), which are never reused."""
    from lazylab.cache import Memo
    from lazylab.config import code_identity

    memo = Memo(cache_dir)
    out.print(f"removed {memo.prune()} entries computed by other code than {code_identity()}")


# ------------------------------------------------------------------- ladder
class ProgressReporter:
    """Renders experiment progress as a rich bar on stderr.

    The latest one is kept in ``ProgressReporter.latest`` so that ``main`` can say,
    after an interrupt, how many finished runs the memo holds.
    """

    latest = None

    def __init__(self, progress):
        ProgressReporter.latest = self
        self.progress = progress
        self.task = progress.add_task("ladder", total=None)
        self.computed = 0
        self.cached = 0
        self._reported: set[str] = set()  # a bracket run reused as a ladder cell is counted once

    def plan(self, total):
        self.progress.update(self.task, total=total)

    @staticmethod
    def label(cfg) -> str:
        """``arm m=W seed=S lr=R``, or ``... convex`` for a convex readout (no rate)."""
        return f"{cfg.arm} m={cfg.width} seed={cfg.seed} " + ("convex" if cfg.lr is None else f"lr={cfg.lr:g}")

    def start(self, cfg):
        _check_interrupt()
        self.progress.update(self.task, description=self.label(cfg))

    def epoch(self, cfg, epoch, acc):
        _check_interrupt()
        self.progress.update(self.task, description=f"{self.label(cfg)} epoch {epoch}/{cfg.epochs} {acc:.2f}%")

    def done(self, cfg, record, cached):
        if record["key"] not in self._reported:
            self._reported.add(record["key"])
            self.cached += cached
            self.computed += not cached
            self.progress.advance(self.task)
        _check_interrupt()


def ladder_table(result) -> Table:
    """Arm x width table of mean ± std of best_acc (%) over seeds, with the chosen rate; unstable seeds counted."""
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
            if getattr(a, "failed", None):
                cells.append("failed")
            elif c is None or c["mean"] is None:
                cells.append("diverged")
            else:
                text = f"{c['mean']:.2f}" + (f" ± {c['std']:.2f}" if c["n"] > 1 else "")
                text += f" ({c['diverged']} div)" if c["diverged"] else ""
                cells.append(text + (f" [yellow]({c['unstable']} unstable)[/yellow]" if c.get("unstable") else ""))
        table.add_row(a.arm, *cells, "failed" if getattr(a, "failed", None) else "diverged" if a.lr is None else f"{a.lr:g}")
    return table


def _count(n: int, noun: str) -> str:
    """``"1 epoch"``, ``"3 epochs"``: a count with its noun in the right number."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _num(v, fmt=".2f") -> str:
    return "-" if v is None else format(v, fmt)


def analysis_tables(analysis: dict) -> list:
    """Rich renderables for the ladder's laws (``experiments.laws.analyse_ladder``), in SPEC section 6 order."""
    parts: list = []
    law = Table(title="ladder law: err = 100 - mean acc = floor + c m^-alpha", title_justify="left")
    for col in ("arm", "widths fitted", "floor (%)", "c", "alpha", "R^2"):
        law.add_column(col, justify="left" if col in ("arm", "widths fitted") else "right")
    for arm, f in analysis["ladder_law"].items():
        used = ",".join(map(str, f.get("widths", []))) or "-"
        if "skipped" in f:
            law.add_row(arm, used, "-", "-", "-", f"[dim]{f['skipped']}[/dim]")
        else:
            note = " [yellow](alpha at search bound)[/yellow]" if f["at_bound"] else ""
            law.add_row(arm, used, f"{f['floor']:.2f}", f"{f['c']:.3g}", f"{f['alpha']:.3f}{note}",
                        f"{f['r2']:.4f}" + (" (exact: 3 points)" if f["dof"] == 0 else ""))
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
        for arm, per in analysis["movement"].items():
            f = analysis["movement_law"].get(arm, {})
            cells = [_num(per.get(str(w), {}).get("mean"), ".4g") for w in widths]
            mv.add_row(arm, *cells, _num(f.get("slope"), ".3f"), _num(f.get("r2"), ".4f"))
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
            gp.add_row(name, *[_num(g["per_width"].get(str(w)), "+.2f") for w in widths],
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
                cells = [f"{_num(per[str(w)]['start'], '.3g')} -> {_num(per[str(w)]['end'], '.3g')}" if str(w) in per
                         else "-" for w in widths]
                sc.add_row(arm, name, *cells)
        parts.append(sc)
    return parts


def exchange_parts(exchange: dict | None) -> list:
    """The exchange-rate table (``experiments.laws.exchange_table``) and its sentence; one note line without a pair."""
    if not exchange or not exchange.get("rows"):
        return ["exchange rate: no trained arm in this ladder has a frozen arm of the same unit and init"]
    table = Table(title="exchange rate: the frozen width of the same unit matching a trained arm's mean accuracy "
                        "(interpolated on log m, or extrapolated from the frozen ladder law)", title_justify="left")
    for col in ("trained arm", "m", "trained acc (%)", "frozen arm", "matching frozen width", "how"):
        table.add_column(col, justify="right" if col in ("m", "trained acc (%)", "matching frozen width") else "left")
    for r in exchange["rows"]:  # the width as the analysis wrote it ("text"), how it was found from the row's fields
        if r["method"] == "interpolated":
            how = f"interpolated on log m between {r['between'][0]} and {r['between'][1]}"
        elif r["method"] in ("extrapolated", "never"):
            how = f"frozen law, floor {100 - r['floor_acc']:.2f} % err" + (f"; {r['note']}" if r.get("note") else "")
        else:
            how = r.get("why") or "-"
        table.add_row(r["trained"], str(r["width"]), _num(r["trained_acc"]), r["frozen"], r["text"], how)
    return [table, exchange["sentence"]]


def _backend_note(backend) -> str:
    """``"; N Ray tasks on <where>"`` for the Ray backend, else nothing."""
    tasks = getattr(backend, "tasks", None)
    return "" if tasks is None else f"; {tasks} Ray task{'s' * (tasks != 1)} on {backend.where()}"


def _lambdas(value: str | None) -> tuple[float, ...] | None:
    """``--lambdas``: comma-separated distinct finite penalties > 0, largest first; None when not given."""
    if value is None:
        return None
    try:
        given = [float(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated numbers, got {value!r}", param_hint="--lambdas") from None
    if not given or any(not (0 < v < float("inf")) for v in given):
        # lambda = 0 has no minimiser when the classes are separable (a wide bank on few images)
        raise click.BadParameter(f"expected finite penalties > 0, got {value!r}", param_hint="--lambdas")
    if len(set(given)) < len(given):
        raise click.BadParameter(f"a penalty is given more than once in {value!r}", param_hint="--lambdas")
    return tuple(sorted(given, reverse=True))


def default_out() -> Path:
    """``$LAZYLAB_OUT`` or ``./out``: the root for figures and tables a command writes by default."""
    return Path(os.environ.get("LAZYLAB_OUT") or "out")


@cli.command()
@list_option("--arms", "arms_", help="Comma-separated arms [default: the preset's].")
@list_option("--widths", type=IntList(1, MAX_WIDTH), help="Comma-separated widths m [default: the preset's].")
@list_option("--seeds", type=IntList(0, MAX_SEED), help="Comma-separated seeds [default: the preset's].")
@click.option("--epochs", type=click.IntRange(min=1, max=1000), default=None, help="Epochs per run [default: the preset's].")
@click.option("--lr", type=click.FloatRange(min=0, min_open=True, max=MAX_LR), default=None, callback=finite,
              help="Fixed learning rate (skips bracketing).")
@click.option("--train-size", type=click.IntRange(min=256, max=60000), default=None, help="First N training images [default: 60000].")
@click.option("--fan-in", type=click.Choice(["unit", "d"]), default="unit", show_default=True,
              help="Random init: each unit's own lecun convention, or fan-in d for all.")
@click.option("--preset", type=click.Choice(["paper", "quick"]), default="paper", show_default=True,
              help="Defaults for every option not given.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the full results (plan, summaries, every run record) as JSON.")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write every run as one CSV row [default: next to --json as <name>.csv, else <figures>/runs.csv].")
@click.option("--figures", "figures_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder for accuracy.{png,svg} and movement.{png,svg} [default: $LAZYLAB_OUT/ladder or out/ladder].")
@click.option("--no-figures", is_flag=True, help="Draw no figures.")
@click.option("--report", is_flag=True,
              help="Train nothing: re-print, re-write and re-draw everything from the memo (exit 2 if a run is missing).")
@list_option("--climb-widths", type=IntList(1),
             help="Fit every arm's ladder law on these widths instead of its climbing region.")
@click.option("--climb-gain", type=click.FloatRange(min=0), default=0.1, show_default=True, callback=finite,
              help="Climbing region: from the smallest width while each next width gains more than this (points).")
@click.option("--redundancy-sample", type=click.Choice(["first-n", "held-out", "with-seeds"]), default="first-n",
              show_default=True, help="Images of the redundancy measurement: the first n, or for a data-seeded bank "
              "those that seed no unit, or n that include every seed image (docs/results.md).")
@click.option("--readout", type=click.Choice(["adamw", "convex", "both"]), default="adamw", show_default=True,
              help="Frozen heads: the protocol's AdamW epochs, the convex optimum of the same objective "
                   "(L-BFGS, frozen arms only), or both with the wall table (docs/convex.md).")
@list_option("--lambdas", help="Convex readout: comma-separated L2 penalties to choose from on a held-out part "
             "of the training set [default: 1e-4,1e-6,1e-8].")
@backend_options
@cache_limit_option
@data_options
def ladder(arms_, widths, seeds, epochs, lr, train_size, fan_in, preset, json_path, csv_path, figures_dir,
           no_figures, report, climb_widths, climb_gain, redundancy_sample, readout, lambdas, data_dir, cache_dir, cache_limit, backend,
           address, task_cpus, task_gpus):
    """The width ladder: bracket each arm's rate at m=256, then train every width x seed."""
    from lazylab.experiments import Workspace
    from lazylab.experiments.convex import LAMBDAS
    from lazylab.experiments.ladder import PRESETS, LadderPlan, run_ladder

    p = PRESETS[preset]
    backend = make_backend(backend, address, task_cpus, task_gpus)
    plan = LadderPlan(
        arms=parse_arms(arms_) if arms_ is not None else parse_arms(",".join(p["arms"])),
        widths=widths or p["widths"],
        seeds=seeds or p["seeds"],
        epochs=epochs or p["epochs"],
        train_size=train_size or p["train_size"],
        lr=lr,
        fan_in=fan_in,
    )
    if json_path is not None:
        writable_file(json_path, "--json")
    if csv_path is not None:
        writable_file(csv_path, "--csv")
    figures_dir = None if no_figures else writable_dir(figures_dir or default_out() / "ladder", "--figures")
    from lazylab.experiments.laws import analyse_ladder, missing_message, runs_table

    if lambdas is not None and readout == "adamw":
        raise click.BadParameter("applies to the convex readout: add --readout convex or both", param_hint="--lambdas")
    lambdas = _lambdas(lambdas) or LAMBDAS
    if readout != "adamw" and all(a.trained for a in plan.arms):
        raise LazylabError(f"--readout {readout} reads out frozen banks and this ladder has none "
                           f"({', '.join(a.name for a in plan.arms)})")
    ws = Workspace(data_dir, cache_dir, cache_limit=cache_limit)
    ws.backend = backend
    if readout == "convex":
        _convex_ladder(ws, plan, lambdas, report, json_path, climb_widths, climb_gain)
        return
    if report:
        ws.memo_only = True
        result = run_ladder(ws, plan)
    else:
        result, reporter = _sweep(backend, run_ladder, ws, plan)
    healthy = tuple(a for a in plan.arms if a.name not in ws.failures)
    analysis = analyse_ladder(ws, result, healthy, climb_widths=climb_widths, min_gain=climb_gain,
                              redundancy_sample=redundancy_sample)
    for line in ws.memo.problems:
        click.echo(line, err=True)
    if report and ws.missing:
        raise LazylabError(missing_message(ws, plan, result))
    plan_json = result.plan
    out.print(f"best_acc (%) on the test set, mean ± std over seeds {','.join(map(str, plan_json['seeds']))}; "
              f"{_count(plan_json['epochs'], 'epoch')} on {plan_json['train_size']} training images")
    out.print(ladder_table(result))
    if report:
        out.print(f"runs: {len(result.runs)} from the memo at {ws.memo.directory} (report: nothing trained)")
    else:
        out.print(f"runs: {reporter.computed} computed, {reporter.cached} from the memo at {ws.memo.directory}"
                  + _backend_note(backend))
    for part in analysis_tables(analysis):
        out.print(part)
    from rich.markup import escape

    for part in exchange_parts(analysis.get("exchange")):
        out.print(escape(part) if isinstance(part, str) else part, soft_wrap=isinstance(part, str))
    for line in analysis.get("warnings") or []:  # one line each, never wrapped
        out.print(f"[yellow]warning:[/yellow] {escape(line)}", soft_wrap=True)
    payload = {**result.to_json(), "analysis": analysis}
    if readout == "both":
        import dataclasses

        from lazylab.experiments.convex import wall

        frozen = dataclasses.replace(plan, arms=tuple(a for a in healthy if not a.trained))
        convex = _convex_phase(ws, frozen, lambdas, report)
        payload["convex"] = convex
        payload["analysis"]["wall"] = wall(result, convex, climb_widths, climb_gain)
        for part in wall_tables(payload["analysis"]["wall"]):
            out.print(part)
    if json_path is not None:
        write_text_atomically(json_path, json.dumps(payload, indent=1), "--json")
        out.print(f"wrote {json_path}")
    if csv_path is None and json_path is not None:
        csv_path = json_path.with_suffix(".csv")
    elif csv_path is None and figures_dir is not None:
        csv_path = figures_dir / "runs.csv"
    if csv_path is not None:
        import csv
        import io

        header, rows = runs_table(result)
        csv_path.parent.mkdir(parents=True, exist_ok=True)
        text = io.StringIO(newline="")
        writer = csv.writer(text)
        writer.writerow(header)
        writer.writerows(rows)
        write_text_atomically(csv_path, text.getvalue(), "--csv")
        out.print(f"wrote {csv_path} ({_count(len(rows), 'run')})")
    if figures_dir is not None:
        from lazylab.render.figures import ladder_figures

        paths = ladder_figures(payload, figures_dir)
        out.print(f"wrote {', '.join(str(p) for p in paths)}")
    if ws.failures:  # after every table and file: one line per failed arm, exit 2
        raise LazylabError("\nerror: ".join(f"{msg}; the other runs of {arm} were skipped"
                                             for arm, msg in ws.failures.items()))


def _convex_phase(ws, plan, lambdas, report: bool) -> dict:
    """``run_convex_ladder`` under a progress bar (memo only with ``report``); exit 2 if ``report`` lacks a run."""
    from lazylab.experiments.convex import run_convex_ladder

    if report:
        ws.memo_only = True
        convex = run_convex_ladder(ws, plan, lambdas)
        lacking = [k for k in ws.missing if k.startswith("convex-")]
        if lacking:
            raise LazylabError(f"--report: the memo at {ws.memo.directory} lacks {_count(len(lacking), 'convex readout')}"
                               "; run the same command without --report to compute them")
        out.print(f"convex readouts: {len(convex['runs'])} from the memo (report: nothing computed)")
        return convex
    with _progress() as progress:
        reporter = ProgressReporter(progress)
        convex = run_convex_ladder(ws, plan, lambdas, reporter)
    out.print(f"convex readouts: {reporter.computed} computed, {reporter.cached} from the memo at {ws.memo.directory}")
    return convex


def _convex_ladder(ws, plan, lambdas, report, json_path, climb_widths, climb_gain) -> None:
    """``ladder --readout convex``: every frozen arm's convex optimum per width, its table and law."""
    from lazylab import analysis as an

    convex = _convex_phase(ws, plan, lambdas, report)
    widths = list(plan.widths)
    table = Table()
    table.add_column("arm")
    for w in widths:
        table.add_column(f"m={w}", justify="right")
    for arm, a in convex["arms"].items():
        cells = [a["cells"][str(w)] for w in widths]
        table.add_row(arm, *[_num(c["mean"]) + (f" ± {c['std']:.2f}" if c["n"] > 1 else "") for c in cells])
    out.print(f"convex readout: test accuracy (%) at the optimum of cross-entropy + L2 (lambda chosen on the last "
              f"{convex['holdout_fraction']} of the training images), mean ± std over seeds "
              f"{','.join(map(str, plan.seeds))}")
    out.print(table)
    laws = {arm: an.ladder_law(widths, [a["cells"][str(w)]["mean"] for w in widths], region=climb_widths,
                               min_gain=climb_gain) for arm, a in convex["arms"].items()}
    out.print(_law_table("ladder law of the convex readout: err = floor + c m^-alpha", laws))
    if json_path is not None:
        write_text_atomically(json_path, json.dumps(
            {"plan": {"arms": [a.name for a in plan.arms], "widths": widths, "seeds": list(plan.seeds),
                      "readout": "convex", **plan.protocol()},
             "convex": convex, "analysis": {"convex_law": laws}}, indent=1), "--json")
        out.print(f"wrote {json_path}")


def _law_table(title: str, laws: dict) -> Table:
    """One row per curve: widths fitted, floor, c, alpha, R^2 (notes below, not in a column)."""
    law = Table(title=title, title_justify="left")
    for col in ("curve", "widths fitted", "floor (%)", "c", "alpha", "R^2"):
        law.add_column(col, justify="left" if col in ("curve", "widths fitted") else "right")
    for name, f in laws.items():
        used = ",".join(map(str, f.get("widths", []))) or "-"
        if "skipped" in f:
            law.add_row(name, used, "-", "-", "-", "-")
        else:
            law.add_row(name, used, f"{f['floor']:.2f}", f"{f['c']:.3g}", f"{f['alpha']:.3f}", f"{f['r2']:.4f}")
    skipped = [f"{name}: {f['skipped']}" for name, f in laws.items() if "skipped" in f]
    if skipped:
        law.caption = "; ".join(skipped)
        law.caption_justify = "left"
    return law


def wall_tables(w: dict) -> list:
    """The wall table (``experiments.convex.wall``) and both curves' ladder laws, as rich tables."""
    table = Table(title="the wall: protocol (AdamW) readout against the convex optimum, mean over seeds",
                  title_justify="left")
    for col in ("arm", "m", "best_acc", "final_acc", "convex", "gap (pts)", "train loss: protocol",
                "optimum", "gap (nats)", "grad norm"):
        table.add_column(col, justify="left" if col == "arm" else "right")
    for arm, rows in w["arms"].items():
        for width, r in rows.items():
            table.add_row(arm, width, _num(r["best_acc"]), _num(r["final_acc"]), _num(r["convex_acc"]),
                          _num(r["gap"], "+.2f"), _num(r["protocol_loss"], ".4f"), _num(r["convex_loss"], ".4f"),
                          _num(r["loss_gap"], "+.4f"), f"{r['grad_norm']:.1e}" + ("" if r["converged"] else " *"))
    notes = []
    if any(not r["converged"] for rows in w["arms"].values() for r in rows.values()):
        notes.append("* stopped by the objective-change rule or the iteration cap, not the gradient rule (docs/convex.md)")
    edge, total = w["lambda_at_edge"]
    if edge:
        notes.append(f"lambda: the grid's smallest chosen in {edge} of {total} readouts (--lambdas extends the grid)")
    if notes:
        table.caption = "\n".join(notes)
        table.caption_justify = "left"
    laws = {f"{arm} {curve}": f for arm, fits in w["law"].items() for curve, f in fits.items()}
    return [table, _law_table("ladder law of both curves: err = floor + c m^-alpha", laws)]


# --------------------------------------------------------------- redundancy
@cli.command()
@list_option("--arms", "arms_", default="yat-frozen,yat-data-frozen", show_default=True,
             help="Comma-separated arms whose initial banks are measured (one row set per bank).")
@click.option("--width", type=click.IntRange(2, MAX_WIDTH), default=256, show_default=True, help="Bank width m.")
@click.option("--images", type=click.IntRange(2, 60000), default=4000, show_default=True,
              help="Training images n the correlations are measured on.")
@list_option("--seeds", type=IntList(0, MAX_SEED), default="0,1,2", show_default=True, help="Comma-separated seeds.")
@list_option("--fan-in", "fan_ins", default="unit,d", show_default=True,
             help="Comma-separated random-init fan-ins: unit (as the ladder), d.")
@list_option("--sample", "samples", default="first-n,held-out,with-seeds", show_default=True,
             help="Comma-separated image samples: first-n, held-out (images that seed no unit), "
                  "with-seeds (the n images include every seed image).")
@click.option("--train-size", type=click.IntRange(min=256, max=60000), default=60000, show_default=True,
              help="Banks are seeded from the first N training images.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the rows as JSON.")
@data_options
def redundancy(arms_, width, images, seeds, fan_ins, samples, train_size, json_path, data_dir, cache_dir):
    """Redundancy of initial banks (mean |corr|, participation ratio) for each fan-in x image sample.

    \b
    Examples:
      lazylab redundancy                       # the 2 x 3 x 2 table of docs/results.md
      lazylab redundancy --arms relu-frozen --fan-in unit --sample first-n
    """
    from lazylab.experiments import Workspace
    from lazylab.experiments.laws import SAMPLES, redundancy_grid

    arms = parse_arms(arms_)
    fan_ins = _choices(fan_ins, ("unit", "d"), "--fan-in")
    samples = _choices(samples, SAMPLES, "--sample")
    if images > train_size:
        raise click.BadParameter(f"{images} images exceed --train-size {train_size}", param_hint="--images")
    if json_path is not None:
        writable_file(json_path, "--json")
    ws = Workspace(data_dir, cache_dir)
    with _progress() as progress:
        task = progress.add_task("redundancy", total=None)
        rows = redundancy_grid(ws, arms, width, images, seeds, fan_ins, samples, train_size,
                               progress=lambda done, total: progress.update(task, completed=done, total=total))
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
    if json_path is not None:
        write_text_atomically(json_path, json.dumps({"width": width, "images": images, "seeds": list(seeds),
                                                     "train_size": train_size, "rows": rows}, indent=1), "--json")
        out.print(f"wrote {json_path}")


def _choices(value: str, allowed: tuple, option: str) -> tuple:
    """Comma-separated distinct choices from ``allowed``, in the given order; one-line error otherwise."""
    items = tuple(v.strip() for v in value.split(",") if v.strip())
    bad = [v for v in items if v not in allowed]
    if not items or bad:
        raise click.BadParameter(f"expected comma-separated values from {', '.join(allowed)}, got {value!r}",
                                 param_hint=option)
    if len(set(items)) < len(items):
        raise click.BadParameter(f"a value is given more than once in {value!r}", param_hint=option)
    return items


# --------------------------------------------------------------- trajectory
def _scalars_text(start: dict, end: dict) -> str:
    return ", ".join(f"{k} {start.get(k, float('nan')):.3g}->{v:.3g}" for k, v in end.items()) or "-"


@cli.command()
@list_option("--arms", "arms_", default="yat-trained,yat-data-trained,gaussian-trained", show_default=True,
             help="Comma-separated trained arms (plugins included).")
@click.option("--width", type=click.IntRange(min=1, max=MAX_WIDTH), default=64, show_default=True, help="Units m per bank.")
@click.option("--epochs", type=click.IntRange(min=1), default=24, show_default=True, help="Epochs per arm.")
@click.option("--snapshots", type=click.IntRange(min=1), default=16, show_default=True,
              help="Prototypes kept at every epoch (the first N of the bank).")
@click.option("--seed", type=click.IntRange(min=0, max=MAX_SEED), default=0, show_default=True, help="Seed for bank, head and batch order.")
@click.option("--lr", type=click.FloatRange(min=0, min_open=True, max=MAX_LR), default=None, callback=finite,
              help="Rate for every arm [default: each arm's ladder bracket, m=256 seed 0 12 epochs, memoized].")
@click.option("--train-size", type=click.IntRange(min=256, max=60000), default=60000, show_default=True,
              help="First N training images.")
@click.option("--fan-in", type=click.Choice(["unit", "d"]), default="unit", show_default=True,
              help="Random init: each unit's own lecun convention, or fan-in d for all.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder for the GIFs and PNGs [default: $LAZYLAB_OUT/trajectory or out/trajectory].")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the per-epoch records (no snapshot arrays) as JSON.")
@click.option("--prototype-scale", type=click.Choice(["per-image", "shared"]), default="per-image", show_default=True,
              help="Prototype picture: each image on its own symmetric colour scale, or one scale for all.")
@backend_options
@data_options
def trajectory(arms_, width, epochs, snapshots, seed, lr, train_size, fan_in, out_dir, json_path, prototype_scale,
               data_dir, cache_dir, backend, address, task_cpus, task_gpus):
    """Watch trained prototypes travel: snapshots, travel and accuracy per epoch, and two GIFs."""
    from lazylab.experiments import Workspace
    from lazylab.experiments.trajectory import TrajectoryPlan, run_trajectory, validate
    from lazylab.render.trajectory import render_trajectory

    backend = make_backend(backend, address, task_cpus, task_gpus)
    plan = TrajectoryPlan(arms=parse_arms(arms_), width=width, epochs=epochs, snapshots=snapshots, seed=seed,
                          lr=lr, train_size=train_size, fan_in=fan_in)
    validate(plan)
    if json_path is not None:
        writable_file(json_path, "--json")
    out_dir = writable_dir(out_dir or default_out() / "trajectory", "--out")
    ws = Workspace(data_dir, cache_dir)
    ws.backend = backend
    result, reporter = _sweep(backend, run_trajectory, ws, plan)
    for line in ws.memo.problems:
        click.echo(line, err=True)
    out.print(f"trajectories: m={width}, {_count(epochs, 'epoch')} on {train_size} training images, seed {seed}; "
              f"travel = per-unit ||w_t - w_0|| / ||w_0|| over all {width} units; accuracy (%) on the test set")
    table = Table("arm", "init", "lr", "median travel", "max travel", "final acc", "best acc", "scalars (start->end)", "source")
    for a in result.arms:
        f = a.final()
        table.add_row(a.arm, a.init, f"{a.lr:g} ({a.rate_source})", f"{f['travel_median']:.4f}", f"{f['travel_max']:.4f}",
                      f"{f['accuracy']:.2f}", "-" if f["best_acc"] is None else f"{f['best_acc']:.2f}",
                      _scalars_text(a.record["scalars"][0], f["scalars"]), "memo" if a.cached else "computed")
    out.print(table)
    out.print(f"runs: {reporter.computed} computed, {reporter.cached} from the memo at {ws.memo.directory}"
              + _backend_note(backend))
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
    if json_path is not None:
        write_text_atomically(json_path, json.dumps({**result.to_json(), "pictures": rendered}, indent=1), "--json")
        out.print(f"wrote {json_path}")
    if ws.failures:  # after every table and file: one line per failed arm, exit 2
        raise LazylabError("\nerror: ".join(f"{msg}; the other runs of {arm} were skipped"
                                             for arm, msg in ws.failures.items()))


# ------------------------------------------------------------ gram, readout
def _stage_progress(progress):
    """A ``progress(stage, done, total)`` callback drawing one rich task per stage."""
    tasks = {}

    def tick(stage, done, total):
        if stage not in tasks:
            tasks[stage] = progress.add_task(stage, total=total)
        progress.update(tasks[stage], completed=done, total=total)

    return tick


def _progress():
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    # Off when stderr is not a terminal: a redirected log gets no bar (rich would leave a blank line).
    return Progress(*columns, console=err, transient=True, disable=not err.is_terminal)


def _sweep(backend, experiment, ws, plan):
    """``(experiment(ws, plan, reporter), reporter)`` under a progress bar, then ``backend.close()``,
    also on Ctrl-C: what is stored stays, pending Ray tasks are cancelled."""
    try:
        with _progress() as progress:
            reporter = ProgressReporter(progress)
            return experiment(ws, plan, reporter), reporter
    finally:
        backend.close()


def _compute_then_draw(ws, compute, draw, path: Path):
    """``compute(tick)`` then ``draw(result, path)`` under one progress display; memo problems go to stderr.

    Returns ``(result, info)`` where ``info`` is what ``draw`` returns.
    """
    with _progress() as progress:
        result = compute(_stage_progress(progress))
        task = progress.add_task(f"drawing {path.name}", total=None)
        info = draw(result, path)
        progress.remove_task(task)
    for line in ws.memo.problems:
        click.echo(line, err=True)
    return result, info


def _write_results(out_dir: Path, stem: str, result, info) -> None:
    """``<stem>.json`` (the result and its GIF's facts) and ``<stem>.csv`` (``result.rows()``) in ``out_dir``."""
    import csv
    import io

    gif = {"path": str(info.path), "frames": info.frames, "bytes": info.bytes, "size": list(info.size), "dpi": info.dpi}
    write_text_atomically(out_dir / f"{stem}.json", json.dumps({**result.to_json(), "gif": gif}, indent=1), "--out")
    rows = result.rows()
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    write_text_atomically(out_dir / f"{stem}.csv", text.getvalue(), "--out")


def _gif_line(info) -> str:
    return f"{info.path} ({info.frames} frames, {info.size[0]}x{info.size[1]} px, {info.bytes / 2**20:.2f} MiB)"


@cli.command()
@click.option("--arm", "arm_name", default="yat-frozen", show_default=True, help="A frozen arm (plugins included).")
@click.option("--max-units", type=click.IntRange(min=1, max=MAX_WIDTH), default=2000, show_default=True,
              help="Width of the grown bank (the last frame).")
@click.option("--frames", type=click.IntRange(min=1, max=500), default=40, show_default=True,
              help="Log-spaced widths from 1 to --max-units (distinct integers; at most --max-units).")
@list_option("--images", "classes", default="0,1,7", show_default=True,
             help="Comma-separated classes, indices or names (e.g. 'tshirt,trouser,sneaker').")
@click.option("--per-class", type=click.IntRange(min=2, max=200), default=10, show_default=True,
              help="Images per class: the first N of the class in the test set.")
@click.option("--seed", type=click.IntRange(min=0, max=1_000_000), default=0, show_default=True, help="Seed of the grown bank.")
@click.option("--ref-units", type=click.IntRange(min=1), default=None,
              help="Reference bank width [default: max(32 x max-units, 50000); data-seeded arms: every training image].")
@click.option("--fit-min", type=click.IntRange(min=1), default=10, show_default=True,
              help="Smallest width in the log-log slope fit.")
@click.option("--repeats", type=click.IntRange(min=1, max=64), default=1, show_default=True,
              help="Independent banks (seeds seed..seed+N-1) for an ensemble (RMS) slope; the first is shown.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder for gram.gif, gram.json, gram.csv [default: $LAZYLAB_OUT/gram or out/gram].")
@data_options
def gram(arm_name, max_units, frames, classes, per_class, seed, ref_units, fit_min, repeats, out_dir, data_dir, cache_dir):
    """The random-feature kernel crystallizing: normalised Gram of 30 test images as a bank grows."""
    from lazylab.arms import get_arm
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
    out_dir = writable_dir(out_dir or default_out() / "gram", "--out")
    result, info = _compute_then_draw(ws, lambda tick: run_gram(ws, arm, cfg, tick), gram_gif, out_dir / "gram.gif")
    _write_results(out_dir, "gram", result, info)
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
    out.print(f"wrote {_gif_line(info)}, {out_dir / 'gram.json'}, {out_dir / 'gram.csv'}")
    source = "everything from the memo" if result.cached else f"computed: {', '.join(result.computed)}"
    out.print(f"{source} ({ws.memo.directory}); {result.seconds:.1f} s")


@cli.command()
@click.option("--arm", "arm_name", default="yat-frozen", show_default=True, help="A frozen arm (plugins included).")
@list_option("--widths", type=IntList(1, MAX_WIDTH), default="64,512", show_default=True,
             help="Comma-separated bank widths; the widest judges the garments.")
@click.option("--train-size", type=click.IntRange(min=1, max=60000), default=10000, show_default=True,
              help="First N training images.")
@click.option("--steps", type=click.IntRange(min=1, max=100_000), default=300, show_default=True, help="Adam steps (full batch).")
@click.option("--lr", type=click.FloatRange(min=0, min_open=True, max=MAX_LR), default=0.3, show_default=True, callback=finite,
              help="Adam rate (random features are small, so the readout needs a large one; see docs/gram_readout.md).")
@click.option("--eval-every", type=click.IntRange(min=1), default=5, show_default=True,
              help="Steps between test evaluations (one GIF frame each).")
@click.option("--seed", type=click.IntRange(min=0, max=MAX_SEED), default=0, show_default=True,
              help="Seed of the banks, the readouts and the garments shown.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder for readout.gif, readout.json, readout.csv [default: $LAZYLAB_OUT/readout or out/readout].")
@data_options
def readout(arm_name, widths, train_size, steps, lr, eval_every, seed, out_dir, data_dir, cache_dir):
    """The readout race: linear readouts on frozen banks of two widths, test accuracy through Adam steps."""
    from lazylab.arms import get_arm
    from lazylab.experiments import Workspace
    from lazylab.experiments.gram import require_frozen
    from lazylab.experiments.readout import readout_configs, run_readout
    from lazylab.render.gifs import readout_gif

    arm = get_arm(arm_name.strip())
    require_frozen(arm, "readout")
    ws = Workspace(data_dir, cache_dir)
    configs = readout_configs(ws, arm, widths, seed=seed, lr=lr, steps=steps, eval_every=eval_every,
                              train_size=train_size)
    out_dir = writable_dir(out_dir or default_out() / "readout", "--out")
    result, info = _compute_then_draw(ws, lambda tick: run_readout(ws, arm, configs, tick), readout_gif,
                                      out_dir / "readout.gif")
    _write_results(out_dir, "readout", result, info)
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
    out.print(f"wrote {_gif_line(info)}, {out_dir / 'readout.json'}, {out_dir / 'readout.csv'}")
    source = "everything from the memo" if result.cached else f"computed: {', '.join(result.computed)}"
    out.print(f"{source} ({ws.memo.directory}); {result.seconds:.1f} s")


# ---------------------------------------------------------------------- ntk
class NtkWidths(click.ParamType):
    """Comma-separated widths >= 1; ``a,b,...,z`` expands a doubling (``b = k a``) or arithmetic progression up to ``z``."""

    name = "widths"

    def convert(self, value, param, ctx):
        if isinstance(value, tuple):
            return value
        items = [v.strip() for v in str(value).split(",")]
        try:
            if "..." in items:
                if len(items) != 4 or items[2] != "...":
                    raise ValueError
                a, b, z = int(items[0]), int(items[1]), int(items[3])
                if b <= a or z < b:
                    raise ValueError
                seq = [a]
                ratio = b // a if a > 0 and b % a == 0 and b // a >= 2 else None
                while seq[-1] < z:
                    seq.append(seq[-1] * ratio if ratio else seq[-1] + (b - a))
                if seq[-1] != z:
                    self.fail(f"{z} is not on the progression {a},{b},...", param, ctx)
                ints = tuple(seq)
            else:
                ints = tuple(int(v) for v in items)
        except ValueError:
            self.fail(f"expected comma-separated widths such as 8,16,32 or 8,16,...,1024, got {value!r}", param, ctx)
        if len(ints) < 2:
            self.fail("a sweep needs at least two widths", param, ctx)
        bad = [i for i in ints if not 1 <= i <= MAX_WIDTH]
        if bad:
            self.fail(f"width {bad[0]} is outside 1..{MAX_WIDTH}", param, ctx)
        if len(set(ints)) != len(ints):
            self.fail("widths repeat", param, ctx)
        return ints


class NtkTimes(click.ParamType):
    """Comma-separated report times: finite, >= 0, strictly increasing."""

    name = "times"

    def convert(self, value, param, ctx):
        import math

        if isinstance(value, tuple):
            return value
        try:
            ts = tuple(float(v) for v in str(value).split(","))
        except ValueError:
            self.fail(f"expected comma-separated times, got {value!r}", param, ctx)
        if not all(math.isfinite(t) and 0 <= t <= 1e4 for t in ts):
            self.fail("times must be finite and between 0 and 10000", param, ctx)
        if any(b <= a for a, b in zip(ts, ts[1:])):
            self.fail("times must be strictly increasing", param, ctx)
        return ts


def _ntk_out(out_dir: Path | None) -> Path:
    return writable_dir(out_dir or default_out() / "ntk", "--out")


def _ntk_checks_table(checks) -> Table:
    table = Table("check", "measured", "criterion", "result")
    for c in checks:
        verdict = ("[green]pass[/green]" if c.passed else "[red]FAIL[/red]") if c.expect else \
                  ("[green]fails, as it must[/green]" if not c.passed else "[red]PASSES (must fail)[/red]")
        table.add_row(c.name, f"{c.value:.3g}", c.note, verdict)
    return table


@cli.group()
def ntk():
    """Lazy versus rich, measured: tangent kernels, their drift and the linearization (SPEC section 7)."""


@ntk.command("lab")
@click.option("--width", type=click.IntRange(min=1, max=MAX_WIDTH), default=32, show_default=True, help="Hidden units m (one run).")
@click.option("--lr", type=click.FloatRange(min=0, min_open=True, max=MAX_LR), default=None, callback=finite,
              help="Gradient-descent rate [default: 0.5 for one run, 0.05 for a --widths sweep].")
@click.option("--steps", type=click.IntRange(min=1, max=1_000_000), default=2000, show_default=True, help="Full-batch GD steps.")
@click.option("--bump", type=click.FloatRange(min=-MAX_AMPLITUDE, max=MAX_AMPLITUDE), default=1.0, show_default=True,
              callback=finite, help="Amplitude of the local bump in the target.")
@click.option("--noise", type=click.FloatRange(min=0, max=MAX_AMPLITUDE), default=0.1, show_default=True, callback=finite,
              help="Label noise std.")
@click.option("--seed", type=click.IntRange(min=0, max=MAX_SEED), default=0, show_default=True, help="Initialization seed.")
@click.option("--data-seed", type=click.IntRange(min=0, max=MAX_SEED), default=0, show_default=True, help="Seed of the training data.")
@click.option("--frames", type=click.IntRange(min=2, max=400), default=60, show_default=True, help="Snapshots (GIF frames), log-spaced in steps.")
@list_option("--widths", type=NtkWidths(), help="Run a width sweep instead, e.g. 8,16,...,1024.")
@click.option("--sweep-seeds", type=click.IntRange(min=1, max=100), default=5, show_default=True,
              help="Seeds averaged per width in a sweep (--seed, --seed+1, ...).")
@click.option("--no-gif", is_flag=True, help="Skip the GIF.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Output directory [default: $LAZYLAB_OUT/ntk or ./out/ntk].")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def ntk_lab(width, lr, steps, bump, noise, seed, data_seed, frames, widths, sweep_seeds, no_gif, out_dir, as_json):
    """The 1-D tanh network and its linearization from one init; or a width sweep."""
    from lazylab.experiments.ntk import LabConfig, run_lab, sweep

    out_dir = _ntk_out(out_dir)
    if widths:
        from lazylab.render.ntk import sweep_png

        cfg = LabConfig(width=widths[0], lr=0.05 if lr is None else lr, steps=steps, bump=bump, noise=noise, seed=seed,
                        data_seed=data_seed).validate()
        seeds = list(range(seed, seed + sweep_seeds))
        with _progress() as progress:
            task = progress.add_task("sweep", total=len(widths) * len(seeds))
            sw = sweep(cfg, widths, seeds, on_run=lambda w, s: progress.update(task, advance=1, description=f"m={w} seed={s}"))
        write_text_atomically(out_dir / "sweep.json", json.dumps(sw.to_json(), indent=1), "--out")
        sweep_png(sw, out_dir / "sweep.png")
        if as_json:
            click.echo(json.dumps(sw.to_json(), indent=1))
            return
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
        return

    from lazylab.render.ntk import lab_gif, lab_png

    cfg = LabConfig(width=width, lr=0.5 if lr is None else lr, steps=steps, bump=bump, noise=noise, seed=seed,
                    data_seed=data_seed, frames=frames).validate()
    res = run_lab(cfg)
    s = res.summary()
    (out_dir / "lab.json").write_text(json.dumps({**s, "loss": res.loss.tolist(), "loss_lin": res.loss_lin.tolist(),
                                                   "snap_steps": res.snap_steps.tolist(), "drift_trace": res.drift.tolist()}))
    written = [str(lab_png(res, out_dir / "lab.png"))]
    if not no_gif:
        g = lab_gif(res, out_dir / "lab.gif")
        written.append(f"{g['path']} ({g['frames']} frames, {g['size'][0]}x{g['size'][1]} px, {g['bytes'] / 2**20:.2f} MiB)")
    if as_json:
        click.echo(json.dumps(s, indent=1))
        return
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


@ntk.command("audit")
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
def ntk_audit(as_json):
    """Every SPEC check of the 1-D lab, pass/fail with its measured value; exit 1 if any fails."""
    from lazylab.experiments.ntk import run_audit

    checks = run_audit()
    failed = [c for c in checks if not c.ok]
    if as_json:
        click.echo(json.dumps([c.to_json() for c in checks], indent=1))
    else:
        out.print(_ntk_checks_table(checks))
        out.print(f"{len(checks) - len(failed)}/{len(checks)} checks pass")
    if failed:
        click.get_current_context().exit(1)


@ntk.command("scalar")
@click.option("--w0", type=click.FloatRange(min=1e-4, max=10.0), default=0.01, show_default=True, callback=finite,
              help="Initial output w0 = a0 b0 (balanced a0 = b0), at least 0.01 away from 1.")
@list_option("--times", type=NtkTimes(), default="0,0.5,1,2,3,5,10,20,50,100,200", show_default=True, help="Report times.")
@click.option("--dt", type=click.FloatRange(min=1e-5, max=0.01), default=1e-3, show_default=True, callback=finite,
              help="Largest RK4 step.")
@click.option("--offset", type=float, default=1e-3, show_default=True, callback=finite,
              help="Control 1: the linear model's mismatched start f_lin(0) - f(0) (1e-5 to 1 in size).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Output directory [default: $LAZYLAB_OUT/ntk or ./out/ntk].")
@click.option("--json", "as_json", is_flag=True, help="Print the table and checks as JSON.")
def ntk_scalar(w0, times, dt, offset, out_dir, as_json):
    """The exact scalar model f = a b x: closed forms vs integration, controls, two-mode decay; exit 1 on a wrong verdict."""
    from lazylab.experiments.ntk import run_scalar
    from lazylab.render.ntk import scalar_png

    from lazylab.ntk.scalar import setting_problem

    problem = setting_problem(w0, times, offset)
    if problem:
        raise click.UsageError(problem)
    if times[-1] / dt > 2e6:
        raise click.BadParameter(f"{times[-1]:g} / dt = {times[-1] / dt:.0f} steps is over 2,000,000; raise --dt", param_hint="'--times'")
    out_dir = _ntk_out(out_dir)
    res = run_scalar(w0=w0, times=times, dt=dt, offset=offset)
    (out_dir / "scalar.csv").write_text(res.csv())
    scalar_png(res, out_dir / "scalar.png")
    t = res.table
    if as_json:
        click.echo(json.dumps({"w0": w0, "dt": dt, "table": {k: v.tolist() for k, v in t.items()},
                               "checks": [c.to_json() for c in res.checks]}, indent=1))
    else:
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
    if not res.ok:
        click.get_current_context().exit(1)


@ntk.command("arm")
@click.option("--arm", "arm_name", required=True, help="Arm name, e.g. yat-trained (plugins included).")
@click.option("--width", type=click.IntRange(min=1, max=MAX_WIDTH), required=True, help="Units m.")
@click.option("--probe", type=click.IntRange(min=1, max=1024), default=256, show_default=True, help="First N test images for the NTK.")
@click.option("--seed", type=click.IntRange(min=0, max=MAX_SEED), default=0, show_default=True)
@click.option("--lr", type=click.FloatRange(min=0, min_open=True, max=MAX_LR), default=None, callback=finite,
              help="AdamW rate [default: the middle of the arm's bracketing grid].")
@click.option("--epochs", type=click.IntRange(min=1, max=1000), default=3, show_default=True)
@click.option("--train-size", type=click.IntRange(min=256, max=60000), default=60000, show_default=True)
@click.option("--method", type=click.Choice(["auto", "structured", "jacobian", "rows"]), default="auto", show_default=True,
              help="NTK contraction (docs/ntk.md).")
@click.option("--memory-mib", type=click.IntRange(min=1, max=1 << 20), default=256, show_default=True,
              help="Largest Jacobian-sized intermediate allowed.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Output directory [default: $LAZYLAB_OUT/ntk or ./out/ntk].")
@click.option("--json", "as_json", is_flag=True, help="Print the record as JSON.")
@data_options
def ntk_arm(arm_name, width, probe, seed, lr, epochs, train_size, method, memory_mib, out_dir, as_json, data_dir, cache_dir):
    """Empirical NTK of an arm on a probe slice: drift, disagreement with the linearization, movement."""
    from lazylab.arms import get_arm
    from lazylab.experiments import Workspace
    from lazylab.experiments.ntk import run_arm
    from lazylab.render.ntk import arm_png

    arm = get_arm(arm_name.strip())
    out_dir = _ntk_out(out_dir)
    ws = Workspace(data_dir, cache_dir)
    with _progress() as progress:
        task = progress.add_task("ntk arm", total=None)
        record, arrays = run_arm(ws, arm, width, probe=probe, seed=seed, lr=lr, epochs=epochs, train_size=train_size,
                                 method=method, limit_bytes=memory_mib * 2**20,
                                 progress=lambda s: progress.update(task, description=s))
    for line in ws.memo.problems:
        click.echo(line, err=True)
    stem = f"arm-{arm.name}-m{width}-p{probe}"
    (out_dir / f"{stem}.json").write_text(json.dumps(record, indent=1))
    arm_png(record, arrays, out_dir / f"{stem}.png")
    if as_json:
        click.echo(json.dumps(record, indent=1))
        return
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


# ------------------------------------------------------------------- render
def _render_progress(progress):
    """A ``progress(stage, done, total)`` callback: one rich task per running stage, removed when it completes."""
    tasks = {}

    def tick(stage, done, total):
        _check_interrupt()
        if stage not in tasks:
            tasks[stage] = progress.add_task(stage, total=total)
        progress.update(tasks[stage], completed=done, total=total)
        if total and done >= total:
            progress.remove_task(tasks.pop(stage))

    return tick


def _render_options(f):
    f = data_options(f)
    f = click.option("--redraw", is_flag=True, help="Redraw pictures that are up to date (from the memo; nothing is recomputed).")(f)
    f = click.option("--out", "out_dir", type=click.Path(path_type=Path), default=None,
                     help="Folder for every picture, manifest.json and report.html [default: $LAZYLAB_OUT/render or out/render].")(f)
    return f


_preset_option = click.option(
    "--preset", type=click.Choice(["auto", "quick", "paper"]), default="auto", show_default=True,
    help="Your ladder, shown after the paper ladder that leads the page (memo or shipped reference): auto = the paper "
         "preset if all its runs are in the memo, else the quick preset (its missing runs are computed, about 70 s on "
         "two cores).")


def _render_settings(preset=None, from_json=(), arms_=None, widths=None, seeds=None, epochs=None):
    """The render commands' ``RenderSettings``: each ``--from`` file sets the part it names
    (``experiments.render.with_json``: a ladder, gram, readout or trajectory ``--json`` file); the
    ladder is that file, or an explicit plan whose unset parts come from the quick preset, or
    ``--preset``. Conflicting ladder choices are a usage error."""
    import dataclasses

    from lazylab.experiments.ladder import PRESETS
    from lazylab.experiments.render import DEFAULT_SETTINGS, LadderSettings, with_json

    settings = DEFAULT_SETTINGS
    for path in from_json:
        before = settings.ladder.source
        settings = with_json(settings, path)  # a bad file is one line before anything is computed
        if before is not None and settings.ladder.source != before:
            raise click.UsageError(f"--from names two ladders ({before} and {path}); the report shows one of yours")
    ladder_file = settings.ladder.source is not None
    explicit = [n for n, v in (("--arms", arms_), ("--widths", widths), ("--seeds", seeds), ("--epochs", epochs))
                if v is not None]
    if ladder_file and explicit:
        raise click.UsageError(f"--from shows a ladder file as written; it cannot be combined with {explicit[0]}")
    if (ladder_file or explicit) and preset not in (None, "auto"):
        raise click.UsageError(f"--preset {preset} names a ladder; so does {'--from' if ladder_file else explicit[0]}: give one")
    if ladder_file:
        return settings
    if not explicit:
        return settings.with_ladder(preset or "auto")
    q = PRESETS["quick"]
    names = [a.name for a in parse_arms(arms_)] if arms_ is not None else list(q["arms"])
    return dataclasses.replace(settings, ladder=LadderSettings.explicit(
        arms=names, widths=list(widths or q["widths"]), seeds=list(seeds or q["seeds"]), epochs=epochs or q["epochs"],
        train_size=q["train_size"], lr=None))


def _render(stages, out_dir, redraw, data_dir, cache_dir, settings, cache_limit=None):
    """Run ``stages`` (names of ``Renderer`` methods) with ``settings`` and print what each job did."""
    import time

    from lazylab.experiments import Workspace
    from lazylab.render.report import Renderer

    t0 = time.perf_counter()
    out_dir = writable_dir(out_dir or default_out() / "render", "--out")
    ws = Workspace(data_dir, cache_dir, cache_limit=cache_limit)
    entries, page = [], None
    with _progress() as progress:
        renderer = Renderer(ws, out_dir, settings, _render_progress(progress), redraw=redraw)
        for stage in stages:
            if stage == "report":
                page, more = renderer.report()
            else:
                more = getattr(renderer, stage)()
            seen = {e["name"] for e in entries}
            entries += [e for e in more if e["name"] not in seen]
    for line in ws.memo.problems:
        click.echo(line, err=True)
    table = Table("job", "file", "frames", "pixels", "size", "status")
    for e in entries:
        files = [(n, f) for n, f in e["files"].items() if not n.endswith(".png") or not e["name"].startswith("trajectory") or
                 e["name"] == "trajectory_finals"] or [("-", None)]
        for i, (name, f) in enumerate(files):
            size = "-" if f is None else (f"{f['bytes'] / 2**20:.2f} MB" if f["bytes"] >= 2**20 else f"{f['bytes'] / 1024:.0f} KB")
            table.add_row(e["name"] if i == 0 else "", name, str(f.get("frames", "")) if f else "",
                          "x".join(map(str, f["size"])) if f and "size" in f else "", size, e["status"] if i == 0 else "")
    out.print(table)
    for e in entries:
        if e["name"] == "paper":
            out.print(f"paper ladder: {e['spec']['source']} ({e['spec']['note']})")
        if e["name"] == "ladder" and e["spec"].get("note"):
            out.print(f"your ladder: {e['spec']['name']} ({e['spec']['note']})")
        if e["name"] == "trajectory":
            rates = ", ".join(f"{r['arm']} {r['lr']:g} ({r['source']})" for r in e["spec"]["arms"])
            out.print(f"trajectory rates: {rates}")
    computed = [e for e in entries if e["computed"]]
    fresh = sum(1 for e in entries if e["status"] == "up to date")
    out.print(f"{len(entries)} jobs: {len(computed)} computed something, {len(entries) - len(computed) - fresh} drawn from "
              f"the memo, {fresh} up to date; memo {ws.memo.directory}; {time.perf_counter() - t0:.1f} s")
    if page is not None:
        out.print(f"wrote {page}")
    else:
        out.print(f"wrote to {out_dir}")


def _computing_render_options(f):
    """The options of a render command that may compute ladder runs: which ladder (preset, an explicit plan,
    or a ``ladder --json`` file) and the feature cap too."""
    f = click.option("--epochs", type=click.IntRange(min=1, max=1000), default=None,
                     help="Your ladder: epochs per run [default: the quick preset's].")(f)
    f = list_option("--seeds", type=IntList(0, MAX_SEED), help="Your ladder: comma-separated seeds [default: the quick preset's].")(f)
    f = list_option("--widths", type=IntList(1, MAX_WIDTH), help="Your ladder: comma-separated widths [default: the quick preset's].")(f)
    f = list_option("--arms", "arms_", help="Your ladder: comma-separated arms, plugin arms too; missing runs are "
                                            "computed [default: the quick preset's].")(f)
    return _preset_option(cache_limit_option(_from_option(_render_options(f))))


def _from_option(f):
    return click.option("--from", "from_json", type=click.Path(dir_okay=False, path_type=Path), multiple=True,
                        help="A --json file of `lazylab ladder` (your ladder as written: any arms, plugins too), `gram`, "
                             "`readout` or `trajectory` (that picture with the file's options, from the memo). "
                             "Repeat for several.")(f)


@cli.group()
def render():
    """Every picture from the memo (computing what is missing), and one results page. See docs/render.md."""


@render.command("gifs")
@_from_option
@_render_options
def render_gifs(out_dir, redraw, data_dir, cache_dir, from_json):
    """Gram crystallization, readout race, prototype travel, trajectory curves and the NTK lab as looping GIFs."""
    _render(("gifs",), out_dir, redraw, data_dir, cache_dir, _render_settings(from_json=from_json))


@render.command("figures")
@_computing_render_options
def render_figures(preset, out_dir, redraw, data_dir, cache_dir, cache_limit, from_json, arms_, widths, seeds, epochs):
    """Static figures, PNG and SVG: ladder accuracy and movement, trajectory finals, NTK lab, sweep and scalar model."""
    _render(("figures",), out_dir, redraw, data_dir, cache_dir,
            _render_settings(preset, from_json, arms_, widths, seeds, epochs), cache_limit)


@render.command("report")
@_computing_render_options
def render_report(preset, out_dir, redraw, data_dir, cache_dir, cache_limit, from_json, arms_, widths, seeds, epochs):
    """report.html: the paper ladder first (memo or shipped reference), your ladder, every GIF and figure, the NTK audit."""
    _render(("report",), out_dir, redraw, data_dir, cache_dir,
            _render_settings(preset, from_json, arms_, widths, seeds, epochs), cache_limit)


@render.command("all")
@_computing_render_options
def render_all(preset, out_dir, redraw, data_dir, cache_dir, cache_limit, from_json, arms_, widths, seeds, epochs):
    """Run gifs, then figures, then report (each picture drawn at most once)."""
    _render(("gifs", "figures", "report"), out_dir, redraw, data_dir, cache_dir,
            _render_settings(preset, from_json, arms_, widths, seeds, epochs), cache_limit)


# ----------------------------------------------------------- path options
class CheckedPath(click.Path):
    """A ``click.Path`` that also refuses an empty path and a component over ``NAME_MAX`` bytes.

    ``''`` would otherwise mean the working directory (a memo there, with its permissions),
    and a long component fails only when the file is opened, after the work is done.
    """

    def __init__(self, inner: click.Path):
        self.__dict__.update(inner.__dict__)

    def convert(self, value, param, ctx):
        if isinstance(value, (str, os.PathLike)):
            text = os.fspath(value)
            if text == "":
                self.fail("empty path", param, ctx)
            longest = max(len(os.fsencode(part)) for part in str(text).split(os.sep))
            if longest > NAME_MAX:
                self.fail(f"a path component is {longest} bytes long; file systems allow {NAME_MAX}", param, ctx)
        return super().convert(value, param, ctx)


def _check_paths(group: click.Group) -> None:
    """Give every path option of every command (those added later too) ``CheckedPath``'s checks."""
    for command in group.commands.values():
        if isinstance(command, click.Group):
            _check_paths(command)
        for param in command.params:
            if isinstance(param.type, click.Path) and not isinstance(param.type, CheckedPath):
                param.type = CheckedPath(param.type)


# --------------------------------------------------------------------- main
_interrupted = False  # set by the SIGINT handler that ``main`` installs


def _on_sigint(signum, frame):
    global _interrupted
    _interrupted = True
    raise KeyboardInterrupt


def _check_interrupt() -> None:
    """Raise KeyboardInterrupt again if one was swallowed (Python drops an exception raised in a finalizer)."""
    if _interrupted:
        raise KeyboardInterrupt


def main(argv=None) -> None:
    """Console entry point: one-line errors (exit 2), interrupts (exit 130), bugs (one line, exit 1).

    ``argv`` None means the real console script: after an interrupt it leaves with ``os._exit``,
    since tearing the interpreter down under a compile still running in native threads can crash.
    """
    import signal
    import threading

    global _interrupted
    _interrupted = False
    previous = None
    # Not when SIGINT is ignored (a background job in a script): keep ignoring it.
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        previous = signal.signal(signal.SIGINT, _on_sigint)
    try:
        _main(argv)
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def _exit_interrupted(argv) -> None:
    """Say how many runs the memo kept, and leave with status 130."""
    rep = ProgressReporter.latest
    if rep is None:
        click.echo("interrupted: every finished run is kept in the memo; run the same command to resume", err=True)
    else:
        click.echo(f"interrupted: {_count(rep.computed + rep.cached, 'run')} kept in the memo ({rep.computed} computed now, "
                   f"{rep.cached} already there); run the same command to resume", err=True)
    if argv is None:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)
    sys.exit(130)


def _plugin_warnings(pending: list[str], error: str = "") -> None:
    """Print the plugin-load warnings (``lazylab.arms.warn``), one line each, except for a unit the error names."""
    for line in dict.fromkeys(pending):  # each distinct line once
        unit = line.split("'")[1] if line.count("'") >= 2 else None
        if unit is None or f"'{unit}'" not in error:
            click.echo(f"warning: {line}", err=True)
    pending.clear()


def _main(argv) -> None:
    from lazylab import arms as arms_registry

    ProgressReporter.latest = None
    pending: list[str] = []
    arms_registry.warn = pending.append
    try:
        _run(argv, pending)
    finally:
        arms_registry.warn = None


def _run(argv, pending: list[str]) -> None:
    import logging

    _check_paths(cli)
    # An unwritable HOME makes matplotlib log two warnings and use a temporary folder,
    # which works: stderr keeps to lazylab's one-line rule.
    logging.getLogger("matplotlib").setLevel(logging.ERROR)
    try:
        xla_cache.enable()  # inside: whatever it meets still ends in one line
        rv = cli.main(args=argv, prog_name="lazylab", standalone_mode=False)
        _plugin_warnings(pending)
    except click.exceptions.NoArgsIsHelpError as exc:
        click.echo(exc.ctx.get_help())
        sys.exit(0)
    except click.ClickException as exc:
        click.echo(f"error: {exc.format_message()}", err=True)
        sys.exit(2)  # every click error is a usage error here (click's own FileError would say 1)
    except LazylabError as exc:
        _plugin_warnings(pending, str(exc))
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except (KeyboardInterrupt, click.exceptions.Abort) as exc:
        # click turns a ^C inside a command into Abort (from KeyboardInterrupt); a bare Abort is
        # a confirmation answered no, or with no terminal to answer it.
        if isinstance(exc, click.exceptions.Abort) and not isinstance(exc.__cause__, KeyboardInterrupt):
            click.echo("aborted: nothing was changed", err=True)
            sys.exit(1)
        _exit_interrupted(argv)
    except OSError as exc:
        # The system refused a file operation (full disk, read-only folder, name too long):
        # the user's environment, not a bug.
        if _interrupted:
            _exit_interrupted(argv)
        if os.environ.get("LAZYLAB_DEBUG"):
            raise
        where = f"{exc.filename}: " if exc.filename else ""
        click.echo(f"error: {where}{exc.strerror or ' '.join(str(exc).split())}", err=True)
        sys.exit(2)
    except Exception as exc:  # a bug: still one line, and exit 1 (not 2) so that it shows
        if _interrupted:
            # The ^C landed inside native code that turned its KeyboardInterrupt into another
            # error (e.g. numpy: "SystemError: ... returned a result with an exception set").
            _exit_interrupted(argv)
        if os.environ.get("LAZYLAB_DEBUG"):
            raise
        msg = " ".join(str(exc).split())
        if isinstance(exc, MemoryError) or "RESOURCE_EXHAUSTED" in msg:
            click.echo(f"error: out of memory ({type(exc).__name__}); try smaller --widths or --train-size", err=True)
            sys.exit(2)
        click.echo(f"error: internal error: {type(exc).__name__}: {msg} (set LAZYLAB_DEBUG=1 for the traceback)", err=True)
        sys.exit(1)
    sys.exit(rv if isinstance(rv, int) else 0)


if __name__ == "__main__":
    main()
