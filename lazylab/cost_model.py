"""The cost model's formulas: seconds of a group of runs from the constants measured on this machine
(``lazylab.calibration``), and the bytes of a bank's features. ``lazylab.estimate`` prices commands with them;
``lazylab.estimate_optimum`` the trained optimum's annealed runs (docs/performance.md, "Estimates before a run").
"""

from __future__ import annotations

from lazylab.calibration import Calibration

D, BATCH, N_TEST = 784, 256, 10000  # input dimension, batch size, test images


def trained_group_s(cal: Calibration, width: int, members: int, epochs: int, train_size: int) -> float:
    """Seconds to train ``members`` runs of a trained arm as one program, compilation excluded:
    ``epochs * (steps * (a + S b m) + S * (10000 / 256) * b m / 3)``, ``steps = train_size // 256``."""
    steps = train_size // BATCH
    evaluation = members * (N_TEST / BATCH) * cal.step_b * width / 3
    return epochs * (steps * (cal.step_a + members * cal.step_b * width) + evaluation)


def head_group_s(cal: Calibration, width: int, members: int, epochs: int, train_size: int) -> float:
    """Seconds to train ``members`` heads on stored ``(train_size, width)`` features as one program."""
    return epochs * (train_size // BATCH) * (cal.head_a + members * cal.head_b * width)


def features_s(cal: Calibration, width: int, n_images: int) -> float:
    """Seconds to compute a frozen bank's ``(n_images, width)`` features."""
    return n_images * width * cal.feature_s


def feature_bytes(width: int, train_size: int) -> int:
    """Bytes of a frozen bank's float32 train and test features, ``4 (train_size + 10000) width``."""
    return 4 * (train_size + N_TEST) * width
