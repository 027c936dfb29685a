"""The trained optimum's part of an estimate (``lazylab.estimate``): its selection runs and refits, in CPU seconds.

A selection run (``experiments.optimum``) is priced as a trained run of its whole budget (early stopping only
shortens it) with two 10,000-image evaluations an epoch (held-out and test), its arm's grid with
``OPTIMUM_EXTENSION_RATES`` more rates for the extensions; a refit at its chosen epochs once the memo holds the
choice, else at ``REFIT_SHARE`` of the budget. bench/optimum_cost.py checks it against the records' seconds.
"""

from __future__ import annotations

import dataclasses
import json

OPTIMUM_EXTENSION_RATES, REFIT_SHARE = 1.0, 0.8


def optimum_jobs(ws, plan, pricer, run_row) -> tuple[list, float, list]:
    """``run_optimum``'s runs for the plan's trained arms at widths up to ``optimum.MAX_WIDTH`` as ``(rows, CPU
    seconds, notes)``: every rate of the grid x seed as a selection run on the fitted images, then a refit per seed
    on every image; once a width's choice is settled in the memo its refits are looked up under their own keys.
    ``pricer`` (``estimate.Pricer``) prices the compilations, ``run_row`` (``estimate.run_row``) makes each row."""
    from lazylab.experiments.optimum import MAX_WIDTH, choose, optimum_budget, refit_config, select_config

    rows, seconds, pending = [], 0.0, []
    budget = optimum_budget(plan.epochs)
    for arm in (a for a in plan.arms if a.trained):
        grid = list(arm.unit.grid(True))
        for width in (w for w in plan.widths if w <= MAX_WIDTH):
            cfgs = [select_config(ws, arm, width, s, lr, plan.train_size, plan.fan_in, budget)
                    for lr in grid for s in plan.seeds]
            records = [ws.memo.get_record(c.key()) for c in cfgs]
            stored = [isinstance(r, dict) and r.get("config") == json.loads(c.canonical()) for c, r in zip(cfgs, records)]
            each = (1 + OPTIMUM_EXTENSION_RATES / len(grid)) * \
                annealed_s(pricer, arm, width, len(plan.seeds), budget, cfgs[0].train_size - cfgs[0].holdout)
            for c, s in zip(cfgs, stored):
                row = run_row("optimum", arm.name, width, c.seed, c.lr, c.key(), s)
                if not s:
                    row["seconds"] = round(each, 3)
                    seconds += each
                rows.append(row)
            choice = choose(records) if all(stored) else None
            if choice is not None and choice["edge"]:
                choice = None  # an extension is due: the rate is not settled yet
            if choice is None:
                pending.append(f"{arm.name} m={width}")
            for c in cfgs[:len(plan.seeds)]:
                epochs = choice["epochs"].get(c.seed) if choice else None
                fit = refit_config(dataclasses.replace(c, lr=choice["lr"]), epochs) if epochs else None
                done = fit is not None and fit.key() in ws.memo
                row = run_row("optimum-refit", arm.name, width, c.seed, choice and choice["lr"],
                              fit.key() if fit else None, done)
                if not done:
                    row["seconds"] = round(annealed_s(pricer, arm, width, len(plan.seeds),
                                                      epochs or max(1, int(REFIT_SHARE * budget)), plan.train_size,
                                                      evaluations=1), 3)
                    seconds += row["seconds"]
                rows.append(row)
    notes = [f"trained optimum: rate not chosen yet at {len(pending)} arm-width{'s' * (len(pending) != 1)} (first "
             f"{pending[0]}): selection runs priced at their whole {budget}-epoch budget"] if pending else []
    return rows, seconds, notes


def annealed_s(pricer, arm, width: int, members: int, epochs: int, rows: int, evaluations: int = 2) -> float:
    """CPU seconds per run of a group of ``members`` annealed runs of ``arm`` at ``width`` on ``rows`` images for
    ``epochs`` epochs with ``evaluations`` 10,000-image evaluations an epoch (``estimate.trained_group_s`` prices
    one), its compilation once per shape."""
    from lazylab.cost_model import BATCH, N_TEST, trained_group_s

    cal = pricer.cal
    s = pricer.compile_s(True, ("optimum", arm.name, width, members, rows, evaluations), arm)
    s += trained_group_s(cal, width, members, epochs, rows)
    s += (evaluations - 1) * epochs * members * (N_TEST / BATCH) * cal.step_b * width / 3
    return s / members
