"""The floor of a trained step against its FLOP-bound share, and the preset's floor against its limit.

Usage: .venv/bin/python bench/step_floor.py [--preset paper|quick]

In one run (these machines are noisy, so only ratios measured together mean anything):
1. The preset's FLOP-bound limit exactly as ``bench/roofline.py`` computes it:
   the same terms, and matmul throughput measured at the same shapes.
2. For every trained width of the preset, the floor of one training step: a
   program doing only what no trained bank's step can skip, namely
   - the bank's forward product ``x W^T``,
   - its weight gradient ``G^T x`` (``G`` is the ``(256, m)`` forward output,
     standing in for the back-propagated gradient),
   - and the protocol's AdamW update of the ``(m, 784)`` prototypes
     (``train.optimizer``),
   as a ``lax.scan`` of ``STEPS`` steps like the ladder's epoch. It is timed two
   ways and the better kept: one process using every core (best of 3 calls),
   and one process per core at once (wall time per step of all of them
   together, averaged over a window). It does no activation, head, loss, batch
   gather or bias, so every real arm's step does more.
3. The preset's floor: each trained run's bank steps at the floor step time;
   every other term (evaluation, head, frozen features) at its FLOP-bound time.

The floor is a measured one, not a proof: it is these products and optax's
AdamW as XLA compiles them on this machine. A preset whose floor exceeds k
times its limit cannot finish within k times its limit with them, whatever
the rest of the step does.
"""

from __future__ import annotations

import argparse
import os
import time

from processes import run_at_once  # bench/ is on sys.path when a bench script runs
from roofline import BATCH, D, flop_bound_s, measured_throughput, preset_runs, preset_terms, run_terms

STEPS = 50


def floor_epoch(m: int):
    """``(epoch, args)``: a jitted ``STEPS``-step scan of the floor step at width ``m``, and its arguments."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax

    from lazylab import train

    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.random((STEPS, BATCH, D), dtype=np.float32))  # one batch per step
    W = jnp.asarray(0.03 * rng.standard_normal((m, D), dtype=np.float32))
    tx = train.optimizer(1.0, 1e-4)
    state = tx.init(W)
    state.hyperparams["learning_rate"] = jnp.asarray(1e-3, jnp.float32)

    @jax.jit
    def epoch(W, state, x):
        def step(carry, xb):
            W, state = carry
            G = xb @ W.T  # the bank's forward product, (256, m)
            updates, state = tx.update(G.T @ xb, state, W)  # weight gradient, then AdamW
            return (optax.apply_updates(W, updates), state), None

        return jax.lax.scan(step, (W, state), x)[0]

    return epoch, (W, state, x)


def floor_step_s(m: int, barrier=None, window: float = 2.0) -> float:
    """Seconds per floor step at width ``m``.

    Alone (``barrier`` None): the best of 3 calls. With other processes (a
    ``multiprocessing.Barrier``): the average over back-to-back calls for at
    least ``window`` seconds after the barrier, so a pause of the others is not caught.
    """
    import jax

    epoch, args = floor_epoch(m)
    jax.block_until_ready(epoch(*args))  # compile
    if barrier is None:
        best = float("inf")
        for _ in range(3):
            t = time.perf_counter()
            jax.block_until_ready(epoch(*args))
            best = min(best, time.perf_counter() - t)
        return best / STEPS
    barrier.wait()
    calls, t0 = 0, time.perf_counter()
    while calls < 2 or time.perf_counter() - t0 < window:
        jax.block_until_ready(epoch(*args))
        calls += 1
    return (time.perf_counter() - t0) / (calls * STEPS)


def _concurrent_worker(widths, barrier, results) -> None:
    for m in widths:
        results.put((m, floor_step_s(m, barrier)))


def main() -> None:
    from lazylab.experiments.ladder import PRESETS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", choices=sorted(PRESETS), default="paper")
    args = ap.parse_args()
    preset = PRESETS[args.preset]
    terms = preset_terms(preset)
    throughput = measured_throughput(terms)
    limit_s = flop_bound_s(terms, throughput)

    runs = preset_runs(preset)
    widths = sorted({m for _, trained, m in runs if trained})
    alone = {m: floor_step_s(m) for m in widths}
    cores = os.cpu_count() or 1
    together = dict(alone)
    if cores > 1:
        per_process: dict[int, list[float]] = {}
        for m, s in run_at_once(_concurrent_worker, (widths,), cores, len(widths)):
            per_process.setdefault(m, []).append(s)
        together = {m: 1.0 / sum(1.0 / s for s in per_process[m]) for m in widths}  # wall per step, all at once
    floor_step = {m: min(alone[m], together[m]) for m in widths}

    print(f"\nms per trained step (batch {BATCH}): the FLOP-bound share of the bank's two products, "
          f"and the floor (two products + AdamW), alone | {cores} processes at once")
    print(f"{'m':>5} {'FLOP-bound':>11} {'floor alone':>12} {'at once':>8} {'floor/limit':>12}")
    for m in widths:
        bound = 2 * 2.0 * BATCH * D * m / (throughput[(BATCH, D, m)] * 1e9)
        print(f"{m:5d} {1e3 * bound:11.3f} {1e3 * alone[m]:12.3f} {1e3 * together[m]:8.3f} {floor_step[m] / bound:11.2f}x")

    steps = preset["epochs"] * (preset["train_size"] // BATCH)
    floor_s = 0.0
    for _, trained, m in runs:
        for name, flops, shape in run_terms(trained, m, preset["epochs"], preset["train_size"]):
            floor_s += steps * floor_step[m] if name == "bank fwd+bwd" else flops / (throughput[shape] * 1e9)
    print(f"\npreset {args.preset}: {len(runs)} runs")
    print(f"FLOP-bound limit {limit_s:8.1f} s")
    print(f"floor            {floor_s:8.1f} s  (trained steps at the floor step, every other term at its limit)")
    print(f"floor / limit    {floor_s / limit_s:8.2f}x")


if __name__ == "__main__":
    main()
