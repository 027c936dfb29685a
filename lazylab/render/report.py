"""``lazylab render``: every picture from one command, and a results page (SPEC section 7, ``render``).

Three stages write into one folder (``--out``, default ``$LAZYLAB_OUT/render``):

* ``gifs`` — ``gram.gif``, ``readout.gif``, ``trajectory_prototypes.gif``,
  ``trajectory_curves.gif`` (with their last frames as PNG) and ``ntk_lab.gif``;
* ``figures`` — ``ladder_accuracy``, ``ladder_movement``, ``trajectory_finals``,
  ``ntk_lab``, ``ntk_sweep`` and ``ntk_scalar``, each as PNG and SVG
  (``ntk_scalar.csv`` too);
* ``report`` — ``report.html``: one self-contained page (inline CSS, no
  script, no external request; images by relative links into the same folder)
  with every GIF and figure, the ladder table with its fits and gaps, the NTK
  audit, and the exact configuration and versions behind each artifact.

Each artifact is one *job*: a spec (the exact configuration: experiment
configs, memo keys, rates and where they came from; cheap to build, nothing
trained), a compute step (``lazylab.experiments.render``: from the memo, or
computed and stored) and a draw step. ``manifest.json`` in the folder records,
per job, the SHA-256 of its spec, the files drawn (SHA-256, bytes, frames,
pixel size), the numbers the report prints and the versions that drew it. A
job whose spec and files are unchanged is skipped: a second run computes and
draws nothing. ``redraw=True`` redraws every picture (still from the memo).
"""

from __future__ import annotations

import hashlib
import html
import json
import platform
import time
from dataclasses import asdict, fields, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import numpy as np

from lazylab.paths import writable_dir, write_atomically, write_text_atomically
from lazylab.experiments import render as xr
from lazylab.render.canvas import figure, read_gif

RENDER_SCHEMA = 2  # bump when a picture's drawing changes: every job is then redrawn (from the memo)
MANIFEST = "manifest.json"
REPORT = "report.html"
GIF_JOBS = ("gram", "readout", "trajectory", "ntk_lab")
FIGURE_JOBS = ("paper", "ladder", "trajectory_finals", "ntk_lab_figure", "ntk_sweep", "ntk_scalar")
DATA_JOBS = ("ntk_audit",)
VERSION_PACKAGES = ("lazylab", "jax", "jaxlib", "flax", "optax", "numpy", "matplotlib", "imageio", "pillow",
                    "click", "rich", "diskcache")
Progress = Callable[[str, int, int], None]


# ------------------------------------------------------------------- output
def versions() -> dict:
    """Python, platform, and the installed versions of lazylab and the libraries behind the pictures."""
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version(), "platform": platform.platform()}
    for name in VERSION_PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    return out


def plugins() -> list[dict]:
    """Every unit with its distribution and version (``lazylab arms``), and units that failed to load."""
    from lazylab.arms import registry

    reg = registry()
    rows = [{"unit": n, "distribution": d, "version": v, "status": "ok"} for n, (_, d, v) in sorted(reg.units.items())]
    rows += [{"unit": e.unit, "distribution": e.distribution, "version": e.version, "status": e.message}
             for _, e in sorted(reg.errors.items())]
    return rows


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def file_facts(path: Path) -> dict:
    """``{"sha256", "bytes"}`` plus, for a GIF, ``frames``, ``size`` [w, h], ``loop``, ``same_size``;
    for a PNG, ``size``."""
    path = Path(path)
    facts = {"sha256": _sha256(path), "bytes": path.stat().st_size}
    if path.suffix == ".gif":
        g = read_gif(path)
        facts.update(frames=g["frames"], size=list(next(iter(g["sizes"]))), same_size=len(g["sizes"]) == 1,
                     loop=g["loop"])
    elif path.suffix == ".png":
        from PIL import Image

        with Image.open(path) as im:
            facts["size"] = list(im.size)
    return facts


def _jsonable(obj):
    """Plain JSON types (numpy scalars and arrays, tuples) for the manifest."""
    return json.loads(json.dumps(obj, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o)))


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

    from lazylab.render.style import arm_style
    from lazylab.render.trajectory import CMAP, COLUMNS, colour_scale, image_rows, image_scale, scale_caption

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


def _both(draw, directory: Path, stem: str) -> list[Path]:
    """Call ``draw(path)`` for ``<stem>.png`` and ``<stem>.svg`` (the format follows the suffix)."""
    paths = []
    for fmt in ("png", "svg"):
        paths.append(write_atomically(directory / f"{stem}.{fmt}", draw, "--out"))
    return paths


# --------------------------------------------------------------------- jobs
_FLAGS = {"classes": "--images"}  # settings fields whose option is not --<field with dashes>
_NO_FLAG = {"fallback_lr"}  # render's own settings, not the command's


def _command(base: str, settings, default) -> str:
    """The command that makes a picture with ``settings``: ``base`` plus an option for each field that differs from
    the command's ``default`` (``render --from`` a JSON with other options shows them here)."""
    parts = [base]
    for f in fields(settings):
        value = getattr(settings, f.name)
        if f.name in _NO_FLAG or value == getattr(default, f.name) or value is None:
            continue
        text = ",".join(map(str, value)) if isinstance(value, tuple) else f"{value:g}" if isinstance(value, float) else str(value)
        parts.append(f"{_FLAGS.get(f.name, '--' + f.name.replace('_', '-'))} {text}")
    return " ".join(parts)


class Renderer:
    """Runs the jobs of one output folder (see the module docstring).

    Args:
      ws: a ``Workspace`` (memo and data).
      out: the output folder (checked with ``lazylab.paths.writable_dir``).
      settings: ``lazylab.experiments.render.RenderSettings`` (the subcommands' defaults).
      progress: ``progress(stage, done, total)``, e.g. a rich progress bar.
      redraw: redraw pictures whose spec is unchanged (nothing is recomputed).
    """

    def __init__(self, ws, out: str | Path, settings=xr.DEFAULT_SETTINGS, progress: Progress | None = None,
                 redraw: bool = False):
        self.ws = ws
        self.out = writable_dir(out, "--out")
        self.settings = settings
        self.progress = progress or (lambda *a: None)
        self.redraw = redraw
        self.manifest = self._load_manifest()
        self._versions = versions()
        self._specs: dict[str, dict] = {}
        self._cache: dict[str, object] = {}  # results computed in this process, shared by jobs
        self._ran: dict[str, dict] = {}  # jobs already run by this renderer: ``render all`` runs each once

    # ------------------------------------------------------------ manifest
    def _load_manifest(self) -> dict:
        try:
            m = json.loads((self.out / MANIFEST).read_text())
            if isinstance(m, dict) and m.get("schema") == RENDER_SCHEMA and isinstance(m.get("jobs"), dict):
                return m
        except (OSError, ValueError):
            pass
        return {"schema": RENDER_SCHEMA, "jobs": {}}

    def _save_manifest(self) -> None:
        write_text_atomically(self.out / MANIFEST, json.dumps(self.manifest, indent=1, sort_keys=True, allow_nan=True),
                              "--out")

    def _current(self, name: str, key: str) -> dict | None:
        entry = self.manifest["jobs"].get(name)
        if self.redraw or not entry or entry.get("key") != key:
            return None
        for fname, facts in entry.get("files", {}).items():
            path = self.out / fname
            if not path.is_file() or path.stat().st_size != facts.get("bytes") or _sha256(path) != facts.get("sha256"):
                return None
        return entry

    # --------------------------------------------------------------- specs
    def spec(self, name: str) -> dict:
        """The exact configuration of a job (JSON), built without training anything."""
        if name in self._specs:
            return self._specs[name]
        s, ws = self.settings, self.ws
        if name == "gram":
            arm, cfg = xr.gram_spec(ws, s.gram)
            spec = {"experiment": "gram", "arm": arm.name, "plugin": arm.plugin, "config": json.loads(cfg.canonical()),
                    "memo_key": cfg.key(), "command": _command("lazylab gram", s.gram, xr.GramSettings())}
        elif name == "readout":
            arm, cfgs = xr.readout_spec(ws, s.readout)
            spec = {"experiment": "readout", "arm": arm.name, "plugin": arm.plugin,
                    "configs": [json.loads(c.canonical()) for c in cfgs], "memo_keys": [c.key() for c in cfgs],
                    "command": _command("lazylab readout", s.readout, xr.ReadoutSettings())}
        elif name in ("trajectory", "trajectory_finals"):
            items = self.spec("trajectory")["arms"] if name == "trajectory_finals" else xr.trajectory_spec(ws, s.trajectory)
            spec = {"experiment": "trajectory", "arms": items, "settings": _jsonable(asdict(s.trajectory)),
                    "command": _command("lazylab trajectory", replace(s.trajectory, lr=None), xr.TrajectorySettings())
                    + " --lr " + ",".join(sorted({f"{i['lr']:g}" for i in items}))}
        elif name in ("ntk_lab", "ntk_lab_figure"):
            cfg = s.ntk.lab()
            spec = {"experiment": "ntk lab", "config": asdict(cfg), "memo_key": xr.lab_key(cfg),
                    "command": f"lazylab ntk lab --width {cfg.width} --lr {cfg.lr:g} --steps {cfg.steps}"}
        elif name == "ntk_sweep":
            cfg = s.ntk.sweep()
            spec = {"experiment": "ntk lab width sweep", "config": asdict(cfg), "widths": list(s.ntk.sweep_widths),
                    "seeds": list(s.ntk.sweep_seeds), "memo_key": xr.sweep_key(cfg, s.ntk.sweep_widths, s.ntk.sweep_seeds),
                    "command": f"lazylab ntk lab --widths {','.join(map(str, s.ntk.sweep_widths))} --lr {cfg.lr:g} "
                               f"--sweep-seeds {len(s.ntk.sweep_seeds)}"}
        elif name == "ntk_scalar":
            n = s.ntk
            spec = {"experiment": "ntk scalar", "w0": n.w0, "times": list(n.times), "dt": n.dt, "offset": n.offset,
                    "memo_key": xr.scalar_key(n), "command": f"lazylab ntk scalar --w0 {n.w0:g}"}
        elif name == "ntk_audit":
            cfg = s.ntk.audit()
            spec = {"experiment": "ntk audit", "config": asdict(cfg), "memo_key": xr.audit_key(cfg),
                    "command": "lazylab ntk audit"}
        elif name == "paper":
            ps = self._paper_spec()
            spec = {"experiment": "paper ladder", "source": ps["source"], "note": ps["note"], "plan": ps["plan_json"],
                    "reference": ({"path": ps["path"], "sha256": ps["sha256"], "provenance": ps["provenance"]}
                                  if ps["source"] == "reference" else None),
                    "in_memo": xr.memo_extras(ws, ps["plan"]) if ps["source"] == "memo" else None,
                    "command": "lazylab ladder --preset paper"}
        elif name == "ladder" and self._ladder_spec()["name"] == "file":
            ls = self._ladder_spec()
            spec = {"experiment": "ladder", "name": "file", "note": ls["note"], "plan": ls["plan_json"],
                    "source": {"path": ls["path"], "sha256": ls["sha256"]},
                    "command": f"lazylab render report --from {ls['path']}"}
        elif name == "ladder":
            ls = self._ladder_spec()
            spec = {"experiment": "ladder", "name": ls["name"], "note": ls["note"], "plan": ls["plan_json"],
                    "analysis": {"min_gain": 0.1, "climb_widths": None, "redundancy_width": 256, "redundancy_images": 4000},
                    "in_memo": xr.memo_extras(ws, ls["plan"]),  # redrawn once a wall or redundancy grid lands
                    "command": "lazylab ladder" + (f" --preset {ls['name']}" if ls["name"] != "custom" else " ...")}
        else:
            raise KeyError(name)
        spec = {**spec, "job": name, "render_schema": RENDER_SCHEMA, "data": ws.fingerprint}
        self._specs[name] = _jsonable(spec)
        return self._specs[name]

    def _ladder_spec(self) -> dict:
        if "ladder_plan" not in self._cache:
            self._cache["ladder_plan"] = xr.ladder_spec(self.ws, self.settings.ladder)
        return self._cache["ladder_plan"]

    def _paper_spec(self) -> dict:
        if "paper_spec" not in self._cache:
            self._cache["paper_spec"] = xr.paper_spec(self.ws, self.settings.reference)
        return self._cache["paper_spec"]

    # ------------------------------------------------------------- running
    def run(self, names) -> list[dict]:
        """Run the named jobs in order; returns their manifest entries (with ``status``)."""
        return [self.job(n) for n in names]

    def job(self, name: str) -> dict:
        """Bring one job up to date; returns its manifest entry plus ``status`` and ``computed``."""
        if name not in self._ran:
            self._ran[name] = self._job(name)
        return self._ran[name]

    def _job(self, name: str) -> dict:
        self.progress(f"checking {name}", 0, 1)
        spec = self.spec(name)
        key = xr.digest(spec)
        self.progress(f"checking {name}", 1, 1)
        entry = self._current(name, key)
        if entry is not None:
            return {**entry, "status": "up to date", "computed": []}
        t0 = time.perf_counter()
        files, data, computed = getattr(self, f"_job_{name}")(spec)
        facts = {}
        for path in files:
            facts[path.name] = file_facts(path)
        entry = {"name": name, "key": key, "spec": spec, "files": facts, "data": _jsonable(data),
                 "versions": self._versions, "drawn_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                 "seconds": round(time.perf_counter() - t0, 2), "computed": computed}
        self.manifest["jobs"][name] = entry
        self.manifest["data"] = {"fingerprint": self.ws.fingerprint, "directory": str(self.ws.data_dir)}
        self._save_manifest()
        status = (("computed " + ", ".join(computed) + ("; drawn" if files else "")) if computed
                  else ("drawn from the memo" if files else "from the memo"))
        return {**entry, "status": status}

    def _tick(self, stage: str):
        self.progress(stage, 0, 1)

    def _done(self, stage: str):
        self.progress(stage, 1, 1)

    # gifs -------------------------------------------------------------
    def _job_gram(self, spec):
        from lazylab.data import CLASS_NAMES
        from lazylab.render.gifs import gram_gif

        res = xr.gram_result(self.ws, self.settings.gram, self.progress)
        self._tick("drawing gram.gif")
        info = gram_gif(res, self.out / "gram.gif")
        self._done("drawing gram.gif")
        j = res.to_json()
        data = {"widths": [int(res.widths[0]), int(res.widths[-1])], "frames": len(res.widths),
                "contrast": [float(res.contrast[0]), float(res.contrast[-1])], "reference_contrast": res.reference_contrast,
                "distance": [float(res.distance[0]), float(res.distance[-1])], "fit": res.fit, "raw_fit": res.raw_fit,
                "classes": [CLASS_NAMES[c] for c in res.config["classes"]], "images": len(res.labels),
                "ref_units": res.config["ref_units"], "scalars": j["scalars"], "dpi": info.dpi}
        return [info.path], data, list(res.computed)

    def _job_readout(self, spec):
        from lazylab.render.gifs import readout_gif

        res = xr.readout_result(self.ws, self.settings.readout, self.progress)
        self._tick("drawing readout.gif")
        info = readout_gif(res, self.out / "readout.gif")
        self._done("drawing readout.gif")
        curves = []
        for c in res.curves:
            best = int(np.argmax(c.acc))
            curves.append({"width": c.width, "start": float(c.acc[0]), "final": c.final_acc, "best": float(c.acc[best]),
                           "best_step": int(c.steps[best])})
        right = int((res.widest.preds[-1, res.show_index] == res.show_labels).sum())
        data = {"curves": curves, "shown": len(res.show_index), "right": right, "judge": res.widest.width,
                "lr": res.curves[0].config["lr"], "steps": res.curves[0].config["steps"],
                "train_size": res.curves[0].config["train_size"], "dpi": info.dpi}
        return [info.path], data, list(res.computed)

    def _trajectory(self):
        if "trajectory" not in self._cache:
            res, n = xr.trajectory_result(self.ws, self.settings.trajectory, self.progress)
            self._cache["trajectory"] = res
            return res, ([f"{n} trajector{'y' if n == 1 else 'ies'}"] if n else [])
        return self._cache["trajectory"], []

    @staticmethod
    def _trajectory_data(res) -> dict:
        arms = []
        for a in res.arms:
            f = a.final()
            arms.append({"arm": a.arm, "plugin": a.plugin, "init": a.init, "lr": a.lr, "rate_source": a.rate_source,
                         "bracket": a.bracket, "final": f, "scalars_start": a.record["scalars"][0],
                         "diverged": a.record["diverged"], "images": a.images})
        return {"arms": arms, "notes": res.notes, "width": res.plan["width"], "epochs": res.plan["epochs"],
                "train_size": res.plan["train_size"], "seed": res.plan["seed"]}

    def _job_trajectory(self, spec):
        from lazylab.render.trajectory import render_trajectory

        res, computed = self._trajectory()
        self._tick("drawing trajectory GIFs")
        drawn = render_trajectory(res, self.out, self.settings.trajectory.prototype_scale)
        self._done("drawing trajectory GIFs")
        data = {**self._trajectory_data(res), "colour_scale": drawn["colour_scale"], "caption": drawn.get("caption"),
                "notes": res.notes + drawn["notes"]}
        return [Path(f["path"]) for f in drawn["files"].values()], data, computed

    def _lab(self):
        if "lab" not in self._cache:
            res, cached = xr.lab_result(self.ws, self.settings.ntk.lab(), self.progress)
            self._cache["lab"] = res
            return res, [] if cached else ["1-D lab"]
        return self._cache["lab"], []

    def _job_ntk_lab(self, spec):
        from lazylab.render.ntk import lab_gif

        res, computed = self._lab()
        self._tick("drawing ntk_lab.gif")
        info = lab_gif(res, self.out / "ntk_lab.gif")
        self._done("drawing ntk_lab.gif")
        return [Path(info["path"])], {"summary": res.summary(), "dpi": info["dpi"]}, computed

    # figures ----------------------------------------------------------
    def _job_ladder(self, spec):
        from lazylab.render.figures import ladder_figures

        payload = xr.ladder_result(self.ws, self._ladder_spec(), self.progress)
        self._tick("drawing ladder figures")
        paths = ladder_figures(payload, self.out, "ladder_")
        self._done("drawing ladder figures")
        computed = [f"{payload['computed']} ladder runs"] if payload["computed"] else []
        return paths, _payload_data(payload), computed

    def _job_paper(self, spec):
        from lazylab.render.figures import ladder_figures

        ps = self._paper_spec()
        payload = xr.paper_result(self.ws, ps, self.progress)
        if payload is None:
            return [], {"source": "none", "note": ps["note"]}, []
        self._tick("drawing the paper ladder's figures")
        paths = ladder_figures(payload, self.out, "paper_")
        self._done("drawing the paper ladder's figures")
        computed = [f"{payload['computed']} paper ladder runs"] if payload["computed"] else []
        return paths, {**_payload_data(payload), "source": ps["source"]}, computed

    def _job_trajectory_finals(self, spec):
        res, computed = self._trajectory()
        self._tick("drawing trajectory_finals")
        paths = trajectory_finals(res, self.out, prototype_scale=self.settings.trajectory.prototype_scale)
        self._done("drawing trajectory_finals")
        return paths, self._trajectory_data(res), computed

    def _job_ntk_lab_figure(self, spec):
        from lazylab.render.ntk import lab_png

        res, computed = self._lab()
        self._tick("drawing ntk_lab figure")
        paths = _both(lambda p: lab_png(res, p), self.out, "ntk_lab")
        self._done("drawing ntk_lab figure")
        return paths, {"summary": res.summary()}, computed

    def _job_ntk_sweep(self, spec):
        from lazylab.render.ntk import sweep_png

        n = self.settings.ntk
        sw, cached = xr.sweep_result(self.ws, n.sweep(), n.sweep_widths, n.sweep_seeds, self.progress)
        self._tick("drawing ntk_sweep")
        paths = _both(lambda p: sweep_png(sw, p), self.out, "ntk_sweep")
        self._done("drawing ntk_sweep")
        return paths, {"rows": sw.rows, "slopes": sw.slopes}, [] if cached else ["width sweep"]

    def _job_ntk_scalar(self, spec):
        from lazylab.render.ntk import scalar_png

        res, cached = xr.scalar_result(self.ws, self.settings.ntk, self.progress)
        self._tick("drawing ntk_scalar")
        paths = _both(lambda p: scalar_png(res, p), self.out, "ntk_scalar")
        (self.out / "ntk_scalar.csv").write_text(res.csv())
        self._done("drawing ntk_scalar")
        t = res.table
        data = {"checks": [c.to_json() for c in res.checks], "ok": res.ok, "t_end": float(t["t"][-1]),
                "mode1_end": float(t["mode1_closed"][-1]), "mode2_end": float(t["mode2_closed"][-1])}
        return paths + [self.out / "ntk_scalar.csv"], data, [] if cached else ["scalar model"]

    def _job_ntk_audit(self, spec):
        checks, cached = xr.audit_result(self.ws, self.settings.ntk.audit(), self.progress)
        return [], {"checks": [c.to_json() for c in checks]}, [] if cached else ["audit"]

    # ------------------------------------------------------------- stages
    def gifs(self) -> list[dict]:
        return self.run(GIF_JOBS)

    def figures(self) -> list[dict]:
        return self.run(FIGURE_JOBS)

    def report(self) -> tuple[Path, list[dict]]:
        """Bring every job up to date, then write ``report.html`` from the manifest."""
        entries = self.run(GIF_JOBS + FIGURE_JOBS + DATA_JOBS)
        self._tick("writing report.html")
        page = report_html(self.manifest, self._versions, plugins())
        write_text_atomically(self.out / REPORT, page, "--out")
        self._done("writing report.html")
        return self.out / REPORT, entries


def _payload_data(payload: dict) -> dict:
    """What the manifest keeps of a ladder payload: everything but the run records, which become their
    memo keys (``run_keys``) and the unstable ones (``unstable_runs``: arm, width, seed, lr, best_acc, reason)."""
    payload = dict(payload)
    runs = payload.pop("runs")
    payload["run_keys"] = sorted(r["key"] for r in runs if "key" in r)
    payload["unstable_runs"] = [{"arm": r["config"]["arm"], "width": r["config"]["width"], "seed": r["config"]["seed"],
                                 "lr": r["config"]["lr"], "best_acc": r.get("best_acc"), "unstable": r["unstable"]}
                                for r in runs if r.get("unstable")]
    return payload


# --------------------------------------------------------------------- html
CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;margin:0;color:#1b1b1b;background:#fafafa;line-height:1.45}
main{max-width:1180px;margin:0 auto;padding:1.5rem 1.5rem 4rem}
h1{font-size:1.7rem;margin:.2rem 0 .4rem}h2{font-size:1.3rem;margin:2.4rem 0 .6rem;border-bottom:2px solid #ddd;padding-bottom:.2rem}
h3{font-size:1.05rem;margin:1.4rem 0 .4rem}
nav a{margin-right:1rem}a{color:#0b5cad}
figure{margin:1rem 0;background:#fff;border:1px solid #e2e2e2;padding:.6rem;border-radius:4px}
figure img{max-width:100%;height:auto;display:block}
figcaption{font-size:.88rem;color:#444;margin-top:.4rem}
table{border-collapse:collapse;margin:.6rem 0;font-size:.86rem;background:#fff}
th,td{border:1px solid #ddd;padding:.25rem .5rem;text-align:right;vertical-align:top}
th{background:#f0f0f0}td.l,th.l{text-align:left}
.pass{color:#17703a;font-weight:600}.fail{color:#b3261e;font-weight:700}
details{margin:.5rem 0 1rem;font-size:.85rem}summary{cursor:pointer;color:#0b5cad}
pre{background:#f3f3f3;padding:.6rem;overflow-x:auto;font-size:.78rem;max-height:28rem}
.note{color:#555;font-size:.9rem}code{background:#f0f0f0;padding:0 .2rem}
p,li,figcaption,.source,summary{overflow-wrap:anywhere}
.scroll{overflow-x:auto;max-width:100%;-webkit-overflow-scrolling:touch}.scroll table{margin:0}.scroll{margin:.6rem 0}
.source{background:#fff8e1;border-left:4px solid #e0a800;padding:.5rem .8rem;margin:.6rem 0;font-size:.9rem}
.figrow{display:flex;flex-wrap:wrap;gap:.8rem}.figrow figure{flex:1 1 420px;min-width:0}
.answer{font-size:1.12rem;font-weight:600;background:#eef5ff;border-left:4px solid #0b5cad;padding:.5rem .8rem}
.unstable{color:#b3261e;font-weight:600;white-space:nowrap}td.l:first-child{white-space:nowrap}
ul.warnings{background:#fdecea;border-left:4px solid #b3261e;padding:.4rem .8rem .4rem 2rem;font-size:.9rem}
@media (max-width:600px){main{padding:1rem .6rem 3rem}nav a{display:inline-block;margin:.1rem .6rem .1rem 0}}
"""


def _e(x) -> str:
    return html.escape(str(x), quote=True)


def _f(v, fmt=".2f", none="-") -> str:
    if v is None:
        return none
    try:
        return format(v, fmt)
    except (TypeError, ValueError):
        return _e(v)


def _table(header: list[str], rows: list[list], table_id: str | None = None, left=1) -> str:
    """An HTML table of already-escaped cells; ``left``: how many leading columns are left-aligned,
    or a set of column indices (negative from the end)."""
    n = len(header)
    lefts = set(range(left)) if isinstance(left, int) else {i % n for i in left}
    ident = f' id="{_e(table_id)}"' if table_id else ""
    head = "".join(f'<th{" class=l" if i in lefts else ""}>{_e(h)}</th>' for i, h in enumerate(header))
    body = "".join("<tr>" + "".join(f'<td{" class=l" if i in lefts else ""}>{c}</td>' for i, c in enumerate(r)) + "</tr>"
                   for r in rows)
    # The wrapper scrolls sideways on a narrow screen instead of cutting columns.
    return f'<div class="scroll"><table{ident}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _img(entry: dict | None, fname: str, alt: str, caption: str) -> str:
    if not entry or fname not in entry.get("files", {}):
        return f'<p class="note">{_e(fname)} was not drawn.</p>'
    f = entry["files"][fname]
    w, h = f.get("size", [None, None])
    dims = f' width="{w}" height="{h}"' if w else ""
    extra = []
    if "frames" in f:
        extra.append(f"{f['frames']} frames, loops")
    if w:
        extra.append(f"{w}x{h} px")
    extra.append(f"{f['bytes'] / 2**20:.2f} MB" if f["bytes"] > 2**20 else f"{f['bytes'] / 1024:.0f} KB")
    svg = fname.rsplit(".", 1)[0] + ".svg"
    if fname.endswith(".png") and svg in entry.get("files", {}):
        extra.append(f'<a href="{_e(svg)}">SVG</a>')
    return (f'<figure><img src="{_e(fname)}" alt="{_e(alt)}"{dims} loading="eager">'
            f'<figcaption>{caption} <span class="note">({_e(fname)}: {", ".join(extra)})</span></figcaption></figure>')


def _provenance(entry: dict | None, label: str = "configuration and versions") -> str:
    if not entry:
        return ""
    spec = entry["spec"]
    v = entry.get("versions", {})
    vline = ", ".join(f"{k} {v[k]}" for k in VERSION_PACKAGES if k in v)
    return (f"<details><summary>{_e(label)}: <code>{_e(spec.get('command', ''))}</code>, drawn {_e(entry.get('drawn_at'))}"
            f"</summary><p class=note>Drawn with {_e(vline)}; Python {_e(v.get('python'))} on {_e(v.get('platform'))}. "
            f"Spec SHA-256 {_e(entry['key'])}. Files: "
            + ", ".join(f"{_e(n)} (sha256 {_e(f['sha256'][:16])}…)" for n, f in entry.get("files", {}).items())
            + f"</p><pre>{_e(json.dumps(spec, indent=1, sort_keys=True))}</pre></details>")


def _checks_table(checks: list[dict], table_id: str) -> str:
    rows = []
    for c in checks:
        if c["expect"]:
            verdict = '<span class="pass">pass</span>' if c["passed"] else '<span class="fail">FAIL</span>'
        else:
            verdict = ('<span class="pass">fails, as it must</span>' if not c["passed"]
                       else '<span class="fail">PASSES (must fail)</span>')
        rows.append([_e(c["name"]), _f(c["value"], ".3g"), _e(c["note"]), verdict])
    return _table(["check", "measured", "criterion", "result"], rows, table_id, left={0, 2, 3})


_ACCURACY_CAPTION = ("Test accuracy (best epoch, %) vs width m (log x), mean over seeds with their std as error "
                     "bars; trained arms dashed; reference rungs dotted (outside values, not run here).")


def _unstable_mark(cell: dict) -> str:
    """`` <span class=unstable>`` naming how many seeds of a cell are unstable (contract: ``cell["unstable"]``), or ``""``."""
    k = cell.get("unstable") or 0
    if not k:
        return ""
    return (f' <span class="unstable" title="{k} of {cell.get("n", "?")} seeds unstable: training loss above ln 10 at '
            f'the best epoch, or rising far above its minimum">⚠ {k} unstable</span>')


def _unstable_table(d: dict, pid: str) -> str:
    """The unstable runs (``_payload_data``'s ``unstable_runs``) with their one-line reasons; ``""`` if none."""
    runs = d.get("unstable_runs") or []
    if not runs:
        return ""
    rows = [[_e(r["arm"]), _e(r["width"]), _e(r["seed"]), _f(r["lr"], "g"), _f(r.get("best_acc")),
             '<span class="unstable">⚠ unstable</span> ' + _e(r["unstable"])] for r in runs]
    return ("<h3>Unstable runs</h3><p class=note>Training loss at the best epoch above chance (ln 10), or rising far "
            "above its minimum. Kept in every table and fit (the protocol's bracket rule is unchanged, SPEC section 5) and "
            "marked ⚠; bracket runs at other rates (m = 256, seed 0) are listed too, with their lr.</p>"
            + _table(["arm", "m", "seed", "lr", "best_acc (%)", "why"], rows, f"{pid}unstable-table", left={0, 5}))


def _exchange_block(d: dict, pid: str, after_sentence: str = "") -> list[str]:
    """The study's answer for one ladder: ``analysis["exchange"]`` (sentence, then ``after_sentence`` (HTML), then a
    table of each trained arm and width against the frozen width of the same unit that matches it; ``text`` shown
    verbatim) and ``analysis["warnings"]``."""
    a = d["analysis"]
    ex = a.get("exchange")
    out = []
    if not ex:
        out += ["<p class=note>No exchange rate in these results: they were written by a lazylab without it; "
                "<code>lazylab ladder ... --json</code> with this version adds it.</p>", after_sentence]
    else:
        if ex.get("sentence"):
            out.append(f'<p class="answer">{_e(ex["sentence"])}</p>')
        out.append(after_sentence)
        rows = [[_e(r.get("trained")), _e(r.get("width")), _f(r.get("trained_acc")), _e(r.get("frozen")),
                 _e(r.get("text")), _f(r.get("floor_acc"))] for r in ex.get("rows") or []]
        if rows:  # without rows the sentence already says there is no pair
            out.append(_table(["trained arm", "m", "trained acc (%)", "frozen bank", "frozen width that matches it",
                               "frozen law's limit (acc %)"], rows, f"{pid}exchange-table", left={0, 3, 4}))
    warnings = a.get("warnings") or []
    if warnings:
        out.append(f'<ul class="warnings" id="{pid}warnings">' + "".join(f"<li>⚠ {_e(w)}</li>" for w in warnings) + "</ul>")
    return out


def _paper_section(e: dict | None, yours: dict | None = None) -> str:
    """The page's lead: the paper ladder, from the memo or the shipped reference results (labelled), its
    exchange-rate sentence, its accuracy figure beside that of your ladder (``yours``, the ladder job's entry),
    the exchange table and warnings first; then its tables."""
    if not e or e["data"].get("source") in (None, "none"):
        note = (e or {}).get("data", {}).get("note", "no paper ladder")
        return (f"<p class=note>No paper ladder to show: {_e(note)}. <code>lazylab ladder</code> computes it (hours on "
                "two cores); a release ships it as <code>lazylab/reference/paper.json</code>.</p>")
    d = e["data"]
    prov = d.get("provenance") or {}
    if d["source"] == "reference":
        label = (f'<div class="source" id="paper-source"><b>Shipped reference results</b>, not computed on this machine: '
                 f"{_e(prov.get('runs'))} runs computed {_e(prov.get('when'))} (UTC) on {_e(prov.get('where'))} by "
                 f"lazylab {_e(prov.get('lazylab'))} (<code>{_e(prov.get('code'))}</code>), "
                 f"<code>{_e(prov.get('command'))}</code>; data fingerprint <code>{_e(prov.get('data'))}</code>. "
                 "Once every run of the paper preset is in your memo, this section shows yours instead.</div>")
    else:
        label = (f'<div class="source" id="paper-source"><b>From your memo</b>: the paper preset '
                 f"(<code>lazylab ladder</code>); {_e(d.get('note'))}.</div>")
    figures = _img(e, "paper_accuracy.png", "paper ladder: accuracy vs width", "<b>The paper ladder.</b> " + _ACCURACY_CAPTION)
    if yours and yours["data"].get("name") != "paper":
        figures += _img(yours, "ladder_accuracy.png", "your ladder: accuracy vs width",
                        f'<b>Your ladder</b> ({_e(yours["data"].get("name"))}; its tables are in '
                        '<a href="#ladder">Your ladder</a>). ' + _ACCURACY_CAPTION)
    return "\n".join([label, *_exchange_block(d, "paper-", f'<div class="figrow">{figures}</div>'),
                      _published_block(d), _ladder_section(e, "paper-", "paper", lead=True)])


def _published_block(d: dict) -> str:
    """The published study's numbers against this ladder's (``lazylab.published.compare``), with the why of each
    difference."""
    from lazylab.published import AGREE_POINTS, compare

    rows = [[_e(r["what"]), _e(r["published"]), _e(r["ours"]),
             _f(r["difference"], "+.2f"), f'<span class="{"pass" if r["verdict"] == "agrees" else "fail"}">'
             f'{_e(r["verdict"])}</span>', _e(r["why"] or "-")] for r in compare(d)]
    if not rows:
        return ""
    return ("<h3>Against the published numbers</h3>"
            f"<p class=note>Agrees: within {AGREE_POINTS:g} point (accuracy, floor), or for redundancy within 0.05 in "
            "mean |corr| and a factor 1.5 in participation ratio. Where ours differs, the last column says what this "
            "project measured about it (docs/results.md).</p>"
            + _table(["published point", "published", "ours", "difference (pts)", "verdict", "why"], rows,
                     "published-table", left={0, 5}))


def _ladder_section(e: dict | None, pid: str = "", stem: str = "ladder", lead: bool = False) -> str:
    """One ladder's block: (unless ``lead``, which puts them in ``_paper_section``) the exchange rate and warnings,
    then its table, figures, unstable runs, movement law, gap, wall and redundancy. ``pid`` prefixes every
    table id; ``stem`` the figure files (``<stem>_accuracy.png``).
    """
    if not e:
        return "<p class=note>No ladder.</p>"
    d = e["data"]
    plan = d["plan"]
    widths = [int(w) for w in plan["widths"]]
    law = d["analysis"]["ladder_law"]
    rows = []
    for a in d["arms"]:
        cells = []
        for w in widths:
            c = a["cells"].get(str(w))
            if c is None or c.get("mean") is None:
                cells.append("diverged" if c else "-")
            else:
                cells.append(f"{c['mean']:.2f}" + (f" ± {c['std']:.2f}" if c["n"] > 1 else "") + _unstable_mark(c))
        f = law.get(a["arm"], {})
        if "skipped" in f or not f:
            used = ",".join(map(str, f.get("widths", []))) or "-"
            fit = ["-", "-", "-", "-", _e(f"{used} (not fitted: {f.get('skipped', 'no data')})")]
        else:
            fit = [_f(f["floor"]), _f(f["c"], ".3g"), _f(f["alpha"], ".3f") + (" (at bound)" if f.get("at_bound") else ""),
                   _f(f["r2"], ".4f"), _e(",".join(map(str, f.get("widths", []))))]
        rows.append([_e(a["arm"]), "diverged" if a["lr"] is None else _f(a["lr"], "g"), *cells, *fit])
    header = ["arm", "lr", *[f"m={w}" for w in widths], "floor (%)", "c", "alpha", "R²", "widths fitted"]
    seeds = ",".join(map(str, plan["seeds"]))
    out = [] if lead else _exchange_block(d, pid)
    out += [f"<p>Ladder: <b>{_e(d['name'])}</b> ({_e(d.get('note') or '')}). best_acc (%) on the test set, mean ± std over "
           f"seeds {_e(seeds)}; {plan['epochs']} epoch{'s' if plan['epochs'] != 1 else ''} on {plan['train_size']:,} "
           f"training images; " + (f"every rate fixed at {plan['lr']:g}. " if plan.get("lr") is not None else
                                   "each arm's rate bracketed at m = 256, seed 0 over its grid. ") + f"Ladder law: err = 100 − acc = floor + c·m<sup>−alpha</sup> on each arm's "
           f"climbing region. {len(d.get('run_keys', []))} runs behind it.</p>",
           _table(header, rows, f"{pid}ladder-table", left={0, -1})]
    if not lead:
        out.append(_img(e, f"{stem}_accuracy.png", "accuracy vs width", _ACCURACY_CAPTION))
    out += [_unstable_table(d, pid),
            _img(e, f"{stem}_movement.png", "movement vs width", "Relative prototype movement ||W_end − W0||_F / ||W0||_F "
                 "vs width (log-log) with each trained arm's fitted law and a square-root reference.")]
    mv, ml = d["analysis"].get("movement") or {}, d["analysis"].get("movement_law") or {}
    if mv:
        mw = sorted({int(w) for per in mv.values() for w in per})
        rows = [[_e(arm), *[_f(per.get(str(w), {}).get("mean"), ".4g") for w in mw],
                 _f(ml.get(arm, {}).get("slope"), ".3f"), _f(ml.get(arm, {}).get("r2"), ".4f")] for arm, per in mv.items()]
        out += ["<h3>Movement law</h3>", _table(["arm", *[f"m={w}" for w in mw], "slope", "R²"], rows, f"{pid}movement-table")]
    gap = d["analysis"].get("gap") or {}
    if gap:
        gw = sorted({int(w) for g in gap.values() for w in g["per_width"]})
        rows = [[_e(n), *[_f(g["per_width"].get(str(w)), "+.2f") for w in gw], _e(g.get("largest_at")), _e(g.get("smallest_at"))]
                for n, g in gap.items()]
        out += ["<h3>Gap: trained − frozen accuracy (points)</h3>",
                _table(["pair", *[f"m={w}" for w in gw], "largest at", "smallest at"], rows, f"{pid}gap-table")]
    else:
        out.append("<p class=note>No frozen/trained pair sharing unit and init in this ladder: no gap.</p>")
    out += _wall_section(e, pid, stem)
    red = d["analysis"].get("redundancy") or {}
    if red:
        rows = [[_e(b), _f(r.get("mean_abs_corr"), ".4f"), _f(r.get("participation_ratio"), ".1f"), _e(r.get("n", ""))]
                for b, r in red.items()]
        s = d["analysis"]["settings"]
        out += [f"<h3>Redundancy of each frozen bank (m = {s['redundancy_width']})</h3>",
                _table(["bank", "mean |off-diagonal corr|", "participation ratio", "images"], rows, f"{pid}redundancy-table")]
    out.append(_provenance(e))
    return "\n".join(o for o in out if o)


def _wall_section(e: dict, pid: str = "", stem: str = "ladder") -> list[str]:
    """The wall (protocol readout against the convex optimum) and the redundancy grid, when the memo has them."""
    d = e["data"]
    w = d["analysis"].get("wall")
    out = ["<h3>The wall: protocol readout against the convex optimum</h3>"]
    plan = d["plan"]
    if not w:
        frozen = [a["arm"] for a in d["arms"] if not a["arm"].endswith("-trained")]
        if d.get("name") in ("quick", "paper"):
            command = f"lazylab ladder --preset {d['name']} --readout both"
        else:
            command = (f"lazylab ladder --arms {','.join(frozen)} --widths {','.join(map(str, plan['widths']))} "
                       f"--seeds {','.join(map(str, plan['seeds']))} --epochs {plan['epochs']} "
                       f"--train-size {plan['train_size']}" + (f" --lr {plan['lr']:g}" if plan.get("lr") else "")
                       + " --readout both")
        out.append("<p class=note>" + ("Not in the memo for this ladder: <code>" + _e(command) + "</code> adds it "
                                       "(docs/convex.md).</p>" if frozen else "This ladder has no frozen arm.</p>"))
    else:
        rows = [[_e(arm), _e(width), _f(r["best_acc"]), _f(r["final_acc"]), _f(r["convex_acc"]), _f(r["gap"], "+.2f"),
                 _f(r["loss_gap"], "+.4f"), f"{r['grad_norm']:.1e}" + ("" if r["converged"] else " *")]
                for arm, per in w["arms"].items() for width, r in per.items()]
        epochs = plan["epochs"]
        out += [f"<p>Each frozen bank's head, read out by the protocol ({epochs} AdamW epoch{'s' * (epochs != 1)}, best "
                "epoch) and fitted to the optimum of cross-entropy + L2 (L-BFGS, lambda chosen on held-out training "
                "images). Where the shaded gap is wide, the protocol's optimiser, not the bank, sets the frozen curve. "
                "* : the solve ended on the objective-change rule or the iteration cap, not the gradient rule.</p>",
                _table(["arm", "m", "best_acc", "final_acc", "convex", "gap (pts)", "train-loss gap (nats)", "grad norm"],
                       rows, f"{pid}wall-table"),
                _img(e, f"{stem}_wall.png", "protocol and convex readouts vs width",
                     "Per frozen arm: protocol best_acc (solid) and the convex optimum's test accuracy (dashed) vs width, "
                     "the gap shaded.")]
    grid = d["analysis"].get("redundancy_grid")
    if grid:
        rows = [[_e(r["bank"]), _e(r["fan_in"]), _e(r["sample"]),
                 f"{r['mean_abs_corr']['mean']:.3f} ± {r['mean_abs_corr']['std']:.3f}",
                 f"{r['participation_ratio']['mean']:.1f} ± {r['participation_ratio']['std']:.1f}"] for r in grid]
        g = grid[0]
        out += [f"<h3>Redundancy, reconciled (m = {g['m']}, n = {g['n']}, seeds {_e(','.join(map(str, g['seeds'])))})</h3>",
                "<p>The published 0.42 / about 5 directions for the random Yat bank is the fan-in-d init; the published "
                "0.01 / about 230 for the data-seeded bank appears only when the sample holds every seed image. On images "
                "that seed no unit the data bank is the more redundant one (docs/results.md).</p>",
                _table(["bank", "fan-in", "sample", "mean |corr|", "participation ratio"], rows, f"{pid}redundancy-grid", left={0, 1, 2})]
    else:
        out.append("<p class=note>Redundancy for each fan-in and image sample: not in the memo; <code>lazylab "
                   "redundancy</code> adds it (docs/results.md, \"Redundancy, reconciled\").</p>")
    return out


def report_html(manifest: dict, env: dict, plugin_rows: list[dict]) -> str:
    """The report page from a manifest (see ``Renderer.report``)."""
    J = manifest["jobs"]
    data_info = manifest.get("data", {})
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    parts = [f"<h1>lazylab: how many random neurons buy a trained one?</h1>"
             f"<p class=note>Fashion-MNIST, measured. Written {_e(now)} by lazylab {_e(env.get('lazylab'))}; data "
             f"fingerprint <code>{_e(data_info.get('fingerprint', '-'))}</code>. Every picture below comes from the "
             f"memo (or was computed for it); its exact configuration, memo keys and the versions that drew it are "
             f"under each one.</p>",
             '<nav><a href="#paper">paper ladder</a><a href="#ladder">your ladder</a><a href="#gram">Gram</a><a href="#readout">readout</a>'
             '<a href="#trajectory">trajectories</a><a href="#ntk">NTK</a><a href="#provenance">versions</a></nav>']

    pplan = ((J.get("paper") or {}).get("data") or {}).get("plan") or {}
    shape = (f" ({len(pplan['arms'])} arms, {len(pplan['widths'])} widths, {len(pplan['seeds'])} seeds)"
             if pplan.get("arms") else "")
    parts.append(f'<section id="paper"><h2>The answer: the paper ladder{shape}</h2>'
                 + _paper_section(J.get("paper"), J.get("ladder")) + "</section>")
    lad, pap = J.get("ladder"), J.get("paper")
    if lad and pap and lad["data"].get("name") == "paper" and pap["data"].get("source") == "memo":
        body = "<p class=note>Your ladder is the paper ladder, shown above from your memo.</p>"
    else:
        body = ("<p class=note>The ladder you asked for (<code>--preset</code>, <code>--arms</code>/<code>--widths</code>/"
                "<code>--seeds</code>/<code>--epochs</code> or <code>--from</code>; by default the quick preset), beside "
                "the paper ladder, never in its place.</p>" + _ladder_section(lad))
    parts.append('<section id="ladder"><h2>Your ladder</h2>' + body + "</section>")

    g = J.get("gram")
    if g:
        d = g["data"]
        fit = d["fit"]
        slope = (f"log-log slope {fit['slope']:.3f} over widths {fit['widths'][0]}..{fit['widths'][1]} "
                 f"(R² {fit['r2']:.3f}; Monte Carlo predicts −0.5)") if fit.get("slope") is not None else "slope not fitted"
        parts.append(
            '<section id="gram"><h2>Gram crystallization</h2>'
            + _img(g, "gram.gif", "normalised Gram matrix as the bank grows",
                   f"{_e(g['spec']['arm'])}: normalised Gram K = ΦΦᵀ/m of {d['images']} test images "
                   f"({_e(', '.join(d['classes']))}) as one bank grows from {d['widths'][0]} to {d['widths'][1]:,} units "
                   f"in {d['frames']} frames.")
            + f"<p>Distance to a {d['ref_units']:,}-unit reference: {d['distance'][0]:.4f} → {d['distance'][1]:.4f}; "
              f"{_e(slope)}. Block contrast (within − cross class) {d['contrast'][0]:.4f} → {d['contrast'][1]:.4f} "
              f"(reference {d['reference_contrast']:.4f}).</p>" + _provenance(g) + "</section>")

    r = J.get("readout")
    if r:
        d = r["data"]
        rows = [[str(c["width"]), _f(c["start"]), _f(c["final"]), f"{c['best']:.2f} (step {c['best_step']})"] for c in d["curves"]]
        parts.append(
            '<section id="readout"><h2>Readout race</h2>'
            + _img(r, "readout.gif", "readout race",
                   f"{_e(r['spec']['arm'])}: linear readouts on frozen banks by full-batch Adam (lr {d['lr']:g}, {d['steps']} "
                   f"steps, {d['train_size']:,} training images); garments framed green/orange by the m = {d['judge']} "
                   f"readout's live verdict.")
            + _table(["width m", "step 0 (%)", "final (%)", "best (%)"], rows, "readout-table")
            + f"<p>The m = {d['judge']} readout gets {d['right']}/{d['shown']} of the shown garments right at the end.</p>"
            + _provenance(r) + "</section>")

    t, tf = J.get("trajectory"), J.get("trajectory_finals")
    if t or tf:
        d = (t or tf)["data"]
        rows = []
        for a in d["arms"]:
            f = a["final"]
            src = {"fixed": "fixed (docs/trajectory.md)", "bracket (memo)": "bracketed (memo)"}.get(a["rate_source"], a["rate_source"])
            sc = ", ".join(f"{k} {a['scalars_start'].get(k, float('nan')):.3g}→{v:.3g}" for k, v in f["scalars"].items())
            rows.append([_e(a["arm"]), _e(a["init"]), f"{a['lr']:g} ({_e(src)})", _f(f["travel_median"], ".4f"),
                         _f(f["travel_max"], ".4f"), _f(f["accuracy"]), _f(f["best_acc"]), _e(sc or "-")])
        rates = {a["rate_source"] for a in d["arms"]}
        why = ""
        if "fixed" in rates:
            why = (" Rates marked fixed are 0.03, the rate the ladder's bracket (m = 256, seed 0, 12 epochs) chose for "
                   "all three default arms on the full training set (docs/trajectory.md); render does not re-run that "
                   "bracket (about 4 minutes on two cores). <code>lazylab trajectory</code> brackets it and, once the "
                   "bracket is in the memo, render uses the bracketed rates.")
        parts.append(
            f'<section id="trajectory"><h2>Prototype trajectories</h2><p>Trained arms at m = {d["width"]}, {d["epochs"]} '
            f'epochs on {d["train_size"]:,} training images, seed {d["seed"]}.{why}</p>'
            + _img(t, "trajectory_prototypes.gif", "prototypes epoch by epoch",
                   "The first prototypes of each arm as 28×28 images, epoch by epoch; random-init rows above data-init "
                   "rows; " + _e((t["data"].get("caption") if t else None) or "colour: see the picture") + ".")
            + _img(t, "trajectory_curves.gif", "travel and accuracy through training",
                   "Median per-unit relative travel ||w_t − w_0|| / ||w_0|| and test accuracy, drawn through training.")
            + _img(tf, "trajectory_finals.png", "first and last epoch",
                   "Start and end: epoch 0 and the last epoch of the same prototypes, and the full curves.")
            + _table(["arm", "init", "lr (source)", "median travel", "max travel", "final acc (%)", "best acc (%)",
                      "scalars start→end"], rows, "trajectory-table", left={0, 1, 2, 7})
            + "".join(f"<p class=note>note: {_e(n)}</p>" for n in d.get("notes", []))
            + _provenance(t or tf) + "</section>")

    parts.append('<section id="ntk"><h2>Lazy versus rich: the NTK</h2>')
    lab, labf = J.get("ntk_lab"), J.get("ntk_lab_figure")
    if lab or labf:
        s = (lab or labf)["data"]["summary"]
        c = s["config"]
        rows = [["network", _f(s["train_mse"], ".5f"), _f(s["test_mse"], ".5f"), _f(s["move_net"], ".4f")],
                ["linearization", _f(s["train_mse_lin"], ".5f"), _f(s["test_mse_lin"], ".5f"), _f(s["move_lin"], ".4f")]]
        parts.append(
            f"<h3>1-D lab</h3><p>f(x) = m<sup>−1/2</sup> Σ a<sub>j</sub> tanh(w<sub>j</sub> x + b<sub>j</sub>), m = {c['width']}, "
            f"full-batch GD lr {c['lr']:g} for {c['steps']} steps, bump {c['bump']:g}, noise {c['noise']:g}, seed {c['seed']}; "
            f"the network and its linearization from one init. NTK drift {s['drift']:.4f}; RMS disagreement "
            f"{s['disagreement']:.4f}.</p>"
            + _img(lab, "ntk_lab.gif", "network vs linearization through training",
                   "Function space, losses and kernel drift through training (log-spaced steps).")
            + _img(labf, "ntk_lab.png", "1-D lab at the last step", "The lab at the last step.")
            + _table(["model", "train MSE", "test MSE", "relative movement"], rows, "lab-table")
            + _provenance(lab or labf))
    sw = J.get("ntk_sweep")
    if sw:
        d = sw["data"]
        rows = [[str(r["width"]), f"{r['drift']:.4f} ± {r['drift_std']:.4f}",
                 f"{r['disagreement']:.4f} ± {r['disagreement_std']:.4f}", _f(r["move_net"], ".4f")] for r in d["rows"]]
        sl = d["slopes"]
        parts.append(
            "<h3>Width sweep</h3>"
            + _img(sw, "ntk_sweep.png", "drift and disagreement vs width",
                   f"NTK drift (slope {sl['drift']['slope']:.2f}) and network-vs-linearization disagreement (slope "
                   f"{sl['disagreement']['slope']:.2f}) shrink with width; mean ± std over seeds.")
            + _table(["m", "NTK drift", "disagreement (RMS)", "movement"], rows, "sweep-table") + _provenance(sw))
    sc = J.get("ntk_scalar")
    if sc:
        d = sc["data"]
        parts.append(
            "<h3>Scalar factorized model (exact)</h3>"
            + _img(sc, "ntk_scalar.png", "scalar model", "f = a b x: closed forms (lines) against RK4 integration (markers), "
                   "the two negative controls and the two-mode residual decay.")
            + _checks_table(d["checks"], "scalar-checks")
            + f"<p>Two-mode decay at t = {d['t_end']:g}: {d['mode1_end']:.3e} and {d['mode2_end']:.4f}. Table: "
              f'<a href="ntk_scalar.csv">ntk_scalar.csv</a>.</p>' + _provenance(sc))
    au = J.get("ntk_audit")
    if au:
        checks = au["data"]["checks"]
        ok = sum(1 for c in checks if c["ok"])
        parts.append(f"<h3>Audit of the 1-D lab</h3><p>{ok}/{len(checks)} checks behave as required.</p>"
                     + _checks_table(checks, "audit-table") + _provenance(au))
    parts.append("</section>")

    vrows = [[_e(k), _e(v)] for k, v in env.items()]
    prow = [[_e(p["unit"]), _e(p["distribution"]), _e(p["version"]), _e(p["status"])] for p in plugin_rows]
    parts.append(
        '<section id="provenance"><h2>Versions and data</h2>'
        "<p>This page was written with the versions below. Each artifact above lists the versions that drew it; the "
        "memo keys its results by configuration (arm, plugin distribution and version, width, seed, rate, epochs, "
        "batch, data fingerprint, cache schema), not by library version.</p>"
        + _table(["package", "version"], vrows, "versions-table", left=2)
        + "<h3>Units (plugins)</h3>" + _table(["unit", "distribution", "version", "status"], prow, "plugins-table", left=4)
        + f"<p>Data: <code>{_e(data_info.get('directory', '-'))}</code>, fingerprint "
          f"<code>{_e(data_info.get('fingerprint', '-'))}</code> (SHA-256 over the four IDX files; "
          f"<code>lazylab data info</code>).</p></section>")
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            "<link rel=\"icon\" href=\"data:,\"><title>lazylab report</title>"
            f"<style>{CSS}</style></head><body><main>\n" + "\n".join(parts) + "\n</main></body></html>\n")
