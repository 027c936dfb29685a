"""Units, arms and the entry-point registry.

A *unit* is a nonlinearity: an ``nnx.Module`` built from prototypes ``W`` of
shape ``(m, d)`` that maps images ``(n, d)`` to features ``(n, m)``. An *arm*
is unit x initialisation x (frozen | trained) — SPEC section 4. Units are
discovered through the entry-point group ``lazylab.arms``; the built-in ones
(yat, relu, gaussian) are registered there exactly like third-party plugins.

The plugin contract (version ``CONTRACT_VERSION``) is the ``Unit`` dataclass
below; docs/plugins.md is the tutorial. The registry (``lazylab.arms.loading``)
lists the entry points without importing them and imports a unit when an arm
of it is first needed, with static checks only (no array work); the shape
check of a unit's bank runs when a bank is built (``check_bank``);
``lazylab.testing.check_unit`` (``lazylab arms --check``) is the conformance
suite on real images.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from lazylab.errors import LazylabError

# The built-in units' colours in every picture (Okabe & Ito 2008: blue, orange, bluish green, reddish
# purple); a plugin unit may not take one (``Unit.colour``).
UNIT_COLOURS = {"yat": "#0072B2", "relu": "#E69F00", "gaussian": "#009E73", "rff": "#CC79A7"}

ENTRY_POINT_GROUP = "lazylab.arms"
# 1: name, bank(W, x_ref), inits, fan_in, lr_grids, prototypes_are_images.
# 2: adds the optional ``sample`` (the unit's own random draw of W), ``takes_key``
#    (bank(W, x_ref, key=...) for the bank's other randomness) and ``contract``.
#    Backward compatible: every version-1 unit is a valid version-2 unit.
# 3: adds the optional ``prefix_stable`` (checked by ``lazylab.testing.check_unit``).
# 4: adds the optional ``colour`` (``#RRGGBB``, the unit's colour in every picture).
CONTRACT_VERSION = 4
# A unit's name: in every arm name, figure legend and output file name (an arm of a 100,000-character name took
# 102 s to draw, into an 8 MB SVG), so short: 64 characters at most.
UNIT_NAME_MAX = 64
UNIT_NAME = re.compile(rf"^[a-z][a-z0-9_]{{0,{UNIT_NAME_MAX - 1}}}$")
INITS = ("random", "data")
# The longest arm name a unit can make, ``<unit>-<init>-trained`` (79 characters).
ARM_NAME_MAX = UNIT_NAME_MAX + max(len(i) + 1 for i in INITS) + len("-trained")


def refuse_long_arm_name(name: str) -> None:
    """Raise LazylabError (one line, the name cut to its first 40 characters) for a name longer than any arm's
    (``ARM_NAME_MAX``): no unit makes it, so it is neither compared with the arms nor printed whole (a
    100,000-character name was echoed in a 100 kB error line)."""
    if len(name) > ARM_NAME_MAX:
        raise LazylabError(f"unknown arm {name[:40] + '...'!r}: {len(name):,} characters, longer than any arm name "
                           f"(at most {ARM_NAME_MAX}: a unit name of at most {UNIT_NAME_MAX}, its init and mode)")
DEFAULT_LR_GRIDS = {
    # SPEC section 5: learning-rate bracketing grids.
    "trained": (3e-3, 1e-2, 3e-2),
    "frozen": (3e-2, 1e-1, 3e-1, 1.0),
}


@dataclass(frozen=True)
class Unit:
    """What a plugin provides: the ``lazylab.arms`` contract, version 2.

    A plugin distribution registers ``<name> = "<module>:<attribute>"`` in the
    entry-point group ``lazylab.arms``; the attribute is a ``Unit``.

    Attributes:
      name: the unit's name, equal to the entry-point name; lowercase letters,
        digits and ``_`` (no ``-``: arm names are built from it).
      bank: ``bank(W, x_ref) -> nnx.Module`` (with ``takes_key``:
        ``bank(W, x_ref, key=key)``). ``W`` is float32 prototypes ``(m, d)``
        (``d = 784`` pixels in [0, 1]); ``x_ref`` is float32 ``(512, d)``, the
        first training images, for data-dependent scalars such as a bandwidth.
        The module must hold its prototypes, exactly as given, as an
        ``nnx.Param`` attribute named ``W`` of shape ``(m, d)`` (movement and
        the trained arms use it; rebuilding from ``feat.W`` gives the same
        bank, so transform ``W`` in ``__call__``, not in ``__init__``), and map
        float32 ``(n, d) -> (n, m)``, traceable by ``jax.jit``. Every
        ``nnx.Param`` of the module trains in the trained arm; nothing of the
        bank trains in the frozen arm. It may define
        ``scalars() -> dict[str, float]`` naming its layer scalars (reported
        in each run record at start and end).
      inits: supported initialisations, the default first: ``"random"``
        and/or ``"data"`` (Nystrom: the prototypes are ``m`` distinct training
        images).
      fan_in: for the random init without ``sample``, the lecun-normal fan-in
        axis: ``"m"`` (the flax convention on an ``(m, d)`` array, row norms
        about sqrt(d/m)) or ``"d"`` (a dense layer's, row norms about 1).
      lr_grids: optional ``{"frozen": (...), "trained": (...)}`` (either key)
        overriding the SPEC section 5 bracketing grids; rates > 0.
      prototypes_are_images: whether a prototype row can be shown as a
        28x28 image.
      description: one line for listings (the formula).
      sample: (v2, optional) ``sample(key, (m, d)) -> W`` float32, the unit's
        own random-init draw, replacing lecun-normal (and ``--fan-in``).
      takes_key: (v2) whether ``bank`` takes ``key=``, a JAX key derived from
        the run's seed and independent of the draw of ``W`` and of the head,
        for the bank's other randomness (e.g. phases).
      contract: the contract version the unit is written for (default 1); a
        unit asking for more than ``CONTRACT_VERSION`` is refused.
      prefix_stable: (v3, default False) whether unit ``j`` depends only on
        ``W[j]`` (and the key), so the bank built from ``W[:k]`` gives the
        first ``k`` columns of the full bank's features;
        ``lazylab.testing.check_unit`` checks it when declared.
      colour: (v4, optional) the unit's colour in every picture, ``"#RRGGBB"``
        (not grey, which draws reference lines, nor the warning red
        ``#E31A1C``, nor a colour too light to see on white, nor a built-in
        unit's, ``UNIT_COLOURS``); default: one picked from the name (``lazylab.render.style``).

    What lazylab derives: arms ``<name>-frozen`` and ``<name>-trained`` for
    the default init, plus ``<name>-<init>-frozen|trained`` for the other
    (e.g. ``yat-data-frozen``); memo keys include the providing distribution's
    name and version (``RunConfig.plugin``), so upgrading a plugin never
    reuses results computed by the old one.
    """

    name: str
    bank: Callable
    inits: tuple[str, ...] = ("random",)
    fan_in: str = "m"
    lr_grids: dict | None = None
    prototypes_are_images: bool = True
    description: str = ""
    sample: Callable | None = None
    takes_key: bool = False
    contract: int = 1
    prefix_stable: bool = False
    colour: str | None = None

    def grid(self, trained: bool) -> tuple[float, ...]:
        grids = {**DEFAULT_LR_GRIDS, **(self.lr_grids or {})}
        return tuple(float(r) for r in grids["trained" if trained else "frozen"])

    def make_bank(self, W, x_ref, key=None):
        """Call ``bank`` per the contract: ``key=`` is passed only to units with ``takes_key``."""
        if self.takes_key:
            return self.bank(W, x_ref, key=key)
        return self.bank(W, x_ref)


@dataclass(frozen=True)
class Arm:
    """A unit with an initialisation and a training mode (SPEC section 4).

    ``source`` is the 8-hex-digit hash of the unit's source files (``source_hash``),
    or "" when they cannot be located.
    """

    name: str
    unit: Unit
    init: str
    trained: bool
    distribution: str
    version: str
    source: str = ""

    @property
    def plugin(self) -> str:
        """The identity every memo key holds: ``"<distribution> <version>+src.<hash>"``."""
        return f"{self.distribution} {self.version}" + (f"+src.{self.source}" if self.source else "")


class UnitFailure(LazylabError):
    """A unit produced non-finite features or gradients at run time (one line naming unit, plugin and cell)."""

    def __init__(self, arm: "Arm", cell: str, what: str):
        self.arm, self.cell, self.what = arm, cell, what
        super().__init__(f"unit {arm.unit.name!r} ({arm.plugin}) produced {what} in {cell}")


class ContractError(TypeError):
    """A plugin's unit does not meet the ``lazylab.arms`` contract."""


def _check_contract(obj, ep_name: str) -> Unit:
    """Static checks (no array work) of a loaded entry point; ContractError names the problem."""
    if not isinstance(obj, Unit):
        raise ContractError(f"entry point {ep_name!r} is a {type(obj).__name__}, not a lazylab.arms.Unit")
    if not isinstance(obj.contract, int) or obj.contract > CONTRACT_VERSION:
        raise ContractError(f"unit needs contract version {obj.contract!r}; this lazylab provides {CONTRACT_VERSION}")
    if obj.name != ep_name:
        raise ContractError(f"unit name {obj.name!r} differs from entry point {ep_name!r}")
    if not isinstance(obj.name, str) or not UNIT_NAME.match(obj.name):
        shown = obj.name if not isinstance(obj.name, str) or len(obj.name) <= 80 else obj.name[:40] + "..."
        raise ContractError(f"unit name {shown!r} must be lowercase letters, digits and '_', at most "
                            f"{UNIT_NAME_MAX} characters")
    if not callable(obj.bank):
        raise ContractError("bank is not callable")
    if not isinstance(obj.inits, tuple) or not obj.inits or len(set(obj.inits)) != len(obj.inits) \
            or any(i not in INITS for i in obj.inits):
        raise ContractError(f"inits must be a non-empty tuple of distinct values from {INITS}, got {obj.inits!r}")
    if obj.fan_in not in ("m", "d"):
        raise ContractError(f"fan_in must be 'm' or 'd', got {obj.fan_in!r}")
    if obj.sample is not None and not callable(obj.sample):
        raise ContractError("sample is not callable")
    params = bank_parameters(obj.bank)
    if params is not None:
        accepts_key = "key" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())
        if obj.takes_key and not accepts_key:
            raise ContractError("takes_key=True but bank does not accept key=: add a key parameter")
        if not obj.takes_key and "key" in params and params["key"].default is params["key"].empty:
            raise ContractError("bank requires key= but the unit does not declare takes_key=True, so lazylab "
                                "passes none: declare takes_key=True")
    if obj.colour is not None:
        rgb = obj.colour[1:] if isinstance(obj.colour, str) and re.fullmatch(r"#[0-9a-fA-F]{6}", obj.colour) else None
        if rgb is None:
            raise ContractError(f"colour must be '#RRGGBB', got {obj.colour!r}")
        r, g, b = (int(rgb[i:i + 2], 16) for i in (0, 2, 4))
        if max(r, g, b) - min(r, g, b) < 24 and 40 < r < 230:
            raise ContractError(f"colour {obj.colour} is a grey, which draws the reference lines; name a hue")
        if obj.colour.upper() == "#E31A1C":
            raise ContractError("colour #E31A1C is the warning red (the unstable-run mark); name another")
        if 0.2126 * r + 0.7152 * g + 0.0722 * b > 215:  # Rec. 709 luma (0-255): lighter vanishes on white
            raise ContractError(f"colour {obj.colour} is too light to see on the white figures; name a darker one")
        owner = next((u for u, c in UNIT_COLOURS.items() if c.upper() == obj.colour.upper() and u != obj.name), None)
        if owner is not None:
            raise ContractError(f"colour {obj.colour} is the built-in unit {owner!r}'s; name another")
    if obj.lr_grids is not None:
        if not isinstance(obj.lr_grids, dict) or not set(obj.lr_grids) <= {"frozen", "trained"}:
            raise ContractError("lr_grids must be a dict with keys 'frozen' and/or 'trained'")
        for mode, rates in obj.lr_grids.items():
            try:
                ok = len(rates) > 0 and all(float(r) > 0 for r in rates)
            except (TypeError, ValueError):
                ok = False
            if not ok:
                raise ContractError(f"lr_grids[{mode!r}] must be a non-empty sequence of rates > 0")
    return obj


def plugin_error(exc: BaseException, prefix: str = "") -> str:
    """``"<prefix><type>: <message>"`` of an exception a plugin's code raised, as one line: its first line, each
    control character in it escaped (``lazylab.text.printable``), so that the text a plugin chose is shown, never
    obeyed by the terminal. (The one function lazylab's plugin messages go through.)"""
    from lazylab.text import printable

    return printable((f"{prefix}{type(exc).__name__}: {exc}".splitlines() or [""])[0])


def bank_parameters(bank) -> dict | None:
    """The parameters of ``bank`` (of its ``__init__`` for a class), by name; None when they cannot be read."""
    import inspect

    try:
        return dict(inspect.signature(bank.__init__ if isinstance(bank, type) else bank).parameters)
    except (TypeError, ValueError):
        return None


def key_hint(unit: Unit, exc: BaseException) -> str:
    """What to add to the one-line report of ``exc``, raised while ``unit``'s bank was built, when the
    cause is likely its ``takes_key`` flag: a bank with a ``key`` parameter the unit does not declare
    (lazylab passes no key: ``unexpected PRNG key type <class 'NoneType'>``), or the other way round;
    "" otherwise."""
    params = bank_parameters(unit.bank)
    if not params:
        return ""
    if not unit.takes_key and "key" in params:
        return " (the bank takes key= but the unit does not declare takes_key=True, so lazylab passes no key: declare it)"
    if unit.takes_key and isinstance(exc, TypeError) and "key" in str(exc):
        return " (the unit declares takes_key=True: its bank must accept key=)"
    return ""


def check_bank(unit: Unit, feat, m: int, d: int, W=None) -> None:
    """Check a built bank against the contract, without computing features (``jax.eval_shape``).

    Args: the unit, the module ``unit.make_bank`` returned for prototypes
      ``(m, d)``, and optionally those prototypes ``W``.
    Raises: ContractError naming the first problem (not an ``nnx.Module``; no
    ``nnx.Param`` ``W`` of shape ``(m, d)``, or one that differs from the ``W``
    given; output not float ``(n, m)``; or the call failing while traced).
    """
    import jax
    import jax.numpy as jnp
    import numpy as np
    from flax import nnx

    given = W
    if not isinstance(feat, nnx.Module):
        raise ContractError(f"bank returned a {type(feat).__name__}, not an nnx.Module")
    W = getattr(feat, "W", None)
    if not isinstance(W, nnx.Param):
        raise ContractError("the bank has no nnx.Param attribute 'W'")
    if tuple(W[...].shape) != (m, d):
        raise ContractError(f"bank W has shape {tuple(W[...].shape)}, expected {(m, d)}")
    if given is not None and not np.array_equal(np.asarray(W[...]), np.asarray(given, np.float32)):
        raise ContractError("bank W differs from the prototypes it was given (transform them in __call__)")
    n = 2 if m == 3 else 3  # n != m, so a transposed output is caught
    try:
        graphdef, state = nnx.split(feat)  # traced the way lazylab runs banks (lazylab.model.features)
        out = jax.eval_shape(lambda s, x: nnx.merge(graphdef, s)(x), state, jax.ShapeDtypeStruct((n, d), jnp.float32))
    except Exception as exc:
        raise ContractError(plugin_error(exc, "bank call failed: ")) from None
    if not hasattr(out, "shape") or tuple(out.shape) != (n, m) or not jnp.issubdtype(out.dtype, jnp.floating):
        got = f"{getattr(out, 'dtype', type(out).__name__)} {tuple(getattr(out, 'shape', ()))}"
        raise ContractError(f"bank maps ({n}, {d}) to {got}, expected float ({n}, {m})")


def smoke_check(unit: Unit, m: int = 5, d: int = 784, seed: int = 0) -> None:
    """Build a tiny bank (``m`` random prototypes, 8 random reference images) and ``check_bank`` it.

    Superseded by ``lazylab.testing.check_unit`` (the conformance suite ``lazylab arms
    --check`` runs); kept for plugins whose tests call it. Needs no dataset.
    Raises: ContractError for any failure, with a one-line reason.
    """
    import jax
    import numpy as np

    rng = np.random.default_rng(seed)
    key_w, key_b = jax.random.split(jax.random.key(seed))
    try:
        if "random" in unit.inits and unit.sample is not None:
            W = np.asarray(unit.sample(key_w, (m, d)), np.float32)
            if W.shape != (m, d):
                raise ContractError(f"sample returned shape {W.shape}, expected {(m, d)}")
        else:
            W = rng.random((m, d), dtype=np.float32)
        feat = unit.make_bank(W, rng.random((8, d), dtype=np.float32), key=key_b)
    except ContractError:
        raise
    except Exception as exc:
        raise ContractError(plugin_error(exc, "bank construction failed: ")) from None
    check_bank(unit, feat, m, d, W)


# Where load problems are announced (the CLI prints them as "warning: ..." lines on stderr).
warn: Callable[[str], None] | None = None


def note(line: str) -> None:
    """Announce one line about a unit's numerics (e.g. a bandwidth fallback): through ``warn`` if set
    (the CLI prints ``warning: <line>`` once), else as a Python ``UserWarning``."""
    if warn is not None:
        warn(line)
    else:
        import warnings

        warnings.warn(line, stacklevel=2)


def _source_dir(module: str) -> list[Path]:
    """The source files a unit's identity hashes: every ``.py`` file of a third-party plugin's
    top-level package (or its single module); for a built-in unit, its own module and
    ``lazylab.arms.common`` (the numerics it shares), so that editing the registry or one
    unit leaves the other units' results valid (lazylab's own identity is ``lazylab.config``'s)."""
    top = module.split(".")[0]
    if top == "lazylab":
        spec = importlib.util.find_spec(module)
        if spec is None or not spec.origin:
            return []
        return sorted({Path(spec.origin), Path(__file__).with_name("common.py")})
    spec = importlib.util.find_spec(top)
    if spec is None:
        return []
    if spec.submodule_search_locations:
        return sorted(f for loc in spec.submodule_search_locations for f in Path(loc).rglob("*.py"))
    return [Path(spec.origin)] if spec.origin and spec.origin.endswith(".py") else []


def source_hash(module: str) -> str:
    """First 8 hex digits of SHA-256 over the names and bytes of the files ``_source_dir`` lists.

    Like ``joblib.Memory``'s function-code check, an edit in place (``pip install -e``,
    no version bump) changes the hash and so every memo key of the unit's runs.
    Returns "" when no source file is found (e.g. a zip import).
    """
    files = _source_dir(module)
    if not files:
        return ""
    root = files[0].parent
    h = hashlib.sha256()
    for f in files:
        rel = os.path.relpath(f, root)
        h.update(rel.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:8]


# The registry lives in lazylab.arms.loading (listing without importing, imports bounded in time).
from lazylab.arms.loading import (PluginError, Registry, baseline_settings, get_arm, registry,  # noqa: E402
                                  reset_registry, strict_plugins)

if "jax" in sys.modules:  # a plugin imports jax, then this: the settings before its own code runs
    baseline_settings()

__all__ = ["Unit", "Arm", "UnitFailure", "ContractError", "PluginError", "Registry", "CONTRACT_VERSION",
           "ENTRY_POINT_GROUP", "UNIT_COLOURS", "check_bank", "bank_parameters", "key_hint", "plugin_error", "smoke_check", "source_hash", "note", "registry",
           "reset_registry", "get_arm", "strict_plugins", "ARM_NAME_MAX", "refuse_long_arm_name"]
