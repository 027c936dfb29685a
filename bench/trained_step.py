"""Where a trained arm's training step goes at large widths, and what one worker per core buys.

Usage: .venv/bin/python bench/trained_step.py [--widths 2048,4096,8192] [--arms relu-trained,yat-trained]

In one run, for each width m and trained arm, on random inputs shaped like the
protocol's (batch 256 of 784 pixels; the step's cost does not depend on pixel
values):
- ms per AdamW step of the ladder's compiled epoch (``train._epoch``, a
  ``lax.scan`` over 40 steps), in one process using every core;
- the same with one process per core training at once (as the Ray
  backend's tasks run on one machine), given as
  the wall time per step of all processes together (each process's step time
  divided by the number of processes);
- the step's matmul work alone (the bank's forward product and weight
  gradient, ``x W^T`` and ``G^T x``) and the AdamW update alone (optax, on
  the ``(m, 784)`` prototypes), in one process;
- the memory bandwidth of a jitted ``a + b`` on ``(m, 784)`` float32 arrays
  (3 arrays' bytes per call).
The gap between a step and its matmul work is the memory-bound part
(elementwise passes, the optimiser's four parameter-sized arrays) that a
FLOP count does not see.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from processes import run_at_once  # bench/ is on sys.path when a bench script runs

D, BATCH, STEPS = 784, 256, 40


def step_ms(arms: list[str], m: int) -> dict[str, float]:
    """ms per training step of each arm at width ``m``: the best of 4 calls of one ``STEPS``-step epoch (the first compiles)."""
    import jax
    import jax.numpy as jnp
    from flax import nnx

    from lazylab import train
    from lazylab.arms import get_arm
    from lazylab.model import build_model

    rng = np.random.default_rng(0)
    n = 60000  # the protocol's training set: STEPS batches of it, and distinct images for a data-seeded bank
    x = rng.random((n, D), dtype=np.float32)
    y = rng.integers(0, 10, n).astype(np.int32)
    xj, yj = jnp.asarray(x), jnp.asarray(y)
    out = {}
    for name in arms:
        graphdef, trainable, rest = nnx.split(build_model(get_arm(name), m, 0, x), nnx.Param, ...)
        trainable, rest = train._stack([trainable]), train._stack([rest])
        tx = train.optimizer(1.0, 1e-4)
        opt = jax.vmap(tx.init)(trainable)
        opt.hyperparams["learning_rate"] = jnp.asarray([1e-3], jnp.float32)
        order = jnp.asarray(train.batch_orders(0, n, BATCH, 1)[:, :STEPS])
        best = float("inf")
        for _ in range(4):  # the first call compiles
            t = time.perf_counter()
            trainable, opt, losses = train._epoch(graphdef, tx, trainable, opt, rest, xj, yj, order)
            losses.block_until_ready()
            best = min(best, time.perf_counter() - t)
        out[name] = 1e3 * best / STEPS
    return out


def parts_ms(m: int) -> dict[str, float]:
    """ms of the step's matmul work, of an AdamW update of ``(m, d)`` prototypes, and GB/s of ``a + b``."""
    import jax
    import jax.numpy as jnp
    import optax

    def best(f, *args, n=10):
        jax.block_until_ready(f(*args))
        times = []
        for _ in range(n):
            t = time.perf_counter()
            jax.block_until_ready(f(*args))
            times.append(time.perf_counter() - t)
        return 1e3 * min(times)

    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.random((BATCH, D), dtype=np.float32))
    W = jnp.asarray(rng.standard_normal((m, D), dtype=np.float32))
    G = jnp.asarray(rng.standard_normal((BATCH, m), dtype=np.float32))
    matmul = best(jax.jit(lambda x, W, G: (x @ W.T, G.T @ x)), x, W, G)
    tx = optax.adamw(1e-3, weight_decay=1e-4)
    state = tx.init(W)
    adamw = best(jax.jit(lambda g, s, p: optax.apply_updates(p, tx.update(g, s, p)[0])), W + 1.0, state, W)
    add = best(jax.jit(lambda a, b: a + b), W, W + 1.0)
    return {"matmul": matmul, "adamw": adamw, "stream_gbs": 3 * W.nbytes / add / 1e6}


def _worker(arms, m, barrier, results) -> None:
    barrier.wait()
    results.put(step_ms(arms, m))


def concurrent_step_ms(arms: list[str], m: int, processes: int) -> dict[str, float]:
    """Per-process ms per step with ``processes`` processes training at once (mean over them)."""
    got = run_at_once(_worker, (arms, m), processes, 1)
    return {name: float(np.mean([g[name] for g in got])) for name in arms}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--widths", default="2048,4096,8192")
    ap.add_argument("--arms", default="relu-trained,yat-trained,gaussian-trained")
    args = ap.parse_args()
    arms = args.arms.split(",")
    cores = os.cpu_count() or 1
    print(f"ms per step (batch {BATCH}); 'N workers' = {cores} processes at once, "
          "wall time per step of all of them together")
    print(f"{'arm':18} {'m':>5} {'one process':>12} {f'{cores} workers':>10} {'speed-up':>8} {'matmul':>8} "
          f"{'adamw':>7} {'a+b GB/s':>9}")
    for m in (int(w) for w in args.widths.split(",")):
        one = step_ms(arms, m)
        many = concurrent_step_ms(arms, m, cores) if cores > 1 else one
        parts = parts_ms(m)
        for name in arms:
            together = many[name] / cores
            print(f"{name:18} {m:5d} {one[name]:12.2f} {together:10.2f} {one[name] / together:7.2f}x "
                  f"{parts['matmul']:8.2f} {parts['adamw']:7.2f} {parts['stream_gbs']:9.1f}", flush=True)


if __name__ == "__main__":
    main()
