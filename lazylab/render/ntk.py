"""Pictures of the ``ntk`` experiments (SPEC section 7): the 1-D lab (PNG + GIF),
its width sweep, the scalar model, and an arm's probe kernels.

matplotlib's object API on the Agg canvas (no pyplot, no global backend
switch). GIF frames come from one figure of fixed size and dpi with no tight
bounding box, so every frame has the same pixel size; the GIF loops forever
and is re-drawn at a lower dpi until it is at most ``MAX_GIF_BYTES`` (5 MB).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from lazylab.errors import LazylabError
from lazylab.paths import write_atomically
from lazylab.render.canvas import MAX_GIF_BYTES, figure, grab, write_gif

DPIS = (90, 72, 56, 44)
NET, LIN, DATA = "tab:blue", "tab:orange", "0.25"


# ------------------------------------------------------------------ the lab
def _lab_axes(fig, res):
    """Three panels: function space, losses, kernel drift. Returns artists to update per frame."""
    c, d = res.config, res.data
    steps = np.arange(c.steps + 1)
    gs = fig.add_gridspec(2, 2, width_ratios=(1.35, 1.0), left=0.07, right=0.98, top=0.88, bottom=0.1, wspace=0.22, hspace=0.45)
    ax = fig.add_subplot(gs[:, 0])
    ax.plot(d["x_test"], d["y_test"], color="0.6", lw=2.5, alpha=0.6, label="target (noiseless)")
    ax.plot(d["x_train"], d["y_train"], "o", color=DATA, ms=3.5, label="training data")
    ax.plot(d["x_test"], res.pred_test[0], ":", color="0.4", lw=1, label="both at init")
    (net,) = ax.plot([], [], color=NET, lw=1.8, label="network")
    (lin,) = ax.plot([], [], "--", color=LIN, lw=1.8, label="linearization")
    lo = min(d["y_test"].min(), d["y_train"].min(), res.pred_test.min(), res.pred_test_lin.min())
    hi = max(d["y_test"].max(), d["y_train"].max(), res.pred_test.max(), res.pred_test_lin.max())
    ax.set_ylim(lo - 0.1 * (hi - lo), hi + 0.25 * (hi - lo))
    ax.set_xlabel("input x (dimensionless)")
    ax.set_ylabel("output f(x) (same units as the target y)")
    ax.legend(fontsize=7, loc="upper left", ncol=2, frameon=False)
    title = ax.set_title("", fontsize=10)

    al = fig.add_subplot(gs[0, 1])
    al.set_xscale("symlog", linthresh=1)
    al.set_yscale("log")
    al.plot(steps, res.loss, color=NET, alpha=0.15)
    al.plot(steps, res.loss_lin, color=LIN, alpha=0.15)
    (ln,) = al.plot([], [], color=NET, lw=1.5, label="network")
    (ll,) = al.plot([], [], "--", color=LIN, lw=1.5, label="linearization")
    al.set_title("training loss (half MSE)", fontsize=9)
    al.set_xlabel("GD step (symlog)", fontsize=8)
    al.set_ylabel("half MSE (log)", fontsize=8)
    al.legend(fontsize=7, frameon=False)
    al.tick_params(labelsize=7)

    ad = fig.add_subplot(gs[1, 1])
    ad.set_xscale("symlog", linthresh=1)
    ad.plot(res.snap_steps, res.drift, "o", ms=2, color="0.8")
    (dr,) = ad.plot([], [], "o-", ms=2.5, color="tab:red", lw=1.2)
    ad.set_ylim(0, max(res.drift.max() * 1.15, 1e-12))
    ad.set_title("NTK drift  \u2016K\u209c \u2212 K\u2080\u2016_F / \u2016K\u2080\u2016_F  (train inputs)", fontsize=9)
    ad.set_xlabel("GD step (symlog)", fontsize=8)
    ad.set_ylabel("relative drift (dimensionless)", fontsize=8)
    ad.tick_params(labelsize=7)
    fig.suptitle(f"1-D tanh net, m = {c.width}, lr {c.lr:g}, bump {c.bump:g}, noise {c.noise:g}, seed {c.seed}: "
                 f"network vs its linearization", fontsize=10)

    def update(k):
        s = int(res.snap_steps[k])
        net.set_data(d["x_test"], res.pred_test[k])
        lin.set_data(d["x_test"], res.pred_test_lin[k])
        ln.set_data(steps[: s + 1], res.loss[: s + 1])
        ll.set_data(steps[: s + 1], res.loss_lin[: s + 1])
        dr.set_data(res.snap_steps[: k + 1], res.drift[: k + 1])
        te = np.mean((res.pred_test[k] - d["y_test"]) ** 2)
        tl = np.mean((res.pred_test_lin[k] - d["y_test"]) ** 2)
        title.set_text(f"step {s}/{c.steps}:  test MSE net {te:.4f}, lin {tl:.4f};  drift {res.drift[k]:.3f}")

    return update


def lab_png(res, path: Path, dpi: int = 110) -> Path:
    """The lab's final state (all three panels at step T) as a PNG."""
    fig = figure((11.0, 4.8), dpi)
    update = _lab_axes(fig, res)
    update(len(res.snap_steps) - 1)
    write_atomically(Path(path), lambda tmp: fig.savefig(tmp, dpi=dpi), "--out")
    return Path(path)


def lab_gif(res, path: Path, frame_ms: int = 110, hold_ms: int = 2500, max_bytes: int = MAX_GIF_BYTES) -> dict:
    """The lab drawn through training, one frame per snapshot step. Returns ``{"path", "frames", "bytes", "size", "dpi"}``."""
    size = None
    for dpi in DPIS:
        fig = figure((11.0, 4.8), dpi)
        update = _lab_axes(fig, res)
        frames = []
        for k in range(len(res.snap_steps)):
            update(k)
            frames.append(grab(fig))
        durations = [frame_ms] * (len(frames) - 1) + [hold_ms]
        size = write_gif(frames, Path(path), durations)
        if size <= max_bytes:
            h, w = frames[0].shape[:2]
            return {"path": Path(path), "frames": len(frames), "bytes": size, "size": (w, h), "dpi": dpi}
    raise LazylabError(f"{path}: {size} bytes even at dpi {DPIS[-1]}; use fewer --frames")


def sweep_png(sw, path: Path, dpi: int = 110) -> Path:
    """Drift and disagreement against width (log-log) with their fitted slopes and m^-1/2, m^-1 guides."""
    fig = figure((10.0, 4.2), dpi)
    w = np.array(sw.widths, float)
    for i, (key, label) in enumerate((("drift", "NTK drift on training inputs"),
                                      ("disagreement", "RMS |f_net \u2212 f_lin| on the test grid"))):
        ax = fig.add_subplot(1, 2, i + 1)
        y = np.array([r[key] for r in sw.rows])
        e = np.array([r[key + "_std"] for r in sw.rows])
        ax.errorbar(w, y, yerr=e, fmt="o", ms=4, capsize=2, color="tab:red" if i == 0 else "tab:purple")
        fit = sw.slopes[key]
        ax.plot(w, np.exp(fit["intercept"]) * w ** fit["slope"], "-", lw=1, color="k", label=f"fit: slope {fit['slope']:.2f} (R\u00b2 {fit['r2']:.2f})")
        for p, ls in ((-0.5, ":"), (-1.0, "-.")):
            ax.plot(w, y[0] * (w / w[0]) ** p, ls, lw=0.9, color="0.5", label=f"m^{p:g}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("width m (hidden units, log\u2082)")
        ax.set_ylabel(("relative drift" if key == "drift" else "RMS disagreement") + " (dimensionless, log)")
        ax.set_title(label, fontsize=9)
        ax.legend(fontsize=7, frameon=False)
    c = sw.config
    fig.suptitle(f"width sweep: lr {c.lr:g}, {c.steps} steps, bump {c.bump:g}, noise {c.noise:g}, "
                 f"mean over seeds {','.join(map(str, sw.seeds))}", fontsize=10)
    fig.subplots_adjust(left=0.07, right=0.98, top=0.86, bottom=0.13, wspace=0.25)
    write_atomically(Path(path), lambda tmp: fig.savefig(tmp, dpi=dpi), "--out")
    return Path(path)


# ------------------------------------------------------------------ scalar
def scalar_png(res, path: Path, dpi: int = 110) -> Path:
    """Four panels: outputs, tangent kernel, parameter distance, two-mode residual decay."""
    from lazylab.ntk import scalar as sc

    w0, T = res.w0, float(res.times[-1])
    tt = np.concatenate([[0.0], np.geomspace(min(1e-2, T), T, 400)]) if T > 0 else np.array([0.0])
    tab = res.table
    fig = figure((11.0, 7.0), dpi)
    axs = fig.subplots(2, 2)
    ax = axs[0, 0]
    ax.plot(tt, sc.w_closed(tt, w0), color=NET, label="network w(t) (closed form)")
    ax.plot(tt, sc.f_lin_closed(tt, w0), "--", color=LIN, label="linearization f_lin(t)")
    ax.plot(tt, sc.frozen_final_closed(tt, w0, T), ":", color="tab:green", label="control: kernel frozen at 2w(T)")
    ax.plot(res.times, tab["f_net_int"], "o", ms=4, mfc="none", color=NET, label="RK4 integration")
    ax.plot(res.times, tab["f_lin_int"], "s", ms=4, mfc="none", color=LIN)
    ax.plot(res.times, tab["ctrl_offset_f_int"], "x", ms=4, color="tab:gray", label=f"control: start offset {res.offset:g}")
    ax.set_title(f"output f(t), target 1 (w0 = {w0:g})", fontsize=9)
    ax.set_ylabel("output f (target units)", fontsize=8)
    ax = axs[0, 1]
    ax.plot(tt, sc.kernel_closed(tt, w0), color=NET, label="network: 2 w(t)")
    ax.axhline(2 * w0, ls="--", color=LIN, label="linearization: 2 w0")
    ax.axhline(float(sc.kernel_closed(T, w0)), ls=":", color="tab:green", label="control: 2 w(T)")
    ax.plot(res.times, tab["kernel_net_int"], "o", ms=4, mfc="none", color=NET, label="a\u00b2 + b\u00b2 (integrated)")
    ax.set_title("tangent kernel", fontsize=9)
    ax.set_ylabel("kernel K (dimensionless)", fontsize=8)
    ax = axs[1, 0]
    ax.plot(tt, sc.dist_net_closed(tt, w0), color=NET, label="network |\u03b8(t) \u2212 \u03b8\u2080|")
    ax.plot(tt, sc.dist_lin_closed(tt, w0), "--", color=LIN, label="linearization |\u03b8_lin(t) \u2212 \u03b8\u2080|")
    ax.plot(res.times, tab["dist_net_int"], "o", ms=4, mfc="none", color=NET)
    ax.plot(res.times, tab["dist_lin_int"], "s", ms=4, mfc="none", color=LIN)
    ax.set_title("parameter distance from init", fontsize=9)
    ax.set_ylabel("|\u03b8 \u2212 \u03b8\u2080| (parameter units)", fontsize=8)
    ax = axs[1, 1]
    modes = sc.two_mode_closed(tt)
    ax.plot(tt, modes[:, 0], color="tab:red", label="mode \u03bb = 1: e^(\u2212t)")
    ax.plot(tt, modes[:, 1], color="tab:purple", label="mode \u03bb = 0.01: e^(\u22120.01 t)")
    ax.plot(res.times, np.abs(tab["mode1_int"]), "o", ms=4, mfc="none", color="tab:red", label="RK4 (eigenbasis)")
    ax.plot(res.times, np.abs(tab["mode2_int"]), "o", ms=4, mfc="none", color="tab:purple")
    ax.set_yscale("log")
    ax.set_ylim(1e-8, 1.5)
    ax.set_title("two-mode residual decay dr/dt = \u2212K r", fontsize=9)
    ax.set_ylabel("|residual r| (target units, log)", fontsize=8)
    for a in axs.ravel():
        a.set_xscale("symlog", linthresh=1)
        a.set_xlim(0, max(T, 1.0) * 1.15)
        a.set_xlabel("gradient-flow time t (symlog)", fontsize=8)
        a.legend(fontsize=7, frameon=False)
        a.tick_params(labelsize=7)
    fig.suptitle("scalar factorized model f = a b x, x = y = 1, a0 = b0: exact gradient flow vs its linearization", fontsize=10)
    fig.subplots_adjust(left=0.06, right=0.98, top=0.92, bottom=0.07, wspace=0.18, hspace=0.32)
    write_atomically(Path(path), lambda tmp: fig.savefig(tmp, dpi=dpi), "--out")
    return Path(path)


# ------------------------------------------------------------------ arm
def arm_png(record: dict, arrays: dict, path: Path, dpi: int = 110) -> Path:
    """Class-trace NTK on the probe at init, after training, and their difference.

    Probe images are sorted by class when ``arrays`` holds their ``labels``;
    each panel has its own colour scale (the kernel can grow by orders of magnitude).
    """
    K0, KT = np.asarray(arrays["K0_trace"]), np.asarray(arrays["KT_trace"])
    labels = arrays.get("labels")
    if labels is not None and len(labels) == len(K0):
        order = np.argsort(np.asarray(labels), kind="stable")
        K0, KT = K0[np.ix_(order, order)], KT[np.ix_(order, order)]
    fig = figure((12.5, 4.2), dpi)
    axs = fig.subplots(1, 3)
    D = KT - K0
    lim = max(np.abs(D).max(), 1e-30)
    panels = ((K0, "init Θ₀ (class trace)", "magma", (min(0.0, K0.min()), K0.max())),
              (KT, "after training Θ_T", "magma", (min(0.0, KT.min()), KT.max())),
              (D, f"Θ_T − Θ₀: drift {record['drift_trace']:.3g} (trace), {record['drift']:.3g} (full)",
               "RdBu_r", (-lim, lim)))
    for ax, (K, title, cmap, (lo, hi)) in zip(axs, panels):
        im = ax.imshow(K, cmap=cmap, vmin=lo, vmax=hi, interpolation="nearest")
        ax.set_title(title, fontsize=9)
        cb = fig.colorbar(im, ax=ax, fraction=0.046, pad=0.03)
        cb.ax.tick_params(labelsize=7)
        ax.set_xlabel("probe image" + (" (sorted by class)" if labels is not None else ""), fontsize=8)
        ax.set_ylabel("probe image", fontsize=8)
        ax.tick_params(labelsize=7)
    fig.suptitle(f"{record['arm']} m = {record['width']}: empirical NTK on {record['probe']} test images "
                 f"({record['epochs']} epochs, lr {record['lr']:g}); each panel on its own scale", fontsize=10)
    fig.subplots_adjust(left=0.04, right=0.96, top=0.85, bottom=0.1, wspace=0.3)
    write_atomically(Path(path), lambda tmp: fig.savefig(tmp, dpi=dpi), "--out")
    return Path(path)
