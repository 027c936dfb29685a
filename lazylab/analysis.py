"""The ladder's laws (SPEC section 6): pure functions on numbers, no I/O.

Every function here takes plain numbers or arrays and returns plain
JSON-serialisable dicts, so it can be tested on constructed inputs with
known answers. What must be *measured* (a bank's features on real images,
the memo) lives in ``lazylab.experiments.laws``, which calls these.

Contents:
  * ``fit_power_law`` — ``err(m) = floor + c * m^(-alpha)`` by nonlinear
    least squares (variable projection: linear in floor and c, a 1-D search
    in alpha), with R^2.
  * ``climbing_region`` — the widths a ladder law is fitted on, by a stated
    rule.
  * ``movement_law`` — OLS of log(mean w_move_rel) on log m (3 widths or
    more, else ``skipped`` with the reason, as the ladder law).
  * ``pair_arms`` / ``gap`` — trained-minus-frozen accuracy per width for arms
    sharing unit and init.
  * ``redundancy`` — mean absolute off-diagonal correlation and participation
    ratio of a bank's feature correlation matrix.
  * ``per_width_stats`` / ``scalar_trajectory`` — seed means of a run field
    per width.
  (``exchange_rate`` / ``exchange_sentence`` — the frozen width of the same
  unit that matches a trained arm's accuracy, and one sentence on it — are in
  ``lazylab.exchange``.)
  * ``unstable_reason`` — why a run's training loss marks it unstable (or None).

No scipy: the power law is separable (for a fixed alpha it is linear least
squares in floor and c), so a grid plus golden-section search over the one
nonlinear parameter finds the global least-squares optimum within the
searched alpha range exactly enough (alpha to ~1e-10) with numpy alone.
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

import numpy as np

ALPHA_RANGE = (1e-3, 5.0)  # alpha searched on [1e-3, 5]; a fit at either end is flagged ``at_bound``
DEFAULT_MIN_GAIN = 0.1  # accuracy points: the climbing region ends where the next width gains no more
MOVEMENT_MIN_WIDTHS = 3  # a 2-parameter line needs a third point before its R^2 means anything
CHANCE_LOSS = math.log(10)  # cross-entropy of the uniform guess over 10 classes, 2.303 nats
# A run whose mean epoch training loss climbs above this multiple of its own minimum is unstable.
# Chosen on 52 real 12-epoch frozen-arm runs (docs/ladder.md): of those the ln 10 rule leaves, 34 rise
# by at most 1.42 x after their minimum; the two whose test accuracy collapses mid-training (to 46 %
# and 27 %) by 1.63 and 1.77 x.
UNSTABLE_RISE = 1.5


# ------------------------------------------------------------------ helpers
def r_squared(y: np.ndarray, y_hat: np.ndarray) -> float:
    """Coefficient of determination ``1 - SS_res / SS_tot`` (1.0 when ``y`` is constant and fitted exactly).

    Args: ``y``, ``y_hat``: ``(n,)`` observations and fitted values.
    Returns: a float; ``nan`` when ``y`` is constant but not fitted exactly.
    """
    y = np.asarray(y, np.float64)
    y_hat = np.asarray(y_hat, np.float64)
    ss_res = float(np.sum((y - y_hat) ** 2))
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    if ss_tot == 0.0:
        return 1.0 if ss_res == 0.0 else float("nan")
    return 1.0 - ss_res / ss_tot


def finite_pairs(xs: Sequence, ys: Sequence) -> tuple[np.ndarray, np.ndarray]:
    """The pairs ``(x, y)`` whose ``y`` is a finite number (None and NaN dropped), sorted by ``x``, as two float arrays."""
    pairs = [(float(x), float(y)) for x, y in zip(xs, ys) if y is not None and math.isfinite(float(y))]
    if not pairs:
        return np.zeros(0), np.zeros(0)
    x, y = zip(*sorted(pairs))
    return np.asarray(x), np.asarray(y)


# --------------------------------------------------------------- ladder law
def _linear_part(m: np.ndarray, err: np.ndarray, alpha: float) -> tuple[float, float, float]:
    """For fixed ``alpha``: least-squares (floor, c) of ``err = floor + c m^-alpha`` and the SSE."""
    A = np.stack([np.ones_like(m), m ** (-alpha)], axis=1)
    coef, *_ = np.linalg.lstsq(A, err, rcond=None)
    sse = float(np.sum((A @ coef - err) ** 2))
    return float(coef[0]), float(coef[1]), sse


def fit_power_law(widths: Sequence[float], err: Sequence[float], alpha_range: tuple[float, float] = ALPHA_RANGE,
                  grid: int = 600) -> dict:
    """Fit ``err(m) = floor + c * m^(-alpha)`` by nonlinear least squares (SPEC section 6, ladder law).

    Method (variable projection, Golub & Pereyra 1973): for a fixed ``alpha``
    the model is linear in ``(floor, c)``, solved by ``numpy.linalg.lstsq``;
    the residual sum of squares as a function of ``alpha`` alone is scanned
    on ``grid`` log-spaced points of ``alpha_range`` and the best bracket is
    refined by golden-section search to a relative tolerance of 1e-12.
    Unweighted: every width counts equally (the seed spread is not used).

    Args:
      widths: ``(n,)`` widths ``m > 0`` (units).
      err: ``(n,)`` errors in percentage points, ``100 - mean accuracy (%)``.
      alpha_range: the searched exponent range; ``at_bound`` in the result
        says the optimum sits at an end of it (the fit is then unreliable).
      grid: number of grid points for the scan.
    Returns: ``{"floor", "c", "alpha", "r2", "sse", "widths", "n", "dof",
      "at_bound"}`` — ``floor`` in points, ``c`` in points at ``m = 1``,
      ``r2`` the R^2 on ``err`` (not log err), ``dof = n - 3``.
    Raises: ValueError for fewer than 3 finite points, non-positive widths,
      or mismatched lengths.
    """
    if len(widths) != len(err):
        raise ValueError(f"widths ({len(widths)}) and err ({len(err)}) differ in length")
    m, e = finite_pairs(widths, err)
    if len(m) < 3:
        raise ValueError(f"a 3-parameter power law needs at least 3 finite points, got {len(m)}")
    if np.any(m <= 0):
        raise ValueError("widths must be positive")
    lo, hi = alpha_range
    alphas = np.geomspace(lo, hi, grid)
    sses = np.array([_linear_part(m, e, a)[2] for a in alphas])
    i = int(np.argmin(sses))
    a, b = alphas[max(i - 1, 0)], alphas[min(i + 1, grid - 1)]
    # Golden-section search on [a, b] for the SSE minimum.
    g = (math.sqrt(5.0) - 1.0) / 2.0
    c1, c2 = b - g * (b - a), a + g * (b - a)
    f1, f2 = _linear_part(m, e, c1)[2], _linear_part(m, e, c2)[2]
    while (b - a) > 1e-12 * max(abs(b), 1e-12):
        if f1 <= f2:
            b, c2, f2 = c2, c1, f1
            c1 = b - g * (b - a)
            f1 = _linear_part(m, e, c1)[2]
        else:
            a, c1, f1 = c1, c2, f2
            c2 = a + g * (b - a)
            f2 = _linear_part(m, e, c2)[2]
    alpha = (a + b) / 2.0
    if _linear_part(m, e, alphas[i])[2] < _linear_part(m, e, alpha)[2]:
        alpha = float(alphas[i])  # the grid point was already better (flat SSE)
    floor, c, sse = _linear_part(m, e, alpha)
    fitted = floor + c * m ** (-alpha)
    at_bound = bool(alpha <= lo * (1 + 1e-6) or alpha >= hi * (1 - 1e-6))
    return {
        "floor": floor, "c": c, "alpha": float(alpha), "r2": r_squared(e, fitted), "sse": sse,
        "widths": [int(w) if float(w).is_integer() else float(w) for w in m], "n": int(len(m)),
        "dof": int(len(m) - 3), "at_bound": at_bound,
    }


def power_law(m, floor: float, c: float, alpha: float):
    """``floor + c * m^(-alpha)`` (vectorised over ``m``)."""
    return floor + c * np.asarray(m, np.float64) ** (-alpha)


def climbing_region(widths: Sequence[int], means: Sequence[float | None], min_gain: float = DEFAULT_MIN_GAIN) -> list[int]:
    """The widths a ladder law is fitted on.

    Rule: sort by width; start at the smallest width with a finite mean and
    keep adding the next width while its mean accuracy exceeds the current
    one by more than ``min_gain`` points. The region ends at the last width
    that did so — the first local peak of the ladder when ``min_gain = 0``;
    the default 0.1 points treats a gain within the seed noise as a plateau.
    A width whose mean is missing (every seed diverged) ends the region.

    Args:
      widths: ``(n,)`` widths.
      means: ``(n,)`` mean accuracies (%) or None.
      min_gain: accuracy points a step must gain to count as climbing.
    Returns: the region's widths, ascending (empty if no finite mean).
    """
    pairs = sorted(zip(widths, means))
    region: list[int] = []
    last = None
    for w, a in pairs:
        if a is None or not math.isfinite(a):
            if region:
                break
            continue
        if last is not None and not (a - last > min_gain):
            break
        region.append(int(w))
        last = a
    return region


def ladder_law(widths: Sequence[int], means: Sequence[float | None], region: Sequence[int] | None = None,
               min_gain: float = DEFAULT_MIN_GAIN) -> dict:
    """The ladder law of one arm: ``climbing_region`` (or ``region``) then ``fit_power_law`` on ``100 - mean``.

    Args:
      widths, means: per-width mean accuracy (%) over seeds.
      region: explicit widths to fit (an override of the rule); widths not
        in ``widths`` are ignored.
      min_gain: passed to ``climbing_region`` when ``region`` is None.
    Returns: the ``fit_power_law`` dict plus ``"rule"`` (how the widths were
      chosen); or ``{"widths", "rule", "skipped": reason}`` when fewer than
      3 widths qualify.
    """
    by_width = dict(zip((int(w) for w in widths), means))
    if region is None:
        used = climbing_region(widths, means, min_gain)
        rule = f"climbing: from the smallest width while each next width gains > {min_gain:g} points"
    else:
        used = sorted(int(w) for w in region if int(w) in by_width and by_width[int(w)] is not None)
        rule = "widths given explicitly"
    if len(used) < 3:
        return {"widths": used, "rule": rule,
                "skipped": f"{len(used)} width(s) in the region; the power law needs at least 3"}
    fit = fit_power_law(used, [100.0 - by_width[w] for w in used])
    return {**fit, "rule": rule}


# ------------------------------------------------------------- movement law
def _too_few_movement_widths(n: int) -> str:
    return f"{n} width(s) with movement; the movement law needs at least {MOVEMENT_MIN_WIDTHS}"


def movement_law(widths: Sequence[float], move: Sequence[float | None]) -> dict:
    """OLS of ``log(mean w_move_rel)`` on ``log m`` (SPEC section 6, movement law).

    ``w_move_rel ~ exp(intercept) * m^slope``; natural logs (the slope does
    not depend on the base). Under lazy (NTK) scaling each weight moves
    ``O(m^-1/2)`` relative to its size, i.e. slope -1/2 (Jacot et al. 2018;
    Chizat, Oyallon & Bach 2019). Like the ladder law (``ladder_law``), the
    fit needs at least 3 widths: a line through 2 points fits them exactly, so
    its R^2 = 1 would say nothing about whether movement follows a power law.

    Args:
      widths: ``(n,)`` widths ``m > 0``.
      move: ``(n,)`` mean relative movement per width (dimensionless); None
        or non-finite entries are dropped.
    Returns: ``{"slope", "intercept", "r2", "widths", "n"}`` (``widths``: those
      fitted, ascending); or ``{"widths", "n", "skipped": reason}`` when fewer
      than ``MOVEMENT_MIN_WIDTHS`` (3) widths have a movement.
    Raises: ValueError if the lengths differ, or for a non-positive width or
      movement among the usable points (a frozen bank's zero movement has no log).
    """
    if len(widths) != len(move):
        raise ValueError(f"widths ({len(widths)}) and move ({len(move)}) differ in length")
    m, y = finite_pairs(widths, move)
    used = [int(w) if float(w).is_integer() else float(w) for w in m]
    if len(m) < MOVEMENT_MIN_WIDTHS:
        return {"widths": used, "n": int(len(m)), "skipped": _too_few_movement_widths(len(m))}
    if np.any(m <= 0) or np.any(y <= 0):
        raise ValueError("widths and movements must be positive for a log-log fit")
    lx, ly = np.log(m), np.log(y)
    slope, intercept = np.polyfit(lx, ly, 1)
    return {
        "slope": float(slope), "intercept": float(intercept),
        "r2": r_squared(ly, intercept + slope * lx), "widths": used, "n": int(len(m)),
    }


def movement_law_or_why(law: dict | None) -> dict:
    """A stored ``movement_law`` result as this lazylab reads it (tables and figures call this).

    A fit on fewer than 3 widths (``n``, else ``widths``), as older lazylabs wrote
    into ``--json`` files (R^2 = 1 from 2 widths), becomes ``{"widths", "n",
    "skipped"}`` with the reason ``movement_law`` gives; None or a dict without a
    slope becomes one with ``"skipped"``; a fit is returned as it is.
    """
    if not law:
        return {"skipped": "no movement law"}
    if "skipped" in law or "slope" not in law:
        return law if "skipped" in law else {**law, "skipped": "no movement law"}
    if "n" not in law and "widths" not in law:  # nothing says how many widths: taken as fitted
        return law
    n = int(law.get("n", len(law.get("widths") or [])))
    if n < MOVEMENT_MIN_WIDTHS:
        return {"widths": law.get("widths", []), "n": n, "skipped": _too_few_movement_widths(n)}
    return law



# ---------------------------------------------------------------------- gap
def pair_arms(arms: Iterable) -> list[tuple[str, str]]:
    """``(frozen, trained)`` arm-name pairs sharing unit and init.

    Args: objects with ``name``, ``unit.name`` (or ``unit`` as a str),
      ``init`` and ``trained`` — ``lazylab.arms.Arm`` or equivalents.
    Returns: pairs in the order the frozen arms appear.
    """
    arms = list(arms)

    def ident(a):
        unit = a.unit if isinstance(a.unit, str) else a.unit.name
        return (unit, a.init)

    trained = {ident(a): a.name for a in arms if a.trained}
    return [(a.name, trained[ident(a)]) for a in arms if not a.trained and ident(a) in trained]


def partners_to_add(arm_names: Iterable[str]) -> list[str]:
    """The arms whose addition would give a ladder of ``arm_names`` an exchange rate, when no pair shares unit
    and init: each frozen arm's trained partner (``yat-frozen`` -> ``yat-trained``), else each trained arm's frozen
    one; ``[]`` when the names already hold a pair or none ends in ``-frozen`` / ``-trained``.

    Arm names are ``<unit>[-<init>]-frozen|trained`` (``lazylab.arms.Registry.arms``), so a partner's name is the
    other suffix on the same stem.
    """
    names = list(arm_names)
    stems = {mode: [n[: -len(mode) - 1] for n in names if n.endswith("-" + mode)] for mode in ("frozen", "trained")}
    if set(stems["frozen"]) & set(stems["trained"]):
        return []
    return [f"{s}-trained" for s in stems["frozen"]] or [f"{s}-frozen" for s in stems["trained"]]


def gap(frozen: dict, trained: dict) -> dict:
    """Trained-minus-frozen accuracy per width (SPEC section 6, gap).

    Args:
      frozen, trained: ``{width: {"mean": %, "std": %, "n": seeds}}`` per-width
        summaries (``ArmSummary.cells``); widths missing or None in either are skipped.
    Returns: ``{"per_width": {width: points}, "se": {width: points},
      "largest_at", "smallest_at"}`` — ``se`` is the standard error of the
      difference of means, ``sqrt(s_t^2/n_t + s_f^2/n_f)``; the ``*_at``
      widths are None when no width is shared.
    """
    per, se = {}, {}
    for w in sorted(set(map(int, frozen)) & set(map(int, trained))):
        f, t = _cell(frozen, w), _cell(trained, w)
        if f is None or t is None or f.get("mean") is None or t.get("mean") is None:
            continue
        per[w] = float(t["mean"] - f["mean"])
        se[w] = float(math.sqrt((t.get("std") or 0.0) ** 2 / max(t.get("n", 1), 1)
                                + (f.get("std") or 0.0) ** 2 / max(f.get("n", 1), 1)))
    return {
        "per_width": per, "se": se,
        "largest_at": max(per, key=per.get) if per else None,
        "smallest_at": min(per, key=per.get) if per else None,
    }


def _cell(cells: dict, w: int):
    return cells.get(w, cells.get(str(w)))


# --------------------------------------------------------------- redundancy
def redundancy(F: np.ndarray, tol: float = 1e-12) -> dict:
    """Redundancy of a bank from its features on ``n`` images (SPEC section 6).

    Each unit's feature is z-scored over the images (population std), then
    ``C = Fz^T Fz / n`` is the ``(m, m)`` correlation matrix. Reported: the
    mean absolute off-diagonal entry of ``C``, and the participation ratio
    ``PR = (sum lambda)^2 / sum lambda^2`` of its eigenvalues, computed
    exactly as ``trace(C)^2 / ||C||_F^2`` (C is symmetric) — the effective
    number of feature directions, between 1 (rank one) and m (uncorrelated).
    Units whose feature is constant over the images (std <= ``tol`` times
    the largest unit std, or exactly 0) have no correlation and are dropped;
    their number is reported as ``constant_units``.

    Args:
      F: ``(n, m)`` features, any float dtype (computed in float64).
      tol: relative std below which a unit counts as constant.
    Returns: ``{"mean_abs_corr", "participation_ratio", "m", "n",
      "constant_units"}``.
    Raises: ValueError if ``F`` is not 2-D, has fewer than 2 images, or
      fewer than 2 non-constant units.
    """
    F = np.asarray(F, np.float64)
    if F.ndim != 2:
        raise ValueError(f"features must be (n, m), got shape {F.shape}")
    n, m = F.shape
    if n < 2:
        raise ValueError("redundancy needs at least 2 images")
    if not np.all(np.isfinite(F)):
        raise ValueError("features contain non-finite values")
    std = F.std(axis=0)
    keep = std > tol * max(float(std.max()), 0.0)
    keep &= std > 0
    k = int(keep.sum())
    if k < 2:
        raise ValueError(f"only {k} of {m} units vary over the images; no correlation to measure")
    Z = (F[:, keep] - F[:, keep].mean(axis=0)) / std[keep]
    C = Z.T @ Z / n
    off = np.abs(C[~np.eye(k, dtype=bool)])
    return {
        "mean_abs_corr": float(off.mean()),
        "participation_ratio": float(np.trace(C) ** 2 / np.sum(C * C)),
        "m": int(m), "n": int(n), "constant_units": int(m - k),
    }


# ------------------------------------------------------------ run summaries
def per_width_stats(records: Iterable[dict], field: str) -> dict[int, dict]:
    """Seed statistics of one numeric field of run records, per width.

    Args:
      records: run records (``config.width`` and the field); ``field`` is a
        dotted path such as ``"movement.w_move_rel"``. Missing or None values
        (a diverged run has no movement) are skipped.
    Returns: ``{width: {"mean", "std", "n"}}`` — ``std`` with ddof=1 (0.0 for one seed).
    """
    by: dict[int, list[float]] = {}
    for r in records:
        v = _dig(r, field)
        if v is not None and math.isfinite(float(v)):
            by.setdefault(int(r["config"]["width"]), []).append(float(v))
    return {
        w: {"mean": float(np.mean(v)), "std": float(np.std(v, ddof=1)) if len(v) > 1 else 0.0, "n": len(v)}
        for w, v in sorted(by.items())
    }


def scalar_trajectory(records: Iterable[dict]) -> dict[str, dict[int, dict]]:
    """Learned layer scalars (b, eps, sigma, ...) at start and end, mean over seeds per width.

    Args: run records with ``scalars = {"start": {name: v}, "end": {name: v} | None}``.
    Returns: ``{name: {width: {"start": mean, "end": mean or None, "n": seeds}}}``;
      ``end`` averages only runs that have one (not diverged).
    """
    records = list(records)
    names = sorted({k for r in records for k in ((r.get("scalars") or {}).get("start") or {})})
    out: dict[str, dict[int, dict]] = {}
    for name in names:
        start = per_width_stats(records, f"scalars.start.{name}")
        end = per_width_stats(records, f"scalars.end.{name}")
        out[name] = {w: {"start": s["mean"], "end": end[w]["mean"] if w in end else None, "n": s["n"]}
                     for w, s in start.items()}
    return out


def _dig(record: dict, path: str):
    v = record
    for part in path.split("."):
        if not isinstance(v, dict) or part not in v:
            return None
        v = v[part]
    return v


# ------------------------------------------------------------ unstable runs
def unstable_reason(record: dict) -> str | None:
    """Why a run counts as unstable, in one line, or None (SPEC section 5's bracket rule is not affected).

    A run is unstable when its mean training loss in the epoch of its best test
    accuracy is above chance-level cross-entropy, ``ln 10 = 2.303`` nats (a head
    that predicted the uniform distribution would do better), or when the loss
    after its minimum rises above ``UNSTABLE_RISE`` x that minimum (a rate that
    throws the head back out of the basin it found). The first rule is checked
    first. A diverged run (non-finite loss) is already marked ``diverged`` and
    gets None here, as does a record with no loss curve (missing from the memo).

    Args:
      record: a run record: ``train_loss`` (mean training loss per completed
        epoch, nats) and ``best_epoch`` (1-based epoch of ``best_acc``, as
        ``Workspace`` records it), ``diverged``.
    Returns: None, or e.g. ``"train loss 7.21 at best epoch 3 > ln 10 = 2.303"``.
    """
    losses = [float(v) for v in record.get("train_loss") or []]
    if record.get("diverged") is not None or not losses or not all(math.isfinite(v) for v in losses):
        return None
    best = record.get("best_epoch")
    if best is not None and 1 <= int(best) <= len(losses) and losses[int(best) - 1] > CHANCE_LOSS:
        return f"train loss {losses[int(best) - 1]:.3g} at best epoch {int(best)} > ln 10 = {CHANCE_LOSS:.3f}"
    i = int(np.argmin(losses))
    low = losses[i]
    if low > 0 and i + 1 < len(losses):
        j = i + 1 + int(np.argmax(losses[i + 1:]))
        if losses[j] > UNSTABLE_RISE * low:
            return (f"train loss rose from {low:.3g} (epoch {i + 1}) to {losses[j]:.3g} (epoch {j + 1}), "
                    f"> {UNSTABLE_RISE:g} x its minimum")
    return None
