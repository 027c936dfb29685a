"""The price of an empirical NTK (``lazylab.ntk.price.ntk_kernel_s``) against its measured time.

Usage: .venv/bin/python bench/ntk_kernels.py

For each case (arm, width, probe images, method, memory limit), in one run on the real Fashion-MNIST
test images: build the bank (seed 0), compute the NTK once (jit compilation) and again, timed, and
print the seconds next to the price and the figure each constant is read from: seconds per
``N^2 m (r + C^2)`` (structured: ``NTK_STRUCTURED_S``), per ``(N C)^2 P`` (jacobian:
``NTK_CONTRACT_S``) and per pair of row chunks (rows of one image: ``NTK_ROW_PAIR_S``).
"""

from __future__ import annotations

import time

CASES = [("yat-trained", 256, 64, "structured", 2**28), ("yat-trained", 256, 128, "structured", 2**28),
         ("yat-trained", 1024, 128, "structured", 2**28), ("relu-trained", 64, 64, "jacobian", 2**28),
         ("relu-trained", 128, 64, "jacobian", 2**28), ("relu-trained", 64, 64, "rows", 2**22),
         ("relu-trained", 64, 128, "rows", 2**22)]


def main() -> None:
    from flax import nnx

    from lazylab.arms import get_arm
    from lazylab.data import load
    from lazylab.ntk.price import ntk_kernel_s
    from lazylab.experiments.ntk import trainable_filter
    from lazylab.model import build_model
    from lazylab.ntk import kernels

    d = load(None)
    print("arm, m, N, method: seconds measured, priced; seconds per unit of the method's constant")
    for name, m, n, method, limit in CASES:
        arm = get_arm(name)
        model = build_model(arm, m, 0, d.x_train[:2048])
        x, f = d.x_test[:n], trainable_filter(arm)
        kernels.empirical_ntk(model, x, f, method, limit)  # compiles
        t0 = time.perf_counter()
        kernels.empirical_ntk(model, x, f, method, limit)
        s = time.perf_counter() - t0
        p = kernels.count_params(nnx.state(model, f))
        unit = {"structured": n * n * m * (784 + 100), "jacobian": (n * 10) ** 2 * p,
                "rows": (n * (n + 1)) // 2}[method]
        priced = ntk_kernel_s(method, n, m, 784, True, limit)
        print(f"{name}, {m}, {n}, {method}: {s:.2f} s, {priced:.2f} s; {s / unit:.2e}", flush=True)


if __name__ == "__main__":
    main()
