"""The entry-point registry: units listed without importing them, each imported when an arm of it is needed.

``registry()`` reads the entry points of the group ``lazylab.arms`` (names, distributions,
versions: package metadata only) and imports nothing. A unit's module is imported the first
time something asks for one of its arms (``Registry.arm``, ``Registry.unit``) or for every arm
(``Registry.arms``: ``lazylab arms``), in a thread the command waits on for at most
``import_timeout()`` seconds (``LAZYLAB_IMPORT_TIMEOUT``, default 30): an import that takes
longer is abandoned and the unit counts as not loaded, in one line. Whatever the plugin's own
code raises while it is imported — ``SystemExit`` and ``KeyboardInterrupt`` included — is the
plugin's failure, never lazylab's exit or an interrupt. What it prints goes to stderr. The
process-wide jax and numpy settings (``SETTINGS``) are compared before and after the import;
a plugin that changes one is reported by the conformance check ``settings``
(``lazylab.testing``) and the setting is put back, so no other arm computes under it.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
import traceback
from dataclasses import dataclass, field
from importlib.metadata import entry_points

from lazylab.errors import LazylabError

IMPORT_TIMEOUT = 30.0  # seconds a plugin's import may take (LAZYLAB_IMPORT_TIMEOUT overrides)
# Process-wide jax settings a unit's import must leave alone: each changes what every arm computes
# (dtypes, matmul precision, random bits) or how (jit, NaN checks).
JAX_SETTINGS = ("jax_enable_x64", "jax_default_matmul_precision", "jax_numpy_dtype_promotion",
                "jax_numpy_rank_promotion", "jax_default_prng_impl", "jax_threefry_partitionable",
                "jax_disable_jit", "jax_debug_nans", "jax_debug_infs")
NUMPY_SETTINGS = "numpy.seterr"  # numpy's floating-point error handling (np.geterr())
SETTINGS = (*JAX_SETTINGS, NUMPY_SETTINGS)
_BASELINE: dict | None = None  # the settings as lazylab first saw them in this process (``baseline_settings``)


def import_timeout() -> float:
    """Seconds a plugin's import may take: ``LAZYLAB_IMPORT_TIMEOUT`` (a number > 0), default ``IMPORT_TIMEOUT``.
    Raises: LazylabError (one line) for a value that is not a positive number."""
    raw = os.environ.get("LAZYLAB_IMPORT_TIMEOUT", "").strip()
    if not raw:
        return IMPORT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise LazylabError(f"LAZYLAB_IMPORT_TIMEOUT={raw!r}: expected a number of seconds > 0")
    return value


def process_settings() -> dict:
    """The process-wide settings of ``SETTINGS``: ``{name: value}`` (imports jax)."""
    import jax
    import numpy as np

    out = {name: getattr(jax.config, name) for name in JAX_SETTINGS}
    out[NUMPY_SETTINGS] = dict(sorted(np.geterr().items()))
    return out


def changed_settings(before: dict, restore: bool) -> list[str]:
    """``"name: old -> new"`` for each setting that differs from ``before`` (``process_settings``), in
    ``SETTINGS`` order; with ``restore``, each is set back to its ``before`` value."""
    import jax
    import numpy as np

    now = process_settings()
    changed = [f"{name}: {before[name]} -> {now[name]}" for name in SETTINGS if now[name] != before[name]]
    if restore and changed:
        for name in JAX_SETTINGS:
            if now[name] != before[name]:
                jax.config.update(name, before[name])
        np.seterr(**before[NUMPY_SETTINGS])
    return changed


def baseline_settings() -> dict:
    """The settings as lazylab first read them in this process (taken by the first call, or when
    ``lazylab.arms`` or ``lazylab.testing`` is imported after jax): what a unit's import must leave."""
    global _BASELINE
    if _BASELINE is None:
        _BASELINE = process_settings()
    return _BASELINE


@dataclass(frozen=True)
class PluginError:
    """A unit that could not be loaded: its distribution, version and a one-line reason; ``traceback``:
    the plugin's own traceback, when its code raised (shown with ``LAZYLAB_DEBUG=1``)."""

    unit: str
    distribution: str
    version: str
    message: str
    traceback: str = field(default="", compare=False, repr=False)

    def __str__(self) -> str:
        return f"{self.distribution} {self.version}: {self.message}"

    def where(self) -> str:
        """`` (distribution version)``, or "" for a unit no distribution provides."""
        return f" ({self.distribution} {self.version})" if self.distribution != "-" else ""


def strict_plugins() -> bool:
    """Whether ``LAZYLAB_STRICT_PLUGINS`` is set (to anything but empty or ``0``): plugin problems are errors."""
    return os.environ.get("LAZYLAB_STRICT_PLUGINS", "") not in ("", "0")


def debug() -> bool:
    """Whether ``LAZYLAB_DEBUG`` is set: tracebacks, a plugin's own included, are shown."""
    return bool(os.environ.get("LAZYLAB_DEBUG"))


def show_traceback(trace: str) -> None:
    """Write a plugin's own traceback (``traceback.format_exc()`` where its code raised) to stderr, with
    ``LAZYLAB_DEBUG=1``; nothing otherwise (its one-line reason is reported as usual)."""
    if debug() and trace:
        sys.stderr.write(trace if trace.endswith("\n") else trace + "\n")
        sys.stderr.flush()


def raised_by_plugin(exc: BaseException) -> bool:
    """Whether ``exc``, raised while a plugin's code ran, is the plugin's failure rather than the user's:
    any ``Exception``, ``SystemExit``, and a ``KeyboardInterrupt`` no Ctrl-C sent — under the command
    line, whose SIGINT handler records each Ctrl-C (``lazylab.cli.progress.on_sigint``) or ignores it
    (a background job); where Python's own handler is in place (no command line) a ``KeyboardInterrupt``
    is taken as the user's."""
    if isinstance(exc, (Exception, SystemExit)):
        return True
    if not isinstance(exc, KeyboardInterrupt):
        return False
    import signal

    progress = sys.modules.get("lazylab.cli.progress")  # not imported here: the command line records Ctrl-C
    return (progress is not None and not getattr(progress, "interrupted", True)
            and signal.getsignal(signal.SIGINT) is not signal.default_int_handler)


def _wanted() -> dict[str, str | None]:
    """``LAZYLAB_ARMS`` as ``{unit: distribution or None}``: entries ``name`` or ``distribution:name``."""
    out: dict[str, str | None] = {}
    for item in os.environ.get("LAZYLAB_ARMS", "").split(","):
        dist, _, name = item.strip().rpartition(":")
        if name.strip():
            out[name.strip()] = dist.strip() or None
    return out


def _norm(dist: str) -> str:
    return re.sub(r"[-_.]+", "-", dist).lower()


ONLY_NAMED = "LAZYLAB_ARMS=name,... loads only the named units"


def unit_of(arm_name: str) -> str:
    """The unit an arm name belongs to: the part before its first ``-`` (a unit name has none)."""
    return arm_name.split("-", 1)[0]


def _import(ep, timeout: float) -> tuple[object, str | None, str]:
    """``(object, None, "")`` of ``ep.load()``, or ``(None, one-line reason, the plugin's traceback)``.

    The import runs in a daemon thread the caller waits on for ``timeout`` seconds; an import still
    running then is abandoned (its thread left to sleep). Prints go to stderr meanwhile.
    """
    box: dict = {}

    def target():
        try:
            box["object"] = ep.load()
        except BaseException as exc:  # the plugin's own code: SystemExit and KeyboardInterrupt are its failures too
            box["error"], box["traceback"] = exc, traceback.format_exc()

    thread = threading.Thread(target=target, name=f"lazylab-import-{ep.name}", daemon=True)
    with contextlib.redirect_stdout(sys.stderr):  # stdout belongs to the results (``--json -``)
        thread.start()
        thread.join(timeout)
    if thread.is_alive():
        return None, (f"importing {ep.value} took longer than {timeout:g} s and was abandoned "
                      "(LAZYLAB_IMPORT_TIMEOUT sets the bound)"), ""
    exc = box.get("error")
    if exc is None:
        return box.get("object"), None, ""
    from lazylab.arms import plugin_error

    what = plugin_error(exc)
    if isinstance(exc, (SystemExit, KeyboardInterrupt)):
        name = type(exc).__name__
        what = f"{name}({what[len(name) + 2:]}) raised by the plugin's own code while it was imported"
    return None, what, box["traceback"]


@dataclass
class Registry:
    """The units registered under ``lazylab.arms``, each imported when first needed.

    Attributes:
      entries: ``name -> (entry point, distribution, version)`` of every registered unit (listed, not
        imported).
      units: ``name -> (unit, distribution, version)`` of the units imported so far.
      errors: ``name -> PluginError`` of the units that cannot load: found so far (an import or
        contract failure) or known from the metadata alone (one name registered by two
        distributions, a name in ``LAZYLAB_ARMS`` nothing provides).
      sources: ``name -> source hash`` (``lazylab.arms.source_hash``), read without importing.
      settings: ``name -> ["setting: old -> new", ...]``: what a unit's import changed (and lazylab
        put back).
    """

    entries: dict = field(default_factory=dict)
    units: dict = field(default_factory=dict)
    errors: dict[str, PluginError] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    settings: dict[str, list[str]] = field(default_factory=dict)
    _tried: set = field(default_factory=set, repr=False)

    # -------------------------------------------------------------- loading
    def load(self, name: str) -> None:
        """Import unit ``name`` if it is registered and not tried yet; a failure is recorded in ``errors``
        and announced once (``lazylab.arms.warn``), or raised under ``LAZYLAB_STRICT_PLUGINS=1``.
        Raises: LazylabError (one line) under strict mode when the unit cannot load."""
        if name in self._tried:
            return
        self._tried.add(name)
        if name not in self.entries:
            if name in self.errors:
                self._announce([name])
            return
        self._import(name)
        if name in self.errors:
            self._announce([name])

    def load_all(self) -> None:
        """Import every registered unit (``lazylab arms``); failures announced, or raised together under
        strict mode (one line naming every unit that cannot load)."""
        todo = [n for n in sorted(set(self.entries) | set(self.errors)) if n not in self._tried]
        self._tried.update(todo)
        for name in todo:
            if name in self.entries:
                self._import(name)
        self._announce([n for n in todo if n in self.errors])

    def _import(self, name: str) -> None:
        from lazylab.arms import ContractError, _check_contract, source_hash

        ep, dist, version = self.entries[name]
        baseline_settings()  # jax imported here, before the plugin's own code runs
        before = process_settings()
        obj, failure, trace = _import(ep, import_timeout())
        if failure is None:
            self.settings[name] = changed_settings(before, restore=True)
            if not self.settings[name]:
                del self.settings[name]
            try:
                unit = _check_contract(obj, ep.name)
            except ContractError as exc:
                failure = f"ContractError: {exc}"
        if failure is not None:
            self.errors[name] = PluginError(name, dist, version, failure, trace)
            show_traceback(trace)
            return
        self.units[name] = (unit, dist, version)
        if name not in self.sources:
            try:
                self.sources[name] = source_hash(ep.module)
            except OSError:
                self.sources[name] = ""

    def _announce(self, names: list[str]) -> None:
        """Say that ``names`` cannot load: one LazylabError line under strict mode, else one warning each."""
        import lazylab.arms as arms

        if not names:
            return
        errors = [self.errors[n] for n in sorted(names)]
        if strict_plugins():
            problems = "; ".join(f"plugin unit {e.unit!r}{e.where()} failed: {e.message}" for e in errors)
            raise LazylabError(f"{problems} [LAZYLAB_STRICT_PLUGINS is set; {ONLY_NAMED}]")
        if arms.warn is not None:
            for e in errors:
                arms.warn(f"plugin unit {e.unit!r}{e.where()} did not load: {e.message} ({ONLY_NAMED})")

    # -------------------------------------------------------------- asking
    def unit(self, name: str):
        """``(unit, distribution, version)`` of unit ``name``, imported if needed; None if it is not
        registered or cannot load. Raises: LazylabError under strict mode when it cannot load."""
        self.load(name)
        return self.units.get(name)

    def installed(self, name: str) -> bool:
        """Whether unit ``name`` is registered (nothing imported)."""
        return name in self.entries or name in self.units

    def identity(self, name: str) -> str | None:
        """The plugin identity of registered unit ``name``, ``"<distribution> <version>+src.<hash>"``
        (``Arm.plugin``), from its metadata and source files alone (nothing imported); None if not registered."""
        from lazylab.arms import source_hash

        found = self.units.get(name) or (self.entries[name] if name in self.entries else None)
        if found is None:
            return None
        if name not in self.sources:
            try:
                self.sources[name] = source_hash(self.entries[name][0].module) if name in self.entries else ""
            except OSError:
                self.sources[name] = ""
        return f"{found[1]} {found[2]}" + (f"+src.{self.sources[name]}" if self.sources[name] else "")

    def _unit_arms(self, name: str) -> dict:
        from lazylab.arms import Arm

        unit, dist, version = self.units[name]
        out = {}
        for init in unit.inits:
            stem = name if init == unit.inits[0] else f"{name}-{init}"
            for trained in (False, True):
                arm_name = f"{stem}-{'trained' if trained else 'frozen'}"
                out[arm_name] = Arm(arm_name, unit, init, trained, dist, version, self.sources.get(name, ""))
        return out

    def arms(self) -> dict:
        """Every arm of every unit (``name -> lazylab.arms.Arm``), sorted by unit: imports every unit."""
        self.load_all()
        out = {}
        for name in sorted(self.units):
            out.update(self._unit_arms(name))
        return out

    def arm_names(self) -> list[str]:
        """Arm names for suggestions, importing no third-party unit: every arm of the units loaded (and of
        lazylab's own), ``<unit>-frozen`` and ``<unit>-trained`` of the others."""
        for name, (_, dist, _) in sorted(self.entries.items()):
            if dist == "lazylab":
                self.load(name)
        names = []
        for name in sorted(set(self.entries) | set(self.units)):
            if name in self.units:
                names += list(self._unit_arms(name))
            elif name not in self.errors:
                names += [f"{name}-frozen", f"{name}-trained"]
        return names

    def arm(self, name: str):
        """The arm ``name`` (``yat-frozen``), importing its unit only. Raises: LazylabError (one line) for an
        unknown arm, naming why its unit did not load when it did not, and under strict mode when it cannot."""
        from lazylab.arms import refuse_long_arm_name

        refuse_long_arm_name(name)
        unit = unit_of(name)
        self.load(unit)
        if unit in self.units:
            arms = self._unit_arms(unit)
            if name in arms:
                return arms[name]
        broken = self.errors.get(unit)
        why = f"; unit {broken.unit!r} did not load ({broken})" if broken else ""
        if os.environ.get("LAZYLAB_ARMS", "").strip():
            why += f" (LAZYLAB_ARMS={os.environ['LAZYLAB_ARMS']} restricts which units load)"
        raise LazylabError(f"unknown arm {name!r}{why}; available: {', '.join(self.arm_names()) or 'none'}")


_REGISTRY: Registry | None = None


def registry() -> Registry:
    """The units registered under ``lazylab.arms``, listed (cached per process); nothing is imported.

    ``LAZYLAB_ARMS=name,...`` restricts the registry to the named units (a named unit that no
    installed distribution provides is recorded as an error); ``distribution:name`` also says which
    distribution provides the unit. A unit name registered by two distributions (a built-in
    included) is recorded as an error naming both, unless ``LAZYLAB_ARMS`` picks one; identical
    registrations (one distribution seen twice) count once. A unit is imported when first needed
    (``Registry.load``): a plugin that fails to import, takes longer than ``import_timeout()``
    or breaks the contract (static checks only, ``lazylab.arms.check_bank`` does the rest) is
    recorded in ``Registry.errors`` and announced through ``lazylab.arms.warn`` (one line per unit;
    with ``LAZYLAB_DEBUG=1`` the plugin's own traceback on stderr, ``show_traceback``); with ``LAZYLAB_STRICT_PLUGINS=1`` it
    raises one ``LazylabError`` line instead — for the units a command uses, never for others.
    """
    global _REGISTRY
    if _REGISTRY is not None:
        return _REGISTRY
    wanted = _wanted()
    reg = Registry()
    candidates: dict[str, list] = {}  # unit name -> distinct (entry point, dist, version)
    for ep in entry_points(group="lazylab.arms"):
        if wanted and ep.name not in wanted:
            continue
        dist = ep.dist.name if ep.dist else "unknown"
        version = ep.dist.version if ep.dist else "0"
        if wanted.get(ep.name) and _norm(wanted[ep.name]) != _norm(dist):
            continue
        seen = candidates.setdefault(ep.name, [])
        if not any(_norm(d) == _norm(dist) and e.value == ep.value for e, d, _ in seen):
            seen.append((ep, dist, version))
    for name, found in sorted(candidates.items()):
        if len(found) > 1:
            who = " and ".join(f"{d} {v}" for _, d, v in found)
            pick = " or ".join(f"LAZYLAB_ARMS={d}:{name}" for _, d, _ in found)
            reg.errors[name] = PluginError(name, found[0][1], found[0][2],
                                           f"unit name {name!r} is registered by both {who}; choose one with {pick}")
        else:
            reg.entries[name] = found[0]
    for name in sorted(set(wanted) - set(reg.entries) - set(reg.errors)):
        via = f" from {wanted[name]}" if wanted[name] else ""
        reg.errors[name] = PluginError(name, "-", "-", f"not installed{via} (named in LAZYLAB_ARMS)")
    _REGISTRY = reg
    return reg


def reset_registry() -> None:
    """Forget the registry, so the next ``registry()`` reads the environment again (tests)."""
    global _REGISTRY
    _REGISTRY = None


def get_arm(name: str):
    """Resolve an arm name such as ``yat-frozen`` (importing its unit only); unknown -> LazylabError."""
    return registry().arm(name)
