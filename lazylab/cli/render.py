"""``lazylab render``: every picture from the memo (computing what is missing) and the results page."""

from __future__ import annotations

import time
from pathlib import Path

import click
from rich.table import Table

from lazylab.cli.options import (arms_option, cache_limit_option, data_options, default_out, epochs_option,
                                 parse_arms, seeds_option, widths_option)
from lazylab.cli.output import out, wrap_lines
from lazylab.cli.plan import dry_run_option, plan_first, yes_option
from lazylab.cli.progress import Display, stage_ticker
from lazylab.paths import writable_dir


def _render_options(f):
    f = data_options(f)
    f = click.option("--redraw", is_flag=True, help="Redraw pictures that are up to date (from the memo; nothing is recomputed).")(f)
    f = click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
                     help="Folder for every picture, manifest.json and report.html [default: $LAZYLAB_OUT/render or out/render].")(f)
    return f


_preset_option = click.option(
    "--preset", type=click.Choice(["auto", "quick", "paper"]), default="auto", show_default=True,
    help="Your ladder, shown after the paper ladder that leads the page (memo or shipped reference): auto = the paper "
         "preset if all its runs are in the memo, else the quick preset (its missing runs are computed, 0.5 to 2 minutes on "
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
    named: dict[str, str] = {}  # picture -> the --from file that set it: a second one would silently win
    for path in from_json:
        before = settings
        settings = with_json(settings, path)  # a bad file is one line before anything is computed
        for part in ("ladder", "gram", "readout", "trajectory"):
            if getattr(settings, part) != getattr(before, part):
                if part in named:
                    raise click.UsageError(f"--from names two {part} files ({named[part]} and {path}); "
                                           f"the report shows one {part}")
                named[part] = str(path)
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


def _render(stages, out_dir, redraw, data_dir, cache_dir, settings, cache_limit=None, dry_run=False):
    """Run ``stages`` (names of ``Renderer`` methods) with ``settings`` and print what each job did."""
    from lazylab.experiments import Workspace
    from lazylab.render.report import Renderer

    t0 = time.perf_counter()
    ws = Workspace(data_dir, cache_dir, cache_limit=cache_limit)
    est = plan_first(dry_run, None, "render", ws, settings=settings, stages=stages)
    if est is None:
        return
    out_dir = writable_dir(out_dir or default_out() / "render", "--out")
    entries, page = [], None
    with Display() as display:
        renderer = Renderer(ws, out_dir, settings, stage_ticker(display), redraw=redraw)
        for stage in stages:
            if stage in ("report", "ladders"):
                page, more = getattr(renderer, stage)()
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
            out.print(f"paper ladder: {e['spec']['source']} ({e['spec']['note']})", soft_wrap=not wrap_lines())  # one line
        if e["name"] == "ladder" and e["spec"].get("note"):
            out.print(f"your ladder: {e['spec']['name']} ({e['spec']['note']})", soft_wrap=not wrap_lines())
        if e["name"] == "trajectory":
            rates = ", ".join(f"{r['arm']} {r['lr']:g} ({r['source']})" for r in e["spec"]["arms"])
            out.print(f"trajectory rates: {rates}")
    computed = [e for e in entries if e["computed"]]
    fresh = sum(1 for e in entries if e["status"].startswith("up to date"))
    out.print(f"{len(entries)} jobs: {len(computed)} computed something, {len(entries) - len(computed) - fresh} drawn from "
              f"the memo, {fresh} up to date; memo {ws.memo.directory}; {time.perf_counter() - t0:.1f} s")
    if page is not None:
        out.print(f"wrote {page}")
    else:
        out.print(f"wrote to {out_dir}")


def _computing_render_options(f):
    """The options of a render command that may compute ladder runs: which ladder (preset, an explicit plan,
    or a ``ladder --json`` file) and the feature cap too."""
    f = epochs_option(None, "Your ladder: epochs per run.")(f)
    f = seeds_option()(f)
    f = widths_option(None, "your ladder's widths")(f)
    f = arms_option(None, "arms of your ladder, plugins too; its missing runs are computed")(f)
    return yes_option(dry_run_option(_preset_option(cache_limit_option(_from_option(_render_options(f))))))


def _from_option(f):
    return click.option("--from", "from_json", type=click.Path(dir_okay=False, path_type=Path), multiple=True,
                        help="A --json file of `lazylab ladder` (your ladder as written: any arms, plugins too), `gram`, "
                             "`readout` or `trajectory` (that picture with the file's options, from the memo). "
                             "Repeat for several.")(f)


@click.group()
def render():
    """Every picture from the memo (computing what is missing), and one results page. See docs/render.md.

    \b
    Examples:
      lazylab render all  # every picture and out/render/report.html
      # the page with your ladder (from ladder --json)
      lazylab render report --from results.json
      lazylab render gifs --out /tmp/pictures
    """


@render.command("gifs")
@dry_run_option
@yes_option
@_from_option
@_render_options
def render_gifs(out_dir, redraw, data_dir, cache_dir, from_json, dry_run):
    """Gram crystallization, readout race, prototype travel, trajectory curves and the NTK lab as looping GIFs.

    \b
    Examples:
      lazylab render gifs
      # the gram of `lazylab gram --json gram.json`
      lazylab render gifs --from gram.json --out /tmp/pictures
    """
    _render(("gifs",), out_dir, redraw, data_dir, cache_dir, _render_settings(from_json=from_json), dry_run=dry_run)


def _computing_command(name: str, stages: tuple, doc: str):
    """``lazylab render NAME``: the render command running ``stages`` that may compute ladder runs."""
    def command(preset, out_dir, redraw, data_dir, cache_dir, cache_limit, from_json, arms_, widths, seeds, epochs,
                dry_run, sections="all"):
        from lazylab.experiments.render import DEFAULT_SETTINGS

        settings = _render_settings(preset, from_json, arms_, widths, seeds, epochs)
        if sections == "ladders":  # a --from file the ladder sections never read would be dropped without a word
            unread = [part for part in ("gram", "readout", "trajectory")
                      if getattr(settings, part) != getattr(DEFAULT_SETTINGS, part)]
            if unread:
                raise click.UsageError(f"--sections ladders draws the ladders alone; --from names a {unread[0]} file "
                                       "(drop it, or use --sections all)")
        _render(("ladders",) if sections == "ladders" else stages, out_dir, redraw, data_dir, cache_dir, settings,
                cache_limit, dry_run)

    command.__doc__ = doc
    if name == "report":
        command = click.option(
            "--sections", type=click.Choice(["all", "ladders"]), default="all", show_default=True,
            help="ladders: the page with the paper ladder and yours alone (nothing else computed or drawn).")(command)
    return render.command(name)(_computing_render_options(command))


render_figures = _computing_command("figures", ("figures",), """Static figures, PNG and SVG: ladder accuracy and movement, trajectory finals, NTK lab, sweep and scalar model.

    \b
    Examples:
      lazylab render figures
      lazylab render figures --arms yat-frozen,relu-frozen --widths 16,64,256 \\
        --seeds 0
    """)
render_report = _computing_command("report", ("report",), """report.html: the paper ladder first (memo or shipped reference), your ladder, every GIF and figure, the NTK audit.

    \b
    Examples:
      lazylab render report --dry-run  # what it would compute first
      # your ladder from `lazylab ladder --json results.json`
      lazylab render report --from results.json
      # its ladder sections alone, in seconds
      lazylab render report --from results.json --sections ladders
    """)
render_all = _computing_command("all", ("gifs", "figures", "report"), """Run gifs, then figures, then report (each picture drawn at most once).

    \b
    Examples:
      lazylab render all
      # once the paper ladder is in the memo
      lazylab render all --preset paper --out site/
    """)
