"""The ``lazylab`` command line: parse options, call one experiment, print with rich.

One module per command group (``admin``, ``ladder``, ``studies``, ``ntk``, ``render``,
``runs``); options in ``options``, every table and file format in ``output``, progress in
``progress``. No science here. Every user error ends as one line on stderr and exit status 2;
an interrupt exits 130 after saying that finished runs are kept in the memo.
"""

from __future__ import annotations

import os
import sys

import click

from lazylab import xla_cache
from lazylab.cli import output, progress
from lazylab.cli.options import VERBOSITY_GIVEN, check_paths, verbosity_options
from lazylab.errors import LazylabError
from lazylab.text import printable


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="lazylab")
@verbosity_options
def cli():
    """lazylab: how many random neurons buy a trained one? (Fashion-MNIST)

    Frozen random feature banks (Yat, ReLU, Gaussian units) with a trained linear readout,
    against the same networks trained end to end, across widths. Every run is memoized
    (--cache-dir, default ~/.cache/lazylab/memo), so a command run twice computes nothing.

    \b
    Examples:
      lazylab ladder --preset quick --dry-run   # its runs, and their cost here
      lazylab ladder --preset quick             # the quick width ladder
      lazylab render all                        # every picture, the report
    """
    output.reset()  # here, not in main: click's test runner and plugins' tests invoke the group directly
    # -q / -v before the subcommand (their callbacks ran already); after it, the command's own set it again.
    given = click.get_current_context().meta.get(VERBOSITY_GIVEN, set())
    progress.verbosity = progress.QUIET if "quiet" in given else progress.VERBOSE if "verbose" in given else progress.NORMAL


def _register() -> None:
    from lazylab.cli import admin, ladder, ntk, render, runs, studies, verify

    for command in (admin.arms, admin.new_unit, admin.data, admin.cache, runs.runs, ladder.ladder, ladder.redundancy,
                    studies.trajectory, studies.gram, studies.readout, ntk.ntk, render.render, verify.verify):
        cli.add_command(command)
    _verbosity_everywhere(cli)


def _verbosity_everywhere(group: click.Group) -> None:
    """``-q`` and ``-v`` after any subcommand too (``lazylab ladder -q``), with the same effect as before it."""
    for command in group.commands.values():
        if not any(p.name == "quiet" for p in command.params):
            verbosity_options(command)
        if isinstance(command, click.Group):
            _verbosity_everywhere(command)


_register()


def main(argv=None) -> None:
    """Console entry point: one-line errors (exit 2), interrupts (exit 130), bugs (one line, exit 1).

    ``argv`` None means the real console script: after an interrupt it leaves with ``os._exit``,
    since tearing the interpreter down under a compile still running in native threads can crash.
    """
    import signal
    import threading

    progress.interrupted = False
    previous = None
    # Not when SIGINT is ignored (a background job in a script): keep ignoring it.
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        previous = signal.signal(signal.SIGINT, progress.on_sigint)
    unraisable, sys.unraisablehook = sys.unraisablehook, progress.quiet_interrupts(sys.unraisablehook)
    try:
        _main(argv)
    except KeyboardInterrupt:  # in the imports before ``_run`` handles it
        _exit_interrupted(argv)
    finally:
        sys.unraisablehook = unraisable
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def _exit_interrupted(argv) -> None:
    """Say how many runs the memo kept, and leave with status 130."""
    click.echo(progress.interrupted_message(), err=True)
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
            click.echo(printable(f"warning: {line}"), err=True)  # a plugin's message: data
    pending.clear()


def _option_hint(exc: click.ClickException, argv: list[str]) -> str | None:
    """A better line than click's for an unknown option, or None: a choice's value given as an option
    (``--quick``: did you mean ``--preset quick``), or a long option given one dash (``-preset``, which click
    reads as ``-p`` ``-r`` ...: a long option takes two dashes)."""
    if not isinstance(exc, click.NoSuchOption) or exc.ctx is None:
        return None
    params = [p for p in exc.ctx.command.params if isinstance(p, click.Option)]
    name = exc.option_name
    if name.startswith("--"):
        for p in params:
            if isinstance(p.type, click.Choice) and name[2:] in p.type.choices:
                return f"No such option {name!r} (did you mean '{p.opts[0]} {name[2:]}'?)"
    longs = {o for p in params for o in p.opts if o.startswith("--")}
    for token in argv:
        stem = token.split("=", 1)[0]
        if stem.startswith("-") and not stem.startswith("--") and len(stem) > 2 and "-" + stem in longs:
            return f"No such option {stem!r}: a long option takes two dashes ({'-' + stem})"
    return None


def _main(argv) -> None:
    from lazylab import arms as arms_registry

    progress.ProgressReporter.latest = None
    pending: list[str] = []
    arms_registry.warn = pending.append
    try:
        _run(argv, pending)
    finally:
        arms_registry.warn = None
        output.release_stdout()


def _run(argv, pending: list[str]) -> None:
    import logging

    check_paths(cli)
    # An unwritable HOME makes matplotlib log two warnings and use a temporary folder,
    # which works: stderr keeps to lazylab's one-line rule.
    logging.getLogger("matplotlib").setLevel(logging.ERROR)
    output.escape_warnings()
    try:
        xla_cache.enable()  # inside: whatever it meets still ends in one line
        rv = cli.main(args=argv, prog_name="lazylab", standalone_mode=False)
        _plugin_warnings(pending)
    except click.exceptions.NoArgsIsHelpError as exc:
        click.echo(exc.ctx.get_help())
        sys.exit(0)
    except click.ClickException as exc:
        hint = _option_hint(exc, sys.argv[1:] if argv is None else list(argv))
        click.echo(printable(f"error: {hint or exc.format_message()}", keep_newlines=True), err=True)
        sys.exit(2)  # every click error is a usage error here (click's own FileError would say 1)
    except LazylabError as exc:
        _plugin_warnings(pending, str(exc))
        click.echo(printable(f"error: {exc}", keep_newlines=True), err=True)  # several arms' lines at most
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
        if progress.interrupted:
            _exit_interrupted(argv)
        if os.environ.get("LAZYLAB_DEBUG"):
            raise
        where = f"{exc.filename}: " if exc.filename else ""
        click.echo(printable(f"error: {where}{exc.strerror or ' '.join(str(exc).split())}"), err=True)
        sys.exit(2)
    except Exception as exc:  # a bug: still one line, and exit 1 (not 2) so that it shows
        if progress.interrupted:
            # The ^C landed inside native code that turned its KeyboardInterrupt into another
            # error (e.g. numpy: "SystemError: ... returned a result with an exception set").
            _exit_interrupted(argv)
        if os.environ.get("LAZYLAB_DEBUG"):
            raise
        msg = " ".join(str(exc).split())
        if isinstance(exc, MemoryError) or "RESOURCE_EXHAUSTED" in msg:
            click.echo(f"error: out of memory ({type(exc).__name__}); try smaller --widths or --train-size", err=True)
            sys.exit(2)
        click.echo(printable(f"error: internal error: {type(exc).__name__}: {msg} (set LAZYLAB_DEBUG=1 for the "
                             "traceback)"), err=True)
        sys.exit(1)
    sys.exit(rv if isinstance(rv, int) else 0)
