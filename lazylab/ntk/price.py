"""The price of an empirical NTK (``lazylab.ntk.kernels.empirical_ntk``) before it is computed: what
``lazylab ntk arm --dry-run`` (``lazylab.estimate.ntk_arm_estimate``) adds to its training runs. No jax here.
"""

from __future__ import annotations

from lazylab.limits import CLASS_NAMES

# Seconds per multiply-add of each method's dominant contraction, and per pair of row chunks: bench/ntk_kernels.py
# on the 2-core development machine shared with other jobs (2026-12-06): structured,
# yat-trained m = 256 and 1024 on 64-128 probe images, 0.58-6.6 s; jacobian, relu-trained m = 64 and 128 on 64,
# 1.2-2.3 s; rows of one image, relu-trained m = 64 on 64 and 128 probe images, 7.1 and 23.5 s.
NTK_STRUCTURED_S = 4.5e-10
NTK_CONTRACT_S = 6e-11
NTK_ROW_PAIR_S = 3e-3


def ntk_kernel_s(method: str, probe: int, width: int, d: int, trained: bool, limit: int) -> float:
    """Seconds of one empirical NTK (``lazylab.ntk.kernels.empirical_ntk``) on ``probe`` images of size ``d`` for a
    bank of ``width`` units and its head (``trained``: every parameter, else the head's), under the memory limit
    ``limit`` (bytes), from its dominant contraction: ``"structured"`` (``"auto"`` for a bank and a linear head)
    ``N^2 m (r + C^2)``; ``"jacobian"`` ``(N C)^2 P``; ``"rows"`` the same in pairs of row chunks, each with its
    dispatch and two chunk Jacobians (``P`` parameters: ``m (d + C + 1) + C`` trained, ``m C + C`` the head's;
    ``r = d`` a unit's row; ``C = 10``). Constants: ``NTK_STRUCTURED_S``, ``NTK_CONTRACT_S``, ``NTK_ROW_PAIR_S``."""
    n, c = probe, len(CLASS_NAMES)  # logits
    params = width * (d + c + 1) + c if trained else width * c + c
    if method in ("auto", "structured"):
        return NTK_STRUCTURED_S * n * n * width * ((d if trained else 0) + c * c)
    contract = NTK_CONTRACT_S * (n * c) ** 2 * params
    if method == "jacobian":
        return contract
    chunk = max(1, min(n, limit // (2 * c * params * 4)))
    chunks = -(-n // chunk)
    pairs = chunks * (chunks + 1) // 2
    return contract + pairs * (NTK_ROW_PAIR_S + 2 * 3 * chunk * c * params * NTK_CONTRACT_S)
