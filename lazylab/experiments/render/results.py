"""Where each picture's result comes from: the memo, or the experiment (``lazylab render``).

One ``*_spec`` per picture (its exact configuration and memo key, nothing
trained) and one ``*_result`` (from the memo, or computed and stored). The 1-D
NTK lab, its width sweep, the scalar model and the audit are memoized here under
keys hashed from their configuration (``ntklab-``, ``ntksweep-``,
``ntkscalar-``, ``ntkaudit-``). The ladders are in
``lazylab.experiments.render.ladders``.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Callable

import numpy as np

from lazylab.config import CACHE_SCHEMA, memo_key
from lazylab.errors import LazylabError
from lazylab.experiments import Reporter, Workspace
from lazylab.experiments.render.settings import (
    NTK_MEMO_SCHEMA,
    GramSettings,
    NtkSettings,
    ReadoutSettings,
    TrajectorySettings,
)

Progress = Callable[[str, int, int], None]  # (stage, done, total), as in experiments.gram


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
    """Experiment progress hooks turned into ``progress(stage, done, total)`` ticks, counting memo hits.

    Counts distinct records: a bracket run reused as a ladder cell is reported twice but planned once.
    """

    def __init__(self, progress: Progress, label: str):
        self.progress, self.label = progress, label
        self.total, self.computed, self.cached, self.keys = 0, 0, 0, set()

    def plan(self, total):
        self.total = total
        self.progress(self.label, 0, total)

    def more(self, n):
        self.total += n
        self.progress(self.label, len(self.keys), max(self.total, len(self.keys)))

    def start(self, cfg):
        self.progress(f"{self.label}: {cfg.arm} m={cfg.width} seed={cfg.seed} lr={cfg.lr:g}", 0, cfg.epochs)

    def epoch(self, cfg, epoch, acc):
        self.progress(f"{self.label}: {cfg.arm} m={cfg.width} seed={cfg.seed} lr={cfg.lr:g}", epoch, cfg.epochs)

    def done(self, cfg, record, cached):
        if record["key"] in self.keys:
            return
        self.keys.add(record["key"])
        self.cached += cached
        self.computed += not cached
        self.progress(self.label, len(self.keys), max(self.total, len(self.keys)))


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
    if arrays is not None and rec is not None:
        if _lab_matches(cfg, arrays, rec):
            res = LabResult(config=cfg, data=make_data(cfg), **{k: arrays[k] for k in LAB_ARRAYS},
                            n_params=rec["n_params"], jac_shape=tuple(rec["jac_shape"]), start_gap=rec["start_gap"])
            return res, True
        ws.memo.reject(key, "its arrays are not of the configuration's width, steps, snapshots or data")
    progress("ntk lab: gradient descent", 0, 1)
    res = run_lab(cfg)
    ws.memo.put_arrays(key, {k: getattr(res, k) for k in LAB_ARRAYS})
    ws.memo.put_record(key + "-summary", {"n_params": res.n_params, "jac_shape": list(res.jac_shape),
                                          "start_gap": res.start_gap, "summary": res.summary()})
    progress("ntk lab: gradient descent", 1, 1)
    return res, False


def _lab_matches(cfg, arrays: dict, rec: dict) -> bool:
    """Whether a stored lab (of its kinds' schemas, ``lazylab.schemas.entries``) has ``cfg``'s sizes: its width,
    steps, snapshot steps, training and test points."""
    from lazylab.ntk.lab import checkpoints

    return (arrays["theta0"].shape == (3, cfg.width) and len(arrays["loss"]) == cfg.steps + 1
            and np.array_equal(arrays["snap_steps"], checkpoints(cfg.steps, cfg.frames))
            and arrays["pred_train"].shape[1:] == (cfg.n_train,) and arrays["pred_test"].shape[1:] == (cfg.n_test,)
            and rec["n_params"] == 3 * cfg.width and rec["jac_shape"] == [cfg.n_train, 3 * cfg.width])


def sweep_key(cfg, widths, seeds) -> str:
    return "ntksweep-" + digest({"kind": "ntk-sweep", "config": asdict(cfg), "widths": list(widths),
                                 "seeds": list(seeds), "schema": NTK_MEMO_SCHEMA, "cache": CACHE_SCHEMA})


def sweep_result(ws: Workspace, cfg, widths, seeds, progress: Progress = _quiet):
    """``(SweepResult, cached)`` of the lab's width sweep (``lazylab ntk lab --widths``), memoized."""
    from lazylab.ntk.lab import SweepResult, sweep

    key = sweep_key(cfg, widths, seeds)
    rec = ws.memo.get_record(key)
    if rec is not None:
        if rec["config"] == asdict(cfg) and rec["widths"] == list(widths) and rec["seeds"] == list(seeds):
            return SweepResult(config=cfg, widths=rec["widths"], seeds=rec["seeds"], rows=rec["rows"],
                               slopes=rec["slopes"]), True
        ws.memo.reject(key, "its configuration, widths or seeds are not the ones looked up")
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
    """``Check``s from their stored JSON (``lazylab.schemas.entries.CheckDoc``; ``ok`` is derived, not read)."""
    from lazylab.ntk.checks import Check

    return [Check(name=c["name"], value=c["value"], tol=c["tol"], passed=c["passed"], expect=c["expect"], note=c["note"])
            for c in items]


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
    if arrays is not None and rec is not None:
        if (rec["w0"], rec["dt"], rec["offset"]) == (s.w0, s.dt, s.offset) and \
                np.array_equal(arrays["times"], np.asarray(s.times, np.float64)):
            table = {k[6:]: v for k, v in arrays.items() if k.startswith("table/")}
            return ScalarResult(w0=rec["w0"], dt=rec["dt"], offset=rec["offset"], times=arrays["times"], table=table,
                                checks=_checks(rec["checks"])), True
        ws.memo.reject(key, "its settings or times are not the ones looked up")
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
    if rec is not None:
        return _checks(rec["checks"]), True
    progress("ntk audit", 0, 1)
    checks = run_audit(cfg)
    ws.memo.put_record(key, {"checks": _checks_json(checks)})
    progress("ntk audit", 1, 1)
    return checks, False
