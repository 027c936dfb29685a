"""One look for every picture with arms: a colour per unit, a marker per init, a line style per bank mode.

Colours are the Okabe–Ito palette (Okabe & Ito 2008, "Color Universal
Design"), chosen to stay distinguishable under the common colour-vision
deficiencies. Each *unit* owns one colour in every figure and every run:

  ====================  ===============================
  unit                  colour
  ====================  ===============================
  ``yat``               blue ``#0072B2``
  ``relu``              orange ``#E69F00``
  ``gaussian``          bluish green ``#009E73``
  ``rff`` (the example  reddish purple ``#CC79A7``
  plugin)
  any other plugin      the ``colour`` its unit names
                        (``#RRGGBB``), else one of sky
                        blue, yellow-brown, black,
                        indigo, wine, picked by SHA-256
                        of the unit's name (stable
                        across runs and processes)
  ====================  ===============================

Red ``#E31A1C`` is kept for warnings (the unstable-run marker) and is never
a unit's colour (nor close to one: the Okabe–Ito orange and vermillion are
not used for warnings, so a mark never reads as a ReLU point); grey is kept
for reference lines and legend keys. The init is the marker (random ``o``,
data ``^``) and, for a unit's second init (Yat's data seeding), a darker
shade of its colour too. The line style says what a curve is, the same in every
figure (``LINE_STYLES``): a frozen bank read out by the protocol (AdamW) solid,
the same bank read out at the convex optimum dotted, a trained network dashed,
and a reference from outside the ladder (earlier work's rungs, a law's slope)
grey dash-dot. So ``yat-frozen``, ``yat-trained``, ``yat-data-frozen`` and
``yat-data-trained`` are four distinct blue lines, the last two darker.

An arm name is resolved through the unit registry when the unit is
installed (its ``init`` and mode are then exact); otherwise it is parsed as
``<unit>[-<init>]-<frozen|trained>`` (a plugin payload drawn without the
plugin, for instance).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache

from lazylab.arms import UNIT_COLOURS

# Okabe & Ito (2008): the eight colours of the palette.
OKABE_ITO = {
    "black": "#000000",
    "orange": "#E69F00",
    "sky blue": "#56B4E9",
    "bluish green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "reddish purple": "#CC79A7",
}
# For units without a fixed colour; the yellow is darkened (#F0E442 vanishes on white lines). No grey:
# grey draws the reference rungs and the legend keys. Indigo and wine from Tol's "muted" scheme.
SPARE_COLOURS = (OKABE_ITO["sky blue"], "#B8A100", OKABE_ITO["black"], "#332288", "#882255")
WARNING_COLOUR = "#E31A1C"
SECOND_INIT_DARKEN = 0.45  # a unit's second init is drawn in its colour mixed this much with black
RIGHT_COLOUR, WRONG_COLOUR = OKABE_ITO["bluish green"], OKABE_ITO["vermillion"]
INIT_MARKERS = {"random": "o", "data": "^"}
OTHER_INIT_MARKER = "D"
# The one line-style language of every figure (the report's captions and legends say it the same way).
LINE_STYLES = {"frozen": "-", "trained": "--", "convex": ":", "reference": "-."}
LINE_MEANINGS = {"frozen": "frozen bank, protocol readout (AdamW)", "trained": "trained network",
                 "convex": "frozen bank, readout at the optimum", "reference": "reference from outside the ladder"}
MODE_LINESTYLES = {"frozen": LINE_STYLES["frozen"], "trained": LINE_STYLES["trained"]}
UNSTABLE_MARKER = dict(marker="X", markersize=11, markerfacecolor="none", markeredgecolor=WARNING_COLOUR,
                       markeredgewidth=1.6, linestyle="none")
UNSTABLE_LABEL = "unstable protocol (AdamW) run: train loss > ln 10, or rising"
# Known units whose default init is not "random" (used only when the registry cannot say).
_DEFAULT_INIT = {"gaussian": "data"}


@dataclass(frozen=True)
class ArmStyle:
    """How an arm is drawn: ``unit``, ``init``, ``mode`` ("frozen"/"trained"), ``colour`` (hex),
    ``marker`` (matplotlib marker) and ``linestyle``."""

    unit: str
    init: str
    mode: str
    colour: str
    marker: str
    linestyle: str

    def kwargs(self) -> dict:
        """``color``, ``marker`` and ``linestyle`` for ``Axes.plot`` / ``errorbar``."""
        return {"color": self.colour, "marker": self.marker, "linestyle": self.linestyle}


def unit_colour(unit: str) -> str:
    """The unit's colour (hex): fixed for the built-in units and ``rff``; else the ``colour`` the
    installed unit names (``lazylab.arms.Unit.colour``); else a stable pick from ``SPARE_COLOURS``
    by the SHA-256 of the name (the same in every process)."""
    if unit in UNIT_COLOURS:
        return UNIT_COLOURS[unit]
    named = _registry_colour(unit)
    if named is not None:
        return named
    h = int(hashlib.sha256(unit.encode()).hexdigest(), 16)
    return SPARE_COLOURS[h % len(SPARE_COLOURS)]


@lru_cache(maxsize=256)
def _registry_colour(unit: str) -> str | None:
    try:
        from lazylab.arms import registry

        found = registry().unit(unit)
    except Exception:  # a broken plugin or strict-plugin mode: no named colour
        return None
    return found[0].colour if found is not None else None


def _darker(colour: str, amount: float = SECOND_INIT_DARKEN) -> str:
    """``colour`` mixed ``amount`` of the way to black, as hex."""
    from matplotlib.colors import to_hex, to_rgb

    return to_hex(tuple(c * (1 - amount) for c in to_rgb(colour)))


def default_init(unit: str) -> str:
    """The unit's first (default) init: the installed unit's, else ``_DEFAULT_INIT`` or ``"random"``."""
    try:
        from lazylab.arms import registry

        found = registry().unit(unit)
    except Exception:
        found = None
    return found[0].inits[0] if found is not None else _DEFAULT_INIT.get(unit, "random")


def parse_arm(name: str) -> tuple[str, str, str]:
    """``(unit, init, mode)`` of an arm name such as ``yat-data-trained``.

    The installed registry decides when it knows the arm; otherwise the name is
    parsed (``<unit>[-data|-random]-<frozen|trained>``; a name without a mode
    suffix counts as frozen).
    """
    known = _registry_arm(name)
    if known is not None:
        return known
    parts = name.split("-")
    mode = parts.pop() if len(parts) > 1 and parts[-1] in MODE_LINESTYLES else "frozen"
    if len(parts) > 1 and parts[-1] in INIT_MARKERS:
        init = parts.pop()
    else:
        init = _DEFAULT_INIT.get("-".join(parts), "random")
    return "-".join(parts), init, mode


@lru_cache(maxsize=256)
def _registry_arm(name: str) -> tuple[str, str, str] | None:
    try:
        from lazylab.arms import registry

        arm = registry().arm(name)  # imports that arm's unit only
    except Exception:  # not installed, a broken plugin, strict-plugin mode: fall back to the name
        return None
    return arm.unit.name, arm.init, "trained" if arm.trained else "frozen"


def arm_style(name: str, init: str | None = None, colour: str | None = None) -> ArmStyle:
    """The style of arm ``name``: its unit's colour (a darker shade for the unit's second init), its init's
    marker, its mode's line style; ``init`` overrides the init read from the name or registry, ``colour``
    the unit's colour (as a ladder file records it: the same whether its plugin is installed or not)."""
    unit, parsed_init, mode = parse_arm(name)
    init = init or parsed_init
    base = colour or unit_colour(unit)
    colour = base if init == default_init(unit) else _darker(base)
    return ArmStyle(unit, init, mode, colour, INIT_MARKERS.get(init, OTHER_INIT_MARKER), MODE_LINESTYLES[mode])


def key_handles(styles: list[ArmStyle]) -> list:
    """Legend proxies explaining the encodings present in ``styles``: one line per init marker
    and per bank mode (grey, so they do not read as a unit)."""
    from matplotlib.lines import Line2D

    handles = []
    for init in sorted({s.init for s in styles}, key=lambda i: (i != "random", i)):
        handles.append(Line2D([], [], color="0.35", linestyle="none", marker=INIT_MARKERS.get(init, OTHER_INIT_MARKER),
                              label=f"marker: {init} init"))
    for mode in sorted({s.mode for s in styles}):
        handles.append(Line2D([], [], color="0.35", linestyle=MODE_LINESTYLES[mode], label=f"line: {LINE_MEANINGS[mode]}"))
    return handles


def shades(colour: str, n: int) -> list[tuple]:
    """``n`` RGB shades of ``colour`` from light (first) to the full colour (last), for one unit's
    several widths (the readout race)."""
    from matplotlib.colors import to_rgb

    r, g, b = to_rgb(colour)
    if n <= 1:
        return [(r, g, b)]
    out = []
    for k in range(n):
        t = 0.5 + 0.5 * k / (n - 1)  # weight of the colour against white (at least half: text stays legible)
        out.append((1 - t + t * r, 1 - t + t * g, 1 - t + t * b))
    return out
