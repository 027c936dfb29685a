"""What ``lazylab render`` shows, and where each result comes from (SPEC section 7, ``render``).

``render`` reads records from the memo and asks the experiments for what is
missing (DESIGN.md). This module holds the settings of every picture (the
subcommands' own defaults, so the memo entries are shared with ``lazylab
gram``, ``readout``, ``trajectory``, ``ntk`` and ``ladder``) and one function
per result that returns it from the memo or computes and stores it. No
drawing and no printing here: ``lazylab.render.report`` draws.

Two choices differ from the subcommands, both stated in the report:

* **Trajectory rate.** ``lazylab trajectory`` brackets each arm's rate first
  (9 runs at m = 256 for 12 epochs, about 4 minutes on two cores). ``render``
  uses each arm's bracketed rate when its whole bracket is already in the
  memo (from ``lazylab trajectory`` or a ladder with the same protocol), and
  otherwise the fixed rate 0.03 — the rate that bracketing chose for all three
  default arms on the full training set (docs/trajectory.md). A trajectory at
  0.03 has the same memo key as ``lazylab trajectory --lr 0.03`` and as the
  bracketed default whenever the bracket picks 0.03.
* **Which ladder.** ``preset="auto"`` shows the paper ladder when every one of
  its runs is in the memo, else the quick preset's ladder (computing its
  missing runs: about 70 s on two cores from nothing).

The 1-D NTK lab, its width sweep, the scalar model and the audit are cheap and
not memoized by ``lazylab ntk``; here they are memoized under keys hashed from
their configuration (``ntklab-``, ``ntksweep-``, ``ntkscalar-``, ``ntkaudit-``).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from typing import Callable

import numpy as np

from lazylab.config import CACHE_SCHEMA, memo_key
from lazylab.errors import LazylabError
from lazylab.experiments import Reporter, Workspace
from lazylab.ntk.lab import LabConfig

Progress = Callable[[str, int, int], None]  # (stage, done, total), as in experiments.gram

FIXED_TRAJECTORY_LR = 0.03  # what bracketing chose for yat-trained, yat-data-trained, gaussian-trained (docs/trajectory.md)
NTK_MEMO_SCHEMA = 1  # bump when the stored layout of the lab, sweep, scalar or audit results changes
SWEEP_WIDTHS = (8, 16, 32, 64, 128, 256, 512, 1024)  # docs/ntk.md's sweep
SWEEP_LR = 0.05  # the CLI's sweep default (lazylab ntk lab --widths)
SWEEP_SEEDS = (0, 1, 2, 3, 4)
LADDER_CHOICES = ("auto", "quick", "paper")


# ------------------------------------------------------------------ settings
@dataclass(frozen=True)
class GramSettings:
    """``lazylab gram``'s defaults (docs/gram_readout.md)."""

    arm: str = "yat-frozen"
    max_units: int = 2000
    frames: int = 40
    classes: tuple[int, ...] = (0, 1, 7)
    per_class: int = 10
    seed: int = 0
    ref_units: int | None = None
    fit_min: int = 10
    repeats: int = 1


@dataclass(frozen=True)
class ReadoutSettings:
    """``lazylab readout``'s defaults (docs/gram_readout.md)."""

    arm: str = "yat-frozen"
    widths: tuple[int, ...] = (64, 512)
    train_size: int = 10_000
    steps: int = 300
    lr: float = 0.3
    eval_every: int = 5
    seed: int = 0


@dataclass(frozen=True)
class TrajectorySettings:
    """``lazylab trajectory``'s defaults, except the rate (module docstring).

    ``lr=None``: each arm's bracketed rate if its whole bracket is in the memo,
    else ``fallback_lr``. A number: that rate for every arm.
    """

    arms: tuple[str, ...] = ("yat-trained", "yat-data-trained", "gaussian-trained")
    width: int = 64
    epochs: int = 24
    snapshots: int = 16
    seed: int = 0
    lr: float | None = None
    fallback_lr: float = FIXED_TRAJECTORY_LR
    train_size: int = 60000
    fan_in: str = "unit"
    prototype_scale: str = "per-image"  # or "shared" (lazylab.render.trajectory.prototype_figure)


@dataclass(frozen=True)
class NtkSettings:
    """``lazylab ntk lab`` (one run: m = 32, lr 0.5, 2000 steps, 60 frames), its width sweep
    (lr 0.05, seeds 0-4, widths 8..1024), ``ntk scalar`` (w0 = 0.01) and ``ntk audit``."""

    lab_config: LabConfig = LabConfig()
    sweep_widths: tuple[int, ...] = SWEEP_WIDTHS
    sweep_lr: float = SWEEP_LR
    sweep_seeds: tuple[int, ...] = SWEEP_SEEDS
    w0: float = 0.01
    times: tuple[float, ...] = (0.0, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0)
    dt: float = 1e-3
    offset: float = 1e-3

    def lab(self):
        return self.lab_config.validate()

    def sweep(self):
        return replace(self.lab_config, width=self.sweep_widths[0], lr=self.sweep_lr, seed=self.sweep_seeds[0]).validate()

    def audit(self):
        return LabConfig()  # the audit's own default configuration (lazylab ntk audit)


@dataclass(frozen=True)
class LadderSettings:
    """Which ladder the figures and the table show.

    ``preset``: ``"auto"`` (paper if complete in the memo, else quick), ``"quick"`` or ``"paper"``
    (``lazylab ladder --preset``). ``plan``: an explicit plan instead (``arms``, ``widths``,
    ``seeds``, ``epochs``, ``train_size``, ``lr``; tests use a tiny one).
    """

    preset: str = "auto"
    plan: tuple | None = None  # sorted (key, value) pairs of an explicit plan
    source: str | None = None  # a ``ladder --json`` file to show instead (``render --from``)

    @staticmethod
    def explicit(**plan) -> "LadderSettings":
        return LadderSettings(preset="custom", plan=tuple(sorted((k, tuple(v) if isinstance(v, list) else v)
                                                                 for k, v in plan.items())))

    @staticmethod
    def from_file(path) -> "LadderSettings":
        """The ladder a ``lazylab ladder --json`` file holds, shown as written (``load_ladder_json`` reads it)."""
        return LadderSettings(preset="file", source=str(path))


@dataclass(frozen=True)
class RenderSettings:
    """Everything ``render`` draws, each part with its subcommand's defaults."""

    gram: GramSettings = field(default_factory=GramSettings)
    readout: ReadoutSettings = field(default_factory=ReadoutSettings)
    trajectory: TrajectorySettings = field(default_factory=TrajectorySettings)
    ntk: NtkSettings = field(default_factory=NtkSettings)
    ladder: LadderSettings = field(default_factory=LadderSettings)
    reference: str | None = None  # the reference results file [default: the shipped lazylab/reference/paper.json]

    def with_ladder(self, preset: str) -> "RenderSettings":
        if self.ladder.plan is not None or self.ladder.source is not None:
            return self
        return replace(self, ladder=LadderSettings(preset=preset))


DEFAULT_SETTINGS = RenderSettings()


def digest(payload) -> str:
    """32 hex digits of SHA-256 of the code identity and ``payload``'s canonical JSON (as ``memo_key``)."""
    return memo_key("x", payload)[2:]


def _arm(name: str):
    from lazylab.arms import get_arm

    return get_arm(name)


def _quiet(stage: str, done: int, total: int) -> None:
    pass


# ---------------------------------------------------------------------- gram
def gram_spec(ws: Workspace, s: GramSettings):
    """``(arm, GramConfig)`` for the settings (validated by ``gram_config``)."""
    from lazylab.experiments.gram import gram_config

    arm = _arm(s.arm)
    return arm, gram_config(ws, arm, max_units=s.max_units, frames=s.frames, classes=tuple(s.classes),
                            per_class=s.per_class, seed=s.seed, ref_units=s.ref_units, fit_min=s.fit_min,
                            repeats=s.repeats)


def gram_result(ws: Workspace, s: GramSettings, progress: Progress = _quiet):
    """The ``lazylab gram`` result for the settings: from the memo, or computed and stored."""
    from lazylab.experiments.gram import run_gram

    arm, cfg = gram_spec(ws, s)
    return run_gram(ws, arm, cfg, lambda stage, d, t: progress(f"gram: {stage}", d, t))


# ------------------------------------------------------------------- readout
def readout_spec(ws: Workspace, s: ReadoutSettings):
    """``(arm, [ReadoutConfig])`` for the settings."""
    from lazylab.experiments.readout import readout_configs

    arm = _arm(s.arm)
    return arm, readout_configs(ws, arm, tuple(s.widths), seed=s.seed, lr=s.lr, steps=s.steps,
                                eval_every=s.eval_every, train_size=s.train_size)


def readout_result(ws: Workspace, s: ReadoutSettings, progress: Progress = _quiet):
    """The ``lazylab readout`` result for the settings: from the memo, or computed and stored."""
    from lazylab.experiments.readout import run_readout

    arm, configs = readout_spec(ws, s)
    return run_readout(ws, arm, configs, lambda stage, d, t: progress(f"readout: {stage}", d, t))


# ---------------------------------------------------------------- trajectory
def trajectory_rates(ws: Workspace, s: TrajectorySettings) -> list[dict]:
    """Per arm: ``{"arm", "lr", "source", "bracket"}`` — nothing is trained here.

    ``source`` is ``"given"`` (``s.lr``), ``"bracket (memo)"`` (every bracket run
    of the arm is in the memo; the rate with the highest ``best_acc``) or
    ``"fixed"`` (``s.fallback_lr``, when the bracket is not all in the memo, or
    diverged throughout).
    """
    from lazylab.experiments import json_config
    from lazylab.experiments.ladder import choose_rate
    from lazylab.experiments.trajectory import BRACKET_SEED, BRACKET_WIDTH, TrajectoryPlan

    out = []
    for name in s.arms:
        arm = _arm(name)
        if s.lr is not None:
            out.append({"arm": name, "lr": float(s.lr), "source": "given", "bracket": {}})
            continue
        plan = TrajectoryPlan(arms=(arm,), train_size=s.train_size, fan_in=s.fan_in)
        scores, complete = {}, True
        for lr in arm.unit.grid(True):
            cfg = ws.config(arm, BRACKET_WIDTH, BRACKET_SEED, lr, **plan.bracket_protocol())
            rec = ws.memo.get_record(cfg.key())
            if not isinstance(rec, dict) or rec.get("config") != json_config(cfg):
                complete = False
                break
            scores[lr] = rec["best_acc"]
        chosen = choose_rate(scores) if complete else None
        if chosen is None:
            out.append({"arm": name, "lr": float(s.fallback_lr), "source": "fixed", "bracket": {}})
        else:
            out.append({"arm": name, "lr": float(chosen), "source": "bracket (memo)",
                        "bracket": {repr(lr): acc for lr, acc in scores.items()}})
    return out


def trajectory_spec(ws: Workspace, s: TrajectorySettings) -> list[dict]:
    """Per arm: its rate (``trajectory_rates``) and the ``TrajectoryConfig`` (dict and memo key)."""
    from lazylab.experiments.trajectory import TrajectoryConfig, TrajectoryPlan, validate

    rates = trajectory_rates(ws, s)
    arms = tuple(_arm(n) for n in s.arms)
    validate(TrajectoryPlan(arms=arms, width=s.width, epochs=s.epochs, snapshots=s.snapshots, seed=s.seed,
                            lr=1.0, train_size=s.train_size, fan_in=s.fan_in))
    out = []
    for arm, rate in zip(arms, rates):
        plan = TrajectoryPlan(arms=(arm,), width=s.width, epochs=s.epochs, snapshots=s.snapshots, seed=s.seed,
                              lr=rate["lr"], train_size=s.train_size, fan_in=s.fan_in)
        tcfg = TrajectoryConfig(ws.config(arm, s.width, s.seed, rate["lr"], **plan.protocol()), s.snapshots)
        out.append({**rate, "key": tcfg.key(), "config": json.loads(tcfg.canonical())})
    return out


class _StageReporter(Reporter):
    """Experiment progress hooks turned into ``progress(stage, done, total)`` ticks, counting memo hits."""

    def __init__(self, progress: Progress, label: str):
        self.progress, self.label = progress, label
        self.total, self.seen, self.computed, self.cached = 0, 0, 0, 0

    def plan(self, total):
        self.total = total
        self.progress(self.label, 0, total)

    def start(self, cfg):
        self.progress(f"{self.label}: {cfg.arm} m={cfg.width} seed={cfg.seed} lr={cfg.lr:g}", 0, cfg.epochs)

    def epoch(self, cfg, epoch, acc):
        self.progress(f"{self.label}: {cfg.arm} m={cfg.width} seed={cfg.seed} lr={cfg.lr:g}", epoch, cfg.epochs)

    def done(self, cfg, record, cached):
        self.seen += 1
        self.cached += cached
        self.computed += not cached
        self.progress(self.label, self.seen, max(self.total, self.seen))


def trajectory_result(ws: Workspace, s: TrajectorySettings, progress: Progress = _quiet):
    """The trajectories of every arm at its rate (``trajectory_spec``): memo or computed.

    Returns ``(result, computed)``: a ``TrajectoryResult`` whose arms carry
    ``rate_source`` ``"given"``, ``"bracket (memo)"`` or ``"fixed"`` (its
    ``plan["lr"]`` is None and ``plan["rates"]`` lists each arm's rate and
    source), and how many trajectories were trained now (the rest came from the memo).
    """
    from lazylab.experiments.trajectory import TrajectoryPlan, TrajectoryResult, run_trajectory

    spec = trajectory_spec(ws, s)
    arms, notes = [], []
    reporter = _StageReporter(progress, "trajectory")
    plan_json = None
    for item in spec:
        plan = TrajectoryPlan(arms=(_arm(item["arm"]),), width=s.width, epochs=s.epochs, snapshots=s.snapshots,
                              seed=s.seed, lr=item["lr"], train_size=s.train_size, fan_in=s.fan_in)
        res = run_trajectory(ws, plan, reporter)
        for a in res.arms:
            a.rate_source, a.bracket = item["source"], item["bracket"]
        arms += res.arms
        notes += res.notes
        plan_json = res.plan
    plan_json = {**plan_json, "arms": list(s.arms), "lr": None, "bracket": None,
                 "rates": [{k: item[k] for k in ("arm", "lr", "source", "bracket")} for item in spec]}
    return TrajectoryResult(plan=plan_json, arms=arms, notes=notes), reporter.computed


# ----------------------------------------------------------------------- ntk
LAB_ARRAYS = ("theta0", "theta", "theta_lin", "loss", "loss_lin", "snap_steps", "pred_test", "pred_test_lin",
              "pred_train", "pred_train_lin", "drift", "K0", "KT")


def lab_key(cfg) -> str:
    return "ntklab-" + digest({"kind": "ntk-lab", "config": asdict(cfg), "schema": NTK_MEMO_SCHEMA, "cache": CACHE_SCHEMA})


def lab_result(ws: Workspace, cfg, progress: Progress = _quiet):
    """``(LabResult, cached)`` of the 1-D lab (``lazylab ntk lab``) for ``cfg``, memoized under ``lab_key``."""
    from lazylab.ntk.lab import LabResult, make_data, run_lab

    key = lab_key(cfg)
    arrays, rec = ws.memo.get_arrays(key), ws.memo.get_record(key + "-summary")
    if arrays is not None and rec is not None and set(LAB_ARRAYS) <= set(arrays):
        res = LabResult(config=cfg, data=make_data(cfg), **{k: arrays[k] for k in LAB_ARRAYS},
                        n_params=int(rec["n_params"]), jac_shape=tuple(rec["jac_shape"]), start_gap=float(rec["start_gap"]))
        return res, True
    progress("ntk lab: gradient descent", 0, 1)
    res = run_lab(cfg)
    ws.memo.put_arrays(key, {k: getattr(res, k) for k in LAB_ARRAYS})
    ws.memo.put_record(key + "-summary", {"n_params": res.n_params, "jac_shape": list(res.jac_shape),
                                          "start_gap": res.start_gap, "summary": res.summary()})
    progress("ntk lab: gradient descent", 1, 1)
    return res, False


def sweep_key(cfg, widths, seeds) -> str:
    return "ntksweep-" + digest({"kind": "ntk-sweep", "config": asdict(cfg), "widths": list(widths),
                                 "seeds": list(seeds), "schema": NTK_MEMO_SCHEMA, "cache": CACHE_SCHEMA})


def sweep_result(ws: Workspace, cfg, widths, seeds, progress: Progress = _quiet):
    """``(SweepResult, cached)`` of the lab's width sweep (``lazylab ntk lab --widths``), memoized."""
    from lazylab.ntk.lab import LabConfig, SweepResult, sweep

    key = sweep_key(cfg, widths, seeds)
    rec = ws.memo.get_record(key)
    if rec is not None and {"config", "widths", "seeds", "rows", "slopes"} <= set(rec):
        return SweepResult(config=LabConfig(**rec["config"]), widths=rec["widths"], seeds=rec["seeds"],
                           rows=rec["rows"], slopes=rec["slopes"]), True
    total, done = len(widths) * len(seeds), [0]

    def on_run(w, s):
        done[0] += 1
        progress("ntk sweep", done[0], total)

    progress("ntk sweep", 0, total)
    sw = sweep(cfg, list(widths), list(seeds), on_run=on_run)
    ws.memo.put_record(key, sw.to_json())
    return sw, False


def _checks_json(checks) -> list[dict]:
    return [c.to_json() for c in checks]


def _checks(items: list[dict]):
    from lazylab.ntk.checks import Check

    return [Check(**{k: v for k, v in c.items() if k != "ok"}) for c in items]


def scalar_key(s: NtkSettings) -> str:
    return "ntkscalar-" + digest({"kind": "ntk-scalar", "w0": s.w0, "times": list(s.times), "dt": s.dt,
                                  "offset": s.offset, "schema": NTK_MEMO_SCHEMA, "cache": CACHE_SCHEMA})


def scalar_result(ws: Workspace, s: NtkSettings, progress: Progress = _quiet):
    """``(ScalarResult, cached)`` of the exact scalar model (``lazylab ntk scalar``), memoized."""
    from lazylab.ntk.scalar import ScalarResult, run_scalar, setting_problem

    problem = setting_problem(s.w0, s.times, s.offset)
    if problem:
        raise LazylabError(f"ntk scalar: {problem}")
    key = scalar_key(s)
    arrays, rec = ws.memo.get_arrays(key), ws.memo.get_record(key + "-checks")
    if arrays is not None and rec is not None and "times" in arrays:
        table = {k[6:]: v for k, v in arrays.items() if k.startswith("table/")}
        return ScalarResult(w0=rec["w0"], dt=rec["dt"], offset=rec["offset"], times=arrays["times"], table=table,
                            checks=_checks(rec["checks"])), True
    progress("ntk scalar: RK4", 0, 1)
    res = run_scalar(w0=s.w0, times=s.times, dt=s.dt, offset=s.offset)
    ws.memo.put_arrays(key, {"times": res.times, **{f"table/{k}": np.asarray(v) for k, v in res.table.items()}})
    ws.memo.put_record(key + "-checks", {"w0": res.w0, "dt": res.dt, "offset": res.offset,
                                         "checks": _checks_json(res.checks)})
    progress("ntk scalar: RK4", 1, 1)
    return res, False


def audit_key(cfg) -> str:
    return "ntkaudit-" + digest({"kind": "ntk-audit", "config": asdict(cfg), "schema": NTK_MEMO_SCHEMA, "cache": CACHE_SCHEMA})


def audit_result(ws: Workspace, cfg, progress: Progress = _quiet):
    """``(checks, cached)`` of ``lazylab ntk audit`` on ``cfg``, memoized."""
    from lazylab.ntk.audit import run_audit

    key = audit_key(cfg)
    rec = ws.memo.get_record(key)
    if rec is not None and "checks" in rec:
        return _checks(rec["checks"]), True
    progress("ntk audit", 0, 1)
    checks = run_audit(cfg)
    ws.memo.put_record(key, {"checks": _checks_json(checks)})
    progress("ntk audit", 1, 1)
    return checks, False


# -------------------------------------------------------------------- ladder
def _plan(preset: str | None, explicit: dict | None = None):
    from lazylab.experiments.ladder import PRESETS, LadderPlan

    if explicit is not None:
        p = dict(explicit)
        return LadderPlan(arms=tuple(_arm(n) for n in p["arms"]), widths=tuple(p["widths"]), seeds=tuple(p["seeds"]),
                          epochs=p.get("epochs", 12), train_size=p.get("train_size", 60000), lr=p.get("lr"),
                          fan_in=p.get("fan_in", "unit"))
    p = PRESETS[preset]
    # Exactly what `lazylab ladder --preset <preset>` runs with no other option.
    return LadderPlan(arms=tuple(_arm(n) for n in p["arms"]), widths=p["widths"], seeds=p["seeds"], epochs=p["epochs"],
                      train_size=p["train_size"], lr=None, fan_in="unit")


def ladder_in_memo(ws: Workspace, plan) -> tuple[int, int]:
    """``(runs present, runs missing)`` of a ladder plan, looking only in the memo."""
    from lazylab.experiments.ladder import run_ladder

    saved = ws.memo_only, ws.missing
    ws.memo_only, ws.missing = True, []
    try:
        result = run_ladder(ws, plan)
        missing = len({k for k in ws.missing if k.startswith("run-")})
        # An arm whose whole bracket is missing has no rate: its cells were never looked up.
        for a in result.arms:
            if a.lr is None and plan.lr is None:
                missing += len(plan.widths) * len(plan.seeds)
        present = sum(1 for r in result.runs if not r.get("missing"))
        missing = min(missing, plan.n_runs() - present)  # a missing bracket run is also an unlooked-up cell
    finally:
        ws.memo_only, ws.missing = saved
    return present, missing


def ladder_spec(ws: Workspace, s: LadderSettings) -> dict:
    """Which ladder is shown: ``{"name", "plan" (LadderPlan), "plan_json", "note"}``.

    ``auto`` looks in the memo only: the paper ladder if all its runs are
    there, else the quick one (whose missing runs ``ladder_result`` computes).
    A file (``s.source``) gives ``name`` ``"file"``, ``plan`` None and adds
    ``"payload"``, its ``"sha256"`` and ``"path"``.
    """
    if s.source is not None:
        payload, sha = load_ladder_json(s.source)
        plan_json = {**payload["plan"], "plugins": {a["arm"]: a.get("plugin") for a in payload["arms"]}}
        return {"name": "file", "plan": None, "plan_json": plan_json, "note": f"from {s.source}",
                "payload": payload, "sha256": sha, "path": str(s.source)}
    if s.plan is not None:
        name, plan, note = "custom", _plan(None, dict(s.plan)), "an explicit plan"
    elif s.preset == "auto":
        name, plan = "quick", None
        try:
            paper = _plan("paper")
            present, missing = ladder_in_memo(ws, paper)
            if missing == 0:
                name, plan, note = "paper", paper, "auto: every run of the paper preset is in the memo"
            else:
                note = (f"auto: the paper preset is not complete in the memo ({present} of its runs present, "
                        f"at least {missing} missing), so the quick preset is shown")
        except LazylabError as exc:  # a paper arm is not loaded (LAZYLAB_ARMS)
            note = f"auto: the paper preset cannot be used ({exc}); the quick preset is shown"
        if plan is None:
            plan = _plan("quick")
    elif s.preset in ("quick", "paper"):
        name, plan, note = s.preset, _plan(s.preset), f"--preset {s.preset}"
    else:
        raise LazylabError(f"unknown ladder preset {s.preset!r}; choose one of {', '.join(LADDER_CHOICES)}")
    plan_json = {"arms": [a.name for a in plan.arms], "plugins": {a.name: a.plugin for a in plan.arms},
                 "widths": list(plan.widths), "seeds": list(plan.seeds), "lr": plan.lr, "data": ws.fingerprint,
                 **plan.protocol()}
    return {"name": name, "plan": plan, "plan_json": plan_json, "note": note}


def ladder_result(ws: Workspace, spec: dict, progress: Progress = _quiet) -> dict:
    """The ladder's payload (``LadderResult.to_json()`` plus ``"analysis"``), computing missing runs.

    Adds ``"computed"`` and ``"cached"`` (runs) and ``"name"``/``"note"`` (which ladder, why).
    """
    from lazylab.experiments.ladder import run_ladder
    from lazylab.experiments.laws import analyse_ladder

    if spec.get("payload") is not None:  # a ladder --json file: shown as written, nothing computed
        return {**spec["payload"], "computed": 0, "cached": 0, "name": spec["name"], "note": spec["note"]}
    plan = spec["plan"]
    reporter = _StageReporter(progress, f"ladder ({spec['name']})")
    result = run_ladder(ws, plan, reporter)
    progress("ladder: laws and redundancy", 0, 1)
    analysis = analyse_ladder(ws, result, plan.arms)
    progress("ladder: laws and redundancy", 1, 1)
    wall_analysis(ws, plan, result, analysis)
    return {**result.to_json(), "analysis": analysis, "computed": reporter.computed, "cached": reporter.cached,
            "name": spec["name"], "note": spec["note"]}


def _from_memo(ws: Workspace, compute):
    """``(compute(), complete)`` with the workspace in memo-only mode: nothing is computed."""
    was, before = ws.memo_only, len(ws.missing)
    ws.memo_only = True
    try:
        value = compute()
    finally:
        ws.memo_only = was
    complete = len(ws.missing) == before
    del ws.missing[before:]
    return value, complete


def _memo_extras(ws: Workspace, plan) -> tuple[dict | None, list | None]:
    """``(convex, grid)``: the plan's frozen arms' convex readouts (``run_convex_ladder``) and the
    default ``redundancy_grid`` (yat and yat-data banks), each only if all of it is in the memo."""
    import dataclasses

    from lazylab.experiments.convex import run_convex_ladder
    from lazylab.experiments.laws import redundancy_grid

    frozen = tuple(a for a in plan.arms if not a.trained)
    convex = None
    if frozen:
        convex, complete = _from_memo(ws, lambda: run_convex_ladder(ws, dataclasses.replace(plan, arms=frozen)))
        convex = convex if complete else None
    grid, complete = _from_memo(ws, lambda: redundancy_grid(ws, [_arm("yat-frozen"), _arm("yat-data-frozen")]))
    return convex, grid if complete else None


def memo_extras(ws: Workspace, plan) -> dict:
    """``{"wall": bool, "redundancy_grid": bool}``: whether ``wall_analysis`` finds each in the memo."""
    convex, grid = _memo_extras(ws, plan)
    return {"wall": convex is not None, "redundancy_grid": grid is not None}


def wall_analysis(ws: Workspace, plan, result, analysis: dict) -> None:
    """Add what ``ladder --readout both`` and ``lazylab redundancy`` left in the memo for this ladder.

    ``analysis["wall"]``: the wall table (``experiments.convex.wall``) when every frozen arm's convex
    readout at the plan's widths and seeds (default lambda grid) is in the memo;
    ``analysis["redundancy_grid"]``: the default ``redundancy_grid`` when all its measurements are.
    Absent ones are left out: the report says how to add them.
    """
    from lazylab.experiments.convex import wall

    convex, grid = _memo_extras(ws, plan)
    if convex is not None:
        analysis["wall"] = wall(result, convex)
    if grid is not None:
        analysis["redundancy_grid"] = grid

# ------------------------------------------------- ladder files and the paper ladder
JSON_KINDS = {  # a key only that kind's --json output has at its top level -> its name
    "pictures": "trajectory", "frames": "gram", "curves": "readout", "checks": "ntk",
}


def json_kind(payload) -> str | None:
    """Which command wrote a ``--json`` file: ``"trajectory"``, ``"gram"``, ``"readout"``, ``"ntk"``, else
    ``"ladder"`` when it has a plan, else None."""
    if not isinstance(payload, dict):
        return None
    if payload.get("experiment") in ("gram", "readout"):
        return payload["experiment"]
    kind = next((k for key, k in JSON_KINDS.items() if key in payload), None)
    return kind or ("ladder" if "plan" in payload else None)


def _read_json(path) -> tuple[dict, bytes]:
    from pathlib import Path

    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise LazylabError(f"--from: cannot read {path}: {exc.strerror or exc}") from None
    try:
        return json.loads(raw), raw
    except ValueError as exc:
        raise LazylabError(f"--from: {path} is not JSON ({exc})") from None


def with_json(settings: RenderSettings, path) -> RenderSettings:
    """``settings`` with the part a ``--json`` file names replaced by that file's configuration (``render --from``).

    A ``lazylab ladder --json`` file becomes the ladder shown as written (``load_ladder_json``); a
    ``lazylab gram``, ``readout`` or ``trajectory`` ``--json`` file sets that picture's settings to the
    configuration it records, so the picture is drawn from the memo entry that command left (or
    recomputed, with the same memo key, if the memo lacks it). The rate of a trajectory whose arms were
    bracketed is looked up again in the memo (``trajectory_rates``).
    Raises: LazylabError (one line) for an unreadable file, another kind (``ntk``: not shown from
      files), or a file that lacks the fields of its kind.
    """
    payload, _ = _read_json(path)
    kind = json_kind(payload)
    try:
        if kind == "gram":
            c = payload["config"]
            return replace(settings, gram=GramSettings(
                arm=c["arm"], max_units=c["max_units"], frames=c["frames"], classes=tuple(c["classes"]),
                per_class=c["per_class"], seed=c["seed"], ref_units=c["ref_units"], fit_min=c["fit_min"],
                repeats=c["repeats"]))
        if kind == "readout":
            cs = [c["config"] for c in payload["curves"]]
            c = cs[0]
            return replace(settings, readout=ReadoutSettings(
                arm=c["arm"], widths=tuple(x["width"] for x in cs), train_size=c["train_size"], steps=c["steps"],
                lr=c["lr"], eval_every=c["eval_every"], seed=c["seed"]))
        if kind == "trajectory":
            p = payload["plan"]
            return replace(settings, trajectory=replace(
                settings.trajectory, arms=tuple(p["arms"]), width=p["width"], epochs=p["epochs"],
                snapshots=p["snapshots"], seed=p["seed"], lr=p["lr"], train_size=p["train_size"], fan_in=p["fan_in"]))
    except (KeyError, IndexError, TypeError) as exc:
        raise LazylabError(f"--from: {path} looks like `lazylab {kind} --json` output but lacks {exc}") from None
    if kind == "ntk":
        raise LazylabError(f"--from: {path} is `lazylab ntk` output; the NTK pictures are drawn with their defaults "
                           "(docs/render.md)")
    load_ladder_json(path)  # a ladder's, or one line saying what is wrong with it, before anything is computed
    return replace(settings, ladder=LadderSettings.from_file(path))


def load_ladder_json(path) -> tuple[dict, str]:
    """``(payload, sha256)`` of a file written by ``lazylab ladder --json`` (``render --from``).

    The payload is checked by ``lazylab.reference.check_payload``; a plugin arm needs no
    installed unit here (the file carries its numbers). Older files without the
    ``unstable`` marks get them from their loss curves; without ``exchange``/``warnings`` they
    are shown without them.
    Raises: LazylabError (one line) if the file cannot be read, is not JSON, is another
      command's JSON (``with_json`` takes those), a ``--readout convex`` ladder, or a
      malformed ladder payload.
    """
    import hashlib

    from lazylab.reference import check_payload

    payload, raw = _read_json(path)
    kind = json_kind(payload)
    if kind not in ("ladder", None):
        raise LazylabError(f"--from: {path} is `lazylab {kind} --json` output, not a ladder's")
    if isinstance(payload, dict) and isinstance(payload.get("plan"), dict) and payload["plan"].get("readout") == "convex":
        raise LazylabError(f"--from: {path} is a `ladder --readout convex` file; use `ladder --readout both --json`")
    check_payload(payload, f"--from {path}")
    return payload, hashlib.sha256(raw).hexdigest()


def paper_spec(ws: Workspace, reference: str | None = None) -> dict:
    """Which paper ladder leads the report: ``{"source", "plan", "plan_json", "note", "provenance", "sha256", "path"}``.

    ``source`` is ``"memo"`` when every run of the paper preset is in the memo, else
    ``"reference"`` when the reference file (``reference``, default the shipped
    ``lazylab/reference/paper.json``) loads, else ``"none"`` (``note`` says why). Nothing is trained.
    """
    import hashlib

    from lazylab.reference import load_reference, reference_path

    plan, why = None, ""
    try:
        plan = _plan("paper")
        present, missing = ladder_in_memo(ws, plan)
        if missing == 0:
            plan_json = {"arms": [a.name for a in plan.arms], "plugins": {a.name: a.plugin for a in plan.arms},
                         "widths": list(plan.widths), "seeds": list(plan.seeds), "lr": None, "data": ws.fingerprint,
                         **plan.protocol()}
            return {"source": "memo", "plan": plan, "plan_json": plan_json, "provenance": None, "sha256": None,
                    "path": None, "note": f"every one of its {present} runs is in the memo at {ws.memo.directory}"}
        why = f"the memo holds {present} of its runs, at least {missing} missing"
    except LazylabError as exc:  # a paper arm is not loaded
        why = str(exc)
    path = reference or reference_path()
    try:
        doc = load_reference(path)
    except LazylabError as exc:
        return {"source": "none", "plan": None, "plan_json": None, "provenance": None, "sha256": None,
                "path": str(path), "note": f"not complete in the memo ({why}) and {exc}"}
    from pathlib import Path

    sha = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    return {"source": "reference", "plan": None, "plan_json": doc["payload"]["plan"], "provenance": doc["provenance"],
            "sha256": sha, "path": str(path), "doc": doc,
            "note": f"the memo does not hold the whole paper ladder ({why}), so the shipped reference results are shown"}


def paper_result(ws: Workspace, spec: dict, progress: Progress = _quiet) -> dict | None:
    """The paper ladder's payload (as ``ladder_result``) from the memo or the reference file; None if neither."""
    if spec["source"] == "memo":
        return ladder_result(ws, {"name": "paper", "plan": spec["plan"], "note": spec["note"]}, progress)
    if spec["source"] == "reference":
        return {**spec["doc"]["payload"], "computed": 0, "cached": 0, "name": "paper", "note": spec["note"],
                "provenance": spec["provenance"]}
    return None
