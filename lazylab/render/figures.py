"""Static figures of the width ladder (SPEC section 7, ``ladder``): PNG and SVG.

Both figures read only the ladder's JSON payload (``LadderResult.to_json()``
plus its ``"analysis"`` section), so they can be redrawn from the memo
(``lazylab ladder --report``) without training. matplotlib's object API with
the Agg canvas is used directly: no pyplot, no global backend switch.

  * ``accuracy_figure`` — mean ``best_acc`` (%) vs width m on a log-2 axis,
    seed std as error bars, trained arms dashed (a frozen/trained pair shares
    a colour), and the three reference rungs of SPEC section 6 as labelled
    dotted lines.
  * ``movement_figure`` — relative prototype movement ``w_move_rel`` vs m on
    log-log axes for the trained arms, each with its fitted movement law,
    and one pure square-root reference ``m^(+-1/2)``. Which sign: the lazy
    (NTK) picture — gradient descent in the NTK parametrisation — predicts
    relative movement *falling* like ``m^(-1/2)`` (Jacot et al. 2018;
    Chizat, Oyallon & Bach 2019). This protocol's default (Adam, and the
    flax fan-in-m init that fixes ``||W0||_F ~ sqrt(d)`` at every width)
    instead predicts it *growing* like ``m^(+1/2)``: Adam moves each of the
    ``m d`` coordinates by about the rate whatever its gradient's scale, so
    ``||W_end - W0||_F`` grows like ``sqrt(m d)``. By default
    (``sqrt_sign="auto"``) the reference takes the sign of the mean fitted
    slope, and its label says which it is.
  * ``wall_figure`` — with ``ladder --readout both``: per frozen arm, the
    protocol's ``best_acc`` and the convex optimum's test accuracy vs m, the
    gap between them shaded.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from lazylab.paths import write_atomically
from lazylab.render.canvas import figure

# SPEC section 6: external constants from earlier work in the same series (test accuracy, %).
REFERENCE_RUNGS = (
    (79.0, "Yat head on raw pixels"),
    (83.3, "hand-built oriented-edge bank"),
    (85.7, "trained CNN backbone's head"),
)
FORMATS = ("png", "svg")


def _save(fig, directory: Path, stem: str) -> list[Path]:
    """Write ``<stem>.png`` and ``<stem>.svg`` atomically (a temp file, then rename)."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in FORMATS:
        meta = {"Date": None} if fmt == "svg" else {"Software": None}
        paths.append(write_atomically(directory / f"{stem}.{fmt}",
                                      lambda tmp: fig.savefig(tmp, format=fmt, metadata=meta), "--figures"))
    return paths


def _colours(names: list[str]) -> dict[str, tuple]:
    """One colour per bank (``yat``, ``yat-data``, ...) so a frozen/trained pair shares it."""
    from matplotlib import colormaps

    banks = []
    for n in names:
        b = n.rsplit("-", 1)[0]
        if b not in banks:
            banks.append(b)
    cmap = colormaps["tab10"]
    return {n: cmap(banks.index(n.rsplit("-", 1)[0]) % 10) for n in names}


def _log2_axis(ax, widths):
    ax.set_xscale("log", base=2)
    ax.set_xticks(widths)
    ax.set_xticklabels([str(w) for w in widths])
    ax.minorticks_off()
    ax.set_xlabel("width m (units in the bank)")


def accuracy_figure(payload: dict, directory: str | Path, stem: str = "accuracy") -> list[Path]:
    """Accuracy vs width: ``<directory>/<stem>.png`` and ``.svg``.

    Args:
      payload: ``{"plan": {"widths", "seeds", "epochs", ...}, "arms": [{"arm",
        "cells": {str(width): {"mean", "std", "n"}}}]}`` (``LadderResult.to_json()``).
      directory: output folder (created).
    Returns: the two paths written.
    """
    widths = [int(w) for w in payload["plan"]["widths"]]
    names = [a["arm"] for a in payload["arms"]]
    colour = _colours(names)
    fig = figure((8.6, 4.8), 110, layout="constrained")
    ax = fig.add_subplot()
    lows, highs = [], []
    for a in payload["arms"]:
        pts = [(int(w), c["mean"], c.get("std") or 0.0) for w, c in a["cells"].items() if c.get("mean") is not None]
        if not pts:
            continue
        pts.sort()
        x, y, s = map(np.asarray, zip(*pts))
        trained = a["arm"].endswith("-trained")
        ax.errorbar(x, y, yerr=s, color=colour[a["arm"]], linestyle="--" if trained else "-",
                    marker="s" if trained else "o", markersize=4, capsize=3, linewidth=1.5, label=a["arm"])
        lows.append(float(np.min(y - s)))
        highs.append(float(np.max(y + s)))
    rung_values = [v for v, _ in REFERENCE_RUNGS]
    lo = min(lows + [min(rung_values)]) - 1.0
    hi = max(highs + [max(rung_values)]) + 1.0
    ax.set_ylim(lo, hi)
    _log2_axis(ax, widths)
    for value, label in REFERENCE_RUNGS:
        ax.axhline(value, color="0.35", linestyle=":", linewidth=1.1, zorder=0)
        ax.annotate(f"{value:.1f} {label}", xy=(1.0, value), xycoords=("axes fraction", "data"),
                    xytext=(4, 0), textcoords="offset points", fontsize=7.5, color="0.3", va="center",
                    annotation_clip=False)
    plan = payload["plan"]
    seeds = ",".join(str(s) for s in plan.get("seeds", []))
    ax.set_ylabel("test accuracy (%), best epoch")
    ax.set_title(f"Fashion-MNIST width ladder: mean ± std over seeds {seeds}, {plan.get('epochs')} epochs",
                 fontsize=10)
    ax.grid(True, which="major", alpha=0.25)
    ax.legend(fontsize=8, ncols=2, loc="lower right", title="solid: frozen bank, dashed: trained",
              title_fontsize=7.5)
    return _save(fig, Path(directory), stem)


def movement_figure(payload: dict, directory: str | Path, stem: str = "movement", sqrt_sign: str = "auto") -> list[Path]:
    """Relative prototype movement vs width, log-log: ``<directory>/<stem>.png`` and ``.svg``.

    Args:
      payload: as for ``accuracy_figure``, with ``payload["analysis"]["movement"]``
        (``{arm: {str(width): {"mean", "std", "n"}}}``) and ``["movement_law"]``
        (``{arm: {"slope", "intercept", "r2"}}``) from ``analyse_ladder``.
      directory: output folder (created).
      sqrt_sign: ``"auto"`` (the sign of the mean fitted slope; ``-`` when
        there is no fit), ``"+"`` or ``"-"``: the square-root reference's direction.
    Returns: the two paths written. With no trained arm the figure says so.
    """
    analysis = payload.get("analysis") or {}
    movement = analysis.get("movement") or {}
    laws = analysis.get("movement_law") or {}
    widths = [int(w) for w in payload["plan"]["widths"]]
    colour = _colours(list(movement) or ["-"])
    fig = figure((8.6, 4.8), 110, layout="constrained")
    ax = fig.add_subplot()
    logs = []
    for arm, per in movement.items():
        pts = sorted((int(w), s["mean"], s.get("std") or 0.0) for w, s in per.items() if s.get("mean"))
        pts = [p for p in pts if p[1] > 0]
        if not pts:
            continue
        x, y, s = map(np.asarray, zip(*pts))
        lower = np.minimum(s, y * 0.999)  # keep the lower bar above 0 on a log axis
        ax.errorbar(x, y, yerr=[lower, s], color=colour[arm], linestyle="none", marker="o", markersize=4,
                    capsize=3, label=arm)
        logs += [(math.log(w), math.log(v)) for w, v in zip(x, y)]
        law = laws.get(arm) or {}
        if "slope" in law:
            xx = np.geomspace(x.min(), x.max(), 50)
            ax.plot(xx, np.exp(law["intercept"]) * xx ** law["slope"], color=colour[arm], linewidth=1.3,
                    label=f"{arm} fit: slope {law['slope']:.3f}, R² {law['r2']:.3f}")
    if logs:
        slopes = [law["slope"] for law in laws.values() if "slope" in law]
        if sqrt_sign == "auto":
            sign = 1.0 if slopes and float(np.mean(slopes)) > 0 else -1.0
        else:
            sign = 1.0 if sqrt_sign == "+" else -1.0
        lx, ly = np.asarray(logs).T
        anchor = float(np.mean(ly - sign * 0.5 * lx))  # through the points' centre of mass in log-log space
        xx = np.geomspace(min(widths), max(widths), 50)
        what = "Adam on a fan-in-m init" if sign > 0 else "lazy/NTK gradient descent"
        ax.plot(xx, np.exp(anchor) * xx ** (sign * 0.5), color="black", linestyle=":", linewidth=1.3,
                label=f"m^({'+' if sign > 0 else '-'}1/2): square-root reference ({what})")
        ax.set_yscale("log")
        from matplotlib.ticker import FuncFormatter, LogLocator

        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_minor_locator(LogLocator(base=10, subs=tuple(range(1, 10))))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
        ax.legend(fontsize=8, loc="best")
    else:
        ax.text(0.5, 0.5, "no trained arm in this ladder: frozen banks do not move", ha="center", va="center",
                transform=ax.transAxes)
    _log2_axis(ax, widths)
    ax.set_ylabel("relative prototype movement ||W_end - W0||_F / ||W0||_F")
    ax.set_title("How far trained prototypes travel, mean ± std over seeds", fontsize=10)
    ax.grid(True, which="both", alpha=0.25)
    return _save(fig, Path(directory), stem)


def wall_figure(payload: dict, directory: str | Path, stem: str = "wall") -> list[Path]:
    """Each frozen arm's protocol readout and its convex optimum vs width, the gap shaded.

    Args:
      payload: a ladder payload whose ``["analysis"]["wall"]["arms"]`` is
        ``{arm: {str(width): {"best_acc", "convex_acc", ...}}}`` (``experiments.convex.wall``).
      directory: output folder (created).
    Returns: the two paths written (``<stem>.png``, ``.svg``); none when no arm has a row.
    """
    arms = {a: rows for a, rows in payload["analysis"]["wall"]["arms"].items() if rows}
    if not arms:
        return []
    widths = [int(w) for w in payload["plan"]["widths"]]
    cols = min(len(arms), 2)
    rows_n = math.ceil(len(arms) / cols)
    fig = figure((4.6 * cols + 0.6, 3.4 * rows_n + 0.4), 110, layout="constrained")
    axes = fig.subplots(rows_n, cols, squeeze=False).ravel()
    colour = _colours(list(arms))
    for ax, (arm, rows) in zip(axes, arms.items()):
        x = np.asarray(sorted(int(w) for w in rows))
        proto = np.asarray([rows[str(w)]["best_acc"] for w in x])
        conv = np.asarray([rows[str(w)]["convex_acc"] for w in x])
        ax.fill_between(x, proto, conv, color=colour[arm], alpha=0.18, linewidth=0, label="gap")
        ax.plot(x, proto, color=colour[arm], marker="o", markersize=4, linewidth=1.5,
                label="protocol: AdamW, best epoch")
        ax.plot(x, conv, color=colour[arm], marker="D", markersize=4, linewidth=1.5, linestyle="--",
                label="convex optimum (L-BFGS)")
        _log2_axis(ax, widths)
        ax.set_ylabel("test accuracy (%)")
        ax.set_title(arm, fontsize=10)
        ax.grid(True, alpha=0.25)
        ax.legend(fontsize=7.5, loc="lower right")
    for ax in axes[len(arms):]:
        ax.set_visible(False)
    seeds = ",".join(str(s) for s in payload["plan"].get("seeds", []))
    fig.suptitle(f"The wall: frozen readouts against their convex optimum, mean over seeds {seeds}", fontsize=10)
    return _save(fig, Path(directory), stem)


def ladder_figures(payload: dict, directory: str | Path) -> list[Path]:
    """The ladder figures into ``directory``: accuracy and movement, and the wall when the payload has one."""
    paths = accuracy_figure(payload, directory) + movement_figure(payload, directory)
    if (payload.get("analysis") or {}).get("wall"):
        paths += wall_figure(payload, directory)
    return paths
