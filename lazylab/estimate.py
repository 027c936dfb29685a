"""What a computing command will cost on this machine, estimated before it runs (issue 25).

Nothing is trained here. A command's plan becomes the list of runs it would do,
each looked up in the memo under the key the experiment itself computes, and
the runs still to compute are priced in CPU seconds by a cost model whose
constants are measured on this machine (``lazylab.calibration``), then turned
into wall time over the cores the command gets (``effective_cores``: what it
keeps busy on quiet cores, or less when other work takes them):

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

Ray (``--backend ray``, one worker per core) multiplies the cores by a gain
measured on 2 cores. Peak memory is a base plus the widest run's working set;
disk is the records, the new banks' feature entries (at most ``--cache-limit``
in all: an upper bound, as the store keeps only those that load faster than they
compute, ``lazylab.cache.worth_storing``) and the data copy. The convex readout's jobs are
priced by ``lazylab.estimate_convex``.
The ladder's figures (the quick preset, a convex ladder) and ``verify``'s are checked against
their wall time by ``bench/estimate.py`` (docs/performance.md, "Estimates against wall time");
the other commands' are crude.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field

from lazylab.calibration import Calibration, calibration, calibration_path
from lazylab.cost_model import BATCH, D, N_TEST, feature_bytes, features_s, head_group_s, trained_group_s
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

def compile_cache_warm() -> bool:
    """Whether jax's persistent compilation cache is on and holds programs (``lazylab.xla_cache``).

    Which programs it holds cannot be told without compiling them, so a cache holding
    any is taken to hold the command's programs of every unit it has built banks of
    (``xla_cache.cached_units``; true after a first command of the same shapes).
    """
    from lazylab import xla_cache

    folder = xla_cache.cache_dir()
    return folder is not None and xla_cache.stats(folder)[0] > 0


def compiled_units() -> set[str]:
    """The units (plugin identities, ``Arm.plugin``) whose programs jax's cache holds (``xla_cache.cached_units``)."""
    from lazylab import xla_cache

    folder = xla_cache.cache_dir()
    return set() if folder is None else xla_cache.cached_units(folder)


class Pricer:
    """Prices groups of runs as one process computes them, remembering what it compiled and which banks it computed.

    Args: cal: the Calibration; cache_limit: the feature store's cap in bytes (``--cache-limit``,
      default 8 GiB); warm: whether programs load from jax's cache (default ``compile_cache_warm()``): then a
      unit's programs are priced warm once the cache holds that unit's (``compiled_units``), and cold before
      (a unit never run here, a plugin just installed or edited); ``warm=True`` given prices every unit warm.
    Attributes: ``feature_disk`` (bytes of the new banks' feature entries, at most the cap each),
    ``working_bytes`` (the largest group's working set), ``extension_runs`` (the most runs grid extensions
    can add to the brackets priced, ``_bracket``).
    """

    def __init__(self, cal: Calibration, cache_limit: int | None = None, warm: bool | None = None):
        from lazylab.cache import DEFAULT_CACHE_LIMIT

        self.cal = cal
        self.cache_limit = DEFAULT_CACHE_LIMIT if cache_limit is None else cache_limit
        self.warm = compile_cache_warm() if warm is None else warm
        self.units = compiled_units() if warm is None and self.warm else None  # None: every unit as ``warm``
        self.shapes: set = set()
        self.banks: set = set()
        self.cold_banks: set = set()
        self.feature_disk = 0
        self.working_bytes = 0
        self.extension_runs = 0  # runs the grid extensions of brackets not yet run may add (a range's top)

    def warm_for(self, arm) -> bool:
        """Whether ``arm``'s programs load from jax's cache (see the class): ``warm``, and its unit compiled before."""
        return self.warm and (self.units is None or arm is None or arm.plugin in self.units)

    def compile_s(self, trained: bool, shape, arm=None) -> float:
        """The compilation of ``shape`` (of ``arm``'s unit, if given) if this process has not compiled it yet, else 0."""
        if shape in self.shapes:
            return 0.0
        self.shapes.add(shape)
        cal, warm = self.cal, self.warm_for(arm)
        if trained:
            return cal.warm_compile_s if warm else cal.compile_s
        return cal.warm_frozen_compile_s if warm else cal.frozen_compile_s

    def cold_bank_s(self, arm, width: int) -> float:
        """A bank width's other programs (``COLD_BANK_COMPILES``) when new to a cold process, else 0."""
        bank = (arm.name, width)
        if self.warm_for(arm) or bank in self.cold_banks:
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
        seconds = self.compile_s(arm.trained, (arm.name, m, S, n, first.batch), arm) + self.cold_bank_s(arm, m)
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
      runs_high: the most runs the command can do: ``runs_total`` plus the runs of grid extensions the
        brackets not yet run may call for (``Pricer.extension_runs``); the time counts their expected share.
      contention: ``{"share", "cores"}``: the share of the cores a probe got just before (``cpu_share``; 1 when
        nothing is to compute) and the cores the work was priced at (``effective_cores``).
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
    runs_high: int = 0
    contention: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        """The estimate as plain JSON types."""
        return asdict(self)


def wall_s(compute_s: float, backend: str, cores: int, share: float = 1.0) -> float:
    """Wall time (s) of a command whose runs take ``compute_s`` CPU seconds, when a probe gets ``share`` of the cores.

    ``COMMAND_S + compute_s / effective_cores(share, backend, cores)``, plus ``RAY_START_S`` with Ray (one worker per
    core: its gain over one process, 1 + 0.25 (cores - 1), is measured on 2 cores only).
    """
    if compute_s <= 0:
        return COMMAND_S
    start = RAY_START_S if backend == "ray" else 0.0
    return COMMAND_S + start + compute_s / effective_cores(share, backend, cores)


def run_row(phase: str, arm: str, width: int, seed: int, lr, key, in_memo: bool) -> dict:
    """One row of ``Estimate.runs`` (``seconds`` 0 until priced)."""
    return {"phase": phase, "arm": arm, "width": width, "seed": seed, "lr": lr, "key": key, "in_memo": in_memo,
            "seconds": 0.0}


def _run_rows(phase: str, arm, cfgs: list, resolved: bool, stored: list[bool], pricer: Pricer) -> tuple[list, float]:
    """Rows of runs of ``arm`` and the seconds of those not in the memo, grouped as the experiment groups them."""
    from lazylab.experiments import batch_groups

    rows = [run_row(phase, arm.name, c.width, c.seed, c.lr if resolved else None, c.key() if resolved else None, s)
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
    carry ``EXTENSION_RATES`` more rates in their seconds (which rate, if any, is not known before), and
    the extensions still possible (``MAX_EXTEND`` rounds in all, 1se rule only) add their runs to
    ``pricer.extension_runs``."""
    from lazylab.bracket import BRACKET_WIDTH, MAX_EXTEND, Bracket, RateScore, bracket_seeds, next_rate

    seeds = bracket_seeds(rule)
    bracket = Bracket(rule=rule, grid=[float(lr) for lr in arm.unit.grid(arm.trained)])
    rates, rows, seconds, round_ = list(bracket.grid), [], 0.0, 0
    while rates:
        cfgs = [ws.config(arm, BRACKET_WIDTH, seed, lr, **protocol) for lr in rates for seed in seeds]
        records = [ws._memo_record(c) for c in cfgs]  # the experiment's own look-up
        more, s = _run_rows("bracket", arm, cfgs, True, [r is not None for r in records], pricer)
        if any(r is None for r in records):
            share = 1 + EXTENSION_RATES / len(rates)  # each missing run carries its share of the extensions
            more = [{**r, "seconds": round(r["seconds"] * share, 3)} for r in more]
            if rule == "1se":
                pricer.extension_runs += (MAX_EXTEND - round_) * len(seeds)
            return rows + more, seconds + s * share, None, False
        round_ += 1
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
    row = run_row("gram", arm.name, cfg.max_units, cfg.seed, None, cfg.key(),
               cfg.key() in ws.memo and cfg.key() + "-summary" in ws.memo)
    if not row["in_memo"]:
        units = cfg.ref_units + cfg.max_units * cfg.repeats
        row["seconds"] = round(pricer.compile_s(False, ("gram", arm.name), arm) +
                               features_s(pricer.cal, units, len(cfg.classes) * cfg.per_class), 3)
    return [row], row["seconds"], ["gram: crude (features and a compilation priced; bank drawing and Gram algebra not)"]


def _readouts(ws, arm, configs: list, pricer: Pricer) -> tuple[list, float, list]:
    """Per width: the bank's features unless stored, then ``steps`` full-batch steps priced as ``n/256`` head steps."""
    cal, rows = pricer.cal, []
    for cfg in configs:
        row = run_row("readout", arm.name, cfg.width, cfg.seed, cfg.lr, cfg.key(), cfg.key() in ws.memo)
        if not row["in_memo"]:
            s = pricer.compile_s(False, ("readout", cfg.width, cfg.train_size), arm)
            s += cfg.steps * (cfg.train_size / BATCH) * (cal.head_a + cal.head_b * cfg.width)
            if cfg.features().key() not in ws.memo:
                s += pricer.bank_s(("readout", arm.name, cfg.width, cfg.seed, cfg.train_size), cfg.width, cfg.train_size)
            row["seconds"] = round(s, 3)
        rows.append(row)
    return rows, sum(r["seconds"] for r in rows), ["readout: crude (a full-batch step priced as n/256 head steps)"]


def _ntk(cfg, pairs: list, key: str | None = None, in_memo: bool = False) -> tuple[list, float, list]:
    """1-D NTK lab runs ``(width, seed)`` at ``NTK_RUN_S`` per 2,000 steps (not calibrated)."""
    per_run = 0.0 if in_memo else NTK_RUN_S * cfg.steps / 2000
    rows = [{**run_row("ntk", "1-D tanh net", w, s, cfg.lr, key, in_memo), "seconds": round(per_run, 3)} for w, s in pairs]
    return rows, per_run * len(rows), ["ntk: crude (a fixed time per 1-D run, measured on the 2-core machine)"]


# The cores a computing command keeps busy on average on quiet cores (its CPU time over its wall time):
# jax's steps and OpenBLAS's products run on every core, the Python between them on one (bench/estimate.py).
BUSY_CORES = 1.4


def effective_cores(share: float, backend: str, cores: int) -> float:
    """The cores a command's work gets: what it keeps busy on quiet cores (``BUSY_CORES``; with Ray, one worker per
    core, ``BUSY_CORES x (1 + 0.25 (cores - 1))``, at most ``cores``), or, when other work leaves it less, the
    share of the cores a probe got just now (``calibration.cpu_share``) times the cores.

    Why: the calibration prices work in CPU seconds, which other work on the machine changes little; the wall
    time is those seconds over the cores the work gets, and a command at the same priority as the other work
    gets about what the probe got (Linux's fair scheduler)."""
    busy = BUSY_CORES if backend != "ray" else min(float(cores), BUSY_CORES * (1 + RAY_GAIN_PER_EXTRA_CORE * (cores - 1)))
    return min(busy, share * cores)


def _estimate(command: str, ws, parts: list, extra_s: float, pricer: Pricer, backend: str = "local",
              base_bytes: int = PEAK_BASE_BYTES) -> Estimate:
    """An Estimate from ``(rows, seconds, notes)`` parts, ``extra_s`` of drawing and the pricer's memory and disk;
    its runs' CPU seconds become wall time over the cores the command gets now (``effective_cores``)."""
    from lazylab.bracket import MAX_EXTEND
    from lazylab.calibration import cpu_share

    cal, cores = pricer.cal, os.cpu_count() or 1
    rows = [r for part in parts for r in part[0]]
    notes = list(dict.fromkeys(n for part in parts for n in part[2]))
    todo = sum(not r["in_memo"] for r in rows)
    compute_s = sum(part[1] for part in parts)
    share = cpu_share() if todo else 1.0
    busy = effective_cores(1.0, backend, cores)
    gets = effective_cores(share, backend, cores)
    if todo:
        notes.append("compiled programs assumed in jax's cache (it holds programs)" if pricer.warm
                     else "every program compiled (jax's cache is off or empty)")
    if cal.code == "reference":
        notes.append("this machine is not measured yet: the 2-core development machine's figures stand in "
                     "(--dry-run measures it once, 25-55 s)")
    if gets < busy:
        notes.append(f"other work leaves this command {gets:.2g} of this machine's {cores} cores now (it keeps "
                     f"{busy:.2g} busy on quiet cores): the estimate assumes that work goes on")
    if pricer.extension_runs:
        notes.append(f"up to {pricer.extension_runs} more runs if the brackets extend their grids "
                     f"(at most {MAX_EXTEND} half-decade steps per arm); the time counts their expected share")
    fresh_data = ws is not None and not (ws.memo.directory / "data" / ws.fingerprint).is_dir()
    data_copy = DATA_COPY_BYTES if todo and fresh_data else 0
    one = base_bytes + pricer.working_bytes
    rows = [{**r, "seconds": round(r["seconds"] / gets, 3)} for r in rows]  # a run's share of the wall time
    return Estimate(command=command, backend=backend, cores=cores, runs_total=len(rows), in_memo=len(rows) - todo,
                    to_compute=todo, seconds=round(wall_s(compute_s, backend, cores, share) + extra_s * busy / gets, 1),
                    peak_bytes=one * cores if backend == "ray" and todo else one,
                    disk_bytes=todo * RECORD_BYTES + min(pricer.feature_disk, pricer.cache_limit) + data_copy,
                    runs=rows, notes=notes, calibration={"measured_here": cal.code != "reference", "path": str(calibration_path()),
                                                         "measured_at": cal.measured_at, "load": cal.load,
                                                         "seconds": cal.seconds},
                    runs_high=len(rows) + pricer.extension_runs, contention={"share": round(share, 3),
                                                                             "cores": round(gets, 3)})


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
    from lazylab.estimate_convex import convex_jobs
    from lazylab.estimate_optimum import optimum_jobs

    plan.check()
    pricer = Pricer(cal or calibration(), cache_limit, warm)
    parts = [] if readout == "convex" else [_ladder(ws, plan, pricer)]
    if readout != "adamw":
        parts.append(convex_jobs(ws, plan, lambdas, pricer, run_row))
    if readout == "both":
        parts.append(optimum_jobs(ws, plan, pricer, run_row))
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
                    row = run_row("redundancy", arm.name, width, seed, None, key, key in ws.memo)
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
    row = run_row("ntk arm", arm.name, width, seed, cfg.lr, key, key in ws.memo)
    if not row["in_memo"]:
        kernels = 2 * ntk_kernel_s(method, probe, width, ws.data.x_train.shape[1], arm.trained,
                                   JACOBIAN_LIMIT_BYTES if limit is None else limit)
        row["seconds"] = round(pricer.compile_s(True, ("ntk arm", arm.name, width), arm) + kernels +
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
