"""``lazylab arms``, ``lazylab data`` and ``lazylab cache``: the helpers around the experiments."""

from __future__ import annotations

import os
from pathlib import Path

import click
from rich.table import Table

from lazylab import xla_cache
from lazylab.cli.options import CACHE_LIMIT_DEFAULT, cache_dir_option, data_options, finite, json_option
from lazylab.cli.output import count, out, prepare_json, write_json
from lazylab.errors import LazylabError
from lazylab.text import printable

@click.command()
@json_option("the units, arms and their plugins")
@click.option("--check", is_flag=True,
              help="Also run the conformance suite (lazylab.testing.check_unit) on each unit, and keep each verdict "
                   "for the runs that follow; exit 2 if any fails.")
@click.option("--list", "list_checks", is_flag=True,
              help="With --check: list the conformance checks by id (lazylab.testing.CHECKS) instead, importing no unit.")
def arms(json_path, check, list_checks):
    """List every unit and arm with the plugin (distribution, version) it comes from.

    Imports every unit (each import bounded by LAZYLAB_IMPORT_TIMEOUT seconds, default 30; the
    other commands import only the units whose arms they use). A plugin that fails to import or
    breaks the contract is listed with its error and skipped; LAZYLAB_STRICT_PLUGINS=1 makes that
    an error, and LAZYLAB_ARMS=name,... loads only the named units. See docs/plugins.md.

    \b
    Examples:
      lazylab arms
      lazylab arms --check         # run the conformance suite on real images
      lazylab arms --check --list  # the check ids, for expected_failed_checks
      lazylab arms --json - | jq '.arms[].arm'
    """
    from rich.markup import escape

    from lazylab.arms import CONTRACT_VERSION, ENTRY_POINT_GROUP, registry, strict_plugins

    prepare_json(json_path)
    if list_checks:
        _list_checks(json_path, check)
        return
    reg = registry()
    all_arms = reg.arms()  # every unit imported (each import bounded in time): the listing names every one
    status = {}
    for name in sorted(reg.units):
        status[name] = "ok"
        if check:
            from lazylab.vetting import check_images, verdict

            first = next(a for a in all_arms.values() if a.unit.name == name)
            failures = verdict(first, check_images, recheck=True)  # kept: the unit's first run reads it
            if failures:
                status[name] = f"contract: {'; '.join(failures)}"
    failed = [f"unit {n!r} ({reg.units[n][1]} {reg.units[n][2]}) fails its check: {s}"
              for n, s in status.items() if s != "ok"]
    if failed and strict_plugins():
        raise LazylabError("; ".join(failed) + " [LAZYLAB_STRICT_PLUGINS is set]")
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
    write_json(json_path, {"group": ENTRY_POINT_GROUP, "contract": CONTRACT_VERSION,
                           "units": units, "arms": rows, "errors": broken})
    table = Table("arm", "unit", "init", "bank", "plugin", "status")
    text = lambda s: escape(printable(s))  # a plugin's metadata and messages: markup and control characters are data
    for r in rows:
        ok = r["status"] == "ok"
        table.add_row(r["arm"], r["unit"], r["init"], r["bank"], text(f"{r['distribution']} {r['version']}"),
                      r["status"] if ok else f"[red]{text(r['status'])}[/red]")
    for b in broken:
        plugin = f"{b['distribution']} {b['version']}" if b["distribution"] != "-" else "-"
        table.add_row("-", text(b["unit"]), "-", "-", text(plugin), f"[red]{text(b['status'])}[/red]")
    out.print(table)
    if check:
        passed = len(status) - len(failed)
        out.print(f"conformance suite (lazylab.testing.check_unit) on real images: {passed} of "
                  f"{count(len(status), 'unit')} passed; verdicts kept for the runs that follow")
    if failed:  # after the listing: every failing unit, one line each
        raise LazylabError("\nerror: ".join(failed))


@click.command("new-unit")
@click.argument("name")
@click.option("--dir", "parent", type=click.Path(file_okay=False, path_type=Path), default=Path("."), show_default=True,
              help="Folder the package folder NAME is written in.")
def new_unit(name, parent):
    """Write a plugin package for a new unit NAME: its entry point, a working unit to edit, a test file
    running lazylab's conformance suite (one pytest item per check) and a README.

    It installs and passes its tests as written; docs/plugins.md starts from it.

    \b
    Examples:
      lazylab new-unit cauchy && pip install -e cauchy && pytest cauchy
      lazylab ladder --arms cauchy-frozen,yat-frozen --widths 16 --seeds 0 \\
        --epochs 1
    """
    from lazylab.scaffold import write_unit_package

    for path in write_unit_package(name, parent):
        out.print(f"wrote {path}")
    root = parent / name
    out.print(f"next: pip install -e {root} && pytest {root}; then lazylab arms lists {name}-frozen and {name}-trained",
              soft_wrap=True)


def _list_checks(json_path, check: bool) -> None:
    """``arms --check --list``: every conformance check id with what it checks (``lazylab.testing.CHECKS``)."""
    if not check:
        raise click.UsageError("--list lists the checks of --check: give both")
    from lazylab.testing import CHECKS

    write_json(json_path, {"checks": [{"id": cid, "checks": what} for cid, what in CHECKS.items()]})
    table = Table("check id", "what it checks")
    for cid, what in CHECKS.items():
        table.add_row(cid, what)
    out.print(table)
    out.print(f"{count(len(CHECKS), 'check')}: a unit runs contract, settings and, for each init it declares, "
              "<init>-<check> (prefix_stable only where declared); expected_failed_checks takes these ids")


@click.group()
def data():
    """Locate, verify and fetch Fashion-MNIST.

    \b
    Examples:
      lazylab data info
      lazylab data info --json - | jq .fingerprint
      lazylab data fetch --out data/fashion-mnist   # needs internet
    """


@data.command("info")
@data_options
@json_option("where the data is, its counts and checksums")
def data_info(data_dir, cache_dir, json_path):
    """Where the data was found, the counts and the files' SHA-256.

    \b
    Examples:
      lazylab data info
      lazylab data info --data-dir /srv/fashion-mnist --json - | jq .fingerprint
    """
    from lazylab import data as fmnist
    from lazylab.cache import default_dir
    from lazylab.locations import check_memo_dir

    prepare_json(json_path)
    info = fmnist.info(data_dir, cache_dir=check_memo_dir(cache_dir or default_dir()))  # its parsed copy lives there
    write_json(json_path, info)
    out.print(f"directory: {info['directory']}")
    out.print(f"train: {info['train']}  test: {info['test']}  image: {info['image_shape'][0]}x{info['image_shape'][1]}  fingerprint: {info['fingerprint']}")
    table = Table("file", "bytes", "sha256", "verified")
    for name, f in info["files"].items():
        table.add_row(name, str(f["bytes"]), f["sha256"], "yes" if f["verified"] else "[red]NO[/red]")
    out.print(table)


@data.command("fetch")
@click.option("--out", "dest", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder for the four files [default: $LAZYLAB_DATA or ./data/fashion-mnist].")
@click.option("--base-url", default=None, help="Mirror base URL [default: the dataset's public mirror].")
@click.option("--timeout", type=click.FloatRange(min=0.1, max=86400), default=30.0, show_default=True, callback=finite,
              help="Seconds per request.")
def data_fetch(dest, base_url, timeout):
    """Download the four files with SHA-256 verification (needs internet; lazylab never downloads by itself).

    \b
    Examples:
      lazylab data fetch --out data/fashion-mnist
      LAZYLAB_DATA=data/fashion-mnist lazylab ladder --preset quick
    """
    from lazylab import data as fmnist

    dest = dest or Path(os.environ.get("LAZYLAB_DATA") or "data/fashion-mnist")
    paths = fmnist.fetch(dest, base_url=base_url or fmnist.MIRROR, timeout=timeout)
    for p in paths:
        out.print(f"ok {p}")
    out.print(f"set LAZYLAB_DATA={dest} (or pass --data-dir) to use them")


@click.group()
def cache():
    """Inspect, prune or clear the memo (default ~/.cache/lazylab/memo, or $LAZYLAB_CACHE).

    \b
    Examples:
      lazylab cache info
      # drop entries computed by older code, and unreadable ones
      lazylab cache prune
      lazylab cache check  # drop unreadable entries only
      # list the runs themselves
      lazylab runs --arm yat-frozen
    """


@cache.command("info")
@cache_dir_option
@json_option("the counts and sizes")
def cache_info(cache_dir, json_path):
    """Entries and bytes in the memo, in its feature store and in the compiled-program cache.

    \b
    Examples:
      lazylab cache info
      lazylab cache info --cache-dir /data/lazylab-memo
      lazylab cache info --json - | jq .memo.entries
    """
    from lazylab.cache import Memo, format_size
    from lazylab.config import code_identity
    from lazylab.runs import stale_source_entries

    prepare_json(json_path)
    memo = Memo(cache_dir)
    volume, by_code = memo.volume(), memo.code_counts()
    stale = len(stale_source_entries(memo)) if code_identity() in by_code else 0
    for line in memo.problems:  # e.g. an old ./cache memo left by an earlier lazylab
        click.echo(line, err=True)
    out.print(f"{memo.directory}: {len(memo)} entries, {volume / 2**20:.1f} MiB; with the feature store, by the "
              "code that computed them:")
    for code, n in by_code.items():
        tag = printable(code or "lazylab 0.1.0 (no code identity)")  # a row's tag: data
        if code != code_identity():
            out.print(f"  {n} by {tag} (never reused; 'lazylab cache prune' removes them)")
            continue
        out.print(f"  {n - stale} by {tag} (current)")
        if stale:
            out.print(f"  {stale} by {tag} for plugin sources edited since (stale source: reused only if the edit "
                      "is reverted; 'lazylab cache prune' removes them)")
    entries, size = memo.feature_stats()
    out.print(f"{memo.feature_dir}: {entries} feature matrices, {format_size(size)} "
              f"(cap: --cache-limit, default {CACHE_LIMIT_DEFAULT})")
    folder = xla_cache.cache_dir()
    programs = {"directory": None if folder is None else str(folder), "kept": False, "programs": 0, "bytes": 0}
    if folder is None:
        out.print(f"compiled programs: not kept (LAZYLAB_XLA_CACHE={os.environ['LAZYLAB_XLA_CACHE']})")
    elif not xla_cache.usable(folder):
        out.print(f"{folder}: cannot be written (jax locks it even to read), so compiled programs are not kept or used")
    else:
        n_programs, program_bytes = xla_cache.stats(folder)
        programs.update(kept=True, programs=n_programs, bytes=program_bytes)
        out.print(f"{folder}: {n_programs} compiled programs, {format_size(program_bytes)} (jax's compilation cache, "
                  "LAZYLAB_XLA_CACHE, 0 for none; not cleared by 'cache clear')")
    write_json(json_path, {
        "memo": {"directory": str(memo.directory), "entries": len(memo), "bytes": volume,
                 "by_code": [{"code": code, "entries": n - (stale if code == code_identity() else 0),
                              "current": code == code_identity()} for code, n in by_code.items()],
                 "stale_source": stale},
        "features": {"directory": str(memo.feature_dir), "entries": entries, "bytes": size},
        "compiled_programs": programs, "problems": list(memo.problems)})


@cache.command("clear")
@cache_dir_option
@click.option("--yes", is_flag=True, help="Do not ask.")
def cache_clear(cache_dir, yes):
    """Remove every memo entry (the compiled-program cache stays).

    \b
    Examples:
      lazylab cache clear
      lazylab cache clear --yes --cache-dir /tmp/scratch-memo
    """
    from lazylab.cache import Memo

    memo = Memo(cache_dir)
    if not yes:
        click.confirm(f"remove {len(memo) + memo.feature_stats()[0]} entries from {memo.directory}?", abort=True)
    out.print(f"removed {memo.clear()} entries")


@cache.command("prune")
@cache_dir_option
def cache_prune(cache_dir):
    """Remove the entries computed by other code (another lazylab version or numerics), which are never
    reused, the results of plugin sources edited since (lazylab runs --all marks them "stale source";
    reused only if the edit is reverted), and the entries that cannot be read (as 'cache check' does).

    \b
    Examples:
      lazylab cache prune
      lazylab cache prune --cache-dir /data/lazylab-memo
    """
    from lazylab.cache import Memo
    from lazylab.config import code_identity
    from lazylab.runs import stale_source_entries

    memo = Memo(cache_dir)
    try:
        other = memo.prune()
        stale = memo.remove(stale_source_entries(memo))
        sound, removed = memo.check()
    finally:
        memo.close()
    _echo_lines(memo.problems + removed)
    out.print(f"removed {_entries(other)} computed by other code than {code_identity()}, "
              f"{_entries(stale)} of plugin sources edited since (stale source) and "
              f"{_entries(len(removed), 'unreadable')}; {_entries(sound, 'sound')} kept", soft_wrap=True)


@cache.command("check")
@cache_dir_option
@json_option("the counts and every entry removed")
def cache_check(cache_dir, json_path):
    """Read every entry of the memo and its feature store; remove those that cannot be read.

    An entry cannot be read when its row is not one lazylab writes (a pickled value, a
    file mode without its file, a file outside the memo), its SHA-256 seal does not match,
    or its content is not what lazylab reads back (a record that is not JSON or fails its
    schema, an array file that does not load). Each removed entry is named on stderr, in
    one line; sound entries are left as they are. Reads the whole memo once.

    \b
    Examples:
      lazylab cache check
      lazylab cache check --cache-dir /data/lazylab-memo --json - | jq .removed
    """
    from lazylab.cache import Memo

    prepare_json(json_path)
    memo = Memo(cache_dir)
    try:
        sound, removed = memo.check()
    finally:
        memo.close()
    write_json(json_path, {"directory": str(memo.directory), "sound": sound, "removed": len(removed),
                           "problems": list(memo.problems) + removed})
    _echo_lines(memo.problems + removed)
    out.print(f"{memo.directory}: {_entries(sound, 'sound')}, {_entries(len(removed), 'unreadable')} removed")


def _entries(n: int, kind: str = "") -> str:
    """``"1 sound entry"``, ``"3 sound entries"``."""
    return f"{n} {kind + ' ' if kind else ''}{'entry' if n == 1 else 'entries'}"


def _echo_lines(lines) -> None:
    """Each line on stderr as it is (never wrapped), as every command prints the memo's problems."""
    for line in lines:
        click.echo(line, err=True)



