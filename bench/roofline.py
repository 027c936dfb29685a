"""Roofline for a ladder preset: measured wall time against its FLOP-bound limit.

Usage: .venv/bin/python bench/roofline.py [--preset quick|paper] [--backend local|ray] [--cache-dir DIR]

Steps, all in one run (these machines are noisy, so only ratios measured
together mean anything):
1. Measure this machine's float32 matmul throughput with jax at the
   protocol's shapes: a batch of 256 images against an (d, m) bank, and a
   4096-image feature chunk against it, for every width in the preset. Each
   shape is measured two ways and the better counts: one process using every
   core, and one process per core, all multiplying at once (their sum).
2. Count the preset's floating-point work (matmul terms only; the
   elementwise terms are O(1/d) of it): per run, bank features or bank
   forward/backward, head forward/backward, and test evaluation each epoch.
3. Run the preset's ladder on a fresh memo and time it, in this process
   (``--backend local``) or as tasks on a local Ray instance, one
   worker process per core (``--backend ray``).
4. Print wall time, the FLOP-bound limit (sum over terms of flops / measured
   throughput at that term's shape), their ratio, and peak memory: this
   process's peak RSS, or with Ray the peak of the summed RSS of this process
   and every process it started (Ray's own and its workers), sampled each second.
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
from processes import run_at_once  # bench/ is on sys.path when a bench script runs

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


def sustained_gflops(n: int, k: int, m: int, barrier, seconds: float) -> float:
    """Throughput (GFLOP/s) of back-to-back ``(n, k) @ (k, m)`` products over ``seconds``, started at ``barrier``.

    An average, not a best-of: with several processes multiplying at once, a best
    single product would catch a moment when the others paused.
    """
    a = jax.random.normal(jax.random.key(0), (n, k), jnp.float32)
    b = jax.random.normal(jax.random.key(1), (k, m), jnp.float32)
    f = jax.jit(lambda a, b: a @ b)
    f(a, b).block_until_ready()
    barrier.wait()  # every process multiplies the same shape at the same time
    count, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        f(a, b).block_until_ready()
        count += 1
    return 2.0 * n * k * m * count / (time.perf_counter() - t0) / 1e9


def _concurrent_worker(shapes, seconds, barrier, results) -> None:
    """One of the processes multiplying at once."""
    for shape in shapes:
        results.put((shape, sustained_gflops(*shape, barrier, seconds)))


def concurrent_gflops(shapes: list[tuple], processes: int, seconds: float = 1.0) -> dict[tuple, float]:
    """Summed throughput (GFLOP/s) per shape of ``processes`` processes multiplying at once."""
    total: dict[tuple, float] = {}
    for shape, g in run_at_once(_concurrent_worker, (shapes, seconds), processes, len(shapes)):
        total[shape] = total.get(shape, 0.0) + g
    return total


class TreeMemory:
    """Peak of the summed RSS (bytes) of this process and all its descendants, sampled every ``period`` s."""

    def __init__(self, period: float = 1.0):
        import psutil

        self.peak, self._stop = 0, threading.Event()
        self._me = psutil.Process()
        self._thread = threading.Thread(target=self._sample, args=(period,), daemon=True)
        self._thread.start()

    def _sample(self, period: float) -> None:
        import psutil

        while not self._stop.is_set():
            total = 0
            for proc in [self._me, *self._me.children(recursive=True)]:
                try:
                    total += proc.memory_info().rss
                except psutil.Error:  # exited between listing and reading
                    pass
            self.peak = max(self.peak, total)
            self._stop.wait(period)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


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


def preset_terms(preset: dict) -> list[tuple[str, float, tuple]]:
    """Every (name, flops, matmul shape) term of a preset's runs."""
    return [term for _, trained, m in preset_runs(preset)
            for term in run_terms(trained, m, preset["epochs"], preset["train_size"])]


def measured_throughput(terms: list[tuple]) -> dict[tuple, float]:
    """GFLOP/s at each term's shape: the better of one process on every core and one process per core at once (printed)."""
    shapes = sorted({shape for _, _, shape in terms})
    one = {shape: matmul_gflops(*shape) for shape in shapes}
    cores = os.cpu_count() or 1
    many = concurrent_gflops(shapes, cores) if cores > 1 else one
    print(f"matmul throughput (GFLOP/s): one process on {cores} cores | {cores} processes at once")
    for shape in shapes:
        print(f"  {shape[0]:>5} x {shape[1]:>5} @ {shape[1]:>5} x {shape[2]:>5}: {one[shape]:8.1f} | {many[shape]:8.1f}")
    throughput = {shape: max(one[shape], many[shape]) for shape in shapes}
    print(f"peak {max(throughput.values()):.1f} GFLOP/s; the limit uses the better of the two at each shape")
    return throughput


def flop_bound_s(terms: list[tuple], throughput: dict[tuple, float]) -> float:
    """The FLOP-bound limit (s): the sum over terms of flops / measured throughput at the term's shape."""
    return sum(flops / (throughput[shape] * 1e9) for _, flops, shape in terms)


def main() -> None:
    from lazylab.experiments import Workspace
    from lazylab.experiments.ladder import PRESETS, LadderPlan, run_ladder
    from lazylab.cli import parse_arms

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", choices=sorted(PRESETS), default="quick")
    ap.add_argument("--backend", choices=("local", "ray"), default="local",
                    help="run the preset in this process, or on a local Ray instance with one worker per core")
    ap.add_argument("--cache-dir", default=None, help="memo for the timed run (default: a fresh temporary one)")
    args = ap.parse_args()
    preset = PRESETS[args.preset]

    terms = preset_terms(preset)
    throughput = measured_throughput(terms)
    flops_total = sum(flops for _, flops, _ in terms)
    bound_s = flop_bound_s(terms, throughput)

    with tempfile.TemporaryDirectory() as tmp:
        ws = Workspace(None, args.cache_dir or tmp)
        if args.backend == "ray":
            from lazylab.backends import RayBackend

            ws.backend = RayBackend(num_cpus=1.0)
            memory = TreeMemory()
        plan = LadderPlan(arms=parse_arms(",".join(preset["arms"])), widths=preset["widths"],
                          seeds=preset["seeds"], epochs=preset["epochs"], train_size=preset["train_size"])
        t = time.perf_counter()
        run_ladder(ws, plan)
        wall = time.perf_counter() - t
        ws.backend.close()
        ws.memo.close()
    if args.backend == "ray":
        peak_mem, what = memory.stop() / 2**30, "peak summed RSS (driver, Ray, workers)"
    else:
        peak_mem, what = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, "peak RSS"  # KiB -> GiB
    print(f"preset {args.preset} ({args.backend} backend): {len(preset_runs(preset))} runs, "
          f"{flops_total / 1e12:.2f} TFLOP (matmul terms)")
    print(f"wall time        {wall:8.1f} s")
    print(f"FLOP-bound limit {bound_s:8.1f} s")
    print(f"ratio            {wall / bound_s:8.2f}x")
    print(f"{what}  {peak_mem:.2f} GiB")


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    main()
