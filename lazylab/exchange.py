"""The study's answer for a ladder: how many frozen units of a unit match a trained arm of the same unit.

``exchange_rate`` reads the frozen arm's measured curve (interpolating in
``log m``) or, beyond the sweep, its fitted ladder law (``lazylab.analysis.ladder_law``);
``exchange_sentence`` puts one pair's answer in a plain sentence. Pure
functions on numbers, no I/O; ``lazylab.experiments.laws.exchange_table``
calls them for every trained arm and width.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from lazylab.analysis import finite_pairs

EXCHANGE_METHODS = ("interpolated", "extrapolated", "never", "none")


UNIT_NAMES = {"yat": "Yat", "relu": "ReLU", "gaussian": "Gaussian", "rff": "random Fourier"}


def unit_name(arm: str) -> str:
    """``"Yat"`` for ``yat-data-frozen``: the unit's name as prose spells it (a plugin's as registered)."""
    unit = arm.split("-", 1)[0]
    return UNIT_NAMES.get(unit, unit)


def unit_words(arm: str) -> str:
    """``"Yat"`` for ``yat-frozen``, ``"data-seeded Yat"`` for ``yat-data-frozen``: an arm's unit and init as a
    sentence names them beside "trained" or "frozen"."""
    middle = arm.split("-")[1:-1]  # the init in "yat-data-frozen"
    return " ".join([*({"data": "data-seeded"}.get(p, p) for p in middle), unit_name(arm)])


def bank_words(arm: str, init: str | None) -> str:
    """``"random frozen Gaussian units"``; a data-seeded bank ``"frozen Yat units centred on training images"``."""
    kind = "frozen" if arm.endswith("-frozen") else "trained"
    if init == "data":
        return f"{kind} {unit_name(arm)} units centred on training images"
    return f"random {kind} {unit_name(arm)} units"


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
    m, acc = finite_pairs(frozen_widths, frozen_means)

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
    unit = unit_words(r["frozen"])
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


# ------------------------------------------------------------------ the answer at the optimum
BOOTSTRAP_DRAWS = 2000
BOOTSTRAP_LEVEL = 0.95
EXTRAPOLATION_BOUND = 4  # a width the law puts beyond 4 x the widest bank is shown as a bound, not a number


def at_smallest_width(rows: Sequence[dict]) -> list[dict]:
    """The rows (exchange or answer rows, each with ``trained`` and ``width``) of each trained arm at its first,
    smallest width: what tables show by default, the rest folding away."""
    smallest: dict = {}
    for r in rows:
        smallest.setdefault(r.get("trained"), r.get("width"))
    return [r for r in rows if r.get("width") == smallest[r.get("trained")]]


def crossing(widths: Sequence[float], means: Sequence[float | None], target: float) -> float:
    """The measured width at which a frozen curve first reaches ``target`` (%), linear in ``log m``.

    Returns: the interpolated width (``exchange_rate``'s "interpolated" rule); ``0.0`` when the smallest
    width already reaches it (below the sweep); ``inf`` when no width does (beyond the sweep).
    """
    m, acc = finite_pairs(widths, means)
    reached = np.nonzero(acc >= target)[0]
    if len(reached) == 0:
        return math.inf
    i = int(reached[0])
    if i == 0:
        return 0.0
    m0, m1, a0, a1 = m[i - 1], m[i], acc[i - 1], acc[i]
    return math.exp(math.log(m0) + (target - a0) / (a1 - a0) * (math.log(m1) - math.log(m0)))


def seed_interval(widths: Sequence[int], frozen: dict, trained: Sequence[float], draws: int = BOOTSTRAP_DRAWS,
                  level: float = BOOTSTRAP_LEVEL, seed: int = 0) -> tuple[float, float]:
    """A percentile bootstrap interval over seeds (Efron & Tibshirani 1993, ch. 13) for ``crossing``.

    Each draw resamples, with replacement, the trained arm's per-seed accuracies and, independently at
    each width (each width's banks are independent draws), the frozen arm's per-seed accuracies; the
    crossing of the resampled frozen means at the resampled trained mean is one sample.

    Args:
      widths: the frozen widths; frozen: ``{width: [accuracy % per seed]}``; trained: accuracies (%) per seed.
      draws, level: bootstrap draws and the interval's coverage; seed: the resampling generator's seed.
    Returns: ``(low, high)`` widths: ``0.0`` means below the sweep, ``inf`` beyond it.
    """
    rng = np.random.default_rng(seed)
    trained = np.asarray([t for t in trained if t is not None], float)
    cols = [np.asarray([a for a in frozen.get(w, []) if a is not None], float) for w in widths]
    samples = np.empty(draws)
    for k in range(draws):
        target = rng.choice(trained, len(trained)).mean()
        means = [c[rng.integers(0, len(c), len(c))].mean() if len(c) else None for c in cols]
        samples[k] = crossing(widths, means, target)
    tail = (1.0 - level) / 2
    return float(np.quantile(samples, tail, method="lower")), float(np.quantile(samples, 1 - tail, method="higher"))


def format_match(width: float, low: float | None = None, high: float | None = None, sweep: Sequence[int] = ()) -> str:
    """A matching width with its interval: ``"812 (640-1,100)"``, ``"<= 16"``, ``"> 8192"``, ``"812 (640 - > 8192)"``."""
    top, bottom = (max(sweep), min(sweep)) if sweep else (None, None)

    def one(w):
        if w == 0.0:
            return f"<= {bottom}"
        if math.isinf(w):
            return f"> {top}"
        return format_width(w)

    text = one(width)
    if low is not None and high is not None and not (math.isinf(width) and math.isinf(low)):
        text += f" ({one(low)} - {one(high)})" if low != high or math.isinf(low) else ""
    return text


def answer_rows(trained: dict, frozen: dict, pairs: dict, widths: Sequence[int]) -> list[dict]:
    """The answer at the optimum: per trained arm and width, the matching frozen width of the same unit's convex
    readout and the cheapest frozen bank of any unit's convex readout, each with a seed interval.

    Measured only: the crossing of the frozen curve of per-width mean test accuracy (``crossing``), so a
    match beyond the sweep is a bound (``> 8192``), never a number read off a law.

    Args:
      trained: ``{trained arm: {width: [best_acc % per seed]}}`` (the protocol's accuracy: that arm trains
        its bank end to end); frozen: ``{frozen arm: {width: [convex test_acc % per seed]}}``;
      pairs: ``{trained arm: frozen arm of the same unit and init}``; widths: the frozen widths swept.
    Returns: per trained arm (in ``trained``'s order) and width, ``{"trained", "width", "trained_acc",
      "same": {"frozen", "width", "interval", "text"} | None, "cheapest": {...} | None}``; a matching width
      and each end of its interval is a number of units, ``"below"`` (the smallest bank already matches)
      or ``"beyond"`` (no bank of the sweep does); ``cheapest`` is None when no unit matches in the sweep.
    """
    def plain(w: float):
        return "below" if w == 0.0 else "beyond" if math.isinf(w) else w

    rows = []
    for arm, per_width in trained.items():
        for w in sorted(per_width):
            accs = [a for a in per_width[w] if a is not None]
            if not accs:
                continue
            target = float(np.mean(accs))
            matches = {}
            for f, curve in frozen.items():
                means = [float(np.mean(curve[x])) if curve.get(x) else None for x in widths]
                point = crossing(widths, means, target)
                low, high = seed_interval(widths, curve, accs)
                matches[f] = (point, {"frozen": f, "width": plain(point), "interval": [plain(low), plain(high)],
                                      "text": format_match(point, low, high, widths)})
            same = matches.get(pairs.get(arm))
            cheapest = min(matches.values(), key=lambda pm: (pm[0], pm[1]["frozen"]), default=None)
            rows.append({"trained": arm, "width": int(w), "trained_acc": target, "same": same and same[1],
                         "cheapest": None if cheapest is None or math.isinf(cheapest[0]) else cheapest[1]})
    return rows


def protocol_words(protocol: dict, sweep: Sequence[int], short: bool = False) -> str:
    """An ``exchange_rate`` row in words, measured before extrapolated: ``"about 812 units"``, ``"... its ladder
    law, read beyond the sweep, says about 1257 units (1.2 x the widest bank)"``, a bound beyond
    ``EXTRAPOLATION_BOUND`` x the widest bank, or why there is none; ``short``: for a table cell
    (``"812"``, ``"1257 (law, beyond the sweep)"``, ``"> 4096 (law)"``, ``"never (law)"``)."""
    top = max(sweep)
    width = protocol.get("frozen_width")
    beyond = protocol["method"] == "extrapolated" and width is not None and not protocol.get("below")
    if short:
        if protocol["method"] == "interpolated":
            return format_width(width)
        if beyond:
            return f"> {EXTRAPOLATION_BOUND * top} (law)" if width > EXTRAPOLATION_BOUND * top else \
                f"{format_width(width)} (law only: measured banks fall short)" if protocol.get("peak") else \
                f"{format_width(width)} (law, beyond the sweep)"
        return "never (law)" if protocol["method"] == "never" else protocol["text"]
    if protocol["method"] == "interpolated":
        return f"about {format_width(width)} units"
    if beyond:
        if protocol.get("peak"):
            (mp, ap) = protocol["peak"]
            return (f"none in the sweep (up to {top}): the measured curve peaks at {ap:.1f} % (m = {format_width(mp)}) "
                    f"and falls short beyond it; its ladder law, fitted on the climb, says about {format_width(width)} units")
        if width > EXTRAPOLATION_BOUND * top:
            return f"none in the sweep (up to {top}); its ladder law puts the match beyond {EXTRAPOLATION_BOUND * top} units"
        return (f"none in the sweep (up to {top}); its ladder law, read beyond the sweep, says about "
                f"{format_width(width)} units ({width / top:.2g} x the widest bank)")
    if protocol["method"] == "never":
        return f"none, by its ladder law ({protocol['text']})"
    return protocol["text"]


def answer_sentence(row: dict, protocol: dict | None, sweep: Sequence[int], epochs: int | None = None,
                    protocol_sweep: Sequence[int] | None = None) -> str:
    """The study's answer in words for one trained arm and width (an ``answer_rows`` row), optimum first.

    ``sweep``: the widths with convex readouts; ``protocol`` is the same pair's ``exchange_rate`` row (the
    protocol's readout, ``epochs`` of AdamW, over ``protocol_sweep``, default ``sweep``), or None.
    """
    unit = unit_words(row["trained"])
    who = f"{row['width']} trained {unit} units ({row['trained_acc']:.1f} %)"
    best, same = row["cheapest"], row["same"]
    interval = any(m is not None and "(" in m["text"] for m in (best, same))
    # one seed: a numeric interval of no width (a "<= m" or "> m" match says nothing of seeds)
    one_seed = any(m is not None and isinstance((m.get("interval") or [None])[0], (int, float))
                   and m["interval"][0] == m["interval"][1] for m in (best, same))
    parts = []
    if best is not None:
        parts.append(f"about {best['text']} frozen {unit_words(best['frozen'])} units")
    if same is not None and (best is None or same["frozen"] != best["frozen"]):
        parts.append(f"{same['text']} frozen {unit_words(same['frozen'])} units")
    if not parts:
        text = f"{who}: no frozen bank in the sweep (up to {max(sweep)}) matches them, even read out at the optimum"
    else:
        text = f"{who} = " + " or ".join(parts) + " read out at the optimum" + \
            (" (95 % seed interval in brackets)" if interval else " (one seed: no interval)" if one_seed else "")
    if protocol is not None:
        readout = f"{epochs}-epoch AdamW readout" if epochs else "AdamW readout"
        text += (f"; with the protocol's {readout}, frozen {unit} units needed: "
                 f"{protocol_words(protocol, protocol_sweep or sweep)}")
    return text + "."


# ------------------------------------------------------------------ the fair answer: both sides at their optimum
INTERVAL_LEVEL = 0.95
RANGE_RATIO = 4.0  # an interval wider than this factor (two doublings) is reported as a range, with no point width
GRID_PER_DOUBLING = 16  # widths scanned between two measured ones, per doubling, by ``crossing_interval``


def t_quantile(df: int, level: float = INTERVAL_LEVEL) -> float:
    """The two-sided Student t quantile ``t_{(1 + level) / 2, df}`` (4.303 for df = 2 at 95 %)."""
    from scipy.stats import t

    return float(t.ppf(0.5 + level / 2.0, df))


def _moments(values) -> tuple[float, float, int] | None:
    """``(mean, variance of the mean, n)`` of the finite ``values`` (variance ``s^2 / n``, ddof 1; 0 for one value)."""
    v = np.asarray([x for x in values if x is not None and math.isfinite(float(x))], float)
    if not len(v):
        return None
    return float(v.mean()), float(v.var(ddof=1) / len(v)) if len(v) > 1 else 0.0, len(v)


def welch_df(var_a: float, n_a: int, var_b: float, n_b: int) -> float:
    """Welch-Satterthwaite degrees of freedom of a difference of two means whose variances of the mean are
    ``var_a``, ``var_b`` from ``n_a``, ``n_b`` values (Welch 1947, eq. 29; Satterthwaite 1946), at least
    ``min(n_a, n_b) - 1`` and at least 1 (one value a side, or no spread: no estimate of the noise)."""
    low = max(1, min(n_a, n_b) - 1)
    parts = [v * v / (n - 1) for v, n in ((var_a, n_a), (var_b, n_b)) if n > 1]
    if var_a + var_b <= 0 or not parts or sum(parts) <= 0:
        return float(low)
    return max(float(low), (var_a + var_b) ** 2 / sum(parts))


def crossing_interval(widths: Sequence[int], frozen: dict, trained: Sequence[float],
                      level: float = INTERVAL_LEVEL) -> tuple[float, float]:
    """The widths at which a frozen curve plausibly first matches a trained accuracy, by inverting a t test.

    At each width ``m`` (the measured widths and ``GRID_PER_DOUBLING`` points per doubling between them, the
    frozen mean and the variance of that mean linear in ``log m`` between measured widths, as ``crossing``
    interpolates), the difference ``d(m) = frozen mean - trained mean`` is compared with
    ``t * se(m)``, ``se(m)^2 = s_F(m)^2 / n_F + s_T^2 / n_T`` (Welch 1947), ``t`` the Student quantile with
    Welch-Satterthwaite's degrees of freedom (``welch_df``: between 2 and 4 for three seeds a side, t between
    4.30 and 2.78 at 95 %). The lower end is the first width where the frozen bank is not significantly worse
    (``d >= -t se``), the upper end the first where it is significantly better (``d > t se``): the confidence
    set of the crossing by test inversion (Casella & Berger 2002, section 9.2.1), each end a one-sided test at
    ``(1 - level) / 2``. It covers the seed noise of both sides (banks, initialisations, batch orders); not the
    choice of lambda or rate (made once, on seed 0's bank or all seeds' mean), nor the curve's shape between
    measured widths. Its coverage is checked by simulation (tests/test_exchange.py).

    Args:
      widths: the frozen widths swept (units); frozen: ``{width: [accuracy % per seed]}``;
      trained: the trained side's accuracy (%) per seed; level: the confidence level.
    Returns: ``(low, high)`` widths: ``0.0`` when the smallest bank is already not significantly worse,
      ``inf`` when no bank of the sweep is significantly better (or none not significantly worse, for both).
    """
    t_side = _moments(trained)
    points = [(float(w), _moments(frozen.get(w, []))) for w in sorted(widths)]
    points = [(w, m) for w, m in points if m is not None]
    if t_side is None or not points:
        return math.inf, math.inf
    t_mean, t_var, t_n = t_side
    grid = []  # (width, mean, variance of the mean, n) on the scanned widths
    for (w0, a), (w1, b) in zip(points, points[1:]):
        steps = max(1, int(round(GRID_PER_DOUBLING * math.log2(w1 / w0))))
        for k in range(steps):
            f = k / steps
            grid.append((math.exp((1 - f) * math.log(w0) + f * math.log(w1)), (1 - f) * a[0] + f * b[0],
                         (1 - f) * a[1] + f * b[1], min(a[2], b[2])))
    w_last, last = points[-1]
    grid.append((w_last, last[0], last[1], last[2]))
    low = high = math.inf
    for i, (w, mean, var, n) in enumerate(grid):
        margin = t_quantile(welch_df(var, n, t_var, t_n), level) * math.sqrt(var + t_var)
        d = mean - t_mean
        if math.isinf(low) and d >= -margin:
            low = 0.0 if i == 0 else w
        if d > margin:
            high = 0.0 if i == 0 else w
            break
    return low, high


def round2(w: float) -> str:
    """A width to two significant figures with thousands separators: ``2,000``, ``350``, ``16``."""
    if w < 100:
        return f"{w:.0f}"
    digits = math.floor(math.log10(w)) - 1
    return f"{round(w, -digits):,.0f}"


def match_text(point: float, low: float, high: float, sweep: Sequence[int]) -> str:
    """A matching width and its interval in words a table can hold.

    ``"about 350 (190-690)"``; when the interval spans more than ``RANGE_RATIO`` or reaches past the sweep (a
    flat stretch of the curve: no point is worth reading), the range alone: ``"between 400 and 2,800"``,
    ``"at most 2,200"`` (the smallest bank may already match), ``"at least 3,000"``, ``"anywhere from <= 16 to
    > 8,192"``; ``"<= 16"`` below the sweep; ``"> 8,192"`` beyond it, ``"> 8,192 (at least 3,000)"`` when the
    interval's lower end lies inside it.
    """
    bottom, top = min(sweep), max(sweep)
    if math.isinf(point):
        return f"> {top:,}" + ("" if math.isinf(low) or low == 0.0 else f" (at least {round2(low)})")
    if point == 0.0:
        return f"<= {bottom}" + ("" if high == 0.0 else f" (up to {'> ' + f'{top:,}' if math.isinf(high) else round2(high)})")
    if low == 0.0 and math.isinf(high):
        return f"anywhere from <= {bottom} to > {top:,}"
    if low == 0.0:
        return f"at most {round2(high)}"
    if math.isinf(high):
        return f"at least {round2(low)}"
    if high / low > RANGE_RATIO:
        return f"between {round2(low)} and {round2(high)}"
    return f"about {round2(point)} ({round2(low)}-{round2(high)})"


def round_ratio(x: float) -> str:
    """A ratio in plain words: two significant figures (``21.9 -> "22"``, ``99.8 -> "100"``, ``3.46 -> "3.5"``,
    ``1234 -> "1,200"``, ``0.34 -> "0.34"``)."""
    if x <= 0 or not math.isfinite(x):
        return f"{x:g}"
    digits = 1 - int(math.floor(math.log10(x)))
    rounded = round(x, digits)
    return f"{rounded:,.0f}" if digits <= 0 else f"{rounded:.{digits}f}"


def per_unit_words(hit: dict) -> str | None:
    """A fair match's frozen units per trained unit (``hit["per_unit"]``: point, low, high, as
    ``experiments.optimum.fair_answer`` stores them beside ``match``'s fields) in the words its width is given in
    (``match_text``): ``"31"`` beside "about 490 (390-690)", ``"at least 87"`` beside "at least 2,800",
    ``"11 to 51"`` beside "between 180 and 820", ``"at most 9.0"`` beside "at most 140"; None where the width lies
    outside the sweep or its interval spans all of it. ``hit["range"]`` (``match``) says whether only the
    interval is worth reading, so the two never disagree at a ratio of exactly ``RANGE_RATIO``."""
    point, low, high = hit["per_unit"]
    if not isinstance(point, float):
        return None
    if low == "below":
        return None if high == "beyond" else f"at most {round_ratio(high)}"
    if high == "beyond":
        return f"at least {round_ratio(low)}"
    if hit.get("range"):
        return f"{round_ratio(low)} to {round_ratio(high)}"
    return round_ratio(point)


def match(widths: Sequence[int], frozen: dict, trained: Sequence[float], level: float = INTERVAL_LEVEL) -> dict:
    """One frozen arm's match for one trained accuracy: ``crossing`` of the frozen means at the trained mean and
    ``crossing_interval`` (none with one seed a side: ``"about 490 (one seed: no interval)"``). Returns ``{"width": point | "below" | "beyond", "interval": [low, high] (same
    convention), "text": match_text(...), "range": whether only a range is worth reading}``."""
    plain = lambda w: "below" if w == 0.0 else "beyond" if math.isinf(w) else w
    accs = [a for a in trained if a is not None]
    means = [float(np.mean(frozen[w])) if frozen.get(w) else None for w in widths]
    point = crossing(widths, means, float(np.mean(accs)))
    if len(accs) < 2 or all(len(frozen.get(w) or []) < 2 for w in widths):  # no seed spread to propagate
        text = match_text(point, point, point, widths)
        return {"width": plain(point), "interval": [plain(point), plain(point)], "range": False,
                "text": text.split(" (")[0] + (" (one seed: no interval)" if 0 < point < math.inf else "")}
    low, high = crossing_interval(widths, frozen, accs, level)
    spread = low == 0.0 or math.isinf(high) or (low > 0 and high / low > RANGE_RATIO)
    return {"width": plain(point), "interval": [plain(low), plain(high)],
            "text": match_text(point, low, high, widths), "range": bool(spread and math.isfinite(point) and point > 0)}
