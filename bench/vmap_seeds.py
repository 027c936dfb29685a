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
"""

from __future__ import annotations

import argparse
import time
from functools import partial

import jax
import jax.numpy as jnp


@partial(jax.jit, static_argnums=(0, 1, 2), donate_argnums=(3, 4))
def vmap_epoch(graphdef, tx, x_axis, trainable, opt_state, rest, x, y, order):
    """``train._epoch``'s signature and results, as one ``jax.vmap`` over the members."""
    from lazylab import train

    def run(params, state, r, xx, o):
        def step(carry, idx):
            params, state, loss = train._step(graphdef, tx, *carry, r, xx, y, idx)
            return (params, state), loss

        (params, state), losses = jax.lax.scan(step, (params, state), o)
        return params, state, losses

    return jax.vmap(run, in_axes=(0, 0, 0, x_axis, 0))(trainable, opt_state, rest, x, order)


def main() -> None:
    from lazylab import data, train
    from lazylab.arms import get_arm
    from lazylab.model import build_model, features

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--widths", default="16,64,256")
    ap.add_argument("--arms", default="yat-trained,relu-trained,yat-frozen")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    d = data.load()
    seeds = [0, 1, 2]
    print(f"{len(seeds)} seeds, {args.epochs} epochs on {len(d.x_train)} images; best of {args.repeats}")
    print(f"{'arm':<14}{'m':>6}{'sequential s':>14}{'one program s':>15}{'speed-up':>10}{'jax.vmap s':>12}"
          f"{'speed-up':>10}  identical accuracies (program, vmap)")
    for name in args.arms.split(","):
        arm = get_arm(name)
        for m in [int(w) for w in args.widths.split(",")]:
            models = {s: build_model(arm, m, s, d.x_train) for s in seeds}
            if arm.trained:
                xs = {s: (d.x_train, d.x_test) for s in seeds}
                nets = models
                stacked = (d.x_train, d.x_test)
            else:
                xs = {s: (features(models[s].feat, d.x_train), features(models[s].feat, d.x_test)) for s in seeds}
                nets = {s: models[s].head for s in seeds}
                stacked = (jnp.stack([xs[s][0] for s in seeds]), jnp.stack([xs[s][1] for s in seeds]))

            def sequential(epochs):
                return [train.fit(nets[s], xs[s][0], d.y_train, xs[s][1], d.y_test, lr=0.01, seed=s, epochs=epochs,
                                  batch=256) for s in seeds]

            def batched(epochs):
                return train.fit_batch([nets[s] for s in seeds], stacked[0], d.y_train, stacked[1], d.y_test,
                                       lrs=[0.01] * len(seeds), seeds=seeds, epochs=epochs, batch=256)

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
                    curves[f] = [r.curve for r in f(args.epochs)]
                    seconds[f] = min(seconds[f], time.perf_counter() - t)
            seq = seconds[sequential]
            print(f"{name:<14}{m:>6}{seq:>14.2f}{seconds[batched]:>15.2f}{seq / seconds[batched]:>9.2f}x"
                  f"{seconds[vmapped]:>12.2f}{seq / seconds[vmapped]:>9.2f}x  "
                  f"{curves[batched] == curves[sequential]}, {curves[vmapped] == curves[sequential]}", flush=True)


if __name__ == "__main__":
    main()
