"""The learning-rate bracket: which rate an arm uses at every width (SPEC section 5, and the noise-aware rule).

Two rules, named in ``RULES``:

- ``"1se"`` (the default): every rate of the arm's grid runs at m = 256 with seeds 0, 1, 2. A rate is
  *eligible* when none of its seeds diverged or is unstable (``analysis.unstable_reason``). The *best* is
  the eligible rate with the highest mean ``best_acc``; the *chosen* rate is the smallest eligible rate
  whose mean lies within one standard error of the best's mean (the best's sample std over seeds / sqrt(n)):
  the one-standard-error rule of Breiman, Friedman, Olshen and Stone, *Classification and Regression Trees*
  (1984), section 3.4.3, as glmnet's ``lambda.1se``. A difference smaller than the seeds' own noise never
  decides, so float-level changes (another CPU model's XLA code) cannot flip the choice unless two rates'
  means sit at one standard error of each other. When the best lies at an end of the rates tried, the grid
  is extended by one half-decade step that way (``next_rate``), at most ``MAX_EXTEND`` steps per arm, until
  the best is interior; otherwise the reason is recorded (``edge``). When no rate is stable, the grid is
  extended downwards and the smallest rate tried is used: unstable runs differ across CPU models, so a
  comparison of them would be decided by float noise.
- ``"argmax"``: SPEC section 5 as published: seed 0 only, the grid as given, the highest ``best_acc``
  (diverged runs never chosen, ties to the first). A float-level change can flip it where two rates are
  closer than one seed's noise; it is kept for fidelity to the publication.

``Bracket.to_json()`` is what a ladder's JSON holds per arm under ``"selection"``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from lazylab.analysis import unstable_reason

RULES = ("1se", "argmax")
DEFAULT_RULE = "1se"
BRACKET_WIDTH = 256
BRACKET_SEED = 0  # the argmax rule's one seed (SPEC section 5)
BRACKET_SEEDS = (0, 1, 2)  # the 1se rule's seeds: the paper ladder's
MAX_EXTEND = 2  # half-decade steps beyond an arm's grid, in all: a bound on the extra runs (3 seeds each)


def bracket_seeds(rule: str) -> tuple[int, ...]:
    """The seeds a bracket runs under ``rule``. Raises: ValueError for a rule not in ``RULES``."""
    if rule not in RULES:
        raise ValueError(f"unknown bracket rule {rule!r}; rules: {', '.join(RULES)}")
    return BRACKET_SEEDS if rule == "1se" else (BRACKET_SEED,)


def next_rate(rates, up: bool) -> float:
    """The next rate beyond the largest (``up``) or smallest of ``rates`` (two or more, > 0).

    On the half-decade ladder 1, 3, 10, 30, ... (x 10^k; the SPEC's grids are on it) the next rung;
    otherwise the grid's own geometric step at that end (end^2 / its neighbour). Rounded to 6 digits.
    """
    rs = sorted(float(r) for r in rates)
    end, inner = (rs[-1], rs[-2]) if up else (rs[0], rs[1])

    def rung(x):  # (mantissa 1 or 3, exponent), or None off the ladder
        e = math.floor(math.log10(x) + 1e-9)
        m = x / 10 ** e
        return next(((k, e) for k in (1, 3) if math.isclose(m, k, rel_tol=1e-6)), None)

    if all(rung(r) for r in rs):
        k, e = rung(end)
        new = (3 * 10 ** e if k == 1 else 10 ** (e + 1)) if up else (10 ** e if k == 3 else 3 * 10 ** (e - 1))
    else:
        new = end * end / inner
    return float(f"{new:.6g}")


@dataclass
class RateScore:
    """One rate's bracket runs: ``best_acc`` (%) per seed (None: diverged) and how many were unstable."""

    lr: float
    seeds: list[int]
    accs: list[float | None]
    unstable: int
    diverged: int

    @classmethod
    def of(cls, lr: float, records: list[dict]) -> "RateScore":
        return cls(lr=float(lr), seeds=[r["config"]["seed"] for r in records], accs=[r["best_acc"] for r in records],
                   unstable=sum(unstable_reason(r) is not None for r in records),
                   diverged=sum(r["best_acc"] is None for r in records))

    @property
    def finite(self) -> list[float]:
        return [a for a in self.accs if a is not None]

    @property
    def mean(self) -> float | None:
        return float(np.mean(self.finite)) if self.finite else None

    @property
    def std(self) -> float | None:
        """Sample std (ddof = 1) over seeds; None with fewer than 2 finite seeds."""
        return float(np.std(self.finite, ddof=1)) if len(self.finite) > 1 else None

    @property
    def se(self) -> float | None:
        return None if self.std is None else self.std / math.sqrt(len(self.finite))

    @property
    def eligible(self) -> bool:
        """Every seed finite and stable: an unstable or diverged run never wins."""
        return bool(self.accs) and not self.unstable and not self.diverged

    def to_json(self) -> dict:
        return {"lr": self.lr, "seeds": self.seeds, "accs": self.accs, "mean": self.mean, "std": self.std,
                "se": self.se, "unstable": self.unstable, "diverged": self.diverged, "eligible": self.eligible}


@dataclass
class Bracket:
    """An arm's bracket under ``rule``: its rates' scores and the choice (module docstring)."""

    rule: str
    grid: list[float]  # the arm's own grid
    scores: dict[float, RateScore] = field(default_factory=dict)  # every rate tried, extensions included

    @property
    def rates(self) -> list[float]:
        return sorted(self.scores)

    @property
    def extended(self) -> list[float]:
        return [lr for lr in self.rates if lr not in self.grid]

    def _pool(self) -> tuple[list[RateScore], bool]:
        """The candidates and whether they are the eligible ones (False: every rate unstable or diverged)."""
        eligible = [s for s in self.scores.values() if s.eligible]
        if eligible and self.rule == "1se":  # the published argmax rule excludes only diverged runs
            return eligible, True
        return [s for s in self.scores.values() if s.mean is not None], False

    def best(self) -> RateScore | None:
        """The candidate with the highest mean ``best_acc``; ties go to the smaller rate."""
        pool, _ = self._pool()
        return max(pool, key=lambda s: (s.mean, -s.lr)) if pool else None

    def runner_up(self) -> RateScore | None:
        pool, _ = self._pool()
        best = self.best()
        rest = [s for s in pool if s is not best]
        return max(rest, key=lambda s: (s.mean, -s.lr)) if rest else None

    def stable(self) -> bool:
        """Whether any rate tried is eligible (every seed finite and stable)."""
        return any(s.eligible for s in self.scores.values())

    def chosen(self) -> float | None:
        """The rate used at every width (None when every run diverged). Under ``1se`` with no stable rate, the
        smallest rate tried: no comparison of unstable runs decides (their bits differ across CPU models)."""
        best = self.best()
        if best is None:
            return None
        if self.rule == "argmax":
            return best.lr
        pool, _ = self._pool()
        if not self.stable():
            return min(s.lr for s in pool)
        floor = best.mean - (best.se or 0.0)
        return min(s.lr for s in pool if s.mean >= floor)

    def wants_extension(self) -> bool | None:
        """Which way to extend the grid (True: up, False: down), or None: the best is interior, or the rule is
        ``argmax``, or ``MAX_EXTEND`` steps were taken. With no stable rate, down (smaller rates are the stabler)."""
        best = self.best()
        if self.rule != "1se" or best is None or len(self.rates) < 2 or len(self.extended) >= MAX_EXTEND:
            return None
        if not self.stable():
            return False
        if best.lr == self.rates[-1]:
            return True
        if best.lr == self.rates[0]:
            return False
        return None

    def edge(self) -> str | None:
        """Why the chosen rate, or the best, sits at an end of the rates tried (None when both are interior)."""
        best, chosen, rates = self.best(), self.chosen(), self.rates
        if best is None or len(rates) < 2:
            return None
        if self.rule == "1se" and not self.stable():
            return (f"no rate tried is stable (each has an unstable or diverged seed; the grid was extended down by "
                    f"{len(self.extended)} step{'s' * (len(self.extended) != 1)}), so lr {chosen:g}, the smallest "
                    "tried, is used: comparing unstable runs would let float noise decide")
        ends = (rates[0], rates[-1])
        if best.lr in ends:
            side = "largest" if best.lr == rates[-1] else "smallest"
            beyond = "above" if side == "largest" else "below"
            if self.rule == "argmax":
                return (f"the best rate {best.lr:g} is the {side} of the grid (the argmax rule does not extend it): "
                        f"a better rate may lie {beyond} it")
            return (f"the best rate {best.lr:g} is still the {side} after extending the grid by {MAX_EXTEND} steps "
                    f"(the bound): a better rate may lie {beyond} it")
        if chosen in ends:
            return (f"lr {chosen:g}, the smallest rate tried, is within one standard error of the best "
                    f"(lr {best.lr:g}): the 1se rule takes the smallest such rate")
        return None

    def why(self) -> str:
        """One sentence: the rule, the best, the margin over the runner-up against the seeds' spread, the choice."""
        best, up, chosen = self.best(), self.runner_up(), self.chosen()
        if best is None:
            return "every bracket run diverged"
        _, eligible = self._pool()
        n = len(best.finite)
        spread = "" if best.std is None else f", seed std {best.std:.2f}"
        margin = "" if up is None else f"; margin over lr {up.lr:g} {best.mean - up.mean:.2f} points{spread}"
        if self.rule == "argmax":
            return f"argmax over seed {BRACKET_SEED}: lr {best.lr:g} ({best.mean:.2f} %){margin}"
        if not eligible:
            return (f"no stable rate: best lr {best.lr:g} ({best.mean:.2f} % over {n} seeds, unstable){margin}; "
                    f"chosen lr {chosen:g}, the smallest rate tried")
        return (f"best lr {best.lr:g} ({best.mean:.2f} % over {n} seeds){margin}; chosen lr {chosen:g}, "
                f"the smallest rate within one standard error ({best.se or 0:.2f}) of the best")

    def to_json(self) -> dict:
        best, up = self.best(), self.runner_up()
        margin = None if best is None or up is None else best.mean - up.mean
        return {"rule": self.rule, "width": BRACKET_WIDTH, "seeds": list(bracket_seeds(self.rule)),
                "rates": [self.scores[lr].to_json() for lr in self.rates], "grid": self.grid,
                "extended": self.extended, "best": None if best is None else best.lr,
                "runner_up": None if up is None else up.lr, "margin": margin,
                "spread": None if best is None else best.std, "chosen": self.chosen(), "edge": self.edge(),
                "why": self.why()}


def run_brackets(ws, arms, protocol: dict, rule: str, reporter) -> list[tuple[Bracket, list[dict]]]:
    """Bracket every arm under ``rule``: per arm ``(Bracket, its run records)``.

    All arms' runs go to ``ws.run_cells`` together (a concurrent backend keeps every worker busy); under
    ``"1se"`` each round of grid extensions does too, at most ``MAX_EXTEND`` rounds.
    Args: ``ws`` a Workspace; ``arms`` Arm objects; ``protocol`` the plan's epochs, batch, train_size, fan_in.
    """
    seeds = bracket_seeds(rule)
    brackets = [Bracket(rule=rule, grid=[float(lr) for lr in arm.unit.grid(arm.trained)]) for arm in arms]
    records: list[list[dict]] = [[] for _ in arms]
    todo = [(i, lr) for i, b in enumerate(brackets) for lr in b.grid]
    while todo:
        cells = [(arms[i], ws.config(arms[i], BRACKET_WIDTH, seed, lr, **protocol)) for i, lr in todo for seed in seeds]
        got = iter(ws.run_cells(cells, reporter))
        for i, lr in todo:
            recs = [next(got) for _ in seeds]
            if any(r.get("failed") for r in recs):  # the unit failed (lazylab.arms.UnitFailure): the arm stops
                continue
            records[i] += recs
            brackets[i].scores[lr] = RateScore.of(lr, recs)
        todo = []
        for i, b in enumerate(brackets):
            up = b.wants_extension()
            if up is not None and arms[i].name not in ws.failures:
                todo.append((i, next_rate(b.rates, up)))
        if todo:
            reporter.more(len(todo) * len(seeds))
    return list(zip(brackets, records))


BRACKET_HEADER = ("arm", "rule", "rates at m = 256: mean best_acc (%) ± seed std", "best", "margin (pts)",
                  "seed std", "chosen", "note")


def bracket_rows(arms: list[dict]) -> list[list[str]]:
    """One row of ``BRACKET_HEADER`` per arm of a ladder JSON that has a ``selection`` (``Bracket.to_json``).

    The margin is the best rate's mean minus the runner-up's; the seed std is the best rate's sample std over
    the bracket's seeds, the spread the margin is read against. ``(ku)`` after a rate: k seeds unstable,
    ``(kd)``: k diverged; ``+`` before a rate: beyond the arm's grid (an extension).
    """
    def num(v, fmt):
        return "-" if v is None else format(v, fmt)

    rows = []
    for a in arms:
        sel = a.get("selection") or {}
        if not sel.get("rates"):
            continue
        grid = set(sel.get("grid") or [])
        rates = []
        for s in sel["rates"]:
            marks = (f" ({s['unstable']}u)" if s.get("unstable") else "") + (f" ({s['diverged']}d)" if s.get("diverged") else "")
            spread = "" if s.get("std") is None else f" ± {s['std']:.2f}"
            rates.append(f"{'' if s['lr'] in grid else '+'}{s['lr']:g}: {num(s.get('mean'), '.2f')}{spread}{marks}")
        rows.append([a["arm"], sel["rule"], ", ".join(rates), num(sel.get("best"), "g"), num(sel.get("margin"), ".2f"),
                     num(sel.get("spread"), ".2f"), num(sel.get("chosen"), "g"), sel.get("edge") or ""])
    return rows
