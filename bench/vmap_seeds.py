"""Seeds trained as one program against the same seeds one after another.

Usage: .venv/bin/python bench/vmap_seeds.py [--epochs 2] [--widths 16,64,256]

For each arm and width, in one run (these machines are noisy, so only ratios
measured together mean anything):
- three seeds trained sequentially with ``train.fit``;
- the same three seeds as the ladder trains them: one ``train.fit_batch``
  program whose step holds the three members' steps side by side;
- the same three seeds as one ``jax.vmap`` of the epoch's ``lax.scan`` over the
  stacked members (what ``fit_batch`` did before 2026-12-01), for reference.
Every path is compiled once, then the three are timed in turn ``--repeats``
times and each keeps its fastest (noise on a shared machine only slows a
run down). Prints the wall times, the two
speed-ups over sequential, and whether the accuracy curves equal the
sequential ones. Trained arms train every parameter on the images; frozen arms
train the head on each bank's stored features.

It also prints the ceiling of any such program on this machine: the same
sequential runs, timed in a fresh process pinned to one core, give one core's
rate, and members that share no work cannot run faster than every core at that
rate, so no program beats ``cores * sequential / one-core`` (on 2 cores, a run
that already gains g from the second core leaves 2 / g). Only work the members
share (dispatch, set-up) can lift a program above it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from functools import partial

import jax
import jax.numpy as jnp


@partial(jax.jit, static_argnums=(0, 1), donate_argnums=(2, 3))
def vmap_epoch(graphdef, tx, trainable, opt_state, rest, x, y, order):
    """``train._epoch``'s signature and results, as one ``jax.vmap`` over the members (per-member inputs stacked)."""
    from lazylab import train

    def run(params, state, r, xx, o):
        def step(carry, idx):
            params, state, loss = train._step(graphdef, tx, *carry, r, xx, y, idx)
            return (params, state), loss

        (params, state), losses = jax.lax.scan(step, (params, state), o)
        return params, state, losses

    x, x_axis = (jnp.stack(x), 0) if isinstance(x, tuple) else (x, None)
    return jax.vmap(run, in_axes=(0, 0, 0, x_axis, 0))(trainable, opt_state, rest, x, order)


def setup(name: str, m: int, d, seeds: list[int]):
    """The three seeds' nets, their inputs one by one (``xs``) and as ``fit_batch`` takes them: ``(nets, xs, batch_inputs)``."""
    from lazylab.arms import get_arm
    from lazylab.model import build_model, features

    arm = get_arm(name)
    models = {s: build_model(arm, m, s, d.x_train) for s in seeds}
    if arm.trained:
        return models, {s: (d.x_train, d.x_test) for s in seeds}, (d.x_train, d.x_test)
    xs = {s: (features(models[s].feat, d.x_train), features(models[s].feat, d.x_test)) for s in seeds}
    return {s: models[s].head for s in seeds}, xs, ([xs[s][0] for s in seeds], [xs[s][1] for s in seeds])


def sequential_runs(nets, xs, d, seeds: list[int], epochs: int):
    """The seeds trained one after another with ``train.fit``; their accuracy curves."""
    from lazylab import train

    return [train.fit(nets[s], xs[s][0], d.y_train, xs[s][1], d.y_test, lr=0.01, seed=s, epochs=epochs,
                      batch=256).curve for s in seeds]


def one_core_seconds(name: str, m: int, epochs: int, repeats: int) -> float:
    """Fastest sequential time of the three seeds in a fresh process pinned to one core.

    Raises: RuntimeError if that process used more than one core's CPU time.
    """
    cmd = [sys.executable, __file__, "--one-core", f"{name}:{m}", "--epochs", str(epochs), "--repeats", str(repeats)]
    seconds, cores_used = map(float, subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.split()[-2:])
    if cores_used > 1.05:
        raise RuntimeError(f"the one-core process used {cores_used:.2f} cores: pinning did not hold")
    return seconds


def main() -> None:
    from lazylab import data, train

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--widths", default="16,64,256")
    ap.add_argument("--arms", default="yat-trained,relu-trained,yat-frozen")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--one-core", metavar="ARM:M", help=argparse.SUPPRESS)  # the child of one_core_seconds
    args = ap.parse_args()
    if args.one_core:
        # Pinned before jax's first computation, so XLA sizes its thread pool to one core.
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    d = data.load()
    seeds = [0, 1, 2]
    if args.one_core:
        name, m = args.one_core.split(":")
        start, cpu = time.perf_counter(), time.process_time()
        nets, xs, _ = setup(name, int(m), d, seeds)
        sequential_runs(nets, xs, d, seeds, 1)  # compile
        best = float("inf")
        for _ in range(args.repeats):
            t = time.perf_counter()
            sequential_runs(nets, xs, d, seeds, args.epochs)
            best = min(best, time.perf_counter() - t)
        print(best, (time.process_time() - cpu) / (time.perf_counter() - start))
        return
    cores = len(os.sched_getaffinity(0))
    print(f"{len(seeds)} seeds, {args.epochs} epochs on {len(d.x_train)} images; best of {args.repeats}; {cores} cores")
    print(f"{'arm':<14}{'m':>6}{'sequential s':>14}{'one program s':>15}{'speed-up':>10}{'jax.vmap s':>12}"
          f"{'speed-up':>10}{'1 core s':>10}{'ceiling':>9}  identical accuracies (program, vmap)")
    for name in args.arms.split(","):
        for m in [int(w) for w in args.widths.split(",")]:
            nets, xs, inputs = setup(name, m, d, seeds)

            def sequential(epochs):
                return sequential_runs(nets, xs, d, seeds, epochs)

            def batched(epochs):
                return [r.curve for r in train.fit_batch([nets[s] for s in seeds], inputs[0], d.y_train, inputs[1],
                                                         d.y_test, lrs=[0.01] * len(seeds), seeds=seeds,
                                                         epochs=epochs, batch=256)]

            def vmapped(epochs):
                ladder_epoch, train._epoch = train._epoch, vmap_epoch
                try:
                    return batched(epochs)
                finally:
                    train._epoch = ladder_epoch

            paths = (sequential, batched, vmapped)
            for f in paths:
                f(1)  # compile
            seconds, curves = {f: float("inf") for f in paths}, {}
            for _ in range(args.repeats):
                for f in paths:
                    t = time.perf_counter()
                    curves[f] = f(args.epochs)
                    seconds[f] = min(seconds[f], time.perf_counter() - t)
            seq = seconds[sequential]
            one = one_core_seconds(name, m, args.epochs, args.repeats)
            # Members that share no work run at best `cores` times one core's rate: the
            # sequential runs take `seq`, the program at least one/cores.
            print(f"{name:<14}{m:>6}{seq:>14.2f}{seconds[batched]:>15.2f}{seq / seconds[batched]:>9.2f}x"
                  f"{seconds[vmapped]:>12.2f}{seq / seconds[vmapped]:>9.2f}x{one:>10.2f}{cores * seq / one:>8.2f}x  "
                  f"{curves[batched] == curves[sequential]}, {curves[vmapped] == curves[sequential]}", flush=True)


if __name__ == "__main__":
    main()
