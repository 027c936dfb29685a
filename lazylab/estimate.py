"""What a computing command will cost on this machine, estimated before it runs (issue 25).

Nothing is trained here. A command's plan becomes the list of runs it would do,
each looked up in the memo under the key the experiment itself computes, and
the runs still to compute are priced by a cost model whose constants are
measured on this machine (``lazylab.calibration``):

* a trained run's step costs ``a + S b m`` seconds (``S`` members of one
  program, width ``m``; ``a`` the per-step dispatch, ``b`` the bank's products,
  activations and AdamW per unit); its evaluation after each epoch is a forward
  pass over the 10,000 test images, priced as a third of a training step per
  256 images (a step does three products of that size, the forward one of them);
* a frozen run computes its bank's features once (``(n + 10000) m`` outputs at
  the measured rate), then trains its head on them at ``a_h + S b_h m`` a step;
* each new program shape pays the measured compilation once per process (less
  when jax's persistent compilation cache holds programs);
* the command pays a fixed start (imports, data, tables, figures: ``COMMAND_S``).

Ray (``--backend ray``, one worker per core) divides the runs' time by a gain
measured on 2 cores. Peak memory is a base plus the widest run's working set;
disk is the records, the new banks' feature entries (at most ``--cache-limit``
in all: an upper bound, as the store keeps only those that load faster than they
compute, ``lazylab.cache.worth_storing``) and the data copy.
The ladder's figures are checked against measured ladders by ``bench/estimate.py``
(docs/performance.md, "Estimates before a run"); the other commands' are crude.
"""

from __future__ import annotations

import os
import dataclasses
import json
from dataclasses import asdict, dataclass, field

from lazylab.calibration import Calibration, calibration, calibration_path

D, BATCH, N_TEST = 784, 256, 10000
# Fixed cost of a computing command beyond its runs: imports, loading the data,
# the analysis, tables and figures. Measured on the quick preset on the 2-core
# machine (2026-12-03): 54.9 s wall against 49.2 s summed over its runs' records.
COMMAND_S = 6.0
# Peak resident memory: a base (python, jax, the data in numpy and jax, compiled
# programs) plus the widest run's working set. Fitted to local runs on the 2-core
# machine: the quick preset (widest frozen features 0.27 GiB) peaked at 2.62 GiB, the
# paper preset (2.14 GiB) at 5.38 GiB (docs/performance.md).
PEAK_BASE_BYTES = int(2.2 * 2**30)
# The same base for trajectory, gram and readout, which hold no ladder: their peaks measured
# 1.28, 0.81 and 1.05 GiB on the 2-core machine (2026-12-03).
STUDY_BASE_BYTES = 2**30
FEATURE_PEAK_FACTOR = 1.5  # the features held, plus the steps' gathered copies
RECORD_BYTES = 4096  # one run record in the memo (curves, losses, scalars, movement): 2-4 KiB
DATA_COPY_BYTES = 55_000_000  # the parsed Fashion-MNIST copy a memo keeps (memo/data/<fingerprint>)
FEATURE_WRITE_BYTES_PER_S = 450e6  # writing a feature entry: 2188 MiB in 4.4-5.4 s (docs/performance.md)
# Ray on one machine, one worker process per core, both from the 2-core machine: starting Ray
# and the workers (docs/scaling.md: about 10 s, plus the workers' imports), and the gain of a
# second worker process over one: 0.87-1.42x (mean 1.14) on the wide trained steps that take
# most of the paper preset (bench/trained_step.py), 1.2-2.7x on narrow trained runs and frozen
# heads (bench/vmap_seeds.py's ceilings), docs/performance.md; 1.25 weighs them by time.
RAY_START_S = 15.0
RAY_GAIN_PER_EXTRA_CORE = 0.25
# Drawing, measured on the 2-core machine (2026-12-03, other work running): a GIF frame
# (gram: 40 frames in about 6 s beyond its computation; readout: 61 in about 5.5 s), each
# ``render`` command from a full memo (gifs 34 s, figures 6.6 s, report 40.5 s, all 57.7 s
# wall), and one 2,000-step run of the 1-D NTK lab (its 40-run sweep, widths 8-1024, took
# 37 s with imports and the PNG).
GIF_FRAME_S = 0.12
RENDER_DRAW_S = {"gifs": 28.0, "figures": 1.0, "report": 35.0, "all": 52.0, "ladders": 8.0}  # beyond COMMAND_S
NTK_RUN_S = 0.75
# More rates priced per unresolved bracket (the 1se rule extended 3 of the quick preset's 4 arms by one),
# and frozen-program compilations per bank width new to a cold process (its features, evaluation and
# checks): measured by bench/estimate.py --cold, docs/performance.md (2026-12-03).
EXTENSION_RATES, COLD_BANK_COMPILES = 0.75, 1.75
NTK_PEAK_BYTES = 520 * 2**20  # peak RSS of `lazylab ntk lab` (no data, no bank)
# A convex solve (lazylab.estimate.convex_solve_s): fixed seconds, covariance (per row x m^2, ssyrk),
# factorisation (per m^3), and per evaluation: per image (the softmax on 10 logits) and per image x unit
# (the two products): 17, 22, 32 and 87 ms an evaluation at m = 16, 64, 256 and 1024 on 60,000 images (the quick
# preset's cells, 2026-12-04, a niced job beside them; bench/convex.py: 308 ms at 4096). Evaluations per solve:
# about 60 (m/16)^0.45 times a unit's factor (the frontier's median cell at m <= 4096: docs/performance.md);
# the data-seeded Yat bank's solves run to the iteration cap (about 1,070 evaluations).
CONVEX_SETUP_S = 0.5
CONVEX_COV_S = 1.0e-11
CONVEX_FACTOR_S = 2.0e-11
CONVEX_EVAL_IMAGE_S, CONVEX_EVAL_S = 2.7e-7, 1.2e-9
# A width's lambda choice: CHOICE_SOLVES cell-sized solves on 50,000 images (its walk fits 2-6 lambdas, warm-started:
# 2,040-3,454 evaluations in all for yat-data, 2.2-4.0 cells' worth for the other banks at m <= 4096).
CONVEX_DATA_EVALUATIONS, CHOICE_SOLVES = 1070, 3
CONVEX_UNIT_EVALUATIONS = {"yat": 0.7, "relu": 1.0, "gaussian": 2.0}  # another unit: 1
# A width's refinement (experiments.convex.refine_lambda): two solves on 50,000 images, the first from zeros.
REFINE_SOLVES = 2.5
# The trained optimum (experiments.optimum): a selection run is priced at its whole budget (early stopping
# only shortens it) with two evaluations an epoch (held-out and test images), its grid with this many more
# rates for the extensions, and a refit at this share of the budget.
OPTIMUM_EXTENSION_RATES, REFIT_SHARE = 1.0, 0.8


def convex_evaluations(width: int, unit: str, data_seeded: bool) -> float:
    """Evaluations one convex solve of a bank of ``unit`` is priced at (see ``CONVEX_UNIT_EVALUATIONS``)."""
    if data_seeded:
        return CONVEX_DATA_EVALUATIONS
    return min(60.0 * (width / 16) ** 0.45 * CONVEX_UNIT_EVALUATIONS.get(unit, 1.0), CONVEX_DATA_EVALUATIONS)


# ------------------------------------------------------------------ the cost model
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


def compile_cache_warm() -> bool:
    """Whether jax's persistent compilation cache is on and holds programs (``lazylab.xla_cache``).

    Which programs it holds cannot be told without compiling them, so a cache holding
    any is taken to hold the command's (true after a first command of the same shapes).
    """
    from lazylab import xla_cache

    folder = xla_cache.cache_dir()
    return folder is not None and xla_cache.stats(folder)[0] > 0


class Pricer:
    """Prices groups of runs as one process computes them, remembering what it compiled and which banks it computed.

    Args: cal: the Calibration; cache_limit: the feature store's cap in bytes (``--cache-limit``,
      default 8 GiB); warm: whether programs load from jax's cache (default ``compile_cache_warm()``).
    Attributes: ``feature_disk`` (bytes of the new banks' feature entries, at most the cap each),
    ``working_bytes`` (the largest group's working set).
    """

    def __init__(self, cal: Calibration, cache_limit: int | None = None, warm: bool | None = None):
        from lazylab.cache import DEFAULT_CACHE_LIMIT

        self.cal = cal
        self.cache_limit = DEFAULT_CACHE_LIMIT if cache_limit is None else cache_limit
        self.warm = compile_cache_warm() if warm is None else warm
        self.shapes: set = set()
        self.banks: set = set()
        self.cold_banks: set = set()
        self.feature_disk = 0
        self.working_bytes = 0

    def compile_s(self, trained: bool, shape) -> float:
        """The compilation of ``shape`` if this process has not compiled it yet, else 0."""
        if shape in self.shapes:
            return 0.0
        self.shapes.add(shape)
        cal = self.cal
        if trained:
            return cal.warm_compile_s if self.warm else cal.compile_s
        return cal.warm_frozen_compile_s if self.warm else cal.frozen_compile_s

    def cold_bank_s(self, bank) -> float:
        """A bank width's other programs (``COLD_BANK_COMPILES``) when new to a cold process, else 0."""
        if self.warm or bank in self.cold_banks:
            return 0.0
        self.cold_banks.add(bank)
        return COLD_BANK_COMPILES * self.cal.frozen_compile_s

    def bank_s(self, bank, width: int, train_size: int) -> float:
        """A frozen bank's features (and their store write when ``worth_storing``) unless already computed, else 0.

        ``feature_disk`` counts every new bank's features: an upper bound, since near the policy's
        threshold whether the store keeps them depends on how fast they were computed that time.
        """
        from lazylab.cache import worth_storing

        if bank in self.banks:
            return 0.0
        self.banks.add(bank)
        seconds, nbytes = features_s(self.cal, width, train_size + N_TEST), feature_bytes(width, train_size)
        self.working_bytes = max(self.working_bytes, int(FEATURE_PEAK_FACTOR * nbytes))
        self.feature_disk += nbytes if nbytes <= self.cache_limit else 0
        if worth_storing(seconds, nbytes, self.cache_limit):
            seconds += nbytes / FEATURE_WRITE_BYTES_PER_S
        return seconds

    def group(self, arm, cfgs: list) -> float:
        """Seconds for one group of runs of ``arm`` (``experiments.batch_groups``) trained as one program."""
        first, S = cfgs[0], len(cfgs)
        m, E, n = first.width, first.epochs, first.train_size
        seconds = self.compile_s(arm.trained, (arm.name, m, S, n, first.batch)) + self.cold_bank_s((arm.name, m))
        if arm.trained:
            # parameters, gradients and AdamW's two moments, each also in a donated copy
            self.working_bytes = max(self.working_bytes, S * 8 * 4 * m * D)
            return seconds + trained_group_s(self.cal, m, S, E, n)
        for cfg in cfgs:  # the rates of a bracket share one bank
            seconds += self.bank_s((arm.name, m, cfg.seed, n, cfg.fan_in), m, n)
        return seconds + head_group_s(self.cal, m, S, E, n)


# ------------------------------------------------------------------ estimates
@dataclass
class Estimate:
    """What a command will do and cost here.

    Attributes:
      command: e.g. ``"ladder"``; backend: ``"local"`` or ``"ray"``; cores: this machine's.
      runs_total, in_memo, to_compute: runs of the plan (a bracket run reused as a cell counts once).
      seconds: estimated wall time (s); peak_bytes: peak resident memory (bytes, summed over
        Ray's workers); disk_bytes: what the memo grows by at most (records, feature entries, data copy).
      runs: one dict per run: ``phase``, ``arm``, ``width``, ``seed``, ``lr`` and ``key`` (None
        while the bracket that chooses the rate is not all in the memo), ``in_memo``, ``seconds``
        (estimated; a group's time shared among its runs; 0 for runs in the memo).
      notes: lines to print under the summary (assumptions, what could not be resolved).
      calibration: where the calibration behind it is kept, when and at what load it was measured.
    """

    command: str
    backend: str
    cores: int
    runs_total: int
    in_memo: int
    to_compute: int
    seconds: float
    peak_bytes: int
    disk_bytes: int
    runs: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    calibration: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        """The estimate as plain JSON types."""
        return asdict(self)


def wall_s(compute_s: float, backend: str, cores: int) -> float:
    """Wall time (s) of a command whose runs take ``compute_s`` in one process.

    local: ``COMMAND_S + compute_s``. ray: ``COMMAND_S + RAY_START_S + compute_s / gain``,
    ``gain = 1 + 0.25 (cores - 1)`` (measured on 2 cores only).
    """
    if backend == "ray" and compute_s > 0:
        return COMMAND_S + RAY_START_S + compute_s / (1 + RAY_GAIN_PER_EXTRA_CORE * (cores - 1))
    return COMMAND_S + compute_s


def _row(phase: str, arm: str, width: int, seed: int, lr, key, in_memo: bool) -> dict:
    return {"phase": phase, "arm": arm, "width": width, "seed": seed, "lr": lr, "key": key, "in_memo": in_memo,
            "seconds": 0.0}


def _run_rows(phase: str, arm, cfgs: list, resolved: bool, stored: list[bool], pricer: Pricer) -> tuple[list, float]:
    """Rows of runs of ``arm`` and the seconds of those not in the memo, grouped as the experiment groups them."""
    from lazylab.experiments import batch_groups

    rows = [_row(phase, arm.name, c.width, c.seed, c.lr if resolved else None, c.key() if resolved else None, s)
            for c, s in zip(cfgs, stored)]
    row_of = {id(c): r for c, r in zip(cfgs, rows)}
    total = 0.0
    for group in batch_groups(arm, [c for c, s in zip(cfgs, stored) if not s]):
        seconds = pricer.group(arm, group)
        total += seconds
        for c in group:
            row_of[id(c)]["seconds"] = round(seconds / len(group), 3)
    return rows, total


def _bracket(ws, arm, protocol: dict, rule: str, pricer: Pricer) -> tuple[list, float, float | None, bool]:
    """An arm's bracket (``lazylab.bracket``: its grid at m = 256 over the rule's seeds, then each grid
    extension the memo's runs call for): ``(rows, seconds, chosen rate, all in the memo)``. Missing runs
    carry ``EXTENSION_RATES`` more rates in their seconds (which rate, if any, is not known before)."""
    from lazylab.bracket import BRACKET_WIDTH, Bracket, RateScore, bracket_seeds, next_rate

    seeds = bracket_seeds(rule)
    bracket = Bracket(rule=rule, grid=[float(lr) for lr in arm.unit.grid(arm.trained)])
    rates, rows, seconds = list(bracket.grid), [], 0.0
    while rates:
        cfgs = [ws.config(arm, BRACKET_WIDTH, seed, lr, **protocol) for lr in rates for seed in seeds]
        records = [ws._memo_record(c) for c in cfgs]  # the experiment's own look-up
        more, s = _run_rows("bracket", arm, cfgs, True, [r is not None for r in records], pricer)
        if any(r is None for r in records):
            share = 1 + EXTENSION_RATES / len(rates)  # each missing run carries its share of the extensions
            more = [{**r, "seconds": round(r["seconds"] * share, 3)} for r in more]
            return rows + more, seconds + s * share, None, False
        rows, seconds = rows + more, seconds + s
        for i, lr in enumerate(rates):
            bracket.scores[lr] = RateScore.of(lr, records[i * len(seeds):(i + 1) * len(seeds)])
        up = bracket.wants_extension()
        rates = [] if up is None else [next_rate(bracket.rates, up)]
    return rows, seconds, bracket.chosen(), True


def _ladder(ws, plan, pricer: Pricer) -> tuple[list, float, list]:
    """``run_ladder``'s runs: each arm's bracket unless ``plan.lr``, then every width x seed."""
    from lazylab.bracket import BRACKET_WIDTH, bracket_seeds

    rows, seconds, notes, rates = [], 0.0, [], {}
    if plan.lr is None:
        for arm in plan.arms:
            arm_rows, s, lr, resolved = _bracket(ws, arm, plan.protocol(), plan.bracket, pricer)
            rows, seconds = rows + arm_rows, seconds + s
            if resolved:
                rates[arm.name] = lr
                if lr is None:
                    notes.append(f"{arm.name}: every rate of its bracket diverged; its cells will not run")
    seen = {r["key"] for r in rows}
    for arm in plan.arms:
        resolved = plan.lr is not None or arm.name in rates
        lr = plan.lr if plan.lr is not None else rates.get(arm.name, arm.unit.grid(arm.trained)[0])
        if lr is None:
            continue
        cfgs = []
        for width in plan.widths:
            for seed in plan.seeds:
                cfg = ws.config(arm, width, seed, lr, **plan.protocol())
                if cfg.key() in seen if resolved else \
                        width == BRACKET_WIDTH and plan.lr is None and seed in bracket_seeds(plan.bracket):
                    continue  # the bracket run at the chosen rate is this cell: it counts once
                cfgs.append(cfg)
        stored = [resolved and ws._memo_record(c) is not None for c in cfgs]
        arm_rows, s = _run_rows("cell", arm, cfgs, resolved, stored, pricer)
        rows, seconds = rows + arm_rows, seconds + s
    pending = [a.name for a in plan.arms if plan.lr is None and a.name not in rates]
    if pending and any(r["in_memo"] for r in rows):
        notes.append(f"{', '.join(pending)}: bracket not all in the memo, so the rate is not chosen yet and "
                     "every cell counts as to compute")
    return rows, seconds, notes


def convex_solve_s(width: int, rows: int, evaluations: float) -> float:
    """Seconds of one convex solve (``experiments.convex.solve``) on ``rows`` images at ``width``: the
    preconditioner (covariance of ``min(rows, max(16384, 2 m))`` rows, Cholesky and its inverse), then
    ``evaluations`` evaluations of two products over the ``rows x width`` feature matrix."""
    cov_rows = min(rows, max(16384, 2 * width))
    return (CONVEX_SETUP_S + CONVEX_COV_S * cov_rows * width ** 2 + CONVEX_FACTOR_S * width ** 3
            + evaluations * rows * (CONVEX_EVAL_IMAGE_S + CONVEX_EVAL_S * width))


def _convex(ws, plan, lambdas: tuple | None, pricer: Pricer) -> tuple[list, float, list]:
    """``run_convex_ladder``'s jobs: per frozen arm and width the choice of lambda (seed 0's features, ``CHOICE_SOLVES``
    solves) and its refinement (``REFINE_SOLVES``), then every seed (its features, one solve on every image), at
    ``convex_evaluations`` evaluations a solve."""
    from lazylab.experiments.convex import LAMBDAS, convex_config, lambda_config, refine_config

    rows, seconds, pending = [], 0.0, []
    for arm in (a for a in plan.arms if not a.trained):
        data_seeded = arm.unit.name == "yat" and arm.init == "data"  # its units spike at their seed images
        for width in plan.widths:
            lcfg = lambda_config(ws, arm, width, plan.train_size, plan.fan_in, lambdas or LAMBDAS)
            choice = ws.memo.get_record(lcfg.key())
            lam = choice.get("lambda") if isinstance(choice, dict) else None
            row = _row("convex-lambda", arm.name, width, lcfg.seed, None, lcfg.key(), lam is not None)
            if lam is None:
                pending.append(f"{arm.name} m={width}")
                evaluations = convex_evaluations(width, arm.unit.name, data_seeded)
                s = pricer.bank_s((arm.name, width, lcfg.seed, plan.train_size, plan.fan_in), width, plan.train_size)
                s += min(CHOICE_SOLVES, len(lcfg.lambdas)) * convex_solve_s(width, plan.train_size - lcfg.holdout,
                                                                            evaluations)
                row["seconds"] = round(s, 3)
                seconds += s
            rows.append(row)
            refined = None
            if lam is not None:
                rcfg = refine_config(lcfg, choice)
                refinement = ws.memo.get_record(rcfg.key())
                refined = refinement.get("lambda") if isinstance(refinement, dict) else None
            row = _row("convex-refine", arm.name, width, lcfg.seed, None, rcfg.key() if lam is not None else None,
                       refined is not None)
            if refined is None:
                if lam is not None:  # chosen, not yet refined: its cells' penalty is not known
                    pending.append(f"{arm.name} m={width}")
                s = REFINE_SOLVES * convex_solve_s(width, plan.train_size - lcfg.holdout,
                                                   convex_evaluations(width, arm.unit.name, data_seeded))
                row["seconds"] = round(s, 3)
                seconds += s
            rows.append(row)
            lam = refined
            for seed in plan.seeds:
                cfg = convex_config(ws, arm, width, seed, lam or 0.0, plan.train_size, plan.fan_in)
                stored = lam is not None and cfg.key() in ws.memo
                row = _row("convex", arm.name, width, seed, None, cfg.key() if lam is not None else None, stored)
                if not stored:
                    s = pricer.bank_s((arm.name, width, seed, plan.train_size, plan.fan_in), width, plan.train_size)
                    s += convex_solve_s(width, plan.train_size, convex_evaluations(width, arm.unit.name, data_seeded))
                    row["seconds"] = round(s, 3)
                    seconds += s
                rows.append(row)
    notes = [f"convex lambda not chosen yet at {len(pending)} arm-width{'s' * (len(pending) != 1)} (first "
             f"{pending[0]}), so their readouts count as to compute"] if pending else []
    return rows, seconds, notes


def convex_cell_rows(ws, cells: list, pricer: Pricer) -> tuple[list, float, list]:
    """Rows of convex readouts ``[(arm, ConvexConfig), ...]`` (their bank's features and one solve on every image
    each, at ``convex_evaluations``), those in the memo at no cost."""
    rows, seconds = [], 0.0
    for arm, cfg in cells:
        row = _row("convex", arm.name, cfg.width, cfg.seed, None, cfg.key(), cfg.key() in ws.memo)
        if not row["in_memo"]:
            data_seeded = arm.unit.name == "yat" and arm.init == "data"
            s = pricer.bank_s((arm.name, cfg.width, cfg.seed, cfg.train_size, cfg.fan_in), cfg.width, cfg.train_size)
            s += convex_solve_s(cfg.width, cfg.train_size, convex_evaluations(cfg.width, arm.unit.name, data_seeded))
            row["seconds"] = round(s, 3)
            seconds += s
        rows.append(row)
    return rows, seconds, []


def _optimum(ws, plan, pricer: Pricer) -> tuple[list, float, list]:
    """``run_optimum``'s runs for the plan's trained arms at widths up to ``optimum.MAX_WIDTH``: every rate of the
    grid (plus ``OPTIMUM_EXTENSION_RATES``) x seed as selection runs on the fitted images, priced at the whole
    budget with a second evaluation an epoch, then a refit per seed at ``REFIT_SHARE`` of it on every image.
    Once a width's choice is settled in the memo its refits are looked up under their own keys."""
    from lazylab.experiments.optimum import MAX_WIDTH, choose, optimum_budget, refit_config, select_config

    rows, seconds, pending = [], 0.0, []
    budget = optimum_budget(plan.epochs)
    for arm in (a for a in plan.arms if a.trained):
        grid = list(arm.unit.grid(True))
        for width in (w for w in plan.widths if w <= MAX_WIDTH):
            cfgs = [select_config(ws, arm, width, s, lr, plan.train_size, plan.fan_in, budget)
                    for lr in grid for s in plan.seeds]
            records = [ws.memo.get_record(c.key()) for c in cfgs]
            stored = [isinstance(r, dict) and r.get("config") == json.loads(c.canonical()) for c, r in zip(cfgs, records)]
            rows_here = [_row("optimum", arm.name, width, c.seed, c.lr, c.key(), s) for c, s in zip(cfgs, stored)]
            todo = [c for c, s in zip(cfgs, stored) if not s]
            share = 1 + OPTIMUM_EXTENSION_RATES / len(grid)
            each = _selection_s(pricer, arm, width, len(plan.seeds), budget, cfgs[0].train_size - cfgs[0].holdout)
            for r in rows_here:
                if not r["in_memo"]:
                    r["seconds"] = round(each * share, 3)
                    seconds += r["seconds"]
            choice = choose(records) if not todo else None
            if choice is not None and choice["edge"]:
                choice = None  # an extension is due: the rate is not settled yet
            for c in cfgs[:len(plan.seeds)]:
                epochs = choice["epochs"].get(c.seed) if choice else None
                fit = refit_config(dataclasses.replace(c, lr=choice["lr"]), epochs) if epochs else None
                stored_fit = fit is not None and fit.key() in ws.memo
                row = _row("optimum-refit", arm.name, width, c.seed, choice and choice["lr"],
                           fit.key() if fit else None, stored_fit)
                if not stored_fit:
                    row["seconds"] = round(_selection_s(pricer, arm, width, len(plan.seeds),
                                                        epochs or max(1, int(REFIT_SHARE * budget)),
                                                        plan.train_size, evaluations=1), 3)
                    seconds += row["seconds"]
                rows_here.append(row)
            if choice is None:
                pending.append(f"{arm.name} m={width}")
            rows += rows_here
    notes = [f"trained optimum: rate not chosen yet at {len(pending)} arm-width{'s' * (len(pending) != 1)} (first "
             f"{pending[0]}): selection runs priced at their whole {budget}-epoch budget"] if pending else []
    return rows, seconds, notes


def _selection_s(pricer: Pricer, arm, width: int, members: int, epochs: int, rows: int, evaluations: int = 2) -> float:
    """Seconds per run of a group of ``members`` annealed runs of ``arm`` at ``width`` on ``rows`` images for
    ``epochs`` epochs with ``evaluations`` 10,000-image evaluations an epoch, its compilation once per shape."""
    cal = pricer.cal
    s = pricer.compile_s(True, ("optimum", arm.name, width, members, rows, evaluations))
    s += trained_group_s(cal, width, members, epochs, rows)
    s += (evaluations - 1) * epochs * members * (N_TEST / BATCH) * cal.step_b * width / 3
    return s / members


def _trajectories(ws, plan, pricer: Pricer, rates: dict | None = None) -> tuple[list, float, list]:
    """``run_trajectory``'s runs: each arm's bracket (12 epochs) unless ``plan.lr`` or ``rates``, then its trajectory."""
    from lazylab.experiments.trajectory import TrajectoryConfig, _memo_trajectory

    rows, seconds, notes = [], 0.0, []
    for arm in plan.arms:
        lr, resolved = (rates or {}).get(arm.name, plan.lr), True
        if lr is None:
            arm_rows, s, lr, resolved = _bracket(ws, arm, plan.bracket_protocol(), "argmax", pricer)
            rows, seconds = rows + arm_rows, seconds + s
            if resolved and lr is None:
                notes.append(f"{arm.name}: every rate of its bracket diverged; no trajectory")
                continue
        tcfg = TrajectoryConfig(ws.config(arm, plan.width, plan.seed, lr or arm.unit.grid(True)[0], **plan.protocol()),
                                plan.snapshots)
        arm_rows, s = _run_rows("trajectory", arm, [tcfg.run], resolved,
                                [resolved and _memo_trajectory(ws, tcfg) is not None], pricer)
        rows, seconds = rows + arm_rows, seconds + s
    return rows, seconds, notes


def _gram(ws, arm, cfg, pricer: Pricer) -> tuple[list, float, list]:
    """One Gram result: features of the images shown under the grown and the reference banks, one compilation."""
    row = _row("gram", arm.name, cfg.max_units, cfg.seed, None, cfg.key(),
               cfg.key() in ws.memo and cfg.key() + "-summary" in ws.memo)
    if not row["in_memo"]:
        units = cfg.ref_units + cfg.max_units * cfg.repeats
        row["seconds"] = round(pricer.compile_s(False, ("gram", arm.name)) +
                               features_s(pricer.cal, units, len(cfg.classes) * cfg.per_class), 3)
    return [row], row["seconds"], ["gram: crude (features and a compilation priced; bank drawing and Gram algebra not)"]


def _readouts(ws, arm, configs: list, pricer: Pricer) -> tuple[list, float, list]:
    """Per width: the bank's features unless stored, then ``steps`` full-batch steps priced as ``n/256`` head steps."""
    cal, rows = pricer.cal, []
    for cfg in configs:
        row = _row("readout", arm.name, cfg.width, cfg.seed, cfg.lr, cfg.key(), cfg.key() in ws.memo)
        if not row["in_memo"]:
            s = pricer.compile_s(False, ("readout", cfg.width, cfg.train_size))
            s += cfg.steps * (cfg.train_size / BATCH) * (cal.head_a + cal.head_b * cfg.width)
            if cfg.features().key() not in ws.memo:
                s += pricer.bank_s(("readout", arm.name, cfg.width, cfg.seed, cfg.train_size), cfg.width, cfg.train_size)
            row["seconds"] = round(s, 3)
        rows.append(row)
    return rows, sum(r["seconds"] for r in rows), ["readout: crude (a full-batch step priced as n/256 head steps)"]


def _ntk(cfg, pairs: list, key: str | None = None, in_memo: bool = False) -> tuple[list, float, list]:
    """1-D NTK lab runs ``(width, seed)`` at ``NTK_RUN_S`` per 2,000 steps (not calibrated)."""
    per_run = 0.0 if in_memo else NTK_RUN_S * cfg.steps / 2000
    rows = [{**_row("ntk", "1-D tanh net", w, s, cfg.lr, key, in_memo), "seconds": round(per_run, 3)} for w, s in pairs]
    return rows, per_run * len(rows), ["ntk: crude (a fixed time per 1-D run, measured on the 2-core machine)"]


def _estimate(command: str, ws, parts: list, extra_s: float, pricer: Pricer, backend: str = "local",
              base_bytes: int = PEAK_BASE_BYTES) -> Estimate:
    """An Estimate from ``(rows, seconds, notes)`` parts, ``extra_s`` of drawing and the pricer's memory and disk."""
    cal, cores = pricer.cal, os.cpu_count() or 1
    rows = [r for part in parts for r in part[0]]
    notes = list(dict.fromkeys(n for part in parts for n in part[2]))
    todo = sum(not r["in_memo"] for r in rows)
    compute_s = sum(part[1] for part in parts)
    if todo:
        notes.append("compiled programs assumed in jax's cache (it holds programs)" if pricer.warm
                     else "every program compiled (jax's cache is off or empty)")
    if cal.code == "reference":
        notes.append("this machine is not measured yet: the 2-core development machine's figures stand in "
                     "(--dry-run measures it once, 25-55 s)")
    elif cal.load > cores:
        notes.append(f"this machine was busy when measured (load {cal.load:g} on {cores} cores): the estimate may be "
                     "high; LAZYLAB_RECALIBRATE=1 measures again")
    fresh_data = ws is not None and not (ws.memo.directory / "data" / ws.fingerprint).is_dir()
    data_copy = DATA_COPY_BYTES if todo and fresh_data else 0
    one = base_bytes + pricer.working_bytes
    return Estimate(command=command, backend=backend, cores=cores, runs_total=len(rows), in_memo=len(rows) - todo,
                    to_compute=todo, seconds=round(wall_s(compute_s, backend, cores) + extra_s, 1),
                    peak_bytes=one * cores if backend == "ray" and todo else one,
                    disk_bytes=todo * RECORD_BYTES + min(pricer.feature_disk, pricer.cache_limit) + data_copy,
                    runs=rows, notes=notes, calibration={"measured_here": cal.code != "reference", "path": str(calibration_path()),
                                                         "measured_at": cal.measured_at, "load": cal.load,
                                                         "seconds": cal.seconds})


def ladder_estimate(ws, plan, backend: str = "local", cache_limit: int | None = None,
                    cal: Calibration | None = None, warm: bool | None = None, readout: str = "adamw",
                    lambdas: tuple | None = None) -> Estimate:
    """The estimate of ``run_ladder(ws, plan)`` (``lazylab ladder``) on ``backend`` (``"local"`` or ``"ray"``).

    The runs are the experiment's: without ``plan.lr`` each arm's bracket (its grid at m = 256 over
    the rule's seeds, ``lazylab.bracket``), then every width x seed at the chosen rate; a bracket run
    that is also a cell counts once. Once an arm's whole bracket is in the memo its rate is chosen as
    the ladder chooses it (``Bracket.chosen``) and its cells are looked up; until then they count as
    to compute, and grid extensions are not priced.
    Args: cache_limit: ``--cache-limit`` in bytes; cal: default ``calibration()`` (measured once
      per machine, 25-55 s); warm: as ``Pricer``; readout: ``"adamw"`` (the ladder),
      ``"convex"`` (the frozen arms' convex readouts instead) or ``"both"``; lambdas: ``--lambdas``.
    Raises: LazylabError for a plan the ladder refuses (``LadderPlan.check``), or from ``calibration()``.
    """
    plan.check()
    pricer = Pricer(cal or calibration(), cache_limit, warm)
    parts = [] if readout == "convex" else [_ladder(ws, plan, pricer)]
    if readout != "adamw":
        parts.append(_convex(ws, plan, lambdas, pricer))
    if readout == "both":
        parts.append(_optimum(ws, plan, pricer))
    return _estimate("ladder", ws, parts, 0.0, pricer, backend)


def trajectory_estimate(ws, plan, backend: str = "local", cal: Calibration | None = None) -> Estimate:
    """The estimate of ``lazylab trajectory`` (``run_trajectory(ws, plan)``): brackets, trajectories, two GIFs.

    Raises: LazylabError for a plan the command refuses (``lazylab.experiments.trajectory.validate``).
    """
    from lazylab.experiments.trajectory import validate

    validate(plan)
    pricer = Pricer(cal or calibration())
    return _estimate("trajectory", ws, [_trajectories(ws, plan, pricer)], 2 * (plan.epochs + 1) * GIF_FRAME_S,
                     pricer, backend, STUDY_BASE_BYTES)


def gram_estimate(ws, arm, cfg, cal: Calibration | None = None) -> Estimate:
    """The estimate of ``lazylab gram`` for ``cfg`` (``experiments.gram.gram_config``): crude."""
    pricer = Pricer(cal or calibration())
    return _estimate("gram", ws, [_gram(ws, arm, cfg, pricer)], cfg.frames * GIF_FRAME_S, pricer,
                     base_bytes=STUDY_BASE_BYTES)


def readout_estimate(ws, arm, configs: list, cal: Calibration | None = None) -> Estimate:
    """The estimate of ``lazylab readout`` for ``configs`` (``experiments.readout.readout_configs``): crude."""
    pricer = Pricer(cal or calibration())
    frames = configs[0].steps // configs[0].eval_every + 1 if configs else 0
    return _estimate("readout", ws, [_readouts(ws, arm, configs, pricer)], frames * GIF_FRAME_S, pricer,
                     base_bytes=STUDY_BASE_BYTES)


def ntk_lab_estimate(ws, cfg, widths: tuple = (), seeds: tuple = (), gif: bool = True,
                     cal: Calibration | None = None) -> Estimate:
    """The estimate of ``lazylab ntk lab`` (one run and its GIF, or the sweep over ``widths`` x ``seeds``): crude.

    ``lazylab ntk`` memoizes nothing, so nothing counts as in the memo.
    """
    pricer = Pricer(cal or calibration())
    pairs = [(w, s) for w in widths for s in seeds] or [(cfg.width, cfg.seed)]
    drawing = cfg.frames * GIF_FRAME_S if gif and not widths else 0.0
    return _estimate("ntk lab", ws, [_ntk(cfg, pairs)], drawing, pricer, base_bytes=NTK_PEAK_BYTES)


def redundancy_estimate(ws, arms, width: int, n: int, seeds, fan_ins, samples, train_size: int,
                        cal: Calibration | None = None) -> Estimate:
    """The estimate of ``lazylab redundancy`` (``experiments.laws.redundancy_grid``): one measurement per
    bank x fan-in x sample x seed, looked up under the experiment's own keys (a random bank's samples and
    a data-seeded bank's fan-ins share one); each priced as its bank's features on ``n`` images: crude."""
    from lazylab.experiments.laws import bank_name, redundancy_config, redundancy_key

    pricer, rows, seen = Pricer(cal or calibration()), [], set()
    banks = {bank_name(a): a for a in reversed(arms)}
    for arm in banks.values():
        for fan_in in fan_ins:
            for sample in samples:
                for seed in seeds:
                    cfg = redundancy_config(ws, arm, width, n, seed, "unit" if arm.init == "data" else fan_in,
                                            train_size, sample if arm.init == "data" else "first-n")
                    key = redundancy_key(cfg)
                    if key in seen:
                        continue
                    seen.add(key)
                    row = _row("redundancy", arm.name, width, seed, None, key, key in ws.memo)
                    if not row["in_memo"]:
                        row["seconds"] = round(features_s(pricer.cal, width, n), 3)
                    rows.append(row)
    part = (rows, sum(r["seconds"] for r in rows), ["redundancy: crude (the bank's features priced, not the correlations)"])
    return _estimate("redundancy", ws, [part], 0.0, pricer, base_bytes=STUDY_BASE_BYTES)


def ntk_arm_estimate(ws, arm, width: int, probe: int, seed: int, lr: float | None, epochs: int, train_size: int,
                     method: str, cal: Calibration | None = None, limit: int | None = None) -> Estimate:
    """The estimate of ``lazylab ntk arm``: its training run priced as a ladder run, the linearization's run as
    another (measured: about the same), and its two tangent kernels (``lazylab.ntk.price.ntk_kernel_s``; ``limit``
    bytes, default ``lazylab.ntk.kernels.JACOBIAN_LIMIT_BYTES``)."""
    from lazylab.experiments.ntk import arm_key
    from lazylab.ntk.kernels import JACOBIAN_LIMIT_BYTES
    from lazylab.ntk.price import ntk_kernel_s

    pricer = Pricer(cal or calibration())
    key, _, cfg = arm_key(ws, arm, width, probe=probe, seed=seed, lr=lr, epochs=epochs, train_size=train_size,
                          method=method)
    row = _row("ntk arm", arm.name, width, seed, cfg.lr, key, key in ws.memo)
    if not row["in_memo"]:
        kernels = 2 * ntk_kernel_s(method, probe, width, ws.data.x_train.shape[1], arm.trained,
                                   JACOBIAN_LIMIT_BYTES if limit is None else limit)
        row["seconds"] = round(pricer.compile_s(True, ("ntk arm", arm.name, width)) + kernels +
                               2 * trained_group_s(pricer.cal, width, 1, epochs, train_size), 3)
    part = ([row], row["seconds"], ["ntk arm: the network's and the linearization's runs priced as ladder runs, "
                                    "the two tangent kernels from their contractions"])
    return _estimate("ntk arm", ws, [part], 0.0, pricer, base_bytes=STUDY_BASE_BYTES)


def render_estimate(ws, settings, stages: tuple = ("gifs", "figures", "report"), cache_limit: int | None = None,
                    cal: Calibration | None = None) -> Estimate:
    """The estimate of ``lazylab render`` running ``stages`` with ``settings`` (``experiments.render.RenderSettings``).

    What the stages need and the memo lacks: the GIFs the Gram, readout, trajectories and
    the NTK lab; the figures the ladder the report shows (``ladder_spec``: the quick preset
    unless the paper one is complete), the trajectories, the NTK lab and its sweep; the
    report all of these (the scalar model and the audit take seconds); plus the stages'
    drawing (``RENDER_DRAW_S``). Crude but for the ladder.
    """
    from lazylab.arms import get_arm
    from lazylab.experiments import render as R
    from lazylab.experiments.trajectory import TrajectoryPlan

    pricer = Pricer(cal or calibration(), cache_limit)
    parts, stages = [], set(stages)
    ladders = stages == {"ladders"}  # render report --sections ladders: the ladders alone
    report, figures = "report" in stages, "figures" in stages or "report" in stages or ladders
    gifs = "gifs" in stages or report
    spec = R.ladder_spec(ws, settings.ladder) if figures else {"plan": None}
    if spec["plan"] is not None:
        rows, seconds, notes = _ladder(ws, spec["plan"], pricer)
        parts.append(([{**r, "phase": f"ladder {r['phase']}"} for r in rows], seconds,
                      [f"your ladder: {spec['name']} ({spec['note']})"] + notes))
    if ladders:
        return _estimate("render report --sections ladders", ws, parts, RENDER_DRAW_S["ladders"], pricer)
    t = settings.trajectory
    plan = TrajectoryPlan(arms=tuple(get_arm(n) for n in t.arms), width=t.width, epochs=t.epochs,
                          snapshots=t.snapshots, seed=t.seed, train_size=t.train_size, fan_in=t.fan_in)
    parts.append(_trajectories(ws, plan, pricer, {r["arm"]: r["lr"] for r in R.trajectory_rates(ws, t)}))
    if gifs:
        parts.append(_gram(ws, *R.gram_spec(ws, settings.gram), pricer))
        parts.append(_readouts(ws, *R.readout_spec(ws, settings.readout), pricer))
    n = settings.ntk
    lab_key, sweep_key = R.lab_key(n.lab()), R.sweep_key(n.sweep(), n.sweep_widths, n.sweep_seeds)
    parts.append(_ntk(n.lab(), [(n.lab().width, n.lab().seed)], lab_key, lab_key + "-summary" in ws.memo))
    if figures:
        sweep = [(w, s) for w in n.sweep_widths for s in n.sweep_seeds]
        parts.append(_ntk(n.sweep(), sweep, sweep_key, sweep_key in ws.memo))
    drawing = RENDER_DRAW_S["all"] if len(stages) == 3 else sum(RENDER_DRAW_S[s] for s in stages if s in RENDER_DRAW_S)
    return _estimate("render " + ("all" if len(stages) == 3 else " ".join(sorted(stages))), ws, parts, drawing, pricer)
