"""The width ladder (SPEC sections 5 and 7): bracket each arm's rate, then sweep width x seed."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lazylab.analysis import unstable_reason
from lazylab.arms import UNIT_COLOURS, Arm
from lazylab.bracket import BRACKET_WIDTH, DEFAULT_RULE, bracket_seeds, run_brackets
from lazylab.errors import LazylabError
from lazylab.experiments import Reporter, Workspace
from lazylab.vetting import failed_checks

PAPER_WIDTHS = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
PAPER_ARMS = (
    "yat-frozen", "yat-data-frozen", "relu-frozen", "gaussian-frozen",
    "yat-trained", "yat-data-trained", "gaussian-trained", "relu-trained",
)
PRESETS = {
    # The full protocol of SPEC section 5.
    "paper": dict(arms=PAPER_ARMS, widths=PAPER_WIDTHS, seeds=(0, 1, 2), epochs=12, train_size=60000),
    # A few minutes on two cores: the shape of the ladder, not its last digit.
    "quick": dict(
        arms=("yat-frozen", "relu-frozen", "gaussian-frozen", "yat-trained"),
        widths=(16, 64, 256, 1024), seeds=(0,), epochs=3, train_size=60000,
    ),
}


@dataclass(frozen=True)
class LadderPlan:
    """What to run. ``lr=None`` brackets each arm's rate at m = 256 under ``bracket`` (``lazylab.bracket``:
    ``"1se"`` over seeds 0, 1, 2, or ``"argmax"`` over seed 0 as SPEC section 5 publishes it)."""

    arms: tuple[Arm, ...]
    widths: tuple[int, ...]
    seeds: tuple[int, ...]
    epochs: int = 12
    train_size: int = 60000
    batch: int = 256
    lr: float | None = None
    fan_in: str = "unit"
    bracket: str = DEFAULT_RULE

    def protocol(self) -> dict:
        return dict(epochs=self.epochs, batch=self.batch, train_size=self.train_size, fan_in=self.fan_in)

    def check(self) -> None:
        """Raise LazylabError (one line) if a data-seeded arm is asked for more units than there are training
        images (its widths, and the bracket's m = 256 without ``lr``): what ``run_ladder`` refuses before any
        training, and its estimate (``--dry-run``) too."""
        widest = max(self.widths + ((BRACKET_WIDTH,) if self.lr is None else ()))
        for arm in self.arms:
            if arm.init == "data" and widest > self.train_size:
                raise LazylabError(f"{arm.name}: width {widest} exceeds the {self.train_size} training images "
                                   "available for data seeding (lower --widths or raise --train-size)")

    def n_runs(self) -> int:
        """Distinct runs before any grid extension (a bracket run at a ladder cell's config counts once)."""
        total = 0
        for arm in self.arms:
            total += len(self.widths) * len(self.seeds)
            if self.lr is None:
                seeds = bracket_seeds(self.bracket)
                grid = len(arm.unit.grid(arm.trained))
                overlap = len(set(seeds) & set(self.seeds)) if BRACKET_WIDTH in self.widths else 0
                total += grid * len(seeds) - overlap
        return total


def preset_plan(preset: str, arms: tuple[Arm, ...] | None = None, widths=None, seeds=None, epochs: int | None = None,
                train_size: int | None = None, lr: float | None = None, fan_in: str = "unit",
                bracket: str = DEFAULT_RULE) -> LadderPlan:
    """The ladder ``lazylab ladder`` and ``lazylab.api.ladder`` run: every part not given (None or
    empty) is the preset's (``PRESETS``). Raises: LazylabError for an unknown preset or arm name."""
    from lazylab.arms import get_arm

    if preset not in PRESETS:
        raise LazylabError(f"unknown preset {preset!r}; presets: {', '.join(PRESETS)}")
    p = PRESETS[preset]
    return LadderPlan(arms=tuple(arms) if arms else tuple(get_arm(n) for n in p["arms"]),
                      widths=tuple(widths or p["widths"]), seeds=tuple(seeds or p["seeds"]),
                      epochs=epochs or p["epochs"], train_size=train_size or p["train_size"],
                      lr=None if lr is None else float(lr), fan_in=fan_in, bracket=bracket)


@dataclass
class ArmSummary:
    """Per-arm outcome: chosen rate, bracket scores, and per-width statistics of ``best_acc`` (%).

    ``bracket`` maps each rate tried (repr) to its mean ``best_acc`` over the bracket's seeds (None: every
    seed diverged); ``selection`` is ``lazylab.bracket.Bracket.to_json()`` (rule, per-rate scores, margin,
    spread, extension, why), empty for a fixed rate. ``failed``: the unit failure that stopped the arm
    (the cells computed before it keep their values; those after hold ``failed``); ``checks_failed``: the
    conformance checks its unit failed (its runs may not be reproducible); ``colour``: the unit's colour.
    """

    arm: str
    plugin: str
    lr: float | None
    unit: str = ""  # the arm's unit and init, so a file drawn where its plugin is not installed draws it right
    init: str = ""
    bracket: dict[str, float | None] = field(default_factory=dict)
    selection: dict = field(default_factory=dict)
    cells: dict[int, dict] = field(default_factory=dict)
    failed: str | None = None  # the UnitFailure that stopped the arm (its other runs skipped; cells before it kept)
    checks_failed: list[str] = field(default_factory=list)  # the conformance checks its unit failed (lazylab.vetting)
    colour: str | None = None  # the unit's own colour (Unit.colour, or a built-in's), drawn without the plugin


@dataclass
class LadderResult:
    plan: dict
    arms: list[ArmSummary]
    runs: list[dict]

    def to_json(self) -> dict:
        """Plan, per-arm summaries and every run record, each record with ``"unstable"`` (None or why).

        ``unstable`` is derived from the record's loss curve (``analysis.unstable_reason``) here, at
        analysis time; the memo's records themselves do not carry it.
        """
        return {
            "plan": self.plan,
            "arms": [
                {"arm": a.arm, "plugin": a.plugin, "unit": a.unit, "init": a.init, "lr": a.lr, "bracket": a.bracket,
                 "selection": a.selection, "cells": {str(w): c for w, c in a.cells.items()},
                 **({"colour": a.colour} if a.colour else {}), **({"failed": a.failed} if a.failed else {}),
                 **({"checks_failed": a.checks_failed} if a.checks_failed else {})}
                for a in self.arms
            ],
            "runs": [{**r, "unstable": unstable_reason(r)} for r in self.runs],
        }


def choose_rate(scores: dict[float, float | None]) -> float | None:
    """The rate with the highest ``best_acc``; diverged runs (None) are never chosen; ties go to the first.

    SPEC section 5's rule on one seed: the trajectory's bracket uses it; the ladder's is ``lazylab.bracket``.
    """
    finite = [(acc, -i, lr) for i, (lr, acc) in enumerate(scores.items()) if acc is not None]
    return max(finite)[2] if finite else None


def summarise(records: list[dict]) -> dict:
    """Mean and sample std (ddof=0 for one seed) of ``best_acc`` (%) over seeds; diverged seeds counted apart.

    ``unstable`` counts the seeds ``analysis.unstable_reason`` flags; they stay in the mean (marked, not hidden).
    ``failed`` (present only when nonzero) counts the seeds whose unit failed (``failed_record``): no result.
    """
    accs = [r["best_acc"] for r in records if r["best_acc"] is not None]
    finals = [r["final_acc"] for r in records if r["final_acc"] is not None]
    failed = sum(bool(r.get("failed")) for r in records)
    return {
        "n": len(records),
        "diverged": sum(r["diverged"] is not None for r in records),
        "unstable": sum(unstable_reason(r) is not None for r in records),
        "mean": float(np.mean(accs)) if accs else None,
        "std": float(np.std(accs, ddof=1)) if len(accs) > 1 else 0.0 if accs else None,
        "final_mean": float(np.mean(finals)) if finals else None,
        "seeds": [r["config"]["seed"] for r in records],
        **({"failed": failed} if failed else {}),
    }


def run_ladder(ws: Workspace, plan: LadderPlan, reporter: Reporter = Reporter()) -> LadderResult:
    """Bracket (unless ``plan.lr``; ``lazylab.bracket``), then train every (arm, width, seed) cell, memoized.

    Calls to ``Workspace.run_cells``: every arm's bracket (and each round of its grid extensions),
    then every arm's cells at its chosen rate, so a concurrent backend has all of a phase's runs at once.
    The rates of a bracket and the seeds of a cell train together.

    An arm whose unit fails (``lazylab.arms.UnitFailure``: non-finite features or
    gradients) stops there: its ArmSummary holds ``failed``, its other runs are
    skipped (their cells count them as ``failed``), the cells computed before keep
    their values, and every other arm completes.

    Returns: LadderResult with one ArmSummary per arm and every run record.
    Raises: LazylabError, before any training, if a data-seeded arm is asked for more
      units than there are training images (``LadderPlan.check``).
    """
    plan.check()
    reporter.plan(plan.n_runs())
    summaries = [ArmSummary(arm=arm.name, plugin=arm.plugin, lr=plan.lr, unit=arm.unit.name, init=arm.init,
                            colour=arm.unit.colour or UNIT_COLOURS.get(arm.unit.name)) for arm in plan.arms]
    runs = {}  # by memo key: a bracket run reused as a ladder cell appears once
    if plan.lr is None:
        for summary, (bracket, records) in zip(summaries, run_brackets(ws, plan.arms, plan.protocol(), plan.bracket,
                                                                       reporter)):
            runs.update((r["key"], r) for r in records)
            summary.bracket = {repr(lr): s.mean for lr, s in sorted(bracket.scores.items())}
            summary.selection = bracket.to_json()
            summary.lr = bracket.chosen()
    chosen = [(arm, s) for arm, s in zip(plan.arms, summaries) if s.lr is not None and arm.name not in ws.failures]
    cells = [(arm, ws.config(arm, width, seed, s.lr, **plan.protocol()))
             for arm, s in chosen for width in plan.widths for seed in plan.seeds]
    records = iter(ws.run_cells(cells, reporter))
    for _, summary in chosen:
        for width in plan.widths:
            cell = [next(records) for _ in plan.seeds]
            runs.update((r["key"], r) for r in cell if not r.get("failed"))
            summary.cells[width] = summarise(cell)
    for arm, summary in zip(plan.arms, summaries):
        summary.failed = ws.failures.get(arm.name)
        summary.checks_failed = failed_checks(arm)
    plan_json = {
        "arms": [a.name for a in plan.arms], "widths": list(plan.widths), "seeds": list(plan.seeds),
        "lr": plan.lr, "data": ws.fingerprint, **plan.protocol(),
        "bracket": None if plan.lr is not None else
        {"rule": plan.bracket, "width": BRACKET_WIDTH, "seeds": list(bracket_seeds(plan.bracket))},
    }
    return LadderResult(plan=plan_json, arms=summaries, runs=list(runs.values()))
