"""The estimate of a ladder against its measured cost (issue 25: within a factor of 2).

Usage: .venv/bin/python bench/estimate.py [--recalibrate] [--skip-run] [--cold] [--readout-both]

In one run:
1. This machine's calibration (``lazylab.calibration``: kept in
   ``~/.cache/lazylab/calibration.json``; ``--recalibrate`` measures it again first,
   so that the estimate and the run below see the same load on the machine).
2. The quick preset's estimate from an empty temporary memo, then
   ``lazylab ladder --preset quick`` run into that memo as a user runs it (a
   subprocess, jax's compilation cache as configured; ``--cold``: an empty one, as on
   a fresh machine, and the estimate told so), its wall time, peak RSS and the memo's
   size measured; both printed with their ratios. ``--readout-both`` then does the
   same for ``lazylab ladder --preset quick --readout both`` (the convex readouts too)
   into another empty memo (and, with ``--cold``, another empty compilation cache).
3. The paper preset's estimate from an empty memo (local and Ray), next to the
   shipped reference run's record (``lazylab/reference/paper.json``: 260 runs with
   ``--backend ray``, 2 workers, other jobs sharing the cores): its summed run
   seconds, which are worker seconds, so the wall time is about that sum / 2
   (1 h 45 min recorded in docs/results.md), and per arm, the estimate's worker
   seconds under Ray against the record's. The paper preset is not run (over an hour).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Wall times of the paper preset measured on this 2-core machine (docs/performance.md, docs/results.md).
PAPER_MEASURED = {"ray, nothing else running (2026-12-01)": (4140.4, 4932.5),
                  "ray, other jobs running (2026-12-02, the reference)": (6300.0,),
                  "local, earlier code, load 4-5 (2026-11-29)": (6134.4,)}


def plan_of(preset: str):
    from lazylab.arms import get_arm
    from lazylab.experiments.ladder import PRESETS, LadderPlan

    p = PRESETS[preset]
    return LadderPlan(arms=tuple(get_arm(a) for a in p["arms"]), widths=p["widths"], seeds=p["seeds"],
                      epochs=p["epochs"], train_size=p["train_size"])


def gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


def du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def show(label: str, est) -> None:
    print(f"{label}: {est.runs_total} runs ({est.in_memo} in the memo, {est.to_compute} to compute); "
          f"{est.seconds:.1f} s ({est.seconds / 60:.1f} min, {est.backend}, {est.cores} cores), "
          f"peak {gib(est.peak_bytes)}, disk up to {gib(est.disk_bytes)}")
    for note in est.notes:
        print(f"  note: {note}")


def measure(label: str, args: list[str], memo: Path, tmp: Path, est, env: dict) -> Path:
    """Run ``lazylab ladder ARGS`` into ``memo`` as a user would; print its wall time, peak RSS, memo size and
    the estimate's ratios; returns the JSON it wrote."""
    out_json = tmp / f"{label.replace(' ', '_')}.json"
    cmd = [str(Path(sys.executable).parent / "lazylab"), "ladder", *args, "--cache-dir", str(memo),
           "--out", str(tmp / "figures"), "--json", str(out_json)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    _, status, usage = os.wait4(proc.pid, 0)  # this child's own peak RSS
    wall = time.perf_counter() - t0
    if status != 0:
        sys.exit(f"lazylab ladder failed: {proc.stderr.read().strip()[-500:]}")
    peak = usage.ru_maxrss * 1024  # KiB on Linux
    disk = du(memo)
    runs = json.loads(out_json.read_text())["runs"]
    print(f"{label}, measured: {len(runs)} runs in {wall:.1f} s (runs' own seconds {sum(r['seconds'] for r in runs):.1f}), "
          f"peak RSS {gib(peak)}, memo {gib(disk)}; load average after: {os.getloadavg()[0]:.2f}")
    print(f"{label}, estimate / measured: time {est.seconds / wall:.2f}, peak {est.peak_bytes / peak:.2f}, "
          f"disk (an upper bound) {est.disk_bytes / disk:.2f}")
    return out_json


def main() -> None:
    from lazylab.calibration import calibration
    from lazylab.estimate import RAY_GAIN_PER_EXTRA_CORE, compile_cache_warm, ladder_estimate
    from lazylab.experiments import Workspace

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recalibrate", action="store_true", help="measure the calibration again first")
    ap.add_argument("--skip-run", action="store_true", help="estimates only: do not run the quick preset")
    ap.add_argument("--cold", action="store_true", help="an empty compilation cache for every run (a fresh machine)")
    ap.add_argument("--readout-both", action="store_true",
                    help="also run the quick preset with --readout both into another empty memo")
    args = ap.parse_args()

    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    cal = calibration(force=args.recalibrate)
    print(f"calibration ({cal.measured_at}, load {cal.load:g}, took {cal.seconds:.1f} s): trained step "
          f"{cal.step_a * 1e3:.3f} ms + {cal.step_b * 1e6:.2f} us x m; head step {cal.head_a * 1e3:.3f} ms + "
          f"{cal.head_b * 1e9:.0f} ns x m; features {cal.feature_s * 1e9:.1f} ns per image x unit; compile "
          f"{cal.compile_s:.2f} s trained, {cal.frozen_compile_s:.2f} s frozen (warm cache {cal.warm_compile_s:.2f} s, "
          f"{cal.warm_frozen_compile_s:.2f} s)")
    warm = False if args.cold else compile_cache_warm()
    print(f"jax's compilation cache holds programs: {warm}" + (" (--cold: an empty one per run)" if args.cold else ""))

    with tempfile.TemporaryDirectory(prefix="lazylab-estimate-") as tmp:
        tmp = Path(tmp)
        env = lambda name: {**os.environ, **({"LAZYLAB_XLA_CACHE": str(tmp / name)} if args.cold else {})}
        memo = tmp / "memo"
        ws = Workspace(None, memo)
        est = ladder_estimate(ws, plan_of("quick"), cal=cal, warm=warm)
        ws.memo.close()
        show("quick preset, estimate", est)
        if not args.skip_run:
            measure("quick preset", ["--preset", "quick"], memo, tmp, est, env("xla-quick"))
            ws = Workspace(None, memo)
            again = ladder_estimate(ws, plan_of("quick"), cal=cal)
            ws.memo.close()
            print(f"quick preset, estimate again on the filled memo: {again.in_memo} in the memo, "
                  f"{again.to_compute} to compute, {again.seconds:.1f} s")
        if args.readout_both and not args.skip_run:
            memo2 = tmp / "memo-both"
            ws = Workspace(None, memo2)
            est2 = ladder_estimate(ws, plan_of("quick"), cal=cal, warm=warm, readout="both")
            ws.memo.close()
            show("quick preset --readout both, estimate", est2)
            measure("quick preset --readout both", ["--preset", "quick", "--readout", "both"], memo2, tmp, est2,
                    env("xla-both"))

        ws = Workspace(None, tmp / "empty")
        paper = {b: ladder_estimate(ws, plan_of("paper"), backend=b, cal=cal) for b in ("local", "ray")}
        ws.memo.close()
    for backend, e in paper.items():
        show(f"paper preset, estimate ({backend})", e)
    ref = json.loads((ROOT / "lazylab" / "reference" / "paper.json").read_text())
    ref_runs = ref["payload"]["runs"]
    total = sum(r["seconds"] for r in ref_runs)
    print(f"paper reference ({ref['provenance']['command']}, {ref['provenance']['when']}; {ref['provenance']['where']}): "
          f"{len(ref_runs)} runs, {total:.0f} worker seconds, about {total / 2:.0f} s wall with 2 workers")
    print(f"paper preset, estimate (ray) / reference wall: {paper['ray'].seconds / (total / 2):.2f}")
    for what, walls in PAPER_MEASURED.items():
        ratios = ", ".join(f"{paper['ray' if what.startswith('ray') else 'local'].seconds / w:.2f}" for w in walls)
        print(f"  against {what}: {', '.join(f'{w:.0f} s' for w in walls)} -> estimate / measured {ratios}")
    # Per arm and width group: a run's worker seconds under Ray are its one-process seconds x workers / gain.
    cores = paper["ray"].cores
    factor = cores / (1 + RAY_GAIN_PER_EXTRA_CORE * (cores - 1))
    est_s, ref_s = defaultdict(float), defaultdict(float)
    group = lambda w: "16-256" if w <= 256 else "512-2048" if w <= 2048 else "4096-8192"
    for r in paper["local"].runs:
        est_s[r["arm"], group(r["width"])] += r["seconds"] * factor
    for r in ref_runs:
        ref_s[r["config"]["arm"], group(r["config"]["width"])] += r["seconds"]
    print(f"paper preset per arm, worker seconds under Ray (estimate = one-process estimate x {factor:.2f}) "
          "against the reference; widths 16-256 | 512-2048 | 4096-8192:")
    for arm in dict.fromkeys(a for a, _ in ref_s):
        cells = [f"{est_s[arm, g]:7.0f} / {ref_s[arm, g]:7.0f} = {est_s[arm, g] / ref_s[arm, g]:4.2f}"
                 for g in ("16-256", "512-2048", "4096-8192")]
        print(f"  {arm:<17} " + " | ".join(cells))


if __name__ == "__main__":
    main()
