"""Pictures of prototype trajectories (SPEC section 7, ``trajectory``).

Two looping GIFs and a static PNG of each one's last frame, drawn with
matplotlib (Agg) and written with imageio:

* ``trajectory_prototypes.gif`` — the first 8 prototypes of every arm whose
  prototypes are images, as ``28 x 28`` images epoch by epoch, random-init
  rows above data-seeded rows, an epoch counter, and one colour scale shared
  by every row and every frame (symmetric about 0, stated on the colour bar).
* ``trajectory_curves.gif`` — two panels drawn through training time: median
  per-unit relative travel ``||w_t - w_0|| / ||w_0||`` per arm, and test
  accuracy (%) per arm.

Every frame of a GIF has the same pixel size (fixed figure size and dpi, no
tight bounding box). Nothing here trains: it reads a ``TrajectoryResult``.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from lazylab.render.canvas import MAX_GIF_BYTES, figure, grab, write_gif

PROTOTYPES_GIF = "trajectory_prototypes.gif"
PROTOTYPES_PNG = "trajectory_prototypes.png"
CURVES_GIF = "trajectory_curves.gif"
CURVES_PNG = "trajectory_curves.png"
COLUMNS = 8  # prototypes shown per arm
FRAME_MS = 400  # per epoch
LAST_FRAME_MS = 2500  # the last frame lingers before the loop restarts
DPI = 100
CMAP = "RdBu_r"


def colour_scale(arrays: list[np.ndarray]) -> float:
    """Half-width ``v`` of the shared symmetric scale ``[-v, v]``: the 99.5th percentile of ``|w|``
    over every shown prototype and epoch, rounded up to two significant digits (beyond it, colours clip)."""
    values = np.concatenate([np.abs(a).ravel() for a in arrays]) if arrays else np.zeros(1)
    v = float(np.percentile(values, 99.5))
    if not np.isfinite(v) or v <= 0:
        return 1.0
    exp = math.floor(math.log10(v)) - 1
    return round(math.ceil(v / 10**exp) * 10**exp, max(0, -exp))


def image_rows(result) -> list:
    """Arms drawn in the prototype picture: image-like prototypes, random-init rows first (stable)."""
    rows = [a for a in result.arms if a.images]
    return sorted(rows, key=lambda a: a.init != "random")


def prototype_frames(result) -> tuple[list[np.ndarray], float]:
    """One frame per epoch of the prototype grid; returns ``(frames, v)`` with the colour scale ``[-v, v]``."""
    rows = image_rows(result)
    if not rows:
        return [], 1.0
    cols = min(COLUMNS, min(a.snapshots.shape[1] for a in rows))
    side = math.isqrt(rows[0].snapshots.shape[-1])
    n_frames = max(a.snapshots.shape[0] for a in rows)
    v = colour_scale([a.snapshots[:, :cols] for a in rows])
    label_w, cell, bar_w, top, bottom = 2.3, 0.95, 1.0, 0.75, 0.2
    W_in = label_w + cols * cell + bar_w
    H_in = top + len(rows) * cell + bottom
    fig = figure((W_in, H_in), DPI)
    counter = fig.text(0.5, 1 - 0.28 / H_in, "", ha="center", va="center", fontsize=13, weight="bold")
    fig.text(0.5, 1 - 0.58 / H_in, f"first {cols} prototypes per arm, m = {result.plan['width']}",
             ha="center", va="center", fontsize=9, color="0.3")
    images, travel_texts = [], []
    for r, arm in enumerate(rows):
        y0 = (bottom + (len(rows) - 1 - r) * cell) / H_in
        fig.text(0.12 / W_in, y0 + 0.62 * cell / H_in, arm.arm, fontsize=9.5, weight="bold", va="center")
        fig.text(0.12 / W_in, y0 + 0.40 * cell / H_in, f"{arm.init} init, lr {arm.lr:g}", fontsize=8, va="center", color="0.3")
        travel_texts.append(fig.text(0.12 / W_in, y0 + 0.18 * cell / H_in, "", fontsize=8, va="center", color="0.3"))
        row_imgs = []
        for c in range(cols):
            ax = fig.add_axes(((label_w + c * cell + 0.04) / W_in, y0 + 0.04 / H_in, (cell - 0.08) / W_in, (cell - 0.08) / H_in))
            ax.set_axis_off()
            row_imgs.append(ax.imshow(np.zeros((side, side)), cmap=CMAP, vmin=-v, vmax=v, interpolation="nearest"))
        images.append(row_imgs)
    cax = fig.add_axes(((label_w + cols * cell + 0.15) / W_in, bottom / H_in, 0.14 / W_in, len(rows) * cell / H_in))
    bar = fig.colorbar(images[0][0], cax=cax)
    bar.set_label(f"pixel value, one scale for all rows and frames\n[-{v:g}, {v:g}], clipped beyond", fontsize=7.5)
    bar.ax.tick_params(labelsize=7)
    frames = []
    total = n_frames - 1
    for t in range(n_frames):
        counter.set_text(f"epoch {t} / {total}")
        for arm, row_imgs, txt in zip(rows, images, travel_texts):
            tt = min(t, arm.snapshots.shape[0] - 1)  # a diverged arm holds its last finite epoch
            for c, im in enumerate(row_imgs):
                im.set_data(arm.snapshots[tt, c].reshape(side, side))
            txt.set_text(f"median travel {arm.record['travel_median'][tt]:.3f}")
        frames.append(grab(fig))
    return frames, v


def curve_frames(result) -> list[np.ndarray]:
    """One frame per epoch: median travel (left) and test accuracy (right) per arm, drawn up to that epoch."""
    from matplotlib.ticker import MaxNLocator

    arms = result.arms
    if not arms:
        return []
    n_frames = max(len(a.record["epochs"]) for a in arms)
    epochs_total = result.plan["epochs"]
    fig = figure((11.0, 4.4), DPI)
    ax_t = fig.add_axes((0.065, 0.13, 0.40, 0.70))
    ax_a = fig.add_axes((0.57, 0.13, 0.40, 0.70))
    counter = fig.text(0.5, 0.95, "", ha="center", va="center", fontsize=13, weight="bold")
    t_max = max(max(a.record["travel_median"]) for a in arms)
    accs = [x for a in arms for x in a.record["accuracy"][1:]]
    lo, hi = (min(accs), max(accs)) if accs else (0.0, 100.0)
    pad = max(0.5, 0.06 * (hi - lo))
    for ax, ylabel, title in (
        (ax_t, "median ||w_t - w_0|| / ||w_0||", "median per-unit relative travel"),
        (ax_a, "test accuracy (%)", "test accuracy (10,000 test images)"),
    ):
        ax.set_xlim(0, epochs_total)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("epoch")
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
    ax_t.set_ylim(0, 1.08 * t_max if t_max > 0 else 1.0)
    ax_a.set_ylim(lo - pad, hi + pad)
    colours = [f"C{i % 10}" for i in range(len(arms))]
    lines = []
    for a, col in zip(arms, colours):
        style = "-" if a.init == "random" else "--"
        label = f"{a.arm} (lr {a.lr:g})"
        lt, = ax_t.plot([], [], style, color=col, lw=2, label=label)
        mt, = ax_t.plot([], [], "o", color=col, ms=5)
        la, = ax_a.plot([], [], style, color=col, lw=2, label=label)
        ma, = ax_a.plot([], [], "o", color=col, ms=5)
        lines.append((a, lt, mt, la, ma))
    ax_t.legend(loc="upper left", fontsize=8)
    ax_a.legend(loc="lower right", fontsize=8)
    frames = []
    for t in range(n_frames):
        counter.set_text(f"epoch {t} / {epochs_total}")
        for a, lt, mt, la, ma in lines:
            tt = min(t, len(a.record["epochs"]) - 1)
            ep = a.record["epochs"][: tt + 1]
            tr = a.record["travel_median"][: tt + 1]
            lt.set_data(ep, tr)
            mt.set_data(ep[-1:], tr[-1:])
            # Accuracy from epoch 1: epoch 0 is the untrained model at chance (stored in the record).
            la.set_data(ep[1:], a.record["accuracy"][1 : tt + 1])
            ma.set_data(ep[-1:] if tt else [], a.record["accuracy"][tt : tt + 1] if tt else [])
        frames.append(grab(fig))
    return frames


def render_trajectory(result, out_dir: str | Path) -> dict:
    """Write the GIFs and PNGs of ``result`` into ``out_dir`` (created).

    Returns: ``{"files": {name: {"path", "bytes", "frames"}}, "colour_scale": v | None, "notes": [...]}``.
    The prototype picture is skipped, with a note, when no arm's prototypes are images.
    Raises: LazylabError if ``out_dir`` cannot be created or a GIF exceeds 5 MB.
    """
    import imageio.v3 as iio

    from lazylab.errors import LazylabError

    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LazylabError(f"cannot create the output directory {out}: {exc}") from None
    files, notes = {}, []

    def emit(gif_name, png_name, frames):
        size = write_gif(frames, out / gif_name, [FRAME_MS] * (len(frames) - 1) + [LAST_FRAME_MS])
        if size > MAX_GIF_BYTES:
            raise LazylabError(f"{out / gif_name} is {size / 2**20:.1f} MB, over the 5 MB limit")
        iio.imwrite(out / png_name, frames[-1])
        files[gif_name] = {"path": str(out / gif_name), "bytes": size, "frames": len(frames)}
        files[png_name] = {"path": str(out / png_name), "bytes": (out / png_name).stat().st_size, "frames": 1}

    frames, v = prototype_frames(result)
    if frames:
        emit(PROTOTYPES_GIF, PROTOTYPES_PNG, frames)
    else:
        notes.append("no arm has image-like prototypes: no prototype picture (curves only)")
        for stale in (PROTOTYPES_GIF, PROTOTYPES_PNG):  # never leave an older run's picture beside these curves
            (out / stale).unlink(missing_ok=True)
    frames = curve_frames(result)
    if frames:
        emit(CURVES_GIF, CURVES_PNG, frames)
    return {"files": files, "colour_scale": v if files.get(PROTOTYPES_GIF) else None, "notes": notes}
