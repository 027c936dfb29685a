"""Static figures of the width ladder (SPEC section 7, ``ladder``): PNG and SVG.

Both figures read only the ladder's JSON payload (``LadderResult.to_json()``
plus its ``"analysis"`` section), so they can be redrawn from the memo
(``lazylab ladder --report``) without training. matplotlib's object API with
the Agg canvas is used directly: no pyplot, no global backend switch.

  * ``accuracy_figure`` — mean ``best_acc`` (%) vs width m on a log-2 axis,
    seed std as error bars, each arm in its unit's colour, its init's marker
    and its bank mode's line style (``lazylab.render.style``: the same look
    in every figure and run), cells with unstable runs marked by an open
    red ✕ (``style.WARNING_COLOUR``), and the three reference rungs of SPEC section 6 as grey
    dash-dot lines labelled as outside values. Legends sit below the axes, never on
    the data. Every figure speaks one line-style language (``style.LINE_STYLES``).
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
  * ``answer_figure`` — with ``ladder --readout both``: every frozen arm's
    convex-optimum curve (dotted), the first trained arm's accuracy as a
    dashed line, and each crossing (the answer) with its seed interval; also
    drawn narrow (``NARROW``: legend in one column below, for a phone's width).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from lazylab.analysis import movement_law_or_why
from lazylab.exchange import unit_name
from lazylab.paths import write_atomically
from lazylab.render.canvas import figure
from lazylab.render.style import LINE_STYLES, UNSTABLE_LABEL, UNSTABLE_MARKER, arm_style, key_handles

# SPEC section 6: external constants from earlier work in the same series (test accuracy, %).
REFERENCE_RUNGS = (
    (79.0, "Yat head on raw pixels"),
    (83.3, "hand-built oriented-edge bank"),
    (85.7, "trained CNN backbone's head"),
)
FORMATS = ("png", "svg")
# Legend and label sizes (points at 110 dpi: 9.5 pt is 14.5 px in the PNG). The report scales a figure to its
# column; on a narrow screen the answer figure is its narrow drawing (NARROW: 4.4 in, 484 px, shown at about
# 370 px on a 400 px screen), whose 9.5 pt legend stays 11 px tall.
LEGEND_PT = 9.5
LABEL_PT = 8.5
NARROW = (4.4, 6.9)  # inches: the answer figure for screens up to 600 px wide


def _save(fig, directory: Path, stem: str) -> list[Path]:
    """Write ``<stem>.png`` and ``<stem>.svg`` atomically (a temp file, then rename)."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in FORMATS:
        meta = {"Date": None} if fmt == "svg" else {"Software": None}
        paths.append(write_atomically(directory / f"{stem}.{fmt}",
                                      lambda tmp: fig.savefig(tmp, format=fmt, metadata=meta), "--out"))
    return paths


def _log2_axis(ax, widths):
    ax.set_xscale("log", base=2)
    ax.set_xticks(widths)
    ax.set_xticklabels([str(w) for w in widths])
    ax.minorticks_off()
    ax.set_xlabel("width m (units in the bank, log₂ axis)")


def _discard(directory: Path, stem: str) -> list[Path]:
    """Nothing to draw: remove an older ``<stem>.png``/``.svg`` (it would show another selection); returns []."""
    for fmt in FORMATS:
        (Path(directory) / f"{stem}.{fmt}").unlink(missing_ok=True)
    return []


def unstable_cells(payload: dict) -> dict[str, dict[int, int]]:
    """``{arm: {width: number of unstable seeds}}`` for the cells with at least one unstable run.

    Read from ``arms[i]["cells"][str(w)]["unstable"]`` (an int, ``analysis.py``); where no cell of
    the payload carries the field, from the run records' ``"unstable"`` (null or a reason) at the
    arm's chosen rate. A payload with neither (an older JSON) has no unstable cell.
    """
    out: dict[str, dict[int, int]] = {}
    have_cells = False
    for a in payload.get("arms") or []:
        for w, c in (a.get("cells") or {}).items():
            if "unstable" in c:
                have_cells = True
                if (c.get("unstable") or 0) > 0:
                    out.setdefault(a["arm"], {})[int(w)] = int(c["unstable"])
    if have_cells:
        return out
    lr = {a["arm"]: a.get("lr") for a in payload.get("arms") or []}
    for r in payload.get("runs") or []:
        cfg = r.get("config") or {}
        if r.get("unstable") and cfg.get("arm") in lr and (lr[cfg["arm"]] is None or cfg.get("lr") == lr[cfg["arm"]]):
            cell = out.setdefault(cfg["arm"], {})
            cell[int(cfg["width"])] = cell.get(int(cfg["width"]), 0) + 1
    return out


def accuracy_plot(payload: dict):
    """The accuracy-vs-width ``Figure`` (not saved), or None when no arm has a cell with a mean.

    Each arm is drawn in its unit's colour with its init's marker and its bank mode's
    line style (``lazylab.render.style``); cells with unstable runs (``unstable_cells``)
    get a red open ✕ and the legend entry ``style.UNSTABLE_LABEL``; the reference
    rungs (SPEC section 6) are dotted and labelled as outside values.
    """
    widths = [int(w) for w in payload["plan"]["widths"]]
    unstable = unstable_cells(payload)
    series = []
    for a in payload.get("arms") or []:
        pts = sorted((int(w), c["mean"], c.get("std") or 0.0) for w, c in (a.get("cells") or {}).items()
                     if c.get("mean") is not None)
        if pts:
            series.append((a["arm"], pts))
    if not series:
        return None
    fig = figure((9.2, 5.8), 110, layout="constrained")
    ax = fig.add_subplot()
    lows, highs, styles, flagged = [], [], [], []
    for arm, pts in series:
        x, y, s = map(np.asarray, zip(*pts))
        st = _style(payload, arm)
        styles.append(st)
        cells = next(a for a in payload["arms"] if a["arm"] == arm)["cells"]
        every = all(unstable.get(arm, {}).get(int(w), 0) >= (cells[str(int(w))].get("n") or 1) for w in x)
        # an arm unstable in every run is not a measurement of its unit: its legend entry says so
        ax.errorbar(x, y, yerr=s, markersize=5, capsize=3, linewidth=1.5,
                    label=f"{arm} (every run unstable)" if every else arm, **st.kwargs())
        for w, m in zip(x, y):
            k = unstable.get(arm, {}).get(int(w))
            if k:
                flagged.append((int(w), float(m), f"{k}/{cells[str(int(w))].get('n', '?')}"))
        lows.append(float(np.min(y - s)))
        highs.append(float(np.max(y + s)))
    marker = []
    if flagged:
        fx, fy, counts = zip(*flagged)
        marker = ax.plot(fx, fy, zorder=5, gid="unstable", label=UNSTABLE_LABEL, **UNSTABLE_MARKER)
        for w, m, text in flagged:  # how many seeds of the cell are unstable
            ax.annotate(text, (w, m), xytext=(7, 5), textcoords="offset points", fontsize=LABEL_PT,
                        color=UNSTABLE_MARKER["markeredgecolor"])
    rung_values = [v for v, _ in REFERENCE_RUNGS]
    lo = min(lows + [min(rung_values)]) - 1.0
    hi = max(highs + [max(rung_values)]) + 1.0
    ax.set_ylim(lo, hi)
    _log2_axis(ax, widths)
    for value, label in REFERENCE_RUNGS:
        ax.axhline(value, color="0.45", linestyle=LINE_STYLES["reference"], linewidth=1.1, zorder=0)
        ax.annotate(f"outside: {value:.1f} % {label}", xy=(1.0, value), xycoords=("axes fraction", "data"),
                    xytext=(4, 0), textcoords="offset points", fontsize=LABEL_PT, color="0.3", va="center",
                    annotation_clip=False)
    from matplotlib.lines import Line2D

    rung = Line2D([], [], color="0.45", linestyle=LINE_STYLES["reference"],
                  label="reference rungs (earlier work, not run here)")
    plan = payload["plan"]
    ax.set_ylabel("test accuracy (%), best epoch")
    epochs = plan.get("epochs")
    ax.set_title(f"Fashion-MNIST width ladder: {over_seeds(plan.get('seeds', []))}; {epochs} epoch{'s' * (epochs != 1)}",
                 fontsize=10)
    ax.grid(True, which="major", alpha=0.25)
    handles = [h for h, lab in zip(*ax.get_legend_handles_labels()) if lab != UNSTABLE_LABEL]
    handles += key_handles(styles) + marker + [rung]
    fig.legend(handles=handles, fontsize=LEGEND_PT, ncols=3, loc="outside lower center", frameon=False, handlelength=3.5)
    return fig


def accuracy_figure(payload: dict, directory: str | Path, stem: str = "accuracy") -> list[Path]:
    """Accuracy vs width: ``<directory>/<stem>.png`` and ``.svg`` (``accuracy_plot``).

    Args:
      payload: ``{"plan": {"widths", "seeds", "epochs", ...}, "arms": [{"arm", "lr",
        "cells": {str(width): {"mean", "std", "n", "unstable"?}}}], "runs"?: [...]}``
        (``LadderResult.to_json()``).
      directory: output folder (created).
    Returns: the two paths written; [] (and no file, an older one removed) when no arm has a cell.
    """
    fig = accuracy_plot(payload)
    if fig is None:
        return _discard(Path(directory), stem)
    return _save(fig, Path(directory), stem)


def movement_figure(payload: dict, directory: str | Path, stem: str = "movement", sqrt_sign: str = "auto") -> list[Path]:
    """Relative prototype movement vs width, log-log: ``<directory>/<stem>.png`` and ``.svg`` (``movement_plot``).

    Args:
      payload: as for ``accuracy_figure``, with ``payload["analysis"]["movement"]``
        (``{arm: {str(width): {"mean", "std", "n"}}}``) and ``["movement_law"]``
        (``{arm: {"slope", "intercept", "r2"}}``, or ``{"skipped": why}`` from fewer than 3 widths,
        which the legend states; ``analysis.movement_law_or_why`` reads older files) from ``analyse_ladder``.
      directory: output folder (created).
      sqrt_sign: ``"auto"`` (the sign of the mean fitted slope; ``-`` when
        there is no fit), ``"+"`` or ``"-"``: the square-root reference's direction.
    Returns: the two paths written; [] (no file, an older one removed) when no trained arm
    has a positive movement (frozen banks do not move).
    """
    fig = movement_plot(payload, sqrt_sign)
    if fig is None:
        return _discard(Path(directory), stem)
    return _save(fig, Path(directory), stem)


def movement_plot(payload: dict, sqrt_sign: str = "auto"):
    """The movement-vs-width ``Figure`` (not saved; see ``movement_figure``), or None without a trained arm's movement."""
    analysis = payload.get("analysis") or {}
    movement = analysis.get("movement") or {}
    laws = analysis.get("movement_law") or {}
    widths = [int(w) for w in payload["plan"]["widths"]]
    series = []
    for arm, per in movement.items():
        pts = sorted((int(w), s["mean"], s.get("std") or 0.0) for w, s in per.items() if s.get("mean"))
        pts = [p for p in pts if p[1] > 0]
        if pts:
            series.append((arm, pts))
    if not series:
        return None
    fig = figure((8.6, 5.4), 110, layout="constrained")
    ax = fig.add_subplot()
    logs = []
    for arm, pts in series:
        st = _style(payload, arm)
        x, y, s = map(np.asarray, zip(*pts))
        lower = np.minimum(s, y * 0.999)  # keep the lower bar above 0 on a log axis
        law = movement_law_or_why(laws.get(arm))
        ax.errorbar(x, y, yerr=[lower, s], color=st.colour, linestyle="none", marker=st.marker, markersize=5,
                    capsize=3, label=arm if "slope" in law or arm not in laws else f"{arm} (no law: {law['skipped']})")
        logs += [(math.log(w), math.log(v)) for w, v in zip(x, y)]
        if "slope" in law:
            xx = np.geomspace(x.min(), x.max(), 50)
            ax.plot(xx, np.exp(law["intercept"]) * xx ** law["slope"], color=st.colour, linewidth=1.3,
                    linestyle=st.linestyle, label=f"{arm} fit: slope {law['slope']:.3f}, R² {law['r2']:.3f}")
    slopes = [law["slope"] for law in map(movement_law_or_why, laws.values()) if "slope" in law]
    if sqrt_sign == "auto":
        sign = 1.0 if slopes and float(np.mean(slopes)) > 0 else -1.0
    else:
        sign = 1.0 if sqrt_sign == "+" else -1.0
    lx, ly = np.asarray(logs).T
    anchor = float(np.mean(ly - sign * 0.5 * lx))  # through the points' centre of mass in log-log space
    xx = np.geomspace(min(widths), max(widths), 50)
    what = "Adam on a fan-in-m init" if sign > 0 else "lazy/NTK gradient descent"
    ax.plot(xx, np.exp(anchor) * xx ** (sign * 0.5), color="0.2", linestyle=LINE_STYLES["reference"], linewidth=1.3,
            label=f"m^({'+' if sign > 0 else '-'}1/2): square-root reference ({what})")
    ax.set_yscale("log")
    from matplotlib.ticker import FuncFormatter, LogLocator

    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_minor_locator(LogLocator(base=10, subs=tuple(range(1, 10))))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
    fig.legend(*ax.get_legend_handles_labels(), fontsize=LEGEND_PT, ncols=2, loc="outside lower center", frameon=False,
               handlelength=3.5)
    _log2_axis(ax, widths)
    ax.set_ylabel("relative movement ||W_end − W0||_F / ||W0||_F\n(dimensionless, log axis)")
    ax.set_title("How far trained prototypes travel, mean ± std over seeds", fontsize=10)
    ax.grid(True, which="both", alpha=0.25)
    return fig


def wall_figure(payload: dict, directory: str | Path, stem: str = "wall") -> list[Path]:
    """Each frozen arm's protocol readout and its convex optimum vs width, the gap shaded.

    Each panel is drawn in its arm's unit colour (``lazylab.render.style``); the protocol
    is solid with the init's marker, the convex optimum dotted with diamonds.

    Args:
      payload: a ladder payload whose ``["analysis"]["wall"]["arms"]`` is
        ``{arm: {str(width): {"best_acc", "convex_acc", ...}}}`` (``experiments.convex_wall.wall``).
      directory: output folder (created).
    Returns: the two paths written (``<stem>.png``, ``.svg``); [] (no file, an older one
    removed) when no arm has a row.
    """
    fig = wall_plot(payload)
    if fig is None:
        return _discard(Path(directory), stem)
    return _save(fig, Path(directory), stem)


def wall_plot(payload: dict):
    """The wall's ``Figure`` (not saved; see ``wall_figure``), or None when no arm has a row."""
    wall = (payload.get("analysis") or {}).get("wall") or {}
    arms = {a: rows for a, rows in (wall.get("arms") or {}).items() if rows}
    if not arms:
        return None
    widths = [int(w) for w in payload["plan"]["widths"]]
    cols = min(len(arms), 2)
    rows_n = math.ceil(len(arms) / cols)
    fig = figure((4.6 * cols + 0.6, 3.4 * rows_n + 0.9), 110, layout="constrained")
    axes = fig.subplots(rows_n, cols, squeeze=False).ravel()
    for ax, (arm, rows) in zip(axes, arms.items()):
        st = _style(payload, arm)
        x = np.asarray(sorted(int(w) for w in rows))
        proto = np.asarray([rows[str(w)]["best_acc"] for w in x])
        conv = np.asarray([rows[str(w)]["convex_acc"] for w in x])
        ax.fill_between(x, proto, conv, color=st.colour, alpha=0.18, linewidth=0)
        ax.plot(x, proto, color=st.colour, marker=st.marker, markersize=4, linewidth=1.5, linestyle=LINE_STYLES["frozen"])
        ax.plot(x, conv, color=st.colour, marker="D", markersize=4, linewidth=1.5, linestyle=LINE_STYLES["convex"])
        _log2_axis(ax, widths)
        ax.set_ylabel("test accuracy (%)")
        ax.set_title(arm, fontsize=10, color=st.colour)
        ax.grid(True, alpha=0.25)
    for ax in axes[len(arms):]:
        ax.set_visible(False)
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    key = [Line2D([], [], color="0.3", marker="o", linestyle=LINE_STYLES["frozen"], label="protocol: AdamW, best epoch"),
           Line2D([], [], color="0.3", marker="D", linestyle=LINE_STYLES["convex"], label="convex optimum (L-BFGS)"),
           Patch(color="0.3", alpha=0.18, label="gap between them")]
    fig.legend(handles=key, fontsize=LEGEND_PT, ncols=3, loc="outside lower center", frameon=False)
    seeds = payload["plan"].get("seeds", [])
    over = f"mean over seeds {','.join(map(str, seeds))}" if len(seeds) > 1 else f"seed {seeds[0]}" if seeds else ""
    fig.suptitle(f"The wall: frozen readouts against their convex optimum, {over}", fontsize=10)
    return fig


def answer_figure(payload: dict, directory: str | Path, stem: str = "answer") -> list[Path]:
    """The answer at the optimum (``answer_plot``): ``<stem>.png`` and ``.svg``, and ``<stem>_narrow.png`` (the
    narrow drawing); [] (no file, older ones removed) when the payload has no convex readouts or no answer row."""
    return _wide_and_narrow(answer_plot, payload, Path(directory), stem)


def _wide_and_narrow(plot, payload: dict, directory: Path, stem: str) -> list[Path]:
    """``plot(payload)`` as ``<stem>.png`` and ``.svg`` and ``plot(payload, narrow=True)`` as ``<stem>_narrow.png``;
    [] (no file, older ones removed) when ``plot`` has nothing to draw (None)."""
    fig = plot(payload)
    if fig is None:
        (directory / f"{stem}_narrow.png").unlink(missing_ok=True)
        return _discard(directory, stem)
    narrow = plot(payload, narrow=True)
    path = write_atomically(directory / f"{stem}_narrow.png",
                            lambda tmp: narrow.savefig(tmp, format="png", metadata={"Software": None}), "--out")
    return _save(fig, directory, stem) + [path]


def answer_plot(payload: dict, narrow: bool = False):
    """Each frozen arm's convex-optimum test accuracy vs width (mean ± seed std; dotted, the optimum's line
    style), the first trained arm's accuracy at its smallest width as a dashed horizontal line (a trained
    network's), and where each frozen curve crosses it (the answer, ``lazylab.exchange.crossing``) with its
    95 % seed interval as a bar on the line. ``narrow``: drawn ``NARROW`` (legend in one column below,
    every other width labelled), for a phone's width.

    Reads ``payload["convex"]["arms"][arm]["cells"]`` and ``payload["analysis"]["answer"]["rows"][0]``.
    Returns the ``Figure`` (not saved), or None when either is missing.
    """
    from lazylab.exchange import crossing, crossing_interval, round2, seed_interval

    convex = payload.get("convex") or {}
    analysis = payload.get("analysis") or {}
    fair = fair_rows(analysis)
    rows = fair or (analysis.get("answer") or {}).get("rows") or []
    if not convex.get("arms") or not rows:
        return None
    first = rows[0]
    target = first["trained_acc"]
    widths = [int(w) for w in (convex.get("partial") or {}).get("widths") or payload["plan"]["widths"]]
    per_seed: dict = {}
    for r in convex.get("runs") or []:
        per_seed.setdefault(r["config"]["arm"], {}).setdefault(r["config"]["width"], []).append(r["test_acc"])
    if fair:  # the trained side at its held-out optimum, its interval by Welch's t (exchange.crossing_interval)
        trained, interval = first["per_seed"], crossing_interval
        side = "(held-out optimum)"
    else:  # the protocol's trained side, its interval by the seed bootstrap
        trained = [r["best_acc"] for r in payload.get("runs") or []
                   if r.get("config", {}).get("arm") == first["trained"] and r["config"].get("width") == first["width"]
                   and r.get("best_acc") is not None and r["config"].get("lr") == _arm_lr(payload, first["trained"])]
        interval = seed_interval
        side = f"({payload['plan'].get('epochs')} epochs of AdamW)"
    fig = figure(NARROW if narrow else (8.6, 5.4), 110, layout="constrained")
    ax = fig.add_subplot()
    handles = []
    placed: list[tuple[float, str]] = []  # (crossing width, colour) of each frozen arm that crosses
    for arm, a in convex["arms"].items():
        pts = sorted((int(w), c["mean"], c.get("std") or 0.0) for w, c in a["cells"].items() if c.get("mean") is not None)
        if not pts:
            continue
        st = _style(payload, arm)
        x, y, s = map(np.asarray, zip(*pts))
        # dotted: read out at the optimum (style.LINE_STYLES); a data-seeded arm: its init's marker, a darker shade
        handles.append(ax.errorbar(x, y, yerr=s, color=st.colour, marker=st.marker, markersize=5, capsize=3,
                                   linewidth=1.6, linestyle=LINE_STYLES["convex"], label=f"{arm}, at the optimum"))
        point = crossing(x, y, target)
        if 0.0 < point < math.inf:
            ax.plot([point], [target], marker="o", markersize=9, markerfacecolor="white", markeredgecolor=st.colour,
                    markeredgewidth=2, zorder=6)
            if trained:
                low, high = interval(list(x), per_seed.get(arm, {}), trained)
                low, high = max(low, widths[0]), min(high, widths[-1]) if math.isinf(high) else high
                ax.plot([low, high], [target, target], color=st.colour, linewidth=5, alpha=0.35,
                        solid_capstyle="butt", zorder=5)
            placed.append((point, st.colour))
    # Each crossing's width, in order along the line: above and below in turn, and stacked away from a label on the
    # same side closer than `near` (in log2 width; a narrow axis packs widths closer).
    near, sides = (1.4 if narrow else 0.6), {True: [], False: []}
    for i, (point, colour) in enumerate(sorted(placed)):
        up = i % 2 == 0
        stack = sum(1 for q in sides[up] if abs(math.log2(point / q)) < near)
        sides[up].append(point)
        ax.annotate(round2(point), (point, target), xytext=(0, 9 + 12 * stack if up else -11 - 12 * stack),
                    textcoords="offset points", ha="center", va="bottom" if up else "top", fontsize=9, color=colour,
                    fontweight="bold")
    unit = unit_name(first["trained"])
    ax.axhline(target, color="0.15", linestyle=LINE_STYLES["trained"], linewidth=1.4, zorder=4)
    from matplotlib.lines import Line2D

    handles.append(Line2D([], [], color="0.15", linestyle=LINE_STYLES["trained"],
                          label=f"{first['width']} trained {unit} units: {target:.2f} % {side}"))
    handles.append(Line2D([], [], color="0.4", marker="o", markerfacecolor="white", linestyle="none", markersize=8,
                          label="crossing: the frozen width that matches them"))
    handles.append(Line2D([], [], color="0.4", linewidth=5, alpha=0.35, label="its 95 % interval over seeds"))
    _log2_axis(ax, widths)
    ax.set_ylabel("test accuracy (%), convex readout")
    if narrow:  # every other width labelled, so that the labels do not run together
        ax.set_xticklabels([str(w) if i % 2 == 0 else "" for i, w in enumerate(widths)])
        ax.set_xlabel("width m (units, log₂ axis)")
        ax.set_title(f"Frozen units that match {first['width']} trained {unit} units,\nread out at the optimum "
                     f"({over_seeds(payload['plan'].get('seeds', [])).split(' (')[0]})", fontsize=LEGEND_PT)
    else:
        ax.set_title(f"How many frozen units buy {first['width']} trained ones? Frozen banks read out at the optimum, "
                     f"{over_seeds(payload['plan'].get('seeds', []))}", fontsize=10)
    ax.grid(True, which="major", alpha=0.25)
    fig.legend(handles=handles, fontsize=LEGEND_PT, ncols=1 if narrow else 2, loc="outside lower center", frameon=False)
    return fig


def exchange_curve_figure(payload: dict, directory: str | Path, stem: str = "exchange") -> list[Path]:
    """The exchange curve (``exchange_curve_plot``): ``<stem>.png``, ``.svg`` and ``<stem>_narrow.png``; [] (no
    file, older ones removed) when the payload has no fair answer."""
    return _wide_and_narrow(exchange_curve_plot, payload, Path(directory), stem)


def exchange_curve_plot(payload: dict, narrow: bool = False):
    """Frozen units per trained unit against the trained width, both sides at their held-out optimum.

    One line per frozen arm for the first trained arm of ``payload["analysis"]["fair"]["answers"]["fair"]``
    (``experiments.optimum.fair_answer``): a filled marker where the frozen curve crosses the trained accuracy
    inside the sweep, with its 95 % interval as a bar (an open end drawn as an arrow), labelled as the tables word
    it (``exchange.per_unit_words``) and drawn open where only the interval is worth reading; an open triangle
    pointing up at ``widest bank / trained width`` where no bank of the sweep matches (a lower bound).
    Lines in the style of a frozen bank read out at the optimum (``LINE_STYLES["convex"]``). ``narrow``: drawn
    ``NARROW``, the legend in one column below. Returns the ``Figure`` (not saved), or None without a fair answer.
    """
    from lazylab.exchange import per_unit_words, round_ratio

    fair = fair_rows(payload.get("analysis") or {})
    if not fair:
        return None
    sweep = payload["analysis"]["fair"]["sweep"]
    top, bottom = max(sweep), min(sweep)
    trained = fair[0]["trained"]
    rows = [r for r in fair if r["trained"] == trained]
    fig = figure(NARROW if narrow else (8.6, 5.4), 110, layout="constrained")
    ax = fig.add_subplot()
    frozen = list(rows[0]["matches"])
    marks = set()  # the bound markers drawn, for the legend
    for k, arm in enumerate(frozen):
        st = _style(payload, arm)
        nudge = 2 ** (0.06 * (k - (len(frozen) - 1) / 2))  # side by side, so that bars and arrows do not hide
        xs, ys = [], []
        for r in rows:
            hit = r["matches"].get(arm)
            if hit is None:
                continue
            w, x = r["width"], r["width"] * nudge
            point, (low, high) = hit["width"], hit["interval"]
            if isinstance(point, float):
                xs.append(x), ys.append(point / w)
                lo = bottom / w if low == "below" else low / w
                hi = top / w if high == "beyond" else high / w
                ax.plot([x, x], [lo, hi], color=st.colour, linewidth=4, alpha=0.35, solid_capstyle="butt")
                if high == "beyond":
                    ax.annotate("", (x, hi * 1.8), (x, hi), arrowprops=dict(arrowstyle="->", color=st.colour, lw=1.2))
                words = per_unit_words(hit)  # None: the interval spans the whole sweep
                if words != round_ratio(point / w):  # only the interval is worth reading: an open marker, the range
                    marks.add("range")
                    ax.plot([x], [point / w], marker=st.marker, markersize=7, markerfacecolor="white",
                            markeredgecolor=st.colour, markeredgewidth=1.4, linestyle="none", zorder=3)
                if words:
                    ax.annotate(words, (x, point / w), xytext=(6, 0), textcoords="offset points",
                                va="center", fontsize=8, color=st.colour, fontweight="bold")
            else:  # beyond the sweep: a lower bound; below it: an upper bound
                marks.add(point)
                ax.plot([x], [(top if point == "beyond" else bottom) / w], marker="^" if point == "beyond" else "v",
                        markersize=8, markerfacecolor="white", markeredgecolor=st.colour, markeredgewidth=1.6,
                        linestyle="none")
        ax.plot(xs, ys, color=st.colour, marker=st.marker, markersize=6, linestyle=LINE_STYLES["convex"], linewidth=1.6,
                label=f"{arm}" if xs else f"{arm}: none in the sweep")
    from matplotlib.lines import Line2D

    handles = ax.get_legend_handles_labels()[0] + [
        Line2D([], [], color="0.4", linewidth=4, alpha=0.35, label="95 % interval over seeds (arrow: open end)")]
    if "range" in marks:
        handles.append(Line2D([], [], color="0.4", marker="o", markerfacecolor="white", linestyle="none", markersize=7,
                              label="open marker: only the interval is worth reading"))
    if "beyond" in marks:
        handles.append(Line2D([], [], color="0.4", marker="^", markerfacecolor="white", linestyle="none", markersize=8,
                              label=f"no frozen bank up to {top:,} matches: more than this"))
    if "below" in marks:
        handles.append(Line2D([], [], color="0.4", marker="v", markerfacecolor="white", linestyle="none", markersize=8,
                              label=f"even {bottom} frozen units match: at most this"))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    low, high = ax.get_ylim()
    ax.set_ylim(low / 1.5, high * 2.2)  # room for the open ends' arrows
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1, 2, 5)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.10g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xticks([r["width"] for r in rows], [str(r["width"]) for r in rows])
    ax.set_xlabel(f"trained width m ({trained})")
    ax.set_ylabel("frozen units per trained unit")
    title = f"What one trained {unit_name(trained)} unit is worth in frozen units"
    ax.set_title(title + ("\n" if narrow else ", ") + "both sides at their held-out optimum", fontsize=10)
    ax.grid(True, which="major", alpha=0.25)
    fig.legend(handles=handles, fontsize=LEGEND_PT, ncols=1 if narrow else 2, loc="outside lower center",
               frameon=False)
    return fig


def fair_rows(analysis: dict) -> list[dict]:
    """The fair answer's rows (``analysis["fair"]["answers"]["fair"]``, ``experiments.optimum.fair_answer``), [] where
    there is none: a memo-only ladder that found none of the trained optimum's fits writes the answer empty."""
    return ((analysis.get("fair") or {}).get("answers") or {}).get("fair") or []


def over_seeds(seeds) -> str:
    """``mean ± std over seeds 0,1,2``, or for one seed ``seed 0 (one seed: no error bars)``."""
    seeds = list(seeds)
    if len(seeds) == 1:
        return f"seed {seeds[0]} (one seed: no error bars)"
    return "mean ± std over seeds " + ",".join(map(str, seeds))


def _style(payload: dict, arm: str):
    """The arm's style, with the init and unit colour its ladder file records (an arm whose plugin is not
    installed here is drawn with its own init and colour, not ones guessed from its name)."""
    summary = next((a for a in payload.get("arms") or [] if a.get("arm") == arm), {})
    return arm_style(arm, summary.get("init") or None, summary.get("colour") or None)


def _arm_lr(payload: dict, arm: str):
    """The rate an arm's ladder cells ran at (``payload["arms"][i]["lr"]``), or None."""
    return next((a.get("lr") for a in payload.get("arms") or [] if a.get("arm") == arm), None)


def ladder_figures(payload: dict, directory: str | Path, prefix: str = "") -> list[Path]:
    """The ladder figures into ``directory``: ``<prefix>accuracy`` and ``<prefix>movement``, and ``<prefix>wall``
    when the payload has one (``render`` uses the prefixes ``paper_`` and ``ladder_``).

    A figure with nothing to show (no cell, no trained arm, no wall row) is not written.
    """
    paths = accuracy_figure(payload, directory, f"{prefix}accuracy") + movement_figure(payload, directory, f"{prefix}movement")
    if (payload.get("analysis") or {}).get("wall"):
        paths += wall_figure(payload, directory, f"{prefix}wall")
    if (payload.get("analysis") or {}).get("answer"):
        paths += answer_figure(payload, directory, f"{prefix}answer")
    if fair_rows(payload.get("analysis") or {}):
        paths += exchange_curve_figure(payload, directory, f"{prefix}exchange")
    return paths
