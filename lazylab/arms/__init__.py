"""Units, arms and the entry-point registry.

A *unit* is a nonlinearity: an ``nnx.Module`` built from prototypes ``W`` of
shape ``(m, d)`` that maps images ``(n, d)`` to features ``(n, m)``. An *arm*
is unit x initialisation x (frozen | trained) — SPEC section 4. Units are
discovered through the entry-point group ``lazylab.arms``; the built-in ones
(yat, relu, gaussian) are registered there exactly like third-party plugins.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Callable

from lazylab.errors import LazylabError

ENTRY_POINT_GROUP = "lazylab.arms"
CONTRACT_VERSION = 1
INITS = ("random", "data")
DEFAULT_LR_GRIDS = {
    # SPEC section 5: learning-rate bracketing grids.
    "trained": (3e-3, 1e-2, 3e-2),
    "frozen": (3e-2, 1e-1, 3e-1, 1.0),
}


@dataclass(frozen=True)
class Unit:
    """What a plugin provides (contract version 1).

    Attributes:
      name: short lowercase name, used in arm names (``<name>-frozen``).
      bank: ``bank(W, x_ref) -> nnx.Module``. ``W`` is a float32 array of
        prototypes ``(m, d)``; ``x_ref`` is ``(512, d)`` training images for
        data-dependent scalars (e.g. a bandwidth). The module must hold the
        prototypes as an ``nnx.Param`` attribute named ``W`` and map
        ``(n, d) -> (n, m)``. It may define ``scalars() -> dict[str, float]``
        naming its learned layer scalars (reported at start and end).
      inits: supported initialisations, default first: ``"random"`` and/or
        ``"data"`` (Nystrom: prototypes are training images).
      fan_in: for the random init, the lecun-normal fan-in axis: ``"m"`` (the
        flax convention on an ``(m, d)`` array, row norms about sqrt(d/m)) or
        ``"d"`` (a dense layer's convention, row norms about 1).
      lr_grids: optional ``{"frozen": (...), "trained": (...)}`` overriding
        the SPEC grids for bracketing.
      prototypes_are_images: whether a prototype row can be shown as a
        28x28 image.
    """

    name: str
    bank: Callable
    inits: tuple[str, ...] = ("random",)
    fan_in: str = "m"
    lr_grids: dict | None = None
    prototypes_are_images: bool = True
    description: str = ""

    def grid(self, trained: bool) -> tuple[float, ...]:
        grids = {**DEFAULT_LR_GRIDS, **(self.lr_grids or {})}
        return tuple(float(r) for r in grids["trained" if trained else "frozen"])


@dataclass(frozen=True)
class Arm:
    """A unit with an initialisation and a training mode (SPEC section 4)."""

    name: str
    unit: Unit
    init: str
    trained: bool
    distribution: str
    version: str

    @property
    def plugin(self) -> str:
        return f"{self.distribution} {self.version}"


@dataclass
class Registry:
    """The loaded units and the plugins that failed to load."""

    units: dict[str, tuple[Unit, str, str]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    def arms(self) -> dict[str, Arm]:
        out: dict[str, Arm] = {}
        for name, (unit, dist, version) in sorted(self.units.items()):
            for init in unit.inits:
                stem = name if init == unit.inits[0] else f"{name}-{init}"
                for trained in (False, True):
                    arm_name = f"{stem}-{'trained' if trained else 'frozen'}"
                    out[arm_name] = Arm(arm_name, unit, init, trained, dist, version)
        return out

    def arm(self, name: str) -> Arm:
        arms = self.arms()
        if name not in arms:
            raise LazylabError(
                f"unknown arm {name!r}; available: {', '.join(arms) or 'none'}"
            )
        return arms[name]


def _check_contract(obj, ep_name: str) -> Unit:
    if not isinstance(obj, Unit):
        raise TypeError(f"entry point {ep_name!r} is not a lazylab.arms.Unit")
    if obj.name != ep_name:
        raise TypeError(f"unit name {obj.name!r} differs from entry point {ep_name!r}")
    if not obj.inits or any(i not in INITS for i in obj.inits):
        raise TypeError(f"inits must be a non-empty subset of {INITS}")
    if obj.fan_in not in ("m", "d"):
        raise TypeError("fan_in must be 'm' or 'd'")
    return obj


_REGISTRY: Registry | None = None


def registry() -> Registry:
    """Load every unit registered under ``lazylab.arms`` (cached).

    ``LAZYLAB_ARMS=name,...`` restricts loading to the named units. A plugin
    that fails to import or breaks the contract is recorded in
    ``Registry.errors`` and skipped, unless ``LAZYLAB_STRICT_PLUGINS=1``, in
    which case a ``LazylabError`` is raised.
    """
    global _REGISTRY
    if _REGISTRY is not None:
        return _REGISTRY
    wanted = {n.strip() for n in os.environ.get("LAZYLAB_ARMS", "").split(",") if n.strip()}
    strict = os.environ.get("LAZYLAB_STRICT_PLUGINS", "") not in ("", "0")
    reg = Registry()
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if wanted and ep.name not in wanted:
            continue
        dist = ep.dist.name if ep.dist else "unknown"
        version = ep.dist.version if ep.dist else "0"
        try:
            unit = _check_contract(ep.load(), ep.name)
        except Exception as exc:  # a broken plugin must not take the CLI down
            message = f"{type(exc).__name__}: {exc}".splitlines()[0]
            if strict:
                raise LazylabError(f"plugin {ep.name!r} ({dist}) failed: {message}") from None
            reg.errors[ep.name] = f"{dist} {version}: {message}"
            continue
        reg.units[ep.name] = (unit, dist, version)
    _REGISTRY = reg
    return reg


def get_arm(name: str) -> Arm:
    """Resolve an arm name such as ``yat-frozen``; unknown -> LazylabError."""
    return registry().arm(name)
