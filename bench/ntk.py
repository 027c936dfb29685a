"""Time the empirical NTK: full-Jacobian contraction vs lazylab's structured contraction.

One run, same model and probe: each method runs in its own child process (so
each peak resident memory is its own), twice (the first call includes jit
compilation), and the parent prints seconds, peak RSS, the speed ratio and
the largest relative difference between the two kernels.

    .venv/bin/python bench/ntk.py [--arm yat-trained] [--width 64] [--probe 128] [--methods jacobian,structured]

Probe images are the first N Fashion-MNIST test images when the data is
found, else uniform random images (the timing does not depend on content).
On CPU, peak memory is ``ru_maxrss`` of the child (includes the Python/jax
runtime, reported separately as the baseline before the first NTK call).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time


def worker(args) -> None:
    import numpy as np
    from flax import nnx

    from lazylab.arms import get_arm
    from lazylab.model import build_model
    from lazylab.ntk.kernels import empirical_ntk

    try:
        from lazylab import data

        d = data.load(None)
        x_train, x_probe, source = d.x_train[:2048], d.x_test[: args.probe], "Fashion-MNIST test images"
    except Exception:
        rng = np.random.default_rng(0)
        x_train, x_probe, source = rng.random((2048, 784), np.float32), rng.random((args.probe, 784), np.float32), "random images"
    arm = get_arm(args.arm)
    model = build_model(arm, args.width, 0, x_train)
    filt = nnx.Param if arm.trained else nnx.PathContains("head")
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    times = []
    for _ in range(2):
        t0 = time.perf_counter()
        K = empirical_ntk(model, x_probe, filt, args.worker, limit=None if args.worker == "jacobian" else args.limit_mib * 2**20)
        times.append(time.perf_counter() - t0)
    np.save(args.save, K.kernel)
    print(json.dumps({"method": K.method, "first_s": times[0], "second_s": times[1], "baseline_kib": base,
                      "peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "n_params": K.n_params,
                      "jacobian_mib": K.jacobian_bytes / 2**20, "work_mib": K.work_bytes / 2**20, "notes": K.notes,
                      "source": source}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arm", default="yat-trained")
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--probe", type=int, default=128)
    ap.add_argument("--methods", default="jacobian,structured")
    ap.add_argument("--limit-mib", type=int, default=256, help="memory limit for the chunked methods")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--save", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)

    import numpy as np

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for method in args.methods.split(","):
            save = os.path.join(tmp, f"{method}.npy")
            cmd = [sys.executable, __file__, "--arm", args.arm, "--width", str(args.width), "--probe", str(args.probe),
                   "--limit-mib", str(args.limit_mib), "--worker", method, "--save", save]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                print(f"{method}: failed: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode}")
                continue
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            r["kernel"] = np.load(save)
            rows.append(r)
    if not rows:
        sys.exit(1)
    r0 = rows[0]
    print(f"{args.arm} m={args.width}, probe {args.probe} ({r0['source']}), {r0['n_params']:,} parameters, "
          f"full Jacobian {r0['jacobian_mib']:.0f} MiB (float32)")
    print(f"{'method':<11} {'1st call s':>10} {'2nd call s':>10} {'peak RSS MiB':>13} {'baseline MiB':>13} {'work MiB':>9}")
    for r in rows:
        print(f"{r['method']:<11} {r['first_s']:>10.2f} {r['second_s']:>10.2f} {r['peak_kib'] / 1024:>13.0f} "
              f"{r['baseline_kib'] / 1024:>13.0f} {r['work_mib']:>9.0f}")
    if len(rows) >= 2:
        a, b = rows[0], rows[-1]
        ref = np.abs(a["kernel"]).max()
        print(f"speed ratio {a['method']}/{b['method']}: {a['second_s'] / b['second_s']:.1f}x (2nd calls), "
              f"{a['first_s'] / b['first_s']:.1f}x (1st calls); peak RSS ratio {a['peak_kib'] / b['peak_kib']:.2f}; "
              f"max |difference| / max |K| = {np.abs(a['kernel'] - b['kernel']).max() / ref:.1e}")


if __name__ == "__main__":
    main()
