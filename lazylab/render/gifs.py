"""Animated GIFs of the ``gram`` and ``readout`` experiments.

Frames are drawn with matplotlib on an Agg canvas (a fixed figure size and
dpi, no tight bounding box, so every frame has the same pixel size) and
written with imageio's Pillow plugin: looping forever (``loop=0``), a fixed
per-frame duration, and a longer hold on the last frame. A GIF larger than
``MAX_GIF_BYTES`` (5 MB) is re-rendered at a lower dpi until it fits.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from lazylab.data import CLASS_NAMES
from lazylab.errors import LazylabError
from lazylab.render.canvas import MAX_GIF_BYTES, figure, grab, write_gif
from lazylab.render.style import RIGHT_COLOUR, WRONG_COLOUR, arm_style, shades

DPIS = (100, 80, 64, 50)  # tried in turn until the file fits in MAX_GIF_BYTES
TICK, CROSS = "\u2713", "\u2717"  # the readout's verdict on each garment, beside its colour


@dataclass(frozen=True)
class GifInfo:
    """A written GIF: ``path``, ``frames`` count, ``bytes`` on disk, ``size`` (width, height) in pixels, ``dpi``."""

    path: Path
    frames: int
    bytes: int
    size: tuple[int, int]
    dpi: int


def _within_budget(draw: Callable[[int], tuple[list[np.ndarray], list[int]]], path: Path,
                   max_bytes: int = MAX_GIF_BYTES, dpis=DPIS) -> GifInfo:
    for dpi in dpis:
        frames, durations = draw(dpi)
        size = write_gif(frames, path, durations)
        if size <= max_bytes:
            h, w = frames[0].shape[:2]
            return GifInfo(Path(path), len(frames), size, (w, h), dpi)
    raise LazylabError(f"{path}: {size} bytes even at dpi {dpis[-1]}, over the {max_bytes}-byte limit; use fewer frames")


# -------------------------------------------------------------------- gram
def gram_gif(result, path: Path, *, frame_ms: int = 160, hold_ms: int = 2500, max_bytes: int = MAX_GIF_BYTES) -> GifInfo:
    """The Gram crystallization: one frame per bank width.

    Left: the normalised Gram heatmap of the images (class separators, class
    names, a fixed colour scale) under a unit counter ``m = N units``. Right:
    distance to the reference Gram against width (log-log, with the fitted
    slope and the Monte Carlo ``m^(-1/2)`` guide) and the block contrast
    against width, drawn up to the current frame.

    Args: ``result``: a ``GramResult``; ``path``: the ``.gif`` to write.
    Returns: GifInfo. Raises: LazylabError if it cannot fit in ``max_bytes``.
    """
    widths, grams = np.asarray(result.widths), np.asarray(result.grams)
    dist, contrast = np.asarray(result.distance), np.asarray(result.contrast)
    classes = list(result.config["classes"])
    per = int(result.config["per_class"])
    # One colour scale for every frame, fitted to the converged kernel (the last
    # frame and the reference); the few-unit frames may fall below it (clipped).
    settled = min(float(grams[-1].min()), float(result.reference.min()))
    vmin = max(-1.0, float(np.floor(settled * 10) / 10) - 0.1)
    fit = result.fit

    def draw(dpi):
        fig = figure((10.0, 4.8), dpi)
        gs = fig.add_gridspec(2, 2, width_ratios=(1.0, 1.1), left=0.10, right=0.80, top=0.86, bottom=0.11,
                              wspace=0.32, hspace=0.55)
        ax = fig.add_subplot(gs[:, 0])
        im = ax.imshow(grams[0], vmin=vmin, vmax=1.0, cmap="magma", interpolation="nearest")
        cb = fig.colorbar(im, ax=ax, fraction=0.046, pad=0.03)
        cb.ax.tick_params(labelsize=7)
        cb.set_label(f"cosine similarity (below {vmin:g} shown as {vmin:g})", fontsize=7)
        for k in range(1, len(classes)):
            ax.axhline(k * per - 0.5, color="white", lw=1.2)
            ax.axvline(k * per - 0.5, color="white", lw=1.2)
        centres = [k * per + (per - 1) / 2 for k in range(len(classes))]
        names = [CLASS_NAMES[c] for c in classes]
        ax.set_xticks(centres, names, fontsize=7)
        ax.set_yticks(centres, names, fontsize=7, rotation=90, va="center")
        ax.tick_params(length=0)
        counter = ax.set_title("", fontsize=15, fontweight="bold", pad=8)
        fig.suptitle(f"{result.config['arm']}: normalised Gram  K = \u03a6\u03a6\u1d40/m,  K\u1d62\u2c7c/\u221a(K\u1d62\u1d62K\u2c7c\u2c7c)",
                     fontsize=11)

        ad = fig.add_subplot(gs[0, 1])
        ad.set_xscale("log")
        ad.set_yscale("log")
        raw = np.asarray(result.raw_distance)
        ad.plot(widths, dist, "o", ms=2.5, color="0.8")
        ad.plot(widths, raw, "s", ms=2, color="0.85")
        both = np.concatenate([dist, raw])
        ok = both > 0
        ad.set_xlim(0.8, widths[-1] * 1.3)
        if ok.any():
            ad.set_ylim(both[ok].min() / 1.6, both[ok].max() * 1.6)
        if fit.get("slope") is not None:
            xs = np.array(fit["widths"], float)
            ad.plot(xs, np.exp(fit["intercept"]) * xs ** fit["slope"], "--", color="tab:blue", lw=1,
                    label=f"G fit over m \u2265 {fit['min_width']}:\nslope {fit['slope']:.3f}")
            ad.plot(xs, np.exp(fit["intercept"]) * xs[0] ** fit["slope"] * (xs / xs[0]) ** -0.5, ":", color="k",
                    lw=1, label=r"Monte Carlo $m^{-1/2}$")
        (dline,) = ad.plot([], [], "o-", ms=3, color="tab:red", lw=1, label="normalised G")
        rlabel = "raw K, relative" + (f"\n(slope {result.raw_fit['slope']:.3f})" if result.raw_fit.get("slope") is not None else "")
        (rline,) = ad.plot([], [], "s-", ms=2, color="tab:orange", lw=0.8, label=rlabel)
        ad.legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0,
                  frameon=False)  # beside the panel, never over its points
        ad.set_xlabel("units m (log)", fontsize=8)
        ad.set_ylabel("distance (dimensionless, log)", fontsize=7.5)
        ad.set_title(r"distance to the reference: $\|G_m - G_{\rm ref}\|_F$ and $\|K_m - K_{\rm ref}\|_F / \|K_{\rm ref}\|_F$", fontsize=8)
        ad.tick_params(labelsize=7)

        ac = fig.add_subplot(gs[1, 1])
        ac.set_xscale("log")
        ac.plot(widths, contrast, "o", ms=2.5, color="0.8")
        ac.axhline(result.reference_contrast, color="k", ls=":", lw=1, label="reference bank")
        ac.set_xlim(0.8, widths[-1] * 1.3)
        lo, hi = min(contrast.min(), result.reference_contrast, 0.0), max(contrast.max(), result.reference_contrast)
        ac.set_ylim(lo - 0.1 * (hi - lo + 1e-9), hi + 0.15 * (hi - lo + 1e-9))
        (cline,) = ac.plot([], [], "o-", ms=3, color="tab:green", lw=1)
        ac.set_title("block contrast (within \u2212 cross class)", fontsize=9)
        ac.set_xlabel("units m (log)", fontsize=8)
        ac.set_ylabel("cosine difference", fontsize=7.5)
        ac.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, frameon=False)
        ac.tick_params(labelsize=7)

        frames = []
        for i, m in enumerate(widths):
            im.set_data(grams[i])
            counter.set_text(f"m = {int(m):,} unit{'s' if m != 1 else ''}")
            dline.set_data(widths[: i + 1], np.where(dist[: i + 1] > 0, dist[: i + 1], np.nan))
            rline.set_data(widths[: i + 1], np.where(raw[: i + 1] > 0, raw[: i + 1], np.nan))
            cline.set_data(widths[: i + 1], contrast[: i + 1])
            frames.append(grab(fig))
        durations = [frame_ms] * (len(frames) - 1) + [hold_ms]
        return frames, durations

    return _within_budget(draw, Path(path), max_bytes)


# ----------------------------------------------------------------- readout
def readout_gif(result, path: Path, *, frame_ms: int = 90, hold_ms: int = 2500, max_bytes: int = MAX_GIF_BYTES) -> GifInfo:
    """The readout race: one frame per evaluation point.

    Left: test accuracy (%) against optimisation step for every width, drawn
    up to the current step with the current values written at the line ends.
    Each width is a shade of the arm's unit colour (``lazylab.render.style``;
    the widest the full colour). Right: the shown test garments, each with
    the widest readout's prediction at that step marked ✓ (right) or ✗
    (wrong) above it, its true label below it, and a frame in bluish green
    or vermillion (Okabe–Ito): the verdict never rests on colour alone.

    Args: ``result``: a ``ReadoutResult``; ``path``: the ``.gif`` to write.
    Returns: GifInfo. Raises: LazylabError if it cannot fit in ``max_bytes``.
    """
    curves = result.curves
    steps = np.asarray(curves[0].steps)
    widest = result.widest
    verdict_preds = widest.preds[:, result.show_index]  # (T, n_show)
    truth = np.asarray(result.show_labels)
    n_show = len(truth)
    cols = 4
    rows = int(np.ceil(n_show / cols))
    side = int(round(result.show_images.shape[1] ** 0.5))
    top = max(float(c.acc.max()) for c in curves)
    arm = curves[0].config["arm"]
    order = sorted(range(len(curves)), key=lambda k: curves[k].width)
    tints = shades(arm_style(arm).colour, len(curves))  # light (narrowest) to the full colour (widest)
    colour_of = {k: tints[order.index(k)] for k in range(len(curves))}

    def draw(dpi):
        fig = figure((10.0, 4.8), dpi)
        gs = fig.add_gridspec(rows, cols + 3, left=0.07, right=0.99, top=0.85, bottom=0.11, wspace=0.15, hspace=0.45)
        ax = fig.add_subplot(gs[:, :3])
        ax.set_xlim(0, steps[-1] * 1.02 if steps[-1] else 1)
        ax.set_ylim(0, min(100.0, top + 8))
        ax.set_xlabel("Adam step (full batch)", fontsize=9)
        ax.set_ylabel("test accuracy (%)", fontsize=9)
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=8)
        lines, texts = [], []
        for k, c in enumerate(curves):
            color = colour_of[k]
            (ln,) = ax.plot([], [], "-", lw=1.4 + 1.2 * order.index(k) / max(1, len(curves) - 1), color=color,
                            label=f"m = {c.width}")
            lines.append(ln)
            texts.append(ax.text(0.97, 0.30 - 0.07 * (len(curves) - 1 - k), "", fontsize=10, color=color,
                                 fontweight="bold", ha="right", va="center", transform=ax.transAxes))
        # The stacked labels are the key (colour and line width per bank width): no legend box over the lines.
        ax.text(0.97, 0.30 + 0.07, "bank width: accuracy now", fontsize=8, color="0.3", ha="right", va="center",
                transform=ax.transAxes)
        counter = ax.set_title("", fontsize=12, fontweight="bold")
        fig.suptitle(f"{arm}: linear readouts on frozen banks, {curves[0].config['train_size']:,} training images",
                     fontsize=11)
        thumbs = []
        for j in range(n_show):
            a = fig.add_subplot(gs[j // cols, 3 + j % cols])
            a.imshow(result.show_images[j].reshape(side, side), cmap="gray_r", vmin=0, vmax=1)
            a.set_xticks([])
            a.set_yticks([])
            for s in a.spines.values():
                s.set_linewidth(4)
            a.set_xlabel(f"true: {CLASS_NAMES[int(truth[j])]}", fontsize=6, labelpad=2, color="0.2")
            thumbs.append((a, a.set_title("", fontsize=6.5, pad=3)))
        fig.text(0.72, 0.905, f"above: the m = {widest.width} readout's prediction, \u2713 right / \u2717 wrong; below: true label",
                 ha="center", fontsize=8)

        frames = []
        for i, s in enumerate(steps):
            for ln, tx, c in zip(lines, texts, curves):
                ln.set_data(steps[: i + 1], c.acc[: i + 1])
                tx.set_text(f"m = {c.width}: {c.acc[i]:.1f}%")
            counter.set_text(f"step {int(s)} / {int(steps[-1])}")
            for j, (a, title) in enumerate(thumbs):
                right = verdict_preds[i, j] == truth[j]
                color = RIGHT_COLOUR if right else WRONG_COLOUR
                for sp in a.spines.values():
                    sp.set_edgecolor(color)
                title.set_text(f"{TICK if right else CROSS} {CLASS_NAMES[int(verdict_preds[i, j])]}")
                title.set_color(color)
            frames.append(grab(fig))
        durations = [frame_ms] * (len(frames) - 1) + [hold_ms]
        return frames, durations

    return _within_budget(draw, Path(path), max_bytes)
