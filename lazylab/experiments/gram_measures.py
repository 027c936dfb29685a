"""What ``lazylab gram`` measures on Gram matrices: pure numpy, no bank and no memo.

``K = Phi Phi^T / m`` is the Monte Carlo estimate of a random-feature kernel
(Rahimi & Recht 2007, "Random features for large-scale kernel machines",
NeurIPS); the experiment (``lazylab.experiments.gram``) normalises it to
``K_ij / sqrt(K_ii K_jj)``, measures its block contrast and its distance to a
reference, and fits the log-log slope of that distance on the width (Monte
Carlo predicts -1/2).
"""

from __future__ import annotations

import numpy as np

DEFAULT_FIT_MIN = 10  # smallest width in the slope fit (lazylab.experiments.gram's docstring says why)


def log_widths(max_units: int, frames: int) -> np.ndarray:
    """``min(frames, max_units)`` distinct integer widths from 1 to ``max_units``, log-spaced.

    Each width is the geometric step from the previous one towards
    ``max_units`` over the frames left, rounded, and at least one more than the
    previous: log-spaced as nearly as distinct integers allow.
    Returns: int64 ``(k,)``, strictly increasing, ``[0] == 1``, ``[-1] == max_units``.
    """
    k = max(1, min(int(frames), int(max_units)))
    if k == 1:
        return np.array([max_units], np.int64)
    widths = [1]
    for i in range(1, k):
        prev, left = widths[-1], k - i
        nxt = max(prev + 1, int(round(prev * (max_units / prev) ** (1.0 / left))))
        widths.append(min(nxt, max_units - (left - 1)))
    return np.asarray(widths, np.int64)


def normalise_gram(K: np.ndarray) -> np.ndarray:
    """``K_ij / sqrt(K_ii K_jj)`` of a Gram matrix ``K`` ``(n, n)`` (a cosine similarity).

    An image with ``K_ii = 0`` (all features zero, e.g. a ReLU bank of one
    unit) is treated as orthogonal to the others: its row and column are 0,
    its diagonal entry 1.
    Returns: float64 ``(n, n)``, symmetric, unit diagonal, entries in [-1, 1].
    """
    K = np.asarray(K, np.float64)
    diag = np.sqrt(np.clip(np.diag(K), 0.0, None))
    scale = np.where(diag > 0, 1.0 / np.where(diag > 0, diag, 1.0), 0.0)
    G = K * scale[:, None] * scale[None, :]
    G = np.clip((G + G.T) / 2.0, -1.0, 1.0)
    np.fill_diagonal(G, 1.0)
    return G


def normalised_gram(phi: np.ndarray) -> np.ndarray:
    """Normalised Gram matrix of features ``phi`` ``(n, m)``.

    ``K = Phi Phi^T / m`` (Rahimi & Recht 2007), then ``normalise_gram``:
    ``K_ij / sqrt(K_ii K_jj)`` (the ``1/m`` cancels).
    Returns: float64 ``(n, n)``, symmetric, unit diagonal, positive
    semi-definite, entries in [-1, 1].
    """
    phi = np.asarray(phi, np.float64)
    return normalise_gram(phi @ phi.T / phi.shape[1])


def block_contrast(G: np.ndarray, labels: np.ndarray) -> float:
    """Within-class mean minus cross-class mean of a normalised Gram ``G`` ``(n, n)``.

    Within-class: entries ``G_ij`` with ``labels[i] == labels[j]`` and ``i != j``;
    cross-class: ``labels[i] != labels[j]``. Dimensionless, in [-2, 2].
    Raises: ValueError if either set of entries is empty.
    """
    labels = np.asarray(labels)
    same = labels[:, None] == labels[None, :]
    off = ~np.eye(len(labels), dtype=bool)
    within, cross = G[same & off], G[~same]
    if within.size == 0 or cross.size == 0:
        raise ValueError("block contrast needs at least two images in a class and two classes")
    return float(within.mean() - cross.mean())


def loglog_slope(widths, values, min_width: int = DEFAULT_FIT_MIN) -> dict:
    """Ordinary least squares of ``log(value)`` on ``log(width)`` over widths ``>= min_width``.

    Returns: ``{"slope", "intercept", "r2", "widths": [lo, hi], "n"}`` with
    ``slope`` None when fewer than 3 widths (with finite positive values) qualify.
    Monte Carlo predicts slope -1/2 for the distance to the reference kernel.
    """
    w = np.asarray(widths, np.float64)
    v = np.asarray(values, np.float64)
    sel = (w >= min_width) & np.isfinite(v) & (v > 0)
    out = {"slope": None, "intercept": None, "r2": None, "widths": None, "n": int(sel.sum()), "min_width": int(min_width)}
    if sel.sum() < 3:
        return out
    lx, ly = np.log(w[sel]), np.log(v[sel])
    slope, intercept = np.polyfit(lx, ly, 1)
    resid = ly - (slope * lx + intercept)
    ss = float(((ly - ly.mean()) ** 2).sum())
    out.update(slope=float(slope), intercept=float(intercept), r2=(1.0 - float((resid**2).sum()) / ss) if ss > 0 else None,
               widths=[int(w[sel].min()), int(w[sel].max())])
    return out
