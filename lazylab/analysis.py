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
  * ``movement_law`` — OLS of log(mean w_move_rel) on log m.
  * ``pair_arms`` / ``gap`` — trained-minus-frozen accuracy per width for arms
    sharing unit and init.
  * ``redundancy`` — mean absolute off-diagonal correlation and participation
    ratio of a bank's feature correlation matrix.
  * ``per_width_stats`` / ``scalar_trajectory`` — seed means of a run field
    per width.
  * ``exchange_rate`` / ``exchange_sentence`` — the frozen width of the same
    unit that matches a trained arm's accuracy (interpolated, or extrapolated
    from the frozen arm's ladder law), and one sentence on it.
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


def _finite_pairs(xs: Sequence, ys: Sequence) -> tuple[np.ndarray, np.ndarray]:
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
    m, e = _finite_pairs(widths, err)
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
def movement_law(widths: Sequence[float], move: Sequence[float | None]) -> dict:
    """OLS of ``log(mean w_move_rel)`` on ``log m`` (SPEC section 6, movement law).

    ``w_move_rel ~ exp(intercept) * m^slope``; natural logs (the slope does
    not depend on the base). Under lazy (NTK) scaling each weight moves
    ``O(m^-1/2)`` relative to its size, i.e. slope -1/2 (Jacot et al. 2018;
    Chizat, Oyallon & Bach 2019).

    Args:
      widths: ``(n,)`` widths ``m > 0``.
      move: ``(n,)`` mean relative movement per width (dimensionless); None
        or non-finite entries are dropped.
    Returns: ``{"slope", "intercept", "r2", "widths", "n"}``.
    Raises: ValueError for fewer than 2 usable points or a non-positive
      width or movement (a frozen bank's zero movement has no log).
    """
    if len(widths) != len(move):
        raise ValueError(f"widths ({len(widths)}) and move ({len(move)}) differ in length")
    m, y = _finite_pairs(widths, move)
    if len(m) < 2:
        raise ValueError(f"the movement law needs at least 2 widths with movement, got {len(m)}")
    if np.any(m <= 0) or np.any(y <= 0):
        raise ValueError("widths and movements must be positive for a log-log fit")
    lx, ly = np.log(m), np.log(y)
    slope, intercept = np.polyfit(lx, ly, 1)
    return {
        "slope": float(slope), "intercept": float(intercept),
        "r2": r_squared(ly, intercept + slope * lx),
        "widths": [int(w) if float(w).is_integer() else float(w) for w in m], "n": int(len(m)),
    }


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


# ------------------------------------------------------------ exchange rate
EXCHANGE_METHODS = ("interpolated", "extrapolated", "never", "none")


def format_width(m: float) -> str:
    """A matching width for a table: ``"812"``, ``"3.1e+05"`` from 100,000 up."""
    return f"{m:.0f}" if m < 1e5 else f"{m:.2g}"


MAX_EXCHANGE_LOG10 = 15  # beyond 10^15 units an extrapolated width is reported as a bound, not a number


def exchange_rate(frozen_widths: Sequence[float], frozen_means: Sequence[float | None], frozen_law: dict | None,
                  trained_acc: float) -> dict:
    """The width of a frozen bank whose accuracy matches ``trained_acc`` (the study's exchange rate).

    Method (on the frozen arm's mean ``best_acc`` per width):

    * **interpolated** — sort by width; the first width whose mean reaches
      ``trained_acc`` and the width before it bracket the crossing, and the
      matching width is linear in ``log m`` between them:
      ``log m = log m0 + (t - a0) / (a1 - a0) * (log m1 - log m0)``.
      When the smallest width already reaches it, the crossing lies below
      the sweep: extrapolated from the law as below, or ``none`` without one.
    * **extrapolated** — the sweep never reaches ``trained_acc`` but the
      frozen arm's fitted ladder law ``err = floor + c m^-alpha`` (SPEC
      section 6; ``ladder_law``) has its floor below the trained error
      ``err_t = 100 - trained_acc``: ``m = (c / (err_t - floor))^(1/alpha)``.
    * **never** — the fitted floor error is at or above ``err_t``: by the
      law no frozen width of this unit matches.
    * **none** — the frozen arm has no usable law (fewer than 3 climbing
      widths, a non-decreasing fit with ``c <= 0``) or no finite mean at all.

    Caveats: an extrapolated width is read off a 3-parameter curve fitted on
    the frozen arm's *climbing region* only and may lie orders of magnitude
    outside the sweep, where nothing was measured; the floor is the fit's
    least certain parameter (it trades off against ``c`` and ``alpha``, and
    no interval is computed here), so a trained accuracy within a point of
    ``100 - floor`` can flip between a huge width and ``never``; a frozen curve
    that peaks and falls (e.g. a rate chosen at m = 256 that is too high for
    wider banks) is fitted only up to its peak, so the law describes the
    climbing part, not the later fall; and all accuracies are means over
    seeds of ``best_acc``, which selects the epoch on the test set (SPEC
    section 5) — seed spread is not propagated into the width.

    Args:
      frozen_widths: ``(n,)`` widths of the frozen arm (units).
      frozen_means: ``(n,)`` its mean best_acc (%) per width; None entries
        (every seed diverged) are skipped.
      frozen_law: the frozen arm's ``ladder_law`` dict (``floor``, ``c``,
        ``alpha`` in error points), or one with ``"skipped"``, or None.
      trained_acc: the trained arm's mean best_acc (%) at one width.
    Returns: ``{"frozen_width": float | None, "method": one of
      EXCHANGE_METHODS, "floor_acc": 100 - floor (%) | None, "text": str}``,
      with ``"between": [m0, m1]`` for an interpolation and ``"why"`` for
      ``none``. An extrapolated width at or below the widest measured bank
      (the law, fitted on the climb, says a width the measured curve passed
      without reaching ``trained_acc`` — it peaked and fell) is kept, with
      ``"peak": [m, acc]`` of the measured curve, a ``"note"``, and the text
      ``"1093 (law only: measured banks fall short)"``. ``text`` is what
      tables print: ``"812 (interpolated)"``, ``"3.1e+05 (extrapolated)"``,
      ``"never (floor 14.2 % err >= 13.8 %)"``.
    Raises: ValueError if ``trained_acc`` is not finite or the lengths differ.
    """
    if trained_acc is None or not math.isfinite(float(trained_acc)):
        raise ValueError(f"trained accuracy must be a finite number, got {trained_acc!r}")
    if len(frozen_widths) != len(frozen_means):
        raise ValueError(f"widths ({len(frozen_widths)}) and means ({len(frozen_means)}) differ in length")
    t = float(trained_acc)
    err_t = 100.0 - t
    law = frozen_law if frozen_law and "skipped" not in frozen_law and "floor" in frozen_law else None
    floor_acc = None if law is None else 100.0 - float(law["floor"])
    m, acc = _finite_pairs(frozen_widths, frozen_means)

    def out(width, method, text, **extra):
        return {"frozen_width": None if width is None else float(width), "method": method,
                "floor_acc": floor_acc, "text": text, **extra}

    def from_law(where: str):
        floor, c, alpha = float(law["floor"]), float(law["c"]), float(law["alpha"])
        if c <= 0 or alpha <= 0:
            return out(None, "none", "none (the frozen law does not fall with width)",
                       why=f"the frozen arm's fitted law has c = {c:.3g}, alpha = {alpha:.3g}")
        # In log space: with alpha near its lower bound the power overflows a float.
        log10_width = (math.log10(c) - math.log10(err_t - floor)) / alpha
        if where and log10_width >= math.log10(m[0]):
            # The law, fitted on the climb, cannot place a match the smallest bank already beats.
            return below_sweep()
        if log10_width > MAX_EXCHANGE_LOG10:
            return out(None, "extrapolated", f"> 1e{MAX_EXCHANGE_LOG10} (extrapolated)",
                       note=f"the law puts the match at about 10^{log10_width:.0f} units")
        width = 10.0 ** log10_width
        if not where and width <= m[-1]:
            # The law, fitted on the climb, lands among measured widths that fall short: say so.
            k = int(np.argmax(acc))
            note = f"the measured frozen curve peaks at {acc[k]:.2f} % (m = {format_width(m[k])}) and never reaches {t:.2f} %"
            if law.get("widths"):
                note += f"; the law is fitted on its climbing region ({law['widths'][0]}-{law['widths'][-1]})"
            return out(width, "extrapolated", f"{format_width(width)} (law only: measured banks fall short)",
                       peak=[_num_or_int(m[k]), float(acc[k])], note=note)
        return out(width, "extrapolated", f"{format_width(width)} (extrapolated{where})", **({"below": True} if where else {}))

    def below_sweep():
        return out(None, "none", f"<= {format_width(m[0])} (below the sweep)", below=True,
                   why=f"the smallest frozen width, {format_width(m[0])}, already reaches {t:.2f} %")

    if len(m) == 0:
        return out(None, "none", "none (no frozen data)", why="the frozen arm has no finite mean accuracy")
    reached = np.nonzero(acc >= t)[0]
    if len(reached) and reached[0] > 0:
        i = int(reached[0])
        m0, m1, a0, a1 = m[i - 1], m[i], acc[i - 1], acc[i]
        width = math.exp(math.log(m0) + (t - a0) / (a1 - a0) * (math.log(m1) - math.log(m0)))
        return out(width, "interpolated", f"{format_width(width)} (interpolated)",
                   between=[_num_or_int(m0), _num_or_int(m1)])
    if len(reached):  # the smallest frozen width already matches: the crossing lies below the sweep
        if law is not None and err_t > float(law["floor"]):
            return from_law(" below the sweep")
        return below_sweep()
    if law is None:
        why = (frozen_law or {}).get("skipped") or "the frozen arm has no fitted ladder law"
        return out(None, "none", "none (no frozen law)",
                   why=f"the sweep (up to {format_width(m[-1])}) never reaches {t:.2f} % and {why}")
    if float(law["floor"]) >= err_t:
        return out(None, "never", f"never (floor {law['floor']:.1f} % err >= {err_t:.1f} %)")
    return from_law("")


def _num_or_int(v: float):
    return int(v) if float(v).is_integer() else float(v)


def exchange_sentence(rows: Sequence[dict], sweep: Sequence[int]) -> str:
    """One plain sentence answering "how many random neurons buy a trained one?" for a ladder.

    Args:
      rows: exchange rows (``exchange_rate`` results with ``trained``,
        ``frozen``, ``width``, ``trained_acc``), pairs in order; the first
        pair's row at its smallest trained width is the one put in words.
      sweep: the frozen widths swept (the ladder's widths).
    Returns: the sentence; a note when ``rows`` is empty.
    """
    if not rows:
        return "No trained arm in this ladder has a frozen arm of the same unit and init: no exchange rate."
    first = rows[0]
    pair = [r for r in rows if r["trained"] == first["trained"] and r["frozen"] == first["frozen"]]
    r = min(pair, key=lambda x: x["width"])
    unit = r["frozen"].rsplit("-", 1)[0]
    top = format_width(max(sweep)) if sweep else "?"
    who = f"{r['width']} trained {unit} units ({r['trained_acc']:.1f} %)"
    if r["method"] == "interpolated":
        a, b = r["between"]
        return (f"{who} are matched by a frozen {unit} bank of about {format_width(r['frozen_width'])} units "
                f"(interpolated on log m between the sweep's {a} and {b}).")
    if r["method"] == "extrapolated":
        if r.get("peak"):
            (mp, ap), w = r["peak"], format_width(r["frozen_width"])
            return (f"{who}: no frozen {unit} bank in the sweep (up to {top}) matches them: the measured curve peaks "
                    f"at {ap:.1f} % (m = {format_width(mp)}) and falls short beyond it, while the law fitted on its climb "
                    f"(floor {100 - r['floor_acc']:.1f} % error) would match them at about {w} units.")
        if r.get("below"):
            return (f"{who}: even the smallest frozen {unit} bank in the sweep matches them; the fitted law puts "
                    f"the match at about {format_width(r['frozen_width'])} units.")
        if r["frozen_width"] is None:
            return (f"{who}: no frozen {unit} bank in the sweep (up to {top}) matches them; the frozen law puts the "
                    f"match beyond any bank one could build ({r['text']}).")
        times = r["frozen_width"] / max(sweep) if sweep else float("nan")
        return (f"{who}: no frozen {unit} bank in the sweep (up to {top}) matches them; the frozen law, with its "
                f"fitted floor at {100 - r['floor_acc']:.1f} % error, puts the match at about "
                f"{format_width(r['frozen_width'])} units, {times:.3g} times the widest bank measured.")
    if r.get("below"):
        smallest = format_width(min(sweep)) if sweep else "?"
        return f"{who}: even the smallest frozen {unit} bank in the sweep (m = {smallest}) matches them."
    if r["method"] == "never":
        every = len(pair) > 1 and all(x["method"] == "never" for x in pair)
        tail = f", and the same holds at every trained width up to {max(x['width'] for x in pair)}" if every else ""
        return (f"{who}: no frozen {unit} bank in the sweep (up to {top}) matches them, and by the fitted law none "
                f"would: its floor is {100 - r['floor_acc']:.1f} % error, at or above their "
                f"{100 - r['trained_acc']:.1f} %{tail}.")
    return f"{who}: no exchange rate to a frozen {unit} bank ({r.get('why') or r['text']})."
