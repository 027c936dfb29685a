"""Pictures of prototype trajectories (SPEC section 7, ``trajectory``).

Two looping GIFs and a static PNG of each one's last frame, drawn with
matplotlib (Agg) and written with imageio:

* ``trajectory_prototypes.gif`` — the first 8 prototypes of every arm whose
  prototypes are images, as ``28 x 28`` images epoch by epoch, random-init
  rows above data-seeded rows, an epoch counter, and by default every image
  on its own colour scale, symmetric about 0 (``[-max|w|, max|w|]`` of that
  image, the half-width printed under it); ``prototype_scale="shared"``
  draws every row and frame on one scale instead. The picture's caption
  line says which.
* ``trajectory_curves.gif`` — two panels drawn through training time: median
  per-unit relative travel ``||w_t - w_0|| / ||w_0||`` per arm, and test
  accuracy (%) per arm, each arm in its unit's colour with its init's marker
  (``lazylab.render.style``), the legend below the panels.
* ``trajectory_finals.{png,svg}`` (``trajectory_finals``, drawn by ``lazylab
  render figures``) — the prototypes at epoch 0 and at the last epoch beside
  the full travel and accuracy curves.

Every frame of a GIF has the same pixel size (fixed figure size and dpi, no
tight bounding box). Nothing here trains: it reads a ``TrajectoryResult``.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from lazylab.paths import write_atomically
from lazylab.render.canvas import MAX_GIF_BYTES, figure, grab, write_gif
from lazylab.render.style import arm_style

PROTOTYPES_GIF = "trajectory_prototypes.gif"
PROTOTYPES_PNG = "trajectory_prototypes.png"
CURVES_GIF = "trajectory_curves.gif"
CURVES_PNG = "trajectory_curves.png"
COLUMNS = 8  # prototypes shown per arm
FRAME_MS = 400  # per epoch
LAST_FRAME_MS = 2500  # the last frame lingers before the loop restarts
DPI = 100
CMAP = "RdBu_r"
PROTOTYPE_SCALES = ("per-image", "shared")


def colour_scale(arrays: list[np.ndarray]) -> float:
    """Half-width ``v`` of the shared symmetric scale ``[-v, v]``: the 99.5th percentile of ``|w|``
    over every shown prototype and epoch, rounded up to two significant digits (beyond it, colours clip)."""
    values = np.concatenate([np.abs(a).ravel() for a in arrays]) if arrays else np.zeros(1)
    v = float(np.percentile(values, 99.5))
    if not np.isfinite(v) or v <= 0:
        return 1.0
    exp = math.floor(math.log10(v)) - 1
    return round(math.ceil(v / 10**exp) * 10**exp, max(0, -exp))


def image_scale(image: np.ndarray) -> float:
    """Half-width of one prototype's own symmetric scale: ``max |w|`` over its pixels (nothing clips);
    1.0 for an all-zero or non-finite image."""
    finite = np.abs(np.asarray(image, dtype=np.float64))
    finite = finite[np.isfinite(finite)]
    v = float(finite.max()) if finite.size else 0.0
    return v if v > 0 else 1.0


def scale_caption(scale: str, v: float | None = None) -> str:
    """One line saying which colour scale the prototype picture uses (``scale``: ``"per-image"`` or ``"shared"``)."""
    if scale == "per-image":
        return "colour: each image on its own scale, symmetric about 0, \u00b1max|w| of that image (number under it)"
    return f"colour: one scale for every image and epoch, [\u2212{v:g}, {v:g}] (99.5th percentile of |w|), clipped beyond"


def image_rows(result) -> list:
    """Arms drawn in the prototype picture: image-like prototypes, random-init rows first (stable)."""
    rows = [a for a in result.arms if a.images]
    return sorted(rows, key=lambda a: a.init != "random")


def prototype_figure(result, scale: str = "per-image"):
    """The prototype grid's figure and an ``update(t)`` that draws epoch ``t`` on it.

    Args:
      result: a ``TrajectoryResult``; rows are ``image_rows(result)``, the first ``COLUMNS`` prototypes each.
      scale: ``"per-image"`` (default): every image, at every epoch, on its own symmetric scale
        ``[-max|w|, max|w|]`` (``image_scale``), its half-width printed under it, so the texture of
        small random-init prototypes and the changes of data-seeded ones are visible whatever their
        magnitude; ``"shared"``: one scale ``[-v, v]`` for every image and epoch (``colour_scale``),
        so magnitudes compare across rows and epochs but small prototypes look almost white.
    Returns: ``(fig, update, info)`` with ``info = {"scale", "v" (shared half-width, None per image),
      "frames", "axes" (rows x cols image Axes)}``, or None when no arm's prototypes are images.
    Raises: ValueError for an unknown ``scale``.
    """
    if scale not in PROTOTYPE_SCALES:
        raise ValueError(f"prototype scale must be one of {', '.join(PROTOTYPE_SCALES)}, not {scale!r}")
    rows = image_rows(result)
    if not rows:
        return None
    cols = min(COLUMNS, min(a.snapshots.shape[1] for a in rows))
    side = math.isqrt(rows[0].snapshots.shape[-1])
    n_frames = max(a.snapshots.shape[0] for a in rows)
    shared = scale == "shared"
    v = colour_scale([a.snapshots[:, :cols] for a in rows]) if shared else None
    label_w, cell, bar_w, top, bottom = 2.3, 0.95, 1.25, 0.9, 0.2
    cell_h = cell + (0.0 if shared else 0.17)  # room for the per-image half-width under each image
    W_in = label_w + cols * cell + bar_w
    H_in = top + len(rows) * cell_h + bottom
    fig = figure((W_in, H_in), DPI)
    counter = fig.text(0.5, 1 - 0.26 / H_in, "", ha="center", va="center", fontsize=13, weight="bold")
    fig.text(0.5, 1 - 0.54 / H_in, f"first {cols} prototypes per arm, m = {result.plan['width']}; random-init rows "
             f"first", ha="center", va="center", fontsize=9, color="0.3")
    fig.text(0.5, 1 - 0.76 / H_in, scale_caption(scale, v), ha="center", va="center", fontsize=8.5, color="0.15",
             weight="bold")
    images, travel_texts, value_texts, axes = [], [], [], []
    for r, arm in enumerate(rows):
        y0 = (bottom + (len(rows) - 1 - r) * cell_h) / H_in
        yc = y0 + (cell_h - cell) / H_in  # bottom of the image row
        st = arm_style(arm.arm, arm.init)
        fig.text(0.12 / W_in, yc + 0.62 * cell / H_in, arm.arm, fontsize=9.5, weight="bold", va="center", color=st.colour)
        fig.text(0.12 / W_in, yc + 0.40 * cell / H_in, f"{arm.init} init, lr {arm.lr:g}", fontsize=8, va="center", color="0.3")
        travel_texts.append(fig.text(0.12 / W_in, yc + 0.18 * cell / H_in, "", fontsize=8, va="center", color="0.3"))
        row_imgs, row_vals, row_axes = [], [], []
        for c in range(cols):
            ax = fig.add_axes(((label_w + c * cell + 0.04) / W_in, yc + 0.04 / H_in, (cell - 0.08) / W_in, (cell - 0.08) / H_in))
            ax.set_axis_off()
            lim = v if shared else 1.0
            row_imgs.append(ax.imshow(np.zeros((side, side)), cmap=CMAP, vmin=-lim, vmax=lim, interpolation="nearest"))
            row_axes.append(ax)
            if not shared:
                row_vals.append(fig.text((label_w + (c + 0.5) * cell) / W_in, y0 + 0.09 / H_in, "", ha="center",
                                         va="center", fontsize=6.5, color="0.25"))
        images.append(row_imgs)
        value_texts.append(row_vals)
        axes.append(row_axes)
    cax = fig.add_axes(((label_w + cols * cell + 0.15) / W_in, bottom / H_in, 0.14 / W_in, len(rows) * cell_h / H_in))
    if shared:
        bar = fig.colorbar(images[0][0], cax=cax)
    else:  # a fixed [-1, 1] map: the images' own limits change every frame
        from matplotlib.cm import ScalarMappable
        from matplotlib.colors import Normalize

        bar = fig.colorbar(ScalarMappable(norm=Normalize(-1.0, 1.0), cmap=CMAP), cax=cax)
    if shared:
        bar.set_label(f"pixel value, one scale for all rows and frames\n[-{v:g}, {v:g}], clipped beyond", fontsize=7.5)
    else:
        bar.set_ticks([-1.0, -0.5, 0.0, 0.5, 1.0], labels=["\u2212max|w|", "", "0", "", "+max|w|"])
        bar.set_label("pixel value / max|w| of its own image\n(per-image scale; max|w| under each image)", fontsize=7.5)
    bar.ax.tick_params(labelsize=7)
    total = n_frames - 1

    def update(t: int) -> None:
        counter.set_text(f"epoch {t} / {total}")
        for arm, row_imgs, row_vals, txt in zip(rows, images, value_texts, travel_texts):
            tt = min(t, arm.snapshots.shape[0] - 1)  # a diverged arm holds its last finite epoch
            for c, im in enumerate(row_imgs):
                img = arm.snapshots[tt, c].reshape(side, side)
                im.set_data(img)
                if not shared:
                    h = image_scale(img)
                    im.set_clim(-h, h)
                    row_vals[c].set_text(f"\u00b1{h:.3g}")
            txt.set_text(f"median travel {arm.record['travel_median'][tt]:.3f}")

    return fig, update, {"scale": scale, "v": v, "frames": n_frames, "axes": axes}


def prototype_frames(result, scale: str = "per-image") -> tuple[list[np.ndarray], dict]:
    """One RGB frame per epoch of the prototype grid (``prototype_figure``).

    Returns: ``(frames, info)``; ``info``: ``{"scale", "v"}`` plus, per image, ``"range"``: the
    smallest and largest per-image half-width shown (``None`` with the shared scale). No
    frames (and ``{"scale", "v": None, "range": None}``) when no arm's prototypes are images.
    """
    made = prototype_figure(result, scale)
    if made is None:
        return [], {"scale": scale, "v": None, "range": None}
    fig, update, info = made
    frames = []
    for t in range(info["frames"]):
        update(t)
        frames.append(grab(fig))
    halves = None
    if scale == "per-image":
        rows = image_rows(result)
        cols = len(info["axes"][0])
        hs = [image_scale(img) for a in rows for img in a.snapshots[:, :cols].reshape(-1, a.snapshots.shape[-1])]
        halves = [float(min(hs)), float(max(hs))]
    return frames, {"scale": scale, "v": info["v"], "range": halves}


def curve_frames(result) -> list[np.ndarray]:
    """One frame per epoch: median travel (left) and test accuracy (right) per arm, drawn up to that epoch."""
    from matplotlib.ticker import MaxNLocator

    arms = result.arms
    if not arms:
        return []
    n_frames = max(len(a.record["epochs"]) for a in arms)
    epochs_total = result.plan["epochs"]
    legend_rows = math.ceil(len(arms) / 3)
    H = 4.4 + 0.22 * legend_rows
    fig = figure((11.0, H), DPI)
    base = (0.55 + 0.22 * legend_rows) / H  # the axes sit above the legend
    ax_t = fig.add_axes((0.075, base, 0.39, 1 - base - 0.7 / H))
    ax_a = fig.add_axes((0.57, base, 0.40, 1 - base - 0.7 / H))
    counter = fig.text(0.5, 1 - 0.22 / H, "", ha="center", va="center", fontsize=13, weight="bold")
    t_max = max(max(a.record["travel_median"]) for a in arms)
    accs = [x for a in arms for x in a.record["accuracy"][1:]]
    lo, hi = (min(accs), max(accs)) if accs else (0.0, 100.0)
    pad = max(0.5, 0.06 * (hi - lo))
    for ax, ylabel, title in (
        (ax_t, "median ||w_t − w_0|| / ||w_0|| (dimensionless)", "median per-unit relative travel"),
        (ax_a, "test accuracy (%)", "test accuracy (10,000 test images)"),
    ):
        ax.set_xlim(0, epochs_total)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("epoch (passes over the training set)")
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
    ax_t.set_ylim(0, 1.08 * t_max if t_max > 0 else 1.0)
    ax_a.set_ylim(lo - pad, hi + pad)
    lines = []
    for a in arms:
        st = arm_style(a.arm, a.init)  # the unit's colour, the init's marker, the mode's line style
        label = f"{a.arm} ({a.init} init, lr {a.lr:g})"
        lt, = ax_t.plot([], [], color=st.colour, linestyle=st.linestyle, marker=st.marker, ms=3.5, lw=1.8, label=label)
        mt, = ax_t.plot([], [], st.marker, color=st.colour, ms=8)
        la, = ax_a.plot([], [], color=st.colour, linestyle=st.linestyle, marker=st.marker, ms=3.5, lw=1.8)
        ma, = ax_a.plot([], [], st.marker, color=st.colour, ms=8)
        lines.append((a, lt, mt, la, ma))
    # One legend for both panels, below them: never over the curves.
    fig.legend(*ax_t.get_legend_handles_labels(), loc="lower center", ncols=min(3, len(arms)), fontsize=8,
               frameon=False)
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


def render_trajectory(result, out_dir: str | Path, prototype_scale: str = "per-image") -> dict:
    """Write the GIFs and PNGs of ``result`` into ``out_dir`` (created).

    Args:
      result: a ``TrajectoryResult``.
      out_dir: the output folder.
      prototype_scale: ``"per-image"`` (default) or ``"shared"``: the prototype picture's colour
        scale (``prototype_figure``).
    Returns: ``{"files": {name: {"path", "bytes", "frames"}}, "prototype_scale": str,
      "colour_scale": v | None (the shared scale's half-width; None per image or without a picture),
      "image_scales": [min, max] | None (per-image half-widths shown), "caption": str | None
      (``scale_caption``), "notes": [...]}``.
    The prototype picture is skipped, with a note, when no arm's prototypes are images.
    Raises: LazylabError if ``out_dir`` cannot be created, a GIF exceeds 5 MB or the scale is unknown.
    """
    import imageio.v3 as iio

    from lazylab.errors import LazylabError

    if prototype_scale not in PROTOTYPE_SCALES:
        raise LazylabError(f"prototype scale must be one of {', '.join(PROTOTYPE_SCALES)}, not {prototype_scale!r}")
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

    frames, scale = prototype_frames(result, prototype_scale)
    if frames:
        emit(PROTOTYPES_GIF, PROTOTYPES_PNG, frames)
    else:
        notes.append("no arm has image-like prototypes: no prototype picture (curves only)")
        for stale in (PROTOTYPES_GIF, PROTOTYPES_PNG):  # never leave an older run's picture beside these curves
            (out / stale).unlink(missing_ok=True)
    frames = curve_frames(result)
    if frames:
        emit(CURVES_GIF, CURVES_PNG, frames)
    drawn = PROTOTYPES_GIF in files
    return {"files": files, "prototype_scale": prototype_scale, "colour_scale": scale["v"] if drawn else None,
            "image_scales": scale["range"] if drawn else None,
            "caption": scale_caption(prototype_scale, scale["v"]) if drawn else None, "notes": notes}


# ----------------------------------------------------- trajectory finals figure
def trajectory_finals(result, directory: Path, stem: str = "trajectory_finals",
                      prototype_scale: str = "per-image") -> list[Path]:
    """Where the prototypes started and where they ended, with the full travel and accuracy curves.

    Left: per arm whose prototypes are images, its first prototypes at epoch 0
    (upper row) and at the last epoch (lower row), each image on its own
    symmetric scale ``±max|w|`` (``prototype_scale="per-image"``; the values are
    printed in the GIF) or all on the GIF's shared scale (``"shared"``), as the
    caption on the picture says. Right:
    median per-unit relative travel ``||w_t - w_0|| / ||w_0||`` and test
    accuracy (%) per epoch, in each arm's unit colour and init marker
    (``lazylab.render.style``). Writes ``<stem>.png`` and ``<stem>.svg``.
    """
    from matplotlib.ticker import MaxNLocator

    rows = image_rows(result)
    arms = result.arms
    cols = min(COLUMNS, min(a.snapshots.shape[1] for a in rows)) if rows else 0
    label_w, cell, bar_w, curve_w = 2.5, 0.78, 1.1, 5.2
    left_w = label_w + cols * cell + bar_w if rows else 0.4
    H = max(5.2, 0.75 + 2 * len(rows) * cell + 0.35)
    W = left_w + curve_w
    fig = figure((W, H), 110)
    if rows:
        side = int(round(rows[0].snapshots.shape[-1] ** 0.5))
        shared = colour_scale([a.snapshots[:, :cols] for a in rows])
        im = None
        for r, a in enumerate(rows):
            last = a.snapshots.shape[0] - 1
            for k, (t, what) in enumerate(((0, "epoch 0"), (last, f"epoch {last}"))):
                y0 = (0.35 + (2 * (len(rows) - 1 - r) + (1 - k)) * cell) / H
                fig.text(1.55 / W, y0 + 0.5 * cell / H, what, fontsize=7.5, va="center", color="0.3")
                for c in range(cols):
                    ax = fig.add_axes(((label_w + c * cell + 0.03) / W, y0 + 0.03 / H, (cell - 0.06) / W, (cell - 0.06) / H))
                    ax.set_axis_off()
                    image = a.snapshots[t, c]
                    v = image_scale(image) if prototype_scale == "per-image" else shared
                    im = ax.imshow(image.reshape(side, side) / v, cmap=CMAP, vmin=-1, vmax=1, interpolation="nearest")
            ym = (0.35 + (2 * (len(rows) - 1 - r) + 1) * cell) / H
            fig.text(0.1 / W, ym + 0.22 * cell / H, a.arm, fontsize=8.5, weight="bold", va="center")
            fig.text(0.1 / W, ym - 0.1 * cell / H, f"{a.init} init, lr {a.lr:g}", fontsize=7.5, va="center", color="0.3")
            fig.text(0.1 / W, ym - 0.4 * cell / H, f"median travel {a.record['travel_median'][-1]:.3f}", fontsize=7.5,
                     va="center", color="0.3")
        cax = fig.add_axes(((label_w + cols * cell + 0.12) / W, 0.35 / H, 0.12 / W, 2 * len(rows) * cell / H))
        bar = fig.colorbar(im, cax=cax)
        bar.set_label("pixel value / max|w| of its image" if prototype_scale == "per-image"
                      else f"pixel value / {shared:g}", fontsize=7)
        bar.ax.tick_params(labelsize=6.5)
        fig.text((label_w + cols * cell / 2) / W, (0.35 + 2 * len(rows) * cell + 0.25) / H,
                 f"first {cols} prototypes, m = {result.plan['width']}",
                 ha="center", va="center", fontsize=10, weight="bold")
        caption = ("colour: each image on its own scale, symmetric about 0, ±max|w| of that image (the values are "
                   "printed in trajectory_prototypes.gif)" if prototype_scale == "per-image"
                   else scale_caption(prototype_scale, shared))
        fig.text((label_w + cols * cell / 2) / W, (0.35 + 2 * len(rows) * cell + 0.05) / H,
                 caption, ha="center", va="center", fontsize=6.5, color="0.2")
    x0 = (left_w + 0.75) / W
    wpanel = (curve_w - 1.0) / W
    ax_t = fig.add_axes((x0, 0.58, wpanel, 0.33))
    ax_a = fig.add_axes((x0, 0.1, wpanel, 0.33))
    for a in arms:
        st = arm_style(a.arm, a.init)
        ep = a.record["epochs"]
        ax_t.plot(ep, a.record["travel_median"], **st.kwargs(), ms=3, lw=1.8, label=f"{a.arm} (lr {a.lr:g})")
        ax_a.plot(ep[1:], a.record["accuracy"][1:], **st.kwargs(), ms=3, lw=1.8, label=a.arm)
    for ax, title in ((ax_t, "median per-unit travel ||w_t - w_0|| / ||w_0||"), (ax_a, "test accuracy (%)")):
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("epoch", fontsize=8)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    if arms:
        ax_t.legend(fontsize=7, loc="upper left", frameon=False)
    return _save(fig, Path(directory), stem)


def _save(fig, directory: Path, stem: str) -> list[Path]:
    """``<stem>.png`` and ``<stem>.svg`` (no date in the SVG), each written to a temp file then renamed."""
    paths = []
    for fmt in ("png", "svg"):
        meta = {"Date": None} if fmt == "svg" else {"Software": None}
        paths.append(write_atomically(directory / f"{stem}.{fmt}",
                                      lambda tmp: fig.savefig(tmp, format=fmt, metadata=meta), "--out"))
    return paths
