"""Roofline for a ladder preset: measured wall time against its FLOP-bound limit.

Usage: .venv/bin/python bench/roofline.py [--preset quick|paper] [--cache-dir DIR]

Steps, all in one run (these machines are noisy, so only ratios measured
together mean anything):
1. Measure this machine's float32 matmul throughput with jax at the
   protocol's shapes: a batch of 256 images against an (d, m) bank, and a
   4096-image feature chunk against it, for every width in the preset.
2. Count the preset's floating-point work (matmul terms only; the
   elementwise terms are O(1/d) of it): per run, bank features or bank
   forward/backward, head forward/backward, and test evaluation each epoch.
3. Run the preset's ladder on a fresh memo and time it.
4. Print wall time, the FLOP-bound limit (sum over terms of flops / measured
   throughput at that term's shape), their ratio, and peak resident memory.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np

D, CLASSES, BATCH, N_TRAIN, N_TEST, CHUNK = 784, 10, 256, 60000, 10000, 4096


def matmul_gflops(n: int, k: int, m: int, seconds: float = 0.3) -> float:
    """Best-of-repeats float32 throughput (GFLOP/s) of an (n, k) @ (k, m) product."""
    a = jax.random.normal(jax.random.key(0), (n, k), jnp.float32)
    b = jax.random.normal(jax.random.key(1), (k, m), jnp.float32)
    f = jax.jit(lambda a, b: a @ b)
    f(a, b).block_until_ready()
    best, t_end = float("inf"), time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        t = time.perf_counter()
        f(a, b).block_until_ready()
        best = min(best, time.perf_counter() - t)
    return 2.0 * n * k * m / best / 1e9


def run_terms(trained: bool, m: int, epochs: int, n_train: int) -> list[tuple[str, float, tuple]]:
    """(name, flops, matmul shape) terms of one run of the protocol (SPEC section 5)."""
    steps = epochs * (n_train // BATCH)
    terms = []
    if trained:
        # Bank forward (x W^T) plus the weight gradient (the input gradient is not needed).
        terms.append(("bank fwd+bwd", steps * 2 * 2.0 * BATCH * D * m, (BATCH, D, m)))
        terms.append(("eval bank", epochs * 2.0 * N_TEST * D * m, (CHUNK, D, m)))
    else:
        terms.append(("features", 2.0 * (n_train + N_TEST) * D * m, (CHUNK, D, m)))
    # Head: forward, the weight gradient, and (trained only) the feature gradient.
    passes = 3 if trained else 2
    terms.append(("head fwd+bwd", steps * passes * 2.0 * BATCH * m * CLASSES, (BATCH, m, CLASSES)))
    terms.append(("eval head", epochs * 2.0 * N_TEST * m * CLASSES, (CHUNK, m, CLASSES)))
    return terms


def preset_runs(preset: dict) -> list[tuple[str, bool, int]]:
    """Distinct (arm, trained, width) runs of a preset, bracketing at m = 256 included."""
    from lazylab.arms import get_arm

    runs = []
    for name in preset["arms"]:
        arm = get_arm(name)
        grid = arm.unit.grid(arm.trained)
        runs += [(name, arm.trained, 256)] * (len(grid) - (256 in preset["widths"] and 0 in preset["seeds"]))
        runs += [(name, arm.trained, w) for w in preset["widths"] for _ in preset["seeds"]]
    return runs


def main() -> None:
    from lazylab.experiments import Workspace
    from lazylab.experiments.ladder import PRESETS, LadderPlan, run_ladder
    from lazylab.cli import parse_arms

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", choices=sorted(PRESETS), default="quick")
    ap.add_argument("--cache-dir", default=None, help="memo for the timed run (default: a fresh temporary one)")
    args = ap.parse_args()
    preset = PRESETS[args.preset]

    throughput: dict[tuple, float] = {}
    flops_total, bound_s = 0.0, 0.0
    for _, trained, m in preset_runs(preset):
        for _, flops, shape in run_terms(trained, m, preset["epochs"], preset["train_size"]):
            if shape not in throughput:
                throughput[shape] = matmul_gflops(*shape)
            flops_total += flops
            bound_s += flops / (throughput[shape] * 1e9)
    peak = max(throughput.values())
    print(f"matmul throughput: peak {peak:.1f} GFLOP/s over {len(throughput)} protocol shapes")
    for shape, g in sorted(throughput.items()):
        print(f"  {shape[0]:>5} x {shape[1]:>5} @ {shape[1]:>5} x {shape[2]:>5}: {g:8.1f} GFLOP/s")

    with tempfile.TemporaryDirectory() as tmp:
        ws = Workspace(None, args.cache_dir or tmp)
        plan = LadderPlan(arms=parse_arms(",".join(preset["arms"])), widths=preset["widths"],
                          seeds=preset["seeds"], epochs=preset["epochs"], train_size=preset["train_size"])
        t = time.perf_counter()
        run_ladder(ws, plan)
        wall = time.perf_counter() - t
        ws.memo.close()
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB -> GiB on Linux
    print(f"preset {args.preset}: {len(preset_runs(preset))} runs, {flops_total / 1e12:.2f} TFLOP (matmul terms)")
    print(f"wall time        {wall:8.1f} s")
    print(f"FLOP-bound limit {bound_s:8.1f} s")
    print(f"ratio            {wall / bound_s:8.2f}x")
    print(f"peak RSS         {peak_rss:8.2f} GiB")


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    main()
