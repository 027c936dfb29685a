"""What the trained optimum cost against what ``--dry-run`` prices for it, per trained arm, in one run.

Usage: .venv/bin/python bench/optimum_cost.py --cache-dir DIR [--arms yat-trained,...]

For each trained arm of the paper preset whose optimum the memo ``--cache-dir`` holds (``experiments.optimum``:
selection runs at widths 16-256, seeds 0, 1, 2, then the refits): the seconds its records hold (each group's
wall time shared among its runs, as computed, load included), against the estimate ``lazylab ladder --preset
paper --readout both --dry-run`` gives the same runs from an empty memo on this machine's calibration
(``lazylab.estimate_optimum.optimum_jobs``). Prints per arm: runs, record seconds, priced seconds, and their ratio (record
over priced: above 1 the estimate was low), then per complete arm and width its selection runs, their epochs and
seconds, and its refits'. docs/performance.md holds the table.
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile


def main(argv=None) -> int:
    from lazylab import estimate as E
    from lazylab.calibration import calibration
    from lazylab.experiments import Workspace
    from lazylab.estimate_optimum import optimum_jobs
    from lazylab.experiments.optimum import optimum_budget, run_optimum
    from lazylab.experiments.render import _plan

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache-dir", required=True, help="the memo holding the trained optimum")
    ap.add_argument("--arms", default=None, help="trained arms [default: the paper preset's]")
    args = ap.parse_args(argv)
    plan = _plan("paper")
    trained = [a for a in plan.arms if a.trained and (args.arms is None or a.name in args.arms.split(","))]
    ws = Workspace(None, args.cache_dir)
    ws.memo_only = True
    empty = Workspace(None, tempfile.mkdtemp(prefix="lazylab-bench-"))
    cal = calibration(measure_now=False)
    print(f"calibration: {'measured here' if cal.code != 'reference' else 'the reference machine'} "
          f"(load {cal.load:g} when measured)")
    print(f"{'arm':>18} {'runs':>5} {'records s':>10} {'priced s':>9} {'ratio':>6}")
    widths: dict = {}
    for arm in trained:
        optimum = run_optimum(ws, (arm,), plan.widths, plan.seeds, plan.train_size, plan.fan_in,
                              optimum_budget(plan.epochs))
        records = [r for r in optimum["runs"] + optimum["fits"] if not r.get("missing")]
        if len(records) < len(optimum["runs"]) + len(optimum["fits"]) or not optimum["fits"]:
            print(f"{arm.name:>18}  incomplete in the memo ({len(records)} records)")
            continue
        spent = sum(r["seconds"] for r in records)
        rows, priced, _ = optimum_jobs(empty, dataclasses.replace(plan, arms=(arm,)), E.Pricer(cal, warm=False),
                                       E.run_row)
        print(f"{arm.name:>18} {len(records):>5} {spent:>10.0f} {priced:>9.0f} {spent / priced:>6.2f}", flush=True)
        widths[arm.name] = [(w, [r for r in optimum["runs"] if r["config"]["width"] == w],
                             [r for r in optimum["fits"] if r["config"]["width"] == w])
                            for w in sorted({r["config"]["width"] for r in optimum["runs"]})]
    for name, rows in widths.items():  # the table docs/performance.md holds
        print(f"\n{name}\n\n| m | selection runs | epochs run | seconds | refits | epochs | seconds |\n|---|---|---|---|---|---|---|")
        for w, runs, fits in rows:
            print(f"| {w} | {len(runs)} | {sum(r['epochs'] for r in runs)} | {sum(r['seconds'] for r in runs):.0f} | "
                  f"{len(fits)} | {sum(r['epochs'] for r in fits)} | {sum(r['seconds'] for r in fits):.0f} |")
        runs = [r for _, rs, _ in rows for r in rs]
        fits = [f for _, _, fs in rows for f in fs]
        print(f"| all | {len(runs)} | {sum(r['epochs'] for r in runs)} | {sum(r['seconds'] for r in runs):.0f} | "
              f"{len(fits)} | {sum(r['epochs'] for r in fits)} | {sum(r['seconds'] for r in fits):.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
