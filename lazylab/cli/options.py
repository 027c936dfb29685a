"""Option types and the options shared by the commands: one syntax and one set of limits for each.

Lists: ``parse_int_list`` (``8,16,32``, ``8,16,...,1024``, ``0-2``); repeating a list option adds
to it. Seeds are 0..MAX_SEED, widths 1..MAX_WIDTH, training sets 256..60000 images everywhere.
"""

from __future__ import annotations

import errno
import os
from collections import Counter
from pathlib import Path

import click

# The limits live in lazylab.limits (the schemas of files read back use them too); re-exported here.
from lazylab.limits import (MAX_AMPLITUDE, MAX_EPOCHS, MAX_LIST, MAX_LR, MAX_SEED, MAX_TRAIN_SIZE, MAX_WIDTH,  # noqa: F401
                            MIN_TRAIN_SIZE, NAME_MAX)


def parse_int_list(text: str) -> tuple[int, ...]:
    """The one list syntax of every integer list option: ``8,16,32``; ``8,16,...,1024`` (geometric,
    ratio b/a, when b is a multiple of a: a doubling; else arithmetic, step b - a: ``10,15,...,30``);
    ``0-2`` (every integer from 0 to 2). Raises ``ValueError`` with a one-line reason, also when
    z is not on the progression (``8,16,...,1000`` is a typo, not 125 widths)."""
    items = [v.strip() for v in str(text).split(",")]
    if not any(items):
        raise ValueError("expected a comma-separated list of integers, got nothing")
    bad = ValueError(f"expected integers such as 8,16,32, 8,16,...,1024 or 0-2, got {text!r}")
    if "..." in items:
        if len(items) != 4 or items[2] != "...":
            raise ValueError(f"a progression is written a,b,...,z (e.g. 8,16,...,1024), got {text!r}")
        try:
            a, b, z = int(items[0]), int(items[1]), int(items[3])
        except ValueError:
            raise bad from None
        if not a < b <= z:
            raise ValueError(f"a progression a,b,...,z needs a < b <= z, got {text!r}")
        ratio = b // a if a > 0 and b % a == 0 else None
        seq = [a]
        while seq[-1] < z and len(seq) <= MAX_LIST:
            seq.append(seq[-1] * ratio if ratio else seq[-1] + (b - a))
        if seq[-1] != z:
            raise ValueError(f"{z} is not on the progression {a},{b},... ({', '.join(map(str, seq[-2:]))} around it)")
        return tuple(seq)
    ints: list[int] = []
    for item in items:
        lo, dash, hi = item.partition("-")
        try:  # "a-b"; a leading "-" is a negative number, refused later by the minimum
            pair = (int(lo), int(hi)) if dash and lo else None
            ints += [] if pair else [int(item)]
        except ValueError:
            raise bad from None
        if pair:
            if pair[1] < pair[0]:
                raise ValueError(f"the range {item} runs backwards")
            if pair[1] - pair[0] >= MAX_LIST:
                raise ValueError(f"the range {item} holds more than {MAX_LIST} values")
            ints += range(pair[0], pair[1] + 1)
    return tuple(ints)


class IntList(click.ParamType):
    """An integer list (``parse_int_list``'s syntax): distinct values, each at least ``minimum``
    (and at most ``maximum`` if given), at least ``at_least`` of them."""

    name = "ints"

    def __init__(self, minimum: int, maximum: int | None = None, at_least: int = 1):
        self.minimum = minimum
        self.maximum = maximum
        self.at_least = at_least

    def convert(self, value, param, ctx):
        if isinstance(value, tuple):
            return value
        try:
            ints = parse_int_list(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)
        if len(ints) > MAX_LIST:
            self.fail(f"{len(ints)} values: more than {MAX_LIST}", param, ctx)
        bad = [i for i in ints if i < self.minimum]
        if bad:
            self.fail(f"{bad[0]} is below the minimum {self.minimum}", param, ctx)
        bad = [i for i in ints if self.maximum is not None and i > self.maximum]
        if bad:
            self.fail(f"{bad[0]} is above the maximum {self.maximum}", param, ctx)
        repeated = sorted(i for i, n in Counter(ints).items() if n > 1)
        if repeated:  # a repeated width or seed would double-count one run in the statistics
            self.fail(f"{repeated[0]} is given more than once", param, ctx)
        if len(ints) < self.at_least:
            self.fail(f"expected at least {self.at_least} values, got {len(ints)}", param, ctx)
        return ints


class AliasedOption(click.Option):
    """An option with one canonical spelling (its first name, the one ``--help`` and error messages
    show) and aliases also accepted (``--arms`` and ``--arm``): users type either, lazylab says one."""

    def get_error_hint(self, ctx):
        return f"'{self.opts[0]}'"

    def get_help_record(self, ctx):
        names = self.opts
        self.opts = names[:1]
        try:
            return super().get_help_record(ctx)
        finally:
            self.opts = names


def list_option(*decls, type: click.ParamType | None = None, default: str | None = None, show_default=False, help="",
                check=None):
    """A comma-separated list option; repeating it accumulates, the one convention of every list
    option (``--seeds 0 --seeds 1`` is ``--seeds 0,1``; ``--arms a --arms b`` is ``--arms a,b``).

    Each occurrence is converted by ``type`` (a list type such as ``IntList``, returning a tuple);
    repeats are joined and converted once more, so a value repeated across two flags is refused
    like one inside a list. None given: ``default`` (a string) converted, or None. ``check``: an
    option callback run on the joined names of an untyped list, as it is parsed (``--arms``:
    ``_refuse_unknown_arms_now``).
    """
    def callback(ctx, param, value):
        if not value:
            return None
        if type is None:
            joined = ",".join(value)
            return check(ctx, param, joined) if check is not None else joined
        if len(value) == 1:
            return value[0]
        return type.convert(",".join(str(v) for part in value for v in part), param, ctx)

    return click.option(*decls, cls=AliasedOption, type=type, multiple=True, callback=callback,
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


def did_you_mean(message: str, name: str, candidates) -> str:
    """``message`` (``unknown arm 'yat-frozn'; ...``) with `` (did you mean 'yat-frozen'?)`` after the
    name when one of ``candidates`` is close to it (difflib); unchanged otherwise."""
    import difflib

    close = difflib.get_close_matches(name, list(candidates), n=1)
    head = f"unknown arm {name!r}"
    if not close or head not in message:
        return message
    return message.replace(head, f"{head} (did you mean {close[0]!r}?)", 1)


def known_arms() -> tuple[str, ...]:
    """Arm names for ``did_you_mean``, importing no third-party unit (``Registry.arm_names``)."""
    from lazylab.arms import registry

    return tuple(registry().arm_names())


def get_arm(name: str):
    """``lazylab.arms.get_arm``, with a one-line error that says why an arm is unknown: a bare unit name is
    answered with its arms (``--arms yat``: ``yat-frozen, yat-trained, ...``); its unit did not load (named by
    the registry), its unit is not installed but the memo holds its results (named here), or, for none of
    these, the installed arm the name is close to ("did you mean")."""
    from lazylab.arms import get_arm as lookup
    from lazylab.arms import registry
    from lazylab.arms.loading import unit_of
    from lazylab.errors import LazylabError

    try:
        return lookup(name)
    except LazylabError as exc:
        reg = registry()
        if reg.installed(name):  # a bare unit name: its arms (importing that unit only)
            reg.load(name)
            if name in reg.units:
                own = ", ".join(reg._unit_arms(name))
                raise LazylabError(f"unknown arm {name!r}: {name} is a unit; its arms are {own}") from None
        unit, message = unit_of(name), str(exc)
        held = _held_in_memo(name)
        if unit in reg.errors:  # the message names why it did not load: no other unit's arm to suggest
            raise LazylabError(message + held) from None
        if held and not reg.installed(unit):
            head = f"unknown arm {name!r}"
            raise LazylabError(message.replace(head, f"{head}: its unit {unit!r} is not installed", 1) + held) from None
        raise LazylabError(did_you_mean(message, name, known_arms()) + held) from None


ARM_MODES = ("frozen", "trained")


def installed_units() -> tuple[str, ...]:
    """The unit names registered in the entry-point group ``lazylab.arms`` that ``LAZYLAB_ARMS`` lets load, sorted,
    read from the installed distributions' metadata (``lazylab.arms.registry`` lists them without importing any)."""
    from lazylab.arms import registry

    reg = registry()
    return tuple(sorted(set(reg.entries) | set(reg.units)))


def could_be_arm(name: str, units) -> bool:
    """Whether ``name`` has an arm's form, ``<unit>-frozen|trained`` or ``<unit>-<init>-frozen|trained``
    (``lazylab.arms.Registry.arms``), for one of ``units``."""
    from lazylab.arms import INITS

    stem, _, mode = name.rpartition("-")
    unit, _, init = stem.rpartition("-") if stem.rpartition("-")[2] in INITS else (stem, "", "")
    return mode in ARM_MODES and unit in units


def refuse_unknown_arms(names) -> None:
    """Refuse at once, before any unit is imported (loading the units imports jax: seconds), a name that no
    installed unit can make; leave every other name to ``get_arm``.

    Left to ``get_arm`` (which loads the units): a name of an arm's form (``could_be_arm``), a bare unit name
    (answered with its arms), and a name closest to an arm of another init (``yat-data-frozn``: whether a unit
    has that init is known only once it is loaded).
    Raises: LazylabError, one line: for a name longer than any arm's, its length (``refuse_long_arm_name``);
      else the name, the closest arm (``did_you_mean``), the arms every installed unit has, and, for a name of an
      arm's form, the memo's results of that name (``_held_in_memo``).
    """
    import difflib
    import os

    from lazylab.arms import INITS, refuse_long_arm_name
    from lazylab.errors import LazylabError

    units = installed_units()
    for name in names:
        refuse_long_arm_name(name)
        if not name or name in units or could_be_arm(name, units):
            continue
        plain = [f"{u}-{mode}" for u in units for mode in ARM_MODES]
        other_inits = [f"{u}-{init}-{mode}" for u in units for init in INITS for mode in ARM_MODES]
        close = difflib.get_close_matches(name, plain + other_inits, n=1)
        if close and close[0] in other_inits:
            continue
        restricted = os.environ.get("LAZYLAB_ARMS", "").strip()
        why = f" (LAZYLAB_ARMS={restricted} restricts which units load)" if restricted else ""
        message = (f"unknown arm {name!r}{why}; available: {', '.join(plain) or 'none'}, and arms of other inits "
                   "(lazylab arms lists every arm)")
        # Only a name of an arm's form (an uninstalled plugin's arm) can be in the memo: reading the memo's
        # listing loads the installed units, which this check exists to spare a mistyped name.
        held = _held_in_memo(name) if name.rpartition("-")[2] in ARM_MODES else ""
        raise LazylabError(did_you_mean(message, name, plain) + held)


def _refuse_unknown_arms_now(ctx, param, value):
    """Option callback: ``refuse_unknown_arms`` on the comma-separated names given (None: not given)."""
    if value is not None:
        refuse_unknown_arms([n.strip() for n in str(value).split(",")])
    return value


def _held_in_memo(name: str) -> str:
    """``; the memo at ... holds N results of it, computed by ...`` for an arm that is not installed but
    whose results the command's memo (``--cache-dir``, else the default) holds; "" otherwise."""
    from lazylab.errors import LazylabError
    from lazylab.runs import list_runs

    ctx = click.get_current_context(silent=True)
    cache_dir = ctx.params.get("cache_dir") if ctx is not None else None
    try:  # unfiltered: a filter on an arm name loads the units to check it, which this line must not wait for
        listing = list_runs(cache_dir, kinds=None, any_code=True, include_stale=True)
    except (LazylabError, OSError):
        return ""
    held = [r for r in listing.runs if r.arm == name]
    if not held:
        return ""
    plugins = sorted({r.plugin for r in held if r.plugin}) or ["an unrecorded plugin"]
    n = len(held)
    return (f"; the memo at {listing.directory} holds {n} result{'s' if n != 1 else ''} of it, computed by "
            f"{', '.join(plugins)}, reused only by {'that plugin' if len(plugins) == 1 else 'one of those plugins'} at that "
            f"version and source (lazylab runs --all --arm {name} lists them)")


def parse_arms(value: str | None) -> tuple:
    """Resolve a comma-separated arm list; an empty or unknown name is a LazylabError (with "did you mean")."""
    names = [n.strip() for n in (value or "").split(",")]
    if not any(names):
        raise click.BadParameter("expected at least one arm name", param_hint="'--arms'")
    repeated = sorted({n for n in names if n and names.count(n) > 1})
    if repeated:  # one arm twice would train nothing new and print its row twice
        raise click.BadParameter(f"{repeated[0]} is given more than once", param_hint="'--arms'")
    return tuple(get_arm(n) for n in names if n)


VERBOSITY_GIVEN = "lazylab.verbosity"  # ctx.meta key: the -q / -v flags given so far, before or after the subcommand


def _verbosity(ctx, param, value):
    """``-q``/``-v`` callback: set ``progress.verbosity`` wherever the flag stands on the line; both is an error."""
    from lazylab.cli import progress

    if not value:
        return
    given = ctx.meta.setdefault(VERBOSITY_GIVEN, set())
    given.add(param.name)
    if len(given) > 1:
        raise click.UsageError("-q and -v contradict each other: give one")
    progress.verbosity = progress.QUIET if param.name == "quiet" else progress.VERBOSE


def verbosity_options(f):
    """``-q/--quiet`` and ``-v/--verbose``: on the group and on every command, with the same effect
    before or after the subcommand (``lazylab -q ladder`` is ``lazylab ladder -q``)."""
    quiet = click.option("-q", "--quiet", is_flag=True, expose_value=False, callback=_verbosity,
                         help="No progress on stderr (results and errors still print).")
    verbose = click.option("-v", "--verbose", is_flag=True, expose_value=False, callback=_verbosity,
                           help="More progress: one line per epoch when stderr is not a terminal.")
    # A function collects its options bottom-up, a built command appends them: -q first in help either way.
    for option in ((quiet, verbose) if isinstance(f, click.Command) else (verbose, quiet)):
        f = option(f)
    return f


def data_options(f):
    """``--data-dir`` and ``--cache-dir``, shared by every command that touches data or the memo."""
    f = cache_dir_option(f)
    f = click.option("--data-dir", type=click.Path(path_type=Path), default=None,
                     help="Fashion-MNIST directory [default: $LAZYLAB_DATA or /usr/share/datasets/fashion-mnist].")(f)
    return f


def cache_dir_option(f):
    """``--cache-dir``: the memo's folder."""
    return click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
                        help="Memo folder [default: $LAZYLAB_CACHE, else $XDG_CACHE_HOME/lazylab/memo or ~/.cache/lazylab/memo].")(f)


def default_out() -> Path:
    """``$LAZYLAB_OUT`` or ``./out``: the root for figures and tables a command writes by default."""
    return Path(os.environ.get("LAZYLAB_OUT") or "out")


def out_option(folder: str, what: str):
    """``--out DIR``, every command's output folder: ``what`` is written there [default: out/<folder>]."""
    return click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
                        help=f"Folder for {what} [default: $LAZYLAB_OUT/{folder} or out/{folder}].")


def json_option(what: str):
    """``--json PATH``: the command's results as JSON; ``-`` prints them on stdout and nothing else
    (the tables are then left out; progress, warnings and errors stay on stderr)."""
    from lazylab.cli.output import json_stdout

    return click.option("--json", "json_path", type=click.Path(dir_okay=False, allow_dash=True, path_type=Path), metavar="PATH",
                        default=None, callback=json_stdout,
                        help=f"Write {what} as JSON to PATH; - prints it on stdout, alone.")


def arm_option(default: str | None, what: str):
    """``--arm``: one arm name (plugins included); ``--arms`` with one name is accepted too."""
    return click.option("--arm", "--arms", "arm_name", cls=AliasedOption, default=default, required=default is None,
                        show_default=default is not None, callback=_refuse_unknown_arms_now, help=what)


def arms_option(default: str | None = None, what: str = "arms"):
    """``--arms`` (alias ``--arm``): comma-separated arm names (``lazylab arms`` lists them, plugins too)."""
    return list_option("--arms", "--arm", "arms_", default=default, show_default=default is not None,
                       check=_refuse_unknown_arms_now, help=f"Comma-separated {what} (lazylab arms lists them)"
                       + ("" if default is not None else " [default: the preset's]") + ".")


def widths_option(default: str | None = None, what: str = "bank widths m", at_least: int = 1):
    """``--widths`` (alias ``--width``): an integer list of widths 1..MAX_WIDTH."""
    return list_option("--widths", "--width", "widths", type=IntList(1, MAX_WIDTH, at_least), default=default,
                       show_default=default is not None,
                       help=f"{what[0].upper()}{what[1:]}: 64,512, 8,16,...,1024 or 8-12"
                            + ("" if default is not None else " [default: the preset's]") + ".")


def seeds_option(default: str | None = None):
    """``--seeds`` (alias ``--seed``): an integer list of seeds 0..MAX_SEED."""
    return list_option("--seeds", "--seed", "seeds", type=IntList(0, MAX_SEED), default=default, show_default=default is not None,
                       help="Seeds (bank, head and batch order): 0,1,2 or 0-2"
                            + ("" if default is not None else " [default: the preset's]") + ".")


def seed_option(what: str = "Seed of the bank, the head and the batch order.", maximum: int = MAX_SEED,
                alias: bool = True):
    """``--seed``: one seed 0..MAX_SEED (or a smaller ``maximum`` the help explains); ``--seeds`` with
    one value is accepted too (``alias``; not where the command has another seeds option)."""
    return click.option("--seed", *(("--seeds",) if alias else ()), "seed", cls=AliasedOption, type=click.IntRange(min=0, max=maximum), default=0, show_default=True, help=what)


def width_option(default: int | None, what: str = "Units m in the bank.", alias: bool = True):
    """``--width``: one width 1..MAX_WIDTH (required when ``default`` is None); ``--widths`` with one
    value is accepted too (``alias``; not where the command has its own ``--widths``)."""
    return click.option("--width", *(("--widths",) if alias else ()), "width", cls=AliasedOption, type=click.IntRange(min=1, max=MAX_WIDTH), default=default,
                        required=default is None, show_default=default is not None, help=what)


def train_size_option(default: int | None, what: str = "Training images: the first N of the 60000."):
    """``--train-size``: 256..60000 images in every command."""
    return click.option("--train-size", type=click.IntRange(min=MIN_TRAIN_SIZE, max=MAX_TRAIN_SIZE), default=default,
                        show_default=default is not None,
                        help=what + (" [default: the preset's, 60000 for paper]" if default is None else ""))


def epochs_option(default: int | None, what: str = "Epochs per run."):
    """``--epochs``: 1..1000 epochs."""
    return click.option("--epochs", type=click.IntRange(min=1, max=MAX_EPOCHS), default=default,
                        show_default=default is not None,
                        help=what + (" [default: the preset's]" if default is None else ""))


def lr_option(what: str, default: float | None = None):
    """``--lr``: a finite rate in (0, MAX_LR]."""
    return click.option("--lr", type=click.FloatRange(min=0, min_open=True, max=MAX_LR), default=default,
                        show_default=default is not None, callback=finite, help=what)


def fan_in_option(f):
    """``--fan-in``: the random init's fan-in convention."""
    return click.option("--fan-in", type=click.Choice(["unit", "d"]), default="unit", show_default=True,
                        help="Random init: each unit's own lecun convention, or fan-in d = 784 for all.")(f)


def choices(value: str, allowed: tuple, option: str) -> tuple:
    """Comma-separated distinct choices from ``allowed``, in the given order; one-line error otherwise."""
    items = tuple(v.strip() for v in value.split(",") if v.strip())
    bad = [v for v in items if v not in allowed]
    if not items or bad:
        raise click.BadParameter(f"expected comma-separated values from {', '.join(allowed)}, got {value!r}",
                                 param_hint=option)
    if len(set(items)) < len(items):
        raise click.BadParameter(f"a value is given more than once in {value!r}", param_hint=option)
    return items


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


# ----------------------------------------------------------- path options
class CheckedPath(click.Path):
    """A ``click.Path`` that also refuses an empty path, a component over ``NAME_MAX`` bytes and a
    symbolic-link loop (the path, or a folder above it).

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
            try:
                os.stat(text)
            except OSError as exc:
                if exc.errno == errno.ELOOP:  # else it fails only when written, after the work is done
                    self.fail(f"{text} leads into a symbolic-link loop; give another path", param, ctx)
            except ValueError:  # a NUL byte: click's own check says so
                pass
        return super().convert(value, param, ctx)


def check_paths(group: click.Group) -> None:
    """Give every path option of every command (those added later too) ``CheckedPath``'s checks."""
    for command in group.commands.values():
        if isinstance(command, click.Group):
            check_paths(command)
        for param in command.params:
            if isinstance(param.type, click.Path) and not isinstance(param.type, CheckedPath):
                param.type = CheckedPath(param.type)


