"""The convex readout: a frozen bank's head fitted to the optimum of its objective.

The protocol (SPEC section 5) reads a frozen bank out with 12 epochs of AdamW at
a constant rate, which stops wherever the optimiser is after 12 epochs. This
module fits the same head — ``nnx.Linear(m, 10)`` on the bank's stored features
— to the minimiser of the regularised softmax cross-entropy

    L(W, b) = (1/n) sum_i CE(f_i W + b, y_i) + (lambda / 2) ||W||_F^2,

so a ladder can tell an optimiser wall (the protocol stops short of what the
features allow) from a kernel wall (the optimum itself stalls). The objective is
convex in ``(W, b)`` and strictly convex in ``W`` for ``lambda > 0``; the bias is
not penalised (as in scikit-learn's ``LogisticRegression``).

What ``lambda`` corresponds to in the protocol: AdamW's decoupled weight decay
(Loshchilov & Hutter 2019, Algorithm 2) shrinks ``W`` by ``lr * wd * W`` per
step. For plain SGD that is exactly an L2 penalty with ``lambda = wd`` (1e-4);
under Adam's per-coordinate scaling no penalty reproduces it. So ``lambda`` is
chosen, not copied: at every width, on seed 0's bank (``LambdaConfig``), by
accuracy on a held-out part of the *training* set (its last
``1/HOLDOUT_FRACTION``, never the test set; for a data-seeded bank only the
held-out images that seed no unit are scored), walking down the regularisation
path ``LAMBDAS`` (Friedman, Hastie & Tibshirani 2010, section 2.5: largest
first, each fit warm-starting the next) until a lambda does not beat the best
held-out accuracy so far. Every cell of that width (each seed) is then one fit
at that ``lambda`` on every training image (``ConvexConfig``). The choice is
per width because the best penalty moves with it: relu-frozen's held-out choice
rises 100-fold from m = 256 to 1024, and at m = 4096 a Yat bank's optimum is
1.7 points higher at a penalty 100 times below its m = 256 choice
(docs/convex.md, "Lambda per width").

The solver (L-BFGS-B in whitened coordinates over OpenBLAS products, its stopping rules and
memory) is ``lazylab.experiments.convex_solve``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from dataclasses import dataclass

import numpy as np

from lazylab.arms import Arm
from lazylab.config import CACHE_SCHEMA, RunConfig, canonical_json, memo_key
from lazylab.errors import LazylabError
from lazylab.experiments import Reporter, Workspace
from lazylab.experiments.convex_solve import MAX_ITER, TOL, preconditioner, scores, solve

# The regularisation path, largest first, walked down until held-out accuracy stops improving.
# Penalties are on the raw head weights, whose scale follows the features': Yat features are small,
# so their useful lambdas are small (docs/convex.md).
LAMBDAS = (1e-2, 1e-4, 1e-6, 1e-8, 1e-10, 1e-12)
LAMBDA_SEED = 0  # the bank whose held-out accuracy chooses each width's lambda
HOLDOUT_FRACTION = 6  # the last 1/6 of the training images (10,000 of 60,000) choose lambda
CONVEX_VERSION = 4  # bump when the solver or its record changes meaning
# The choice's own version: 5 scores only held-out images that seed no unit (a data-seeded bank's
# prototype images sit at its units' peaks, where no test image is; scoring them cost yat-data-frozen
# 5.4 points of held-out accuracy at m = 4096, lambda 1e-2: docs/convex.md). Walking on past a tie at
# chance (choose_lambda) changes no choice whose path's first lambda beats chance, as every default path's
# does (its first fit scored 34-88 % on the paper memo), so it kept the version (docs/convex.md: a custom
# path's choice stored before it keeps the old pick).
CHOICE_VERSION = 5
# The refinement around the walk's choice (``refine_lambda``): half-decade rungs, a factor sqrt(10) apart.
REFINE_STEP = 0.5  # decades between the walk's choice and each refined penalty
REFINE_GAIN = 0.1  # held-out points a refined penalty must gain to replace the walk's choice (10 of 10,000 images)
REFINE_BEYOND = 4  # half-decade steps the refinement may go on past an end of the path
REFINE_VERSION = 2  # 2: a neighbour that beat everything inside the path is followed towards the walk's next penalty


@dataclass(frozen=True)
class _Bank:
    """The frozen bank a convex readout reads (the fields ``RunConfig`` keys its features by)."""

    arm: str
    plugin: str
    width: int
    seed: int
    train_size: int
    fan_in: str
    data: str

    @property
    def lr(self) -> None:
        """No learning rate: progress displays show ``convex`` instead."""
        return None

    def canonical(self) -> str:
        """Canonical JSON of the fields (sorted keys, no spaces, floats by ``repr``)."""
        return canonical_json(self)

    def bank_run(self) -> RunConfig:
        """A run config of the same bank (the feature store's key ignores rate and epochs)."""
        return RunConfig(arm=self.arm, plugin=self.plugin, width=self.width, seed=self.seed, lr=0.0,
                         train_size=self.train_size, fan_in=self.fan_in, data=self.data)


@dataclass(frozen=True)
class LambdaConfig(_Bank):
    """The choice of an arm's ``lambda`` at one width: its bank at that width and ``LAMBDA_SEED``, fitted down
    the path ``lambdas`` on all but the last ``holdout`` training images and scored on those (``choose_lambda``).

    Attributes: the bank's fields (as in ``RunConfig``); ``lambdas`` the path, largest first;
    ``holdout``; ``tol``, ``max_iter`` the stopping rule. The memo key hashes all of them.
    """

    lambdas: tuple[float, ...] = LAMBDAS
    holdout: int = 10000
    tol: float = TOL
    max_iter: int = MAX_ITER
    version: int = CHOICE_VERSION
    schema: int = CACHE_SCHEMA

    def key(self) -> str:
        """``"convex-lambda-"`` + the first 32 hex digits of SHA-256 of the canonical JSON of the fields."""
        return memo_key("convex-lambda", self)


@dataclass(frozen=True)
class ConvexConfig(_Bank):
    """One convex readout: the bank's head fitted at ``lam`` on every training image, scored on the test set.

    Attributes: the bank's fields (as in ``RunConfig``); ``lam`` the L2 penalty (chosen by a
    ``LambdaConfig``); ``tol``, ``max_iter`` the stopping rule. The memo key hashes all of them.
    """

    lam: float = LAMBDAS[-1]
    tol: float = TOL
    max_iter: int = MAX_ITER
    version: int = CONVEX_VERSION
    schema: int = CACHE_SCHEMA

    def key(self) -> str:
        """``"convex-"`` + the first 32 hex digits of SHA-256 of the canonical JSON of the fields."""
        return memo_key("convex", self)


@dataclass(frozen=True)
class RefineConfig(_Bank):
    """The refinement of a lambda choice (``refine_lambda``): the bank of a ``LambdaConfig`` and what its walk
    found, ``walk`` (``(lambda, held-out accuracy %)`` per penalty fitted) and ``coarse`` (its choice).

    Attributes: the bank's fields; ``lambdas`` the walk's path; ``walk``, ``coarse``; ``holdout``, ``tol``,
    ``max_iter`` as the choice's; ``step`` (decades), ``gain`` (points), ``beyond`` (steps) the refinement's
    rule. The memo key hashes all of them, so a walk that chose otherwise is refined afresh.
    """

    lambdas: tuple[float, ...] = LAMBDAS
    walk: tuple[tuple[float, float], ...] = ()
    coarse: float = LAMBDAS[0]
    holdout: int = 10000
    tol: float = TOL
    max_iter: int = MAX_ITER
    step: float = REFINE_STEP
    gain: float = REFINE_GAIN
    beyond: int = REFINE_BEYOND
    version: int = REFINE_VERSION
    schema: int = CACHE_SCHEMA

    def key(self) -> str:
        """``"convex-refine-"`` + the first 32 hex digits of SHA-256 of the canonical JSON of the fields."""
        return memo_key("convex-refine", self)


def _frozen(arm: Arm) -> None:
    if arm.trained:
        raise LazylabError(f"{arm.name}: the convex readout fits a frozen bank's head; {arm.name} trains its bank "
                           "(use a -frozen arm, or --readout adamw)")


def lambda_config(ws: Workspace, arm: Arm, width: int, train_size: int = 60000, fan_in: str = "unit",
                  lambdas: tuple[float, ...] = LAMBDAS) -> LambdaConfig:
    """The canonical config of the choice of ``arm``'s ``lambda`` at ``width`` on this workspace's data.

    Raises: LazylabError if ``arm`` trains its bank (the convex readout needs frozen features).
    """
    _frozen(arm)
    return LambdaConfig(arm=arm.name, plugin=arm.plugin, width=width, seed=LAMBDA_SEED, train_size=train_size,
                        fan_in=fan_in, data=ws.fingerprint, lambdas=tuple(float(v) for v in lambdas),
                        holdout=train_size // HOLDOUT_FRACTION)


def convex_config(ws: Workspace, arm: Arm, width: int, seed: int, lam: float, train_size: int = 60000,
                  fan_in: str = "unit") -> ConvexConfig:
    """The canonical config of ``arm``'s convex readout at ``width``, ``seed`` and penalty ``lam``.

    Raises: LazylabError if ``arm`` trains its bank.
    """
    _frozen(arm)
    return ConvexConfig(arm=arm.name, plugin=arm.plugin, width=width, seed=seed, train_size=train_size, fan_in=fan_in,
                        data=ws.fingerprint, lam=float(lam))


def _held_out(F_train, y_train, cfg, seeds, verb: str) -> tuple:
    """``(rows, scored, F_scored, y_scored)``: the images fitted (the first ``rows``), the indices of the held-out
    images scored (the last ``cfg.holdout`` less ``seeds``) and their features and labels.
    Raises: ValueError when every held-out image is in ``seeds`` (``verb`` says what could not be done)."""
    n = cfg.train_size
    rows = n - cfg.holdout
    scored = np.setdiff1d(np.arange(rows, n), np.asarray(seeds, dtype=np.int64))
    if not len(scored):
        raise ValueError(f"no held-out image to {verb} lambda on: each of the last {cfg.holdout} training images "
                         "seeds a unit (use more training images or a narrower bank)")
    # A slice is a view; only a data-seeded bank (some held-out images skipped) needs a copy.
    if len(scored) == cfg.holdout:
        return rows, scored, F_train[rows:], y_train[rows:]
    return rows, scored, F_train[scored], y_train[scored]


def choose_lambda(F_train, y_train, cfg: LambdaConfig, seeds=()) -> dict:
    """Walk down the path ``cfg.lambdas`` (largest first, each fit on the first ``train_size - holdout``
    images warm-starting the next) until a lambda's accuracy on the last ``holdout`` images (less those
    in ``seeds``) does not beat the best so far, and keep the best (ties: the larger). While the best is
    no better than chance (the share of the commonest held-out class: a penalty so strong that the head
    only learnt the class frequencies), the walk goes on instead of stopping on a tie at chance.

    Friedman, Hastie & Tibshirani (2010), section 2.5: the path from strong to weak penalties, each
    solution the next one's start; stopping at the first lambda that gains nothing is early stopping
    with patience one, so weak penalties (the slow fits) are solved only while they still help.

    Args: F_train ``(train_size, m)`` float32 features; y_train ``(train_size,)`` labels; cfg the choice;
      seeds: indices of the training images that seed the bank's units (``lazylab.model.seed_indices``;
      empty for a random bank): a held-out image among them is not scored, since its feature on its own
      unit is that unit's peak, which no unseen image reaches.
    Returns: ``{"lambda", "selection": {repr(lambda): held-out accuracy %}, "selection_iterations":
      {repr(lambda): iterations}, "evaluations", "holdout_scored"}`` for the lambdas fitted (evaluations
      summed over them; ``holdout_scored`` the held-out images scored).
    Raises: ValueError for non-finite features, or when every held-out image is in ``seeds``.
    """
    F_train, y_train = np.asarray(F_train), np.asarray(y_train)
    rows, scored, F_scored, y_scored = _held_out(F_train, y_train, cfg, seeds, "choose")
    chance = int(np.bincount(y_scored).max())  # images right by a head that learnt nothing: the commonest class
    precond = preconditioner(F_train, rows)
    selection, iterations, hits, evaluations, start, best = {}, {}, {}, 0, None, None
    for lam in sorted(cfg.lambdas, reverse=True):
        start = solve(F_train, y_train, lam, rows, cfg.tol, cfg.max_iter, start=start, precond=precond)
        right = scores(F_scored, y_scored, start["W"], start["b"])[1]
        hits[lam] = int(right.sum())  # counts, not percentages: a tie at chance stays a tie to the last bit
        selection[repr(lam)] = 100.0 * float(right.mean())
        iterations[repr(lam)] = start["iterations"]
        evaluations += start["evaluations"]
        if best is None or hits[lam] > hits[best]:
            best = lam
        elif hits[best] > chance:  # no gain over a head that has learnt something: stop
            break
    return {"lambda": best, "selection": selection, "selection_iterations": iterations, "evaluations": evaluations,
            "holdout_scored": len(scored)}


def refine_config(choice_cfg: LambdaConfig, choice: dict) -> RefineConfig:
    """The refinement of the lambda choice ``choice`` (a ``choose_lambda`` record of ``choice_cfg``)."""
    walk = tuple(sorted(((float(k), float(v)) for k, v in choice["selection"].items()), reverse=True))
    fields = {f: getattr(choice_cfg, f) for f in ("arm", "plugin", "width", "seed", "train_size", "fan_in", "data",
                                                   "lambdas", "holdout", "tol", "max_iter")}
    return RefineConfig(**fields, walk=walk, coarse=float(choice["lambda"]))


def _rung(lam: float, decades: float) -> float:
    """``lam`` moved by ``decades`` on the log scale, rounded to 3 significant digits (``3.16e-09``)."""
    return float(f"{lam * 10.0 ** decades:.3g}")


def refine_lambda(F_train, y_train, cfg: RefineConfig, seeds=(), remember=None, first=None) -> dict:
    """Refine the walk's choice ``cfg.coarse`` on a half-decade grid, on the same held-out images, until a penalty
    with the best held-out accuracy fitted has both half-decade neighbours fitted (or a limit is reached).

    The walk (``choose_lambda``) steps two decades at a time, so its choice can lie a decade from the held-out
    optimum (yat-frozen, m = 2048: 87.26 % at 1e-8, 87.01 % at 1e-10). Stage one fits ``coarse * 10^step`` (from zeros) and then ``coarse / 10^step``
    (warm-started from it) on the same first ``train_size - holdout`` images, and scores both on the same
    held-out images. Where the better lies beyond an end of the path (the walk's choice was its largest or
    smallest penalty), it goes on that way, a half-decade a step, warm-started, while each step beats everything
    fitted so far, up to ``beyond`` steps; these steps are taken from the previous rung rounded to 3 digits
    (0.0316 then 0.0999). Stage two (version 2): inside the path, a neighbour that beat everything is followed
    the same way, its first step from zeros, while each step beats everything (a tie stops it), up to the rung
    before the walk's next penalty (fitted by the walk); its rungs are ``coarse * 10^(j step)``, so 1e-9 and
    3.16e-10 below 1e-8.
    Interval refinement (Kiefer 1953) on the grid of ``10^(k/2)``. ``cfg.version`` 1 gives stage one alone.

    The choice: the refined penalty with the most held-out hits (ties: the larger) replaces ``coarse`` when it
    scores at least ``gain`` points above it (hit counts, as the walk compares them); else ``coarse`` stays. So
    the chosen penalty's held-out accuracy is within ``gain`` of the best over the walk and the refinement.

    Args: as ``choose_lambda`` (``cfg`` a ``RefineConfig``); ``remember``: None, or ``(lam, compute) -> solve``
      that returns the stored solve of ``lam`` or calls ``compute()`` and stores its result (``step_memo``:
      an interrupted refinement resumes from its last finished solve, to the bit, since each warm start is
      the stored head); ``first``: None, or the version-1 record of this refinement (stage one alone), reused
      instead of refitted: stage two starts from zeros, so the record is the one a fresh refinement gives.
    Returns: ``{"lambda", "coarse", "selection": {repr(lambda): held-out %} of the refined penalties in the
      order fitted, "selection_iterations", "evaluations", "holdout_scored", "best": the best held-out % over
      walk and refinement, "stops": {repr(lambda): stop rule}}``.
    Raises: ValueError as ``choose_lambda``.
    """
    F_train, y_train = np.asarray(F_train), np.asarray(y_train)
    rows, scored, F_scored, y_scored = _held_out(F_train, y_train, cfg, seeds, "refine")
    walk = {float(lam): acc for lam, acc in cfg.walk}
    coarse_hits = round(walk[cfg.coarse] * len(scored) / 100.0)
    precond = preconditioner(F_train, rows)
    hits, selection, iterations, stops, evaluations = {}, {}, {}, {}, 0

    def fit(lam, start):
        nonlocal evaluations
        compute = lambda: solve(F_train, y_train, lam, rows, cfg.tol, cfg.max_iter, start=start,  # noqa: E731
                                precond=precond)
        result = compute() if remember is None else remember(lam, compute)
        right = scores(F_scored, y_scored, result["W"], result["b"])[1]
        hits[lam] = int(right.sum())
        selection[repr(lam)] = 100.0 * float(right.mean())
        iterations[repr(lam)] = result["iterations"]
        stops[repr(lam)] = result["stop"]
        evaluations += result["evaluations"]
        return result

    def beats_everything(lam) -> bool:
        return hits[lam] > max([coarse_hits] + [h for k, h in hits.items() if k != lam])

    up, down = _rung(cfg.coarse, cfg.step), _rung(cfg.coarse, -cfg.step)
    top, bottom = max(cfg.lambdas), min(cfg.lambdas)
    if first is None:
        above = fit(up, None)
        below = fit(down, above)
        for lam, last, sign in ((up, above, 1), (down, below, -1)):
            # Past an end of the path nothing was fitted: go on while each step gains over everything so far.
            for _ in range(cfg.beyond if (lam > top or lam < bottom) else 0):
                if not beats_everything(lam):
                    break
                lam = _rung(lam, sign * cfg.step)
                last = fit(lam, last)
    else:
        for k, acc in first["selection"].items():
            hits[float(k)] = round(acc * len(scored) / 100.0)
            selection[k], iterations[k], stops[k] = acc, first["selection_iterations"][k], first["stops"][k]
        evaluations = first["evaluations"]
    for lam, sign in ((up, 1), (down, -1)) if cfg.version >= 2 else ():
        if lam > top or lam < bottom:
            continue  # stage one went on past the end of the path
        beside = min((p for p in cfg.lambdas if (p - cfg.coarse) * sign > 0), key=lambda p: abs(p - cfg.coarse))
        room = round(abs(math.log10(beside) - math.log10(cfg.coarse)) / cfg.step) - 1  # rungs before the walk's next
        last = None
        for j in range(2, room + 1):
            if not beats_everything(lam):
                break
            lam = _rung(cfg.coarse, sign * j * cfg.step)
            last = fit(lam, last)
    best = max(hits, key=lambda k: (hits[k], k))
    gained = hits[best] - coarse_hits >= cfg.gain / 100.0 * len(scored) - 1e-9
    return {"lambda": best if gained else cfg.coarse, "coarse": cfg.coarse, "selection": selection,
            "selection_iterations": iterations, "stops": stops, "evaluations": evaluations,
            "holdout_scored": len(scored), "best": max(max(walk.values()), max(selection.values()))}


def convex_readout(F_train, y_train, F_test, y_test, cfg: ConvexConfig) -> dict:
    """Fit the head at ``cfg.lam`` on every training image (``solve``) and score it on the test set.

    Args:
      F_train ``(train_size, m)``, F_test ``(n_test, m)``: float32 features; y_train, y_test: labels.
      cfg: the readout's config.
    Returns: the record's numbers: ``test_acc`` (%), ``train_acc`` (%), ``train_loss`` (mean CE on every
      training image at the optimum, nats, penalty excluded), ``objective`` (penalty included),
      ``grad_norm``, ``iterations``, ``evaluations``, ``converged``, ``stop``, ``lambda``.
    Raises: ValueError for non-finite features.
    """
    fit = solve(F_train, y_train, cfg.lam, None, cfg.tol, cfg.max_iter)
    ce, right = scores(F_train, np.asarray(y_train), fit["W"], fit["b"])
    test_right = scores(F_test, np.asarray(y_test), fit["W"], fit["b"])[1]
    return {
        "test_acc": 100.0 * float(test_right.mean()), "train_acc": 100.0 * float(right.mean()),
        "train_loss": float(ce.mean()), "objective": fit["objective"], "grad_norm": fit["grad_norm"],
        "iterations": fit["iterations"], "evaluations": fit["evaluations"], "converged": fit["converged"],
        "stop": fit["stop"], "lambda": cfg.lam,
    }


def _config_json(cfg) -> dict:
    """The config as a plain dict, as stored in its record."""
    return json.loads(canonical_json(cfg))


def _features(ws, arm: Arm, cfg) -> tuple:
    """The bank's train and test features (``Workspace.bank_features``: the memo's store when it holds them)."""
    from lazylab.model import build_model

    model = build_model(arm, cfg.width, cfg.seed, ws.data.x_train[: cfg.train_size], cfg.fan_in)
    return ws.bank_features(arm, cfg.bank_run(), model)


def convex_cells(ws, arm: Arm, cfgs: list[ConvexConfig], on_epoch=None) -> list[dict]:
    """The records of the convex readouts ``cfgs`` of ``arm`` (a backend's unit of work, like
    ``experiments.train_runs``; module-level so that Ray can send it by reference).

    ``on_epoch`` is unused (a solve has no epochs). Raises: LazylabError naming the arm and cell if
    its features are not finite.
    """
    return [_cell(ws, arm, cfg, convex_readout, True) for cfg in cfgs]


def lambda_cells(ws, arm: Arm, cfgs: list[LambdaConfig], on_epoch=None) -> list[dict]:
    """The records of the lambda choices ``cfgs`` of ``arm`` (``choose_lambda``; a backend's unit of work,
    as ``convex_cells``). Raises as ``convex_cells``."""
    from lazylab.model import seed_indices

    def fit(F_train, y_train, cfg):
        seeds = seed_indices(cfg.width, cfg.seed, cfg.train_size) if arm.init == "data" else ()
        return choose_lambda(F_train, y_train, cfg, seeds)

    return [_cell(ws, arm, cfg, fit, False) for cfg in cfgs]


def refine_cells(ws, arm: Arm, cfgs: list[RefineConfig], on_epoch=None) -> list[dict]:
    """The records of the refinements ``cfgs`` of ``arm``'s lambda choices (``refine_lambda``; a backend's unit of
    work, as ``convex_cells``). Raises as ``convex_cells``."""
    from lazylab.model import seed_indices

    def fit(F_train, y_train, cfg):
        seeds = seed_indices(cfg.width, cfg.seed, cfg.train_size) if arm.init == "data" else ()
        return refine_lambda(F_train, y_train, cfg, seeds, step_memo(ws, cfg), _first_stage(ws, cfg))

    return [_cell(ws, arm, cfg, fit, False) for cfg in cfgs]


def _first_stage(ws, cfg: RefineConfig) -> dict | None:
    """The memo's version-1 record of the refinement ``cfg`` (its stage one, which version 2 extends), or None.
    It saves refitting stage one: up to 20 minutes a refinement at m = 8192 on 2 cores."""
    if getattr(ws, "memo", None) is None or cfg.version != 2:
        return None
    return _stored(ws, dataclasses.replace(cfg, version=1))


STOPS = ("gradient", "objective", "max_iter", "line_search")  # ``solve``'s stop rules, stored by index


def step_key(cfg: RefineConfig, lam: float) -> str:
    """The memo key of the refinement ``cfg``'s solve at ``lam``: ``"convex-step-"`` + 32 hex digits."""
    return memo_key("convex-step", {"refine": cfg.key(), "lambda": float(lam)})


def step_memo(ws, cfg: RefineConfig):
    """``refine_lambda``'s ``remember`` for the refinement ``cfg``: each solve (a head of ``cfg.width`` x 10 and
    its counts) is kept in ``ws``'s memo under ``step_key`` as it finishes, so an interrupted refinement (at
    m = 8192 each solve takes 10-20 minutes on 2 cores) loses at most the solve in progress. None on a Ray
    worker, which opens no memo (``lazylab.backends.WorkerWorkspace``): there the refinement is one unit."""
    memo = getattr(ws, "memo", None)
    if memo is None:
        return None

    def remember(lam, compute):
        key = step_key(cfg, lam)
        got = memo.get_arrays(key)
        if got is not None:
            if got["W"].shape == (cfg.width, 10) and 0 <= int(got["stop"]) < len(STOPS):
                return {"W": got["W"], "b": got["b"], "iterations": int(got["iterations"]),
                        "evaluations": int(got["evaluations"]), "stop": STOPS[int(got["stop"])]}
            memo.reject(key, f"a head of shape {got['W'].shape} or stop rule {int(got['stop'])}, not a solve of "
                             f"m = {cfg.width}")
        result = compute()
        memo.put_arrays(key, {"W": result["W"], "b": result["b"], "iterations": np.int64(result["iterations"]),
                              "evaluations": np.int64(result["evaluations"]),
                              "stop": np.int64(STOPS.index(result["stop"]))})
        return result

    return remember


def _cell(ws, arm: Arm, cfg, fit, test: bool) -> dict:
    """One record: ``fit`` (``convex_readout`` with the test features, ``choose_lambda`` without) on the bank."""
    t0 = time.perf_counter()
    F_train, F_test = _features(ws, arm, cfg)
    y_train = np.asarray(ws.data.y_train[: cfg.train_size])
    try:
        result = fit(F_train, y_train, F_test, np.asarray(ws.data.y_test), cfg) if test else fit(F_train, y_train, cfg)
    except ValueError as exc:
        raise LazylabError(f"{arm.name} ({arm.plugin}) m={cfg.width} seed={cfg.seed}: {exc}") from None
    return {"key": cfg.key(), "config": _config_json(cfg), **result, "seconds": round(time.perf_counter() - t0, 3)}


def _stored(ws, cfg) -> dict | None:
    """``cfg``'s memo record, or None (absent, or written for another configuration)."""
    record = ws.memo.get_record(cfg.key())
    return record if isinstance(record, dict) and record.get("config") == _config_json(cfg) else None


def run_convex(ws: Workspace, cells: list[tuple], reporter: Reporter = Reporter(), job=convex_cells) -> list[dict]:
    """Records of convex readouts or lambda choices, each ``(arm, cfg)``, in order: from the memo, or computed by
    ``ws.backend`` (``job``: ``convex_cells`` for ``ConvexConfig``, ``lambda_cells`` for ``LambdaConfig``) and stored.

    Features come from ``Workspace.bank_features`` (the memo's feature store when it holds them), so a
    readout sees exactly the bank its protocol run trained on. Each missing cell is one job of the
    backend, given in the order of ``cells`` (the local backend computes them in that order; Ray starts
    the widest first); each record is stored as its job finishes, so an interrupt keeps every finished cell.
    In memo-only mode a missing cell gives ``{"key", "config", "test_acc": None, "lambda": None, "missing": True}``.

    Raises: LazylabError naming the arm and cell if its features are not finite.
    """
    found, todo = {}, []
    for arm, cfg in cells:
        record = _stored(ws, cfg)
        if record is not None:
            reporter.done(cfg, record, cached=True)
            found[cfg.key()] = record
        elif ws.memo_only:
            ws.missing.append(cfg.key())
            found[cfg.key()] = {"key": cfg.key(), "config": _config_json(cfg), "test_acc": None, "lambda": None,
                                "missing": True}
        else:
            todo.append((arm, [cfg]))
    from lazylab.vetting import mark

    arms = {cfg.key(): arm for arm, cfgs in todo for cfg in cfgs}
    for group, records in ws.backend.compute(ws, todo, reporter, job):
        for cfg, record in zip(group, records):
            record = mark(record, arms[cfg.key()])  # a unit that failed its checks: said in the record
            ws.memo.put_record(cfg.key(), record)
            found[cfg.key()] = record
            reporter.done(cfg, record, cached=False)
    return [found[cfg.key()] for _, cfg in cells]


def mean_of(values) -> float | None:
    """The mean of ``values`` leaving out None (a record without the field); None when none is left."""
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else None


def convex_plan(ws: Workspace, plan, lambdas: tuple[float, ...] = LAMBDAS) -> list[tuple[Arm, LambdaConfig]]:
    """``(arm, LambdaConfig)`` of each frozen arm of ``plan`` (a ``LadderPlan``) at each width, widths ascending.

    Raises: LazylabError if the plan holds a trained arm.
    """
    return [(arm, lambda_config(ws, arm, w, plan.train_size, plan.fan_in, lambdas))
            for w in sorted(plan.widths) for arm in plan.arms]


def run_convex_ladder(ws: Workspace, plan, lambdas: tuple[float, ...] = LAMBDAS,
                      reporter: Reporter = Reporter()) -> dict:
    """Convex readouts of every frozen arm of ``plan`` (a ``LadderPlan``) at each width and seed.

    Width by width, ascending, the arms interleaved: every arm's ``lambda`` at that width is chosen by the
    walk (``lambda_cells``) and refined on a half-decade grid (``refine_cells``), then every seed's
    cell is fitted at the refined choice (``convex_cells``), each step through the backend (``run_convex``);
    an interrupted frontier keeps every arm's narrow widths.
    Returns: ``{"lambdas", "tol", "max_iter", "holdout_fraction", "lambda_seed", "arms": {arm: {"plugin",
      "lambdas": {str(width): chosen lambda | None}, "cells": {str(width): summary}}}, "runs": [record, ...],
      "choices": [walk record, ...], "refinements": [refinement record, ...], "unrefined": [[arm, width], ...]
      (memo-only mode: choices whose refinement the memo lacks, their cells at the walk's lambda)}``; a cell's
      summary holds ``n``, ``mean`` and ``std`` of ``test_acc``
      (%, std with ddof=1, 0 for one seed), ``train_loss`` (mean, nats), ``grad_norm`` (largest),
      ``iterations`` (mean), ``converged`` (all seeds), ``lambdas`` (per seed).
    Raises: LazylabError if the plan holds a trained arm.
    """
    choices = convex_plan(ws, plan, lambdas)
    reporter.plan(len(choices) * (2 + len(plan.seeds)))
    out = {"lambdas": list(lambdas), "tol": TOL, "max_iter": MAX_ITER, "holdout_fraction": f"1/{HOLDOUT_FRACTION}",
           "lambda_seed": LAMBDA_SEED, "arms": {}, "runs": [], "choices": [], "refinements": [], "unrefined": []}
    chosen = {}
    for w in sorted(plan.widths):
        here = [(arm, lcfg) for arm, lcfg in choices if lcfg.width == w]
        walked = run_convex(ws, here, reporter, lambda_cells)
        out["choices"] += walked
        refine = [(arm, refine_config(lcfg, choice)) for (arm, lcfg), choice in zip(here, walked)
                  if not choice.get("missing")]
        refined = iter(run_convex(ws, refine, reporter, refine_cells))
        for (arm, _), choice in zip(here, walked):
            # The cells at this width are fitted at the refined choice. In memo-only mode a refinement not
            # computed yet leaves the walk's choice in force, said so in ``unrefined``.
            chosen[(arm.name, w)] = choice
            if not choice.get("missing"):
                refinement = next(refined)
                if refinement.get("missing"):
                    out["unrefined"].append([arm.name, w])
                else:
                    chosen[(arm.name, w)] = refinement
                    out["refinements"].append(refinement)
        jobs = [(arm, convex_config(ws, arm, w, s, chosen[(arm.name, w)]["lambda"], plan.train_size, plan.fan_in))
                for arm, _ in here for s in plan.seeds if not chosen[(arm.name, w)].get("missing")]
        out["runs"] += run_convex(ws, jobs, reporter)
    for arm in plan.arms:
        mine = [r for r in out["runs"] if r["config"]["arm"] == arm.name]
        cells = {}
        for w in plan.widths:
            cell = [r for r in mine if r["config"]["width"] == w and not r.get("missing")]
            accs = [r["test_acc"] for r in cell]
            cells[str(w)] = {
                "n": len(cell), "mean": mean_of(accs),
                "std": float(np.std(accs, ddof=1)) if len(accs) > 1 else 0.0 if accs else None,
                "train_loss": mean_of(r["train_loss"] for r in cell),
                "grad_norm": max((r["grad_norm"] for r in cell), default=None),
                "iterations": mean_of(r["iterations"] for r in cell),
                "converged": all(r["converged"] for r in cell),
                "lambdas": [r["lambda"] for r in cell],
            }
        out["arms"][arm.name] = {"plugin": arm.plugin, "cells": cells,
                                 "lambdas": {str(w): chosen[(arm.name, w)].get("lambda") for w in plan.widths}}
    return out
