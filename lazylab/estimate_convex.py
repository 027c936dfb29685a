"""The convex readout's part of an estimate (``lazylab.estimate``): its lambda choices and cells, in CPU seconds.

A solve (``experiments.convex_solve.solve``) is its preconditioner, then its evaluations, each two products over
the feature matrix at the cost this machine's calibration measured (``calibration._convex_evaluation_s``); a
solve's evaluations follow its unit and width (``convex_evaluations``). bench/estimate.py checks the whole
against the wall time of a convex ladder (docs/performance.md, "Estimates against wall time").
"""

from __future__ import annotations

import math

from lazylab.calibration import Calibration

# A convex solve (convex_solve_s): fixed seconds, covariance (per row x m^2, ssyrk),
# factorisation (per m^3), and per evaluation the calibration's figures (per image: the softmax on 10 logits;
# per image x unit: the two products; lazylab.calibration). Evaluations per solve:
# about 60 (m/16)^0.45 times a unit's factor (the frontier's median cell at m <= 4096: docs/performance.md);
# the data-seeded Yat bank's solves run to the iteration cap (about 1,070 evaluations).
CONVEX_SETUP_S = 0.5
CONVEX_COV_S = 1.0e-11
CONVEX_FACTOR_S = 2.0e-11
# A width's lambda choice: CHOICE_SOLVES cell-sized solves on 50,000 images (its walk fits 2-6 lambdas, warm-started:
# 2,040-3,454 evaluations in all for yat-data, 2.2-4.0 cells' worth for the other banks at m <= 4096).
CONVEX_DATA_EVALUATIONS, CHOICE_SOLVES = 1070, 3
CONVEX_UNIT_EVALUATIONS = {"yat": 0.7, "relu": 1.0, "gaussian": 2.0}  # another unit: 1
# A width's refinement (experiments.convex.refine_lambda): two solves on 50,000 images, the first from zeros, and
# at about a third of the widths one or two more, the first of them from zeros (refine_solves).
REFINE_SOLVES = 2.5


def refine_solves(coarse: float, path: tuple, narrower: float | None) -> float:
    """Solves a width's refinement is priced at: ``REFINE_SOLVES``, or, where the walk chose an end of its
    ``path`` and the next narrower width's refined penalty ``narrower`` lies past that end (the optimum leaving
    the path as width grows, as the data-seeded Yat bank's from m = 2048), 2 plus the half-decades from
    ``coarse`` to ``narrower``, at most 2 + ``REFINE_BEYOND``: the refinement fits both neighbours, then steps on
    a half-decade at a time while it gains, the last step one past its best (``experiments.convex.
    refine_lambda``; 38 of the 40 shipped refinements fitted 2 + the half-decades from the walk's choice to
    their best penalty, e.g. 5 at yat-data-frozen m = 4096, 0.01 -> 0.316; the other two stopped on a tie)."""
    from lazylab.experiments.convex import REFINE_BEYOND

    if narrower is None or not (coarse == max(path) < narrower or narrower < min(path) == coarse):
        return REFINE_SOLVES
    half_decades = round(abs(2 * math.log10(narrower / coarse)))
    return float(max(REFINE_SOLVES, min(2 + half_decades, 2 + REFINE_BEYOND)))


def convex_evaluations(width: int, unit: str, data_seeded: bool) -> float:
    """Evaluations one convex solve of a bank of ``unit`` is priced at (see ``CONVEX_UNIT_EVALUATIONS``)."""
    if data_seeded:
        return CONVEX_DATA_EVALUATIONS
    return min(60.0 * (width / 16) ** 0.45 * CONVEX_UNIT_EVALUATIONS.get(unit, 1.0), CONVEX_DATA_EVALUATIONS)


# An evaluation inside a real solve costs this many times the calibration's (real banks' features, the held-out
# scoring of a lambda choice, a solve's start): measured by bench/estimate.py, 1.2-1.35 on its convex ladder.
CONVEX_SOLVE_OVERHEAD = 1.25


def convex_solve_s(cal: Calibration, width: int, rows: int, evaluations: float) -> float:
    """CPU seconds of one convex solve (``experiments.convex.solve``) on ``rows`` images at ``width``: the
    preconditioner (covariance of ``min(rows, max(16384, 2 m))`` rows, Cholesky and its inverse), then
    ``evaluations`` evaluations of two products over the ``rows x width`` feature matrix, each
    ``CONVEX_SOLVE_OVERHEAD x rows (convex_eval_a + convex_eval_b m)`` (``cal``, measured on this machine)."""
    cov_rows = min(rows, max(16384, 2 * width))
    return (CONVEX_SETUP_S + CONVEX_COV_S * cov_rows * width ** 2 + CONVEX_FACTOR_S * width ** 3
            + evaluations * rows * CONVEX_SOLVE_OVERHEAD * (cal.convex_eval_a + cal.convex_eval_b * width))


def convex_jobs(ws, plan, lambdas: tuple | None, pricer, run_row) -> tuple[list, float, list]:
    """``run_convex_ladder``'s jobs as ``(rows, CPU seconds, notes)`` for ``estimate._estimate``: per frozen arm and
    width the choice of lambda (seed 0's features, ``CHOICE_SOLVES`` solves) and its refinement (``refine_solves``),
    then every seed (its features, one solve on every image), at ``convex_evaluations`` evaluations a solve; ``pricer`` (``estimate.Pricer``) prices the
    features and compilations, ``run_row`` (``estimate.run_row``) makes each row (passed in: this module is
    ``lazylab.estimate``'s, and imports nothing of it)."""
    from lazylab.experiments.convex import LAMBDAS, convex_config, lambda_config, refine_config

    rows, seconds, pending = [], 0.0, []
    for arm in (a for a in plan.arms if not a.trained):
        data_seeded = arm.unit.name == "yat" and arm.init == "data"  # its units spike at their seed images
        for width in plan.widths:
            lcfg = lambda_config(ws, arm, width, plan.train_size, plan.fan_in, lambdas or LAMBDAS)
            choice = ws.memo.get_record(lcfg.key())
            lam = choice.get("lambda") if isinstance(choice, dict) else None
            row = run_row("convex-lambda", arm.name, width, lcfg.seed, None, lcfg.key(), lam is not None)
            if lam is None:
                pending.append(f"{arm.name} m={width}")
                evaluations = convex_evaluations(width, arm.unit.name, data_seeded)
                s = pricer.bank_s((arm.name, width, lcfg.seed, plan.train_size, plan.fan_in), width, plan.train_size)
                s += pricer.cold_bank_s(arm, width)  # the bank's feature programs, once per width
                s += min(CHOICE_SOLVES, len(lcfg.lambdas)) * convex_solve_s(pricer.cal, width,
                                                                            plan.train_size - lcfg.holdout, evaluations)
                row["seconds"] = round(s, 3)
                seconds += s
            rows.append(row)
            refined = None
            if lam is not None:
                rcfg = refine_config(lcfg, choice)
                refinement = ws.memo.get_record(rcfg.key())
                refined = refinement.get("lambda") if isinstance(refinement, dict) else None
                if refined is None:  # chosen, not yet refined: its cells' penalty is not known
                    pending.append(f"{arm.name} m={width}")
            row = run_row("convex-refine", arm.name, width, lcfg.seed, None, rcfg.key() if lam is not None else None,
                          refined is not None)
            if refined is None:
                # the ladder's widths double: the narrower width's refined penalty, where the memo holds it
                narrower = _refined(ws, lambda_config(ws, arm, width // 2, plan.train_size, plan.fan_in,
                                                      lambdas or LAMBDAS)) if width > 1 else None
                solves = refine_solves(lam, lcfg.lambdas, narrower) if lam is not None else REFINE_SOLVES
                s = solves * convex_solve_s(pricer.cal, width, plan.train_size - lcfg.holdout,
                                            convex_evaluations(width, arm.unit.name, data_seeded))
                row["seconds"] = round(s, 3)
                seconds += s
            rows.append(row)
            cells = [(arm, convex_config(ws, arm, width, seed, refined or 0.0, plan.train_size, plan.fan_in))
                     for seed in plan.seeds]
            more, s, _ = convex_cell_jobs(ws, cells, pricer, run_row, known=refined is not None)
            rows, seconds = rows + more, seconds + s
    notes = [f"convex lambda not chosen or not refined yet at {len(pending)} "
             f"arm-width{'s' * (len(pending) != 1)} (first "
             f"{pending[0]}), so their readouts count as to compute"] if pending else []
    return rows, seconds, notes


def _refined(ws, lcfg) -> float | None:
    """The refined penalty of the lambda choice ``lcfg`` (a ``LambdaConfig``) in ``ws``'s memo, or None."""
    from lazylab.experiments.convex import refine_config

    choice = ws.memo.get_record(lcfg.key())
    if not isinstance(choice, dict) or choice.get("lambda") is None:
        return None
    refinement = ws.memo.get_record(refine_config(lcfg, choice).key())
    return refinement.get("lambda") if isinstance(refinement, dict) else None


def convex_cell_jobs(ws, cells: list, pricer, run_row, known: bool = True) -> tuple[list, float, list]:
    """Convex readouts ``[(arm, ConvexConfig), ...]`` as ``(rows, CPU seconds, notes)``: each its bank's features
    and one solve on every image at ``convex_evaluations``, those in the memo at no cost; ``known``: False while
    their penalty is not chosen yet (every one to compute, no key)."""
    rows, seconds = [], 0.0
    for arm, cfg in cells:
        stored = known and cfg.key() in ws.memo
        row = run_row("convex", arm.name, cfg.width, cfg.seed, None, cfg.key() if known else None, stored)
        if not stored:
            data_seeded = arm.unit.name == "yat" and arm.init == "data"  # its units spike at their seed images
            s = pricer.bank_s((arm.name, cfg.width, cfg.seed, cfg.train_size, cfg.fan_in), cfg.width, cfg.train_size)
            s += pricer.cold_bank_s(arm, cfg.width)
            s += convex_solve_s(pricer.cal, cfg.width, cfg.train_size,
                                convex_evaluations(cfg.width, arm.unit.name, data_seeded))
            row["seconds"] = round(s, 3)
            seconds += s
        rows.append(row)
    return rows, seconds, []
