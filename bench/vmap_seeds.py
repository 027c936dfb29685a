"""Seeds trained as one vmapped program against the same seeds one after another.

Usage: .venv/bin/python bench/vmap_seeds.py [--epochs 2] [--widths 16,64,256]

For each arm and width, in one run (these machines are noisy, so only ratios
measured together mean anything): three seeds trained sequentially with
``train.fit``, then the same three seeds as the ladder trains them — one
``train.fit_batch`` program padded to ``BATCH_MEMBERS`` members. Both paths are
compiled once before timing. Prints both wall times, their ratio and whether
the accuracy curves are identical. Trained arms train every parameter on the
images; frozen arms train the head on each bank's stored features.
"""

from __future__ import annotations

import argparse
import time

import jax.numpy as jnp


def main() -> None:
    from lazylab import data
    from lazylab.arms import get_arm
    from lazylab.experiments import BATCH_MEMBERS
    from lazylab.model import build_model, features
    from lazylab.train import fit, fit_batch

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--widths", default="16,64,256")
    ap.add_argument("--arms", default="yat-trained,relu-trained,yat-frozen")
    args = ap.parse_args()
    d = data.load()
    seeds = [0, 1, 2]
    members = seeds + [seeds[0]] * (BATCH_MEMBERS - len(seeds))
    print(f"{len(seeds)} seeds, {args.epochs} epochs on {len(d.x_train)} images; batched program of {BATCH_MEMBERS} members")
    print(f"{'arm':<14}{'m':>6}{'sequential s':>14}{'vmapped s':>11}{'speed-up':>10}  identical accuracies")
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
                stacked = (jnp.stack([xs[s][0] for s in members]), jnp.stack([xs[s][1] for s in members]))
            kw = dict(epochs=args.epochs, batch=256)

            def sequential():
                return [fit(nets[s], xs[s][0], d.y_train, xs[s][1], d.y_test, lr=0.01, seed=s, **kw) for s in seeds]

            def batched():
                return fit_batch([nets[s] for s in members], stacked[0], d.y_train, stacked[1], d.y_test,
                                 lrs=[0.01] * len(members), seeds=members, **kw)[: len(seeds)]

            for f in (sequential, batched):  # compile both programs first
                fit_args = dict(kw, epochs=1)
                if f is sequential:
                    fit(nets[0], xs[0][0], d.y_train, xs[0][1], d.y_test, lr=0.01, seed=0, **fit_args)
                else:
                    fit_batch([nets[s] for s in members], stacked[0], d.y_train, stacked[1], d.y_test,
                              lrs=[0.01] * len(members), seeds=members, **fit_args)
            t = time.perf_counter()
            seq = sequential()
            t_seq = time.perf_counter() - t
            t = time.perf_counter()
            bat = batched()
            t_bat = time.perf_counter() - t
            same = all(a.curve == b.curve for a, b in zip(seq, bat))
            print(f"{name:<14}{m:>6}{t_seq:>14.2f}{t_bat:>11.2f}{t_seq / t_bat:>9.2f}x  {same}", flush=True)


if __name__ == "__main__":
    main()
