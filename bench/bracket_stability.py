"""Does a float-level perturbation flip a rate bracket? Both rules, every arm, in one run (issue 30).

Usage: .venv/bin/python bench/bracket_stability.py [--preset paper|quick] [--arms a,b] [--cache-dir DIR]
                                                    [--perturbed-cache DIR]

Each arm's bracket (``lazylab.bracket``: m = 256, the preset's epochs, all 60,000 training images) is run
twice: on the real images, and on the same images with every pixel moved up by one float32 ulp
(``numpy.nextafter``), which changes the bits of every sum XLA computes and nothing else, as another CPU
model's XLA code does. The real runs come from (or go to) ``--cache-dir`` (the memo, e.g. the one holding
the paper ladder); the perturbed ones to ``--perturbed-cache`` under a derived data fingerprint, so they
never mix. For each arm and rule it prints the rate chosen on each and whether it flipped, then the arms
that flip under each rule. Under the ``1se`` rule (seeds 0, 1, 2) the choice should hold; under ``argmax``
(seed 0) the arms whose best two rates lie within a seed's noise may flip.

Runs in one process (the perturbed images live in this process: no Ray workers). Cost on 2 cores: the
brackets of the preset twice over, less what the memos hold (docs/ladder.md gives the measured figures).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np


def perturbed_workspace(cache_dir: Path):
    """A Workspace whose images are the real ones moved up by one float32 ulp, under a derived fingerprint."""
    from lazylab.experiments import Workspace

    ws = Workspace(None, cache_dir)
    d = ws.data
    up = {k: np.nextafter(getattr(d, k), np.float32(np.inf)).astype(np.float32) for k in ("x_train", "x_test")}
    for a in up.values():
        a.setflags(write=False)
    ws.fingerprint = d.fingerprint + "-ulp"
    ws._data = dataclasses.replace(d, fingerprint=ws.fingerprint, **up)
    return ws


def brackets(ws, arms, protocol: dict) -> dict:
    """``{(arm, rule): Bracket}`` for both rules (the 1se bracket's seed-0 runs serve the argmax one)."""
    from lazylab.bracket import run_brackets

    out = {}
    for rule in ("argmax", "1se"):
        for arm, (b, _) in zip(arms, run_brackets(ws, arms, protocol, rule, _Lines(rule))):
            out[(arm.name, rule)] = b
    return out


class _Lines:
    """Progress: one line per computed run on stderr."""

    def __init__(self, rule):
        self.rule, self.t0 = rule, time.perf_counter()

    def plan(self, total): ...

    def more(self, n): ...

    def start(self, cfg): ...

    def epoch(self, cfg, epoch, acc): ...

    def done(self, cfg, record, cached):
        if not cached:
            print(f"[{time.perf_counter() - self.t0:7.1f} s] {self.rule} {cfg.arm} lr {cfg.lr:g} seed {cfg.seed} "
                  f"({cfg.data}): {record['best_acc']}", file=sys.stderr, flush=True)


def cutoff_gap(b) -> str:
    """How far the rate nearest the 1se cutoff (the best's mean less its standard error) sits from it, in points,
    signed (+ inside, - outside): a choice that one ulp can flip has a rate within a few hundredths of it."""
    best = b.best()
    if best is None or best.se is None:
        return "-"
    floor = best.mean - best.se
    others = [s.mean - floor for s in b.scores.values() if s is not best and s.eligible and s.mean is not None]
    return f"{min(others, key=abs):+.3f}" if others else "-"


def main(argv=None) -> int:
    from lazylab.arms import get_arm
    from lazylab.experiments import Workspace
    from lazylab.experiments.ladder import PRESETS

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", choices=list(PRESETS), default="paper")
    ap.add_argument("--arms", default=None, help="comma-separated arms [default: the preset's]")
    ap.add_argument("--cache-dir", type=Path, default=None, help="memo of the real runs [default: lazylab's]")
    ap.add_argument("--perturbed-cache", type=Path, default=Path("/tmp/lazylab-bracket-ulp"),
                    help="memo of the perturbed runs [default: %(default)s]")
    args = ap.parse_args(argv)
    p = PRESETS[args.preset]
    arms = [get_arm(n) for n in (args.arms.split(",") if args.arms else p["arms"])]
    protocol = dict(epochs=p["epochs"], batch=256, train_size=p["train_size"], fan_in="unit")
    t0 = time.perf_counter()
    real = brackets(Workspace(None, args.cache_dir), arms, protocol)
    ulp = brackets(perturbed_workspace(args.perturbed_cache), arms, protocol)
    print(f"bracket stability, preset {args.preset} ({p['epochs']} epochs, m = 256): real images against images "
          f"moved by one ulp; {time.perf_counter() - t0:.0f} s")
    print(f"{'arm':18} {'rule':6} {'real':>8} {'1 ulp':>8}  flip  margin (points) / seed std at the best"
          "  [1se: nearest rate to the cutoff, real / 1 ulp]")
    flips = {"argmax": [], "1se": []}
    for arm in arms:
        for rule in ("argmax", "1se"):
            a, b = real[(arm.name, rule)], ulp[(arm.name, rule)]
            flip = a.chosen() != b.chosen()
            if flip:
                flips[rule].append(arm.name)
            sel = a.to_json()
            margin = "-" if sel["margin"] is None else f"{sel['margin']:.2f}"
            spread = "-" if sel["spread"] is None else f"{sel['spread']:.2f}"
            print(f"{arm.name:18} {rule:6} {a.chosen():8g} {b.chosen():8g}  {'FLIP' if flip else '    '}  "
                  f"{margin} / {spread}" + (f"  [{cutoff_gap(a)} / {cutoff_gap(b)}]" if rule == "1se" else ""))
    for rule in ("argmax", "1se"):
        print(f"{rule}: {len(flips[rule])} of {len(arms)} arms flip" + (f" ({', '.join(flips[rule])})" if flips[rule] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
