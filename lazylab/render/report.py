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

This module runs the jobs and keeps the manifest. The page itself is built by
``lazylab.render.page`` (its ladder sections in ``lazylab.render.ladder_sections``,
its pieces in ``lazylab.render.html_parts``); the versions and file facts come
from ``lazylab.render.provenance``; ``trajectory_finals`` is drawn by
``lazylab.render.trajectory``. ``report_html``, ``trajectory_finals``,
``versions``, ``plugins`` and ``file_facts`` stay importable from here.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, fields, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import numpy as np

from lazylab.errors import LazylabError
from lazylab.experiments import render as xr
from lazylab.paths import writable_dir, write_atomically, write_text_atomically
from lazylab.render.page import report_html
from lazylab.render.provenance import _jsonable, _sha256, file_facts, plugins, versions
from lazylab.render.trajectory import trajectory_finals

RENDER_SCHEMA = 4  # bump when a picture's drawing changes: every job is then redrawn (from the memo)
MANIFEST = "manifest.json"
REPORT = "report.html"
GIF_JOBS = ("gram", "readout", "trajectory", "ntk_lab")
FIGURE_JOBS = ("paper", "ladder", "trajectory_finals", "ntk_lab_figure", "ntk_sweep", "ntk_scalar")
DATA_JOBS = ("ntk_audit",)
LADDER_JOBS = ("paper", "ladder")  # what ``render report --sections ladders`` draws
Progress = Callable[[str, int, int], None]


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
        from lazylab.schemas import read_json

        try:  # the bounded reader: a FIFO or a device in the folder is refused at once, not waited on
            m = read_json(self.out / MANIFEST, "render manifest") if (self.out / MANIFEST).exists() else None
            if isinstance(m, dict) and m.get("schema") == RENDER_SCHEMA and isinstance(m.get("jobs"), dict):
                return m
        except (LazylabError, OSError, ValueError):
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
            # Same configuration, so the same picture; but say so when another memo drew it (a shared --out).
            elsewhere = entry.get("memo") not in (None, str(self.ws.memo.directory))
            return {**entry, "status": "up to date" + (f" (drawn from the memo {entry['memo']})" if elsewhere else ""),
                    "computed": []}
        t0 = time.perf_counter()
        files, data, computed = getattr(self, f"_job_{name}")(spec)
        facts = {}
        for path in files:
            facts[path.name] = file_facts(path)
        entry = {"name": name, "key": key, "spec": spec, "files": facts, "data": _jsonable(data),
                 "versions": self._versions, "drawn_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                 "seconds": round(time.perf_counter() - t0, 2), "computed": computed, "memo": str(self.ws.memo.directory)}
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

    def report(self, jobs: tuple[str, ...] | None = None) -> tuple[Path, list[dict]]:
        """Bring ``jobs`` (default: every job) up to date, then write ``report.html`` from the manifest's
        entries of those jobs alone."""
        jobs = GIF_JOBS + FIGURE_JOBS + DATA_JOBS if jobs is None else jobs
        entries = self.run(jobs)
        self._tick("writing report.html")
        shown = {**self.manifest, "jobs": {k: v for k, v in self.manifest["jobs"].items() if k in jobs}}
        page = report_html(shown, self._versions, plugins())
        write_text_atomically(self.out / REPORT, page, "--out")
        self._done("writing report.html")
        return self.out / REPORT, entries

    def ladders(self) -> tuple[Path, list[dict]]:
        """``report.html`` with the ladder sections alone (the paper ladder and yours): nothing else is
        computed or drawn (``render report --sections ladders``)."""
        return self.report(LADDER_JOBS)


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
