"""The trained side at its optimum: each trained arm's rate and epoch count chosen on held-out training images.

The protocol (SPEC section 5) trains a trained arm for 12 epochs at one constant rate, bracketed at
m = 256 only, and reports ``best_acc``, the best of its per-epoch *test* accuracies: a number chosen on
the test set, from a run that has not converged. This module gives the trained side the treatment the
convex readout gives the frozen side (``lazylab.experiments.convex``), so the two meet on equal terms:

1. **Selection runs** (``SelectConfig``): at every width, every rate of the arm's grid and every seed,
   AdamW on the first ``train_size - holdout`` training images with the rate annealed by a per-epoch
   cosine over ``budget`` epochs (``lazylab.train.fit_annealed``), scored after every epoch on the last
   ``holdout`` training images (the same held-out images as the convex readout's lambda choice; for a
   data-seeded bank only those that seed no unit) and stopped early once that accuracy has not improved
   for ``patience`` epochs. Their test accuracy is recorded too (``test_curve``), only so that the
   report can show what a choice on the test set would have given; no choice reads it.
2. **The choice** (``choose``): the rate with the highest mean over seeds of each seed's best held-out
   accuracy (ties: the smaller rate), the grid extended by half-decade steps (``bracket.next_rate``, at
   most ``MAX_EXTEND``) while the best lies at an end of it; each seed's epoch count is the epoch of its
   best held-out accuracy at that rate.
3. **Refits** (``RefitConfig``): each seed trained again on every training image at the chosen rate, for
   its chosen epoch count under the same schedule, and its test accuracy read once, at the end.

This is how the field compares the lazy and the trained regimes (e.g. Geiger et al. 2020, "Disentangling
feature and lazy training in deep neural networks"): every hyperparameter of both sides chosen on a
validation split, the test set read once; the refit on all training images is what the convex readout does
at its chosen lambda.
Not chosen: weight decay (the protocol's 1e-4), batch (256) and the schedule's shape.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field

import numpy as np

from lazylab.arms import Arm
from lazylab.bracket import next_rate
from lazylab.config import CACHE_SCHEMA, canonical_json, code_identity, memo_key
from lazylab.experiments import BATCH_MEMBERS, Reporter, Workspace
from lazylab.experiments.convex import HOLDOUT_FRACTION, mean_of

BUDGET = 50  # epochs of the cosine schedule: the most a selection run trains
PATIENCE = 10  # epochs without a better held-out accuracy before a selection run stops
SCHEDULE = "cosine"
MAX_WIDTH = 256  # the trained widths the answer compares (16-256); wider ones cost more than they tell
MAX_EXTEND = 2  # half-decade steps beyond the arm's grid, per width
OPTIMUM_VERSION = 1  # bump when the selection runs, refits or their records change meaning
PROTOCOL_EPOCHS = 12  # SPEC section 5: the budget scales with a ladder's epochs against these


def optimum_budget(epochs: int) -> int:
    """The cosine budget of a ladder whose protocol trains ``epochs`` epochs: ``BUDGET`` at the SPEC's 12, in
    proportion otherwise (13 for the quick preset's 3), at least 2."""
    return max(2, int(BUDGET * epochs / PROTOCOL_EPOCHS + 0.5))


def patience_for(budget: int) -> int:
    """The early-stopping patience of a ``budget``-epoch schedule: a fifth of it, at least 3 (10 for 50)."""
    return max(3, budget // 5)


@dataclass(frozen=True)
class _AnnealedRun:
    """The fields every annealed run of ``arm`` at ``width`` and ``seed`` shares: peak rate ``lr``, the cosine's
    length ``budget``, the protocol's batch and weight decay, the first ``train_size`` training images. Its memo
    key (``key``): ``"<PREFIX>-"`` + the first 32 hex digits of SHA-256 of the code identity and the canonical
    JSON of every field (``config.memo_key``)."""

    PREFIX = ""

    arm: str
    plugin: str
    width: int
    seed: int
    lr: float
    budget: int = BUDGET
    schedule: str = SCHEDULE
    batch: int = 256
    train_size: int = 60000
    weight_decay: float = 1e-4
    fan_in: str = "unit"
    data: str = ""
    version: int = OPTIMUM_VERSION
    schema: int = CACHE_SCHEMA
    code: str = field(default_factory=code_identity)

    def canonical(self) -> str:
        """Canonical JSON of the fields (sorted keys, no spaces, floats by ``repr``)."""
        return canonical_json(self)

    def key(self) -> str:
        return memo_key(self.PREFIX, self)


@dataclass(frozen=True)
class SelectConfig(_AnnealedRun):
    """One selection run: trained on all but the last ``holdout`` of the first ``train_size`` training images,
    stopped after ``patience`` epochs without a better held-out accuracy (``"optimum-run-"`` keys)."""

    PREFIX = "optimum-run"

    patience: int = PATIENCE
    holdout: int = 10000

    @property
    def epochs(self) -> int:
        """The most epochs the run trains (progress displays read it)."""
        return self.budget


@dataclass(frozen=True)
class RefitConfig(_AnnealedRun):
    """One refit: trained on all of the first ``train_size`` training images for ``epochs`` epochs of the cosine
    over ``budget`` (the choice's), then scored once on the test set (``"optimum-fit-"`` keys)."""

    PREFIX = "optimum-fit"

    epochs: int = field(kw_only=True)


def _json(cfg) -> dict:
    return json.loads(cfg.canonical())


def held_out_masks(arm: Arm, cfgs, rows: int) -> np.ndarray | None:
    """``(len(cfgs), train_size - rows)`` bools: the held-out images each run scores, or None (all of them).

    A data-seeded bank starts its units at training images; a held-out image among them is not scored (it
    sits at a unit's peak, where no test image is), as the convex readout's lambda choice does.
    """
    if arm.init != "data":
        return None
    from lazylab.model import seed_indices

    n = cfgs[0].train_size
    masks = np.ones((len(cfgs), n - rows), bool)
    for i, c in enumerate(cfgs):
        seeds = seed_indices(c.width, c.seed, n)
        masks[i, seeds[seeds >= rows] - rows] = False
    return masks


def _groups(arm: Arm, cfgs: list) -> list[list]:
    """Runs of one shape (differing in seed, rate and epoch count only), at most ``BATCH_MEMBERS`` a group."""
    groups: dict = {}
    for cfg in cfgs:
        shape = dataclasses.replace(cfg, seed=0, lr=0.0, **({"epochs": 0} if isinstance(cfg, RefitConfig) else {}))
        groups.setdefault(shape, []).append(cfg)
    return [g[i : i + BATCH_MEMBERS] for g in groups.values() for i in range(0, len(g), BATCH_MEMBERS)]


def selection_runs(ws, arm: Arm, cfgs: list[SelectConfig], on_epoch=None) -> list[dict]:
    """The records of selection runs of ``arm`` that share a shape (a backend's unit of work, as
    ``experiments.train_runs``; module-level so that Ray can send it by reference).

    Returns per run: ``held_out`` (accuracy % per epoch on the held-out images it scores), ``test_curve``
    (test accuracy % per epoch: for the report's test-selected comparison only, never read by ``choose``),
    ``train_loss`` (nats per epoch), ``best_epoch`` (1-based epoch of the best held-out accuracy, the first
    of ties) and ``held_out_best``, ``epochs``, ``stop``, ``diverged``, ``holdout_scored``, ``seconds``.
    """
    from lazylab.model import build_model
    from lazylab.train import EvalSet, fit_annealed

    t0 = time.perf_counter()
    first = cfgs[0]
    rows = first.train_size - first.holdout
    d = ws.data.subset(train_size=first.train_size)
    models = [build_model(arm, c.width, c.seed, d.x_train, c.fan_in) for c in cfgs]
    masks = held_out_masks(arm, cfgs, rows)
    evals = {"held_out": EvalSet(d.x_train[rows:], d.y_train[rows:], masks), "test": EvalSet(d.x_test, d.y_test)}
    results = fit_annealed(models, d.x_train[:rows], d.y_train[:rows], evals, lrs=[c.lr for c in cfgs],
                           seeds=[c.seed for c in cfgs], horizon=first.budget, batch=first.batch,
                           monitor="held_out", patience=first.patience, weight_decay=first.weight_decay,
                           on_epoch=(lambda i, e, a: on_epoch(cfgs[i], e, a)) if on_epoch else None)
    seconds = round((time.perf_counter() - t0) / len(cfgs), 3)
    records = []
    for i, (cfg, res) in enumerate(zip(cfgs, results)):
        held = res.curves["held_out"]
        best = int(np.argmax(held)) + 1 if held and res.diverged is None else None
        records.append({
            "key": cfg.key(), "config": _json(cfg), "held_out": held, "test_curve": res.curves["test"],
            "train_loss": res.train_loss, "best_epoch": best, "held_out_best": held[best - 1] if best else None,
            "epochs": res.epochs, "stop": res.stop, "diverged": res.diverged,
            "holdout_scored": int(first.holdout if masks is None else masks[i].sum()), "seconds": seconds,
        })
    return records


def refit_runs(ws, arm: Arm, cfgs: list[RefitConfig], on_epoch=None) -> list[dict]:
    """The records of refits of ``arm`` that share a shape (a backend's unit of work, as ``selection_runs``).

    Returns per run: ``test_acc`` (%, read once after its last epoch), ``train_loss`` (nats per epoch),
    ``epochs``, ``diverged``, ``seconds``.
    """
    from lazylab.model import build_model
    from lazylab.train import EvalSet, fit_annealed

    t0 = time.perf_counter()
    first = cfgs[0]
    d = ws.data.subset(train_size=first.train_size)
    models = [build_model(arm, c.width, c.seed, d.x_train, c.fan_in) for c in cfgs]
    results = fit_annealed(models, d.x_train, d.y_train, {"test": EvalSet(d.x_test, d.y_test, every_epoch=False)},
                           lrs=[c.lr for c in cfgs], seeds=[c.seed for c in cfgs], horizon=first.budget,
                           batch=first.batch, epochs=[c.epochs for c in cfgs], weight_decay=first.weight_decay,
                           on_epoch=(lambda i, e, a: on_epoch(cfgs[i], e, a)) if on_epoch else None)
    seconds = round((time.perf_counter() - t0) / len(cfgs), 3)
    return [{"key": cfg.key(), "config": _json(cfg),
             "test_acc": res.curves["test"][-1] if res.diverged is None else None,
             "train_loss": res.train_loss, "epochs": res.epochs, "diverged": res.diverged, "seconds": seconds}
            for cfg, res in zip(cfgs, results)]


def choose(records: list[dict]) -> dict:
    """The rate and epoch counts chosen from selection records of one arm and width (several rates and seeds).

    Reads only each record's rate, seed and held-out curve (never ``test_curve``). A rate is eligible when
    none of its seeds diverged; its score is the mean over seeds of each seed's best held-out accuracy; the
    chosen rate has the highest score (ties: the smaller rate). Each seed's epoch count is the epoch of its
    best held-out accuracy at that rate (the first of ties).

    Returns: ``{"lr" (None: no eligible rate), "epochs": {seed: epoch}, "held_out": score (%), "rates":
      {repr(rate): {"seeds", "best": [% per seed, None diverged], "epochs": [...], "score"}}, "edge": "top" |
      "bottom" | None (the chosen rate is the largest or smallest tried)}``.
    """
    by_rate: dict = {}
    for r in records:
        by_rate.setdefault(float(r["config"]["lr"]), []).append(r)
    rates, eligible = {}, []
    for lr in sorted(by_rate):
        runs = sorted(by_rate[lr], key=lambda r: r["config"]["seed"])
        best = [None if r["diverged"] is not None or not r["held_out"] else max(r["held_out"]) for r in runs]
        epochs = [None if b is None else int(np.argmax(r["held_out"])) + 1 for r, b in zip(runs, best)]
        score = None if None in best else float(np.mean(best))
        rates[repr(lr)] = {"seeds": [r["config"]["seed"] for r in runs], "best": best, "epochs": epochs, "score": score}
        if score is not None:
            eligible.append((score, -lr, lr))
    if not eligible:
        return {"lr": None, "epochs": {}, "held_out": None, "rates": rates, "edge": None}
    score, _, lr = max(eligible)
    tried = sorted(by_rate)
    row = rates[repr(lr)]
    return {"lr": lr, "epochs": {int(s): e for s, e in zip(row["seeds"], row["epochs"])}, "held_out": score,
            "rates": rates, "edge": "top" if lr == tried[-1] else "bottom" if lr == tried[0] else None}


def select_config(ws: Workspace, arm: Arm, width: int, seed: int, lr: float, train_size: int = 60000,
                  fan_in: str = "unit", budget: int = BUDGET) -> SelectConfig:
    """The canonical config of a selection run on this workspace's data (held-out: the last
    ``1/HOLDOUT_FRACTION`` of the training images, as the lambda choice)."""
    return SelectConfig(arm=arm.name, plugin=arm.plugin, width=width, seed=seed, lr=float(lr), budget=budget,
                        patience=patience_for(budget), train_size=train_size, holdout=train_size // HOLDOUT_FRACTION,
                        fan_in=fan_in, data=ws.fingerprint)


def refit_config(sel: SelectConfig, epochs: int) -> RefitConfig:
    """The refit of the selection run ``sel``'s arm, width and seed at its rate for ``epochs`` epochs."""
    return RefitConfig(arm=sel.arm, plugin=sel.plugin, width=sel.width, seed=sel.seed, lr=sel.lr, epochs=int(epochs),
                       budget=sel.budget, schedule=sel.schedule, batch=sel.batch, train_size=sel.train_size,
                       weight_decay=sel.weight_decay, fan_in=sel.fan_in, data=sel.data)


def _stored(ws, cfg) -> dict | None:
    record = ws.memo.get_record(cfg.key())
    return record if isinstance(record, dict) and record.get("config") == _json(cfg) else None


def run_records(ws: Workspace, cells: list[tuple], reporter: Reporter = Reporter()) -> list[dict]:
    """Records of selection runs or refits, each ``(arm, cfg)``, in order: from the memo, or computed by
    ``ws.backend`` in groups of one shape (``selection_runs`` / ``refit_runs``) and stored as each group
    finishes, so an interrupt keeps every finished group. Memo-only mode gives ``{"key", "config",
    "missing": True}`` for a missing run."""
    found, todo = {}, {}
    for arm, cfg in cells:
        record = _stored(ws, cfg)
        if record is not None:
            found[cfg.key()] = record
            reporter.done(cfg, record, cached=True)
        elif ws.memo_only:
            ws.missing.append(cfg.key())
            found[cfg.key()] = {"key": cfg.key(), "config": _json(cfg), "missing": True}
        elif cfg.key() not in found:
            found[cfg.key()] = None
            todo.setdefault((arm.name, type(cfg)), (arm, []))[1].append(cfg)
    groups = [(arm, g) for arm, cfgs in todo.values() for g in _groups(arm, cfgs)]
    for kind, job in ((SelectConfig, selection_runs), (RefitConfig, refit_runs)):
        mine = [(arm, g) for arm, g in groups if isinstance(g[0], kind)]
        for group, records in ws.backend.compute(ws, mine, reporter, job):
            for cfg, record in zip(group, records):
                ws.memo.put_record(cfg.key(), record)
                found[cfg.key()] = record
                reporter.done(cfg, record, cached=False)
    return [found[cfg.key()] for _, cfg in cells]


def chosen_on_test(records: list[dict]) -> dict:
    """What choosing on the test set would give, from the selection records of one arm and width: each rate's
    mean over seeds of each seed's best per-epoch test accuracy, and the best rate's (a bound that reads the
    test set, shown beside the choice on held-out images; ``choose`` never sees it)."""
    by_rate: dict = {}
    for r in records:
        if r.get("missing") or r["diverged"] is not None or not r["test_curve"]:
            continue
        by_rate.setdefault(float(r["config"]["lr"]), []).append(max(r["test_curve"]))
    scores = {lr: float(np.mean(v)) for lr, v in by_rate.items()}
    if not scores:
        return {"lr": None, "test_acc": None}
    lr = max(scores, key=lambda k: (scores[k], -k))
    return {"lr": lr, "test_acc": scores[lr], "per_seed": by_rate[lr]}


def run_optimum(ws: Workspace, arms, widths, seeds, train_size: int = 60000, fan_in: str = "unit",
                budget: int = BUDGET, reporter: Reporter = Reporter()) -> dict:
    """The trained side at its optimum: every trained arm of ``arms`` at each width up to ``MAX_WIDTH``.

    Per round, every (arm, width) whose choice is not settled runs its missing selection runs (all of a
    round's runs go to the backend at once), then its best rate is checked against the ends of the rates
    tried: at an end, the next half-decade rate that way joins the next round (at most ``MAX_EXTEND`` per
    width). Then every seed's refit at its chosen rate and epoch count.

    Returns: ``{"budget", "patience", "schedule", "holdout_fraction", "arms": {arm: {"plugin", "cells":
      {str(width): summary}}}, "runs": [selection record], "fits": [refit record]}``; a summary holds
      ``lr``, ``epochs`` (per seed), ``held_out`` (the choice's score, %), ``edge``, ``rates`` (tried),
      ``n``, ``test_acc`` (mean %), ``std`` (ddof 1), ``per_seed`` (test % per seed), ``test_selected``
      (``chosen_on_test``).
    """
    widths = sorted(w for w in widths if w <= MAX_WIDTH)
    trained = [a for a in arms if a.trained]
    rates = {(a.name, w): list(a.unit.grid(True)) for a in trained for w in widths}
    extended = {key: 0 for key in rates}
    cells = {key: [] for key in rates}
    settled: dict = {}
    by_name = {a.name: a for a in trained}
    reporter.plan(sum(len(r) * len(seeds) for r in rates.values()) + len(rates) * len(seeds))
    while len(settled) < len(rates):
        todo = [(by_name[a], select_config(ws, by_name[a], w, s, lr, train_size, fan_in, budget))
                for (a, w) in rates if (a, w) not in settled
                for lr in rates[(a, w)] for s in seeds
                if lr not in {c["config"]["lr"] for c in cells[(a, w)]}]
        for (arm, cfg), record in zip(todo, run_records(ws, todo, reporter)):
            cells[(arm.name, cfg.width)].append(record)
        for key in rates:
            if key in settled:
                continue
            records = [r for r in cells[key] if not r.get("missing")]
            if len(records) < len(cells[key]):  # memo-only and missing: no choice
                settled[key] = {"lr": None, "epochs": {}, "held_out": None, "rates": {}, "edge": None, "missing": True}
                continue
            choice = choose(records)
            if choice["edge"] and extended[key] < MAX_EXTEND:
                extended[key] += 1
                rates[key].append(next_rate(rates[key], up=choice["edge"] == "top"))
                reporter.more(len(seeds))
            else:
                settled[key] = choice
    fits = []
    for key, choice in settled.items():
        if choice["lr"] is None:
            continue
        arm = by_name[key[0]]
        fits += [(arm, refit_config(select_config(ws, arm, key[1], s, choice["lr"], train_size, fan_in, budget),
                                    choice["epochs"][s])) for s in seeds]
    fit_records = run_records(ws, fits, reporter)
    out = {"budget": budget, "patience": patience_for(budget), "schedule": SCHEDULE,
           "holdout_fraction": f"1/{HOLDOUT_FRACTION}", "arms": {}, "runs": [r for c in cells.values() for r in c],
           "fits": fit_records}
    refit = {(r["config"]["arm"], r["config"]["width"], r["config"]["seed"]): r for r in fit_records}
    for arm in trained:
        summaries = {}
        for w in widths:
            choice = settled[(arm.name, w)]
            mine = [refit.get((arm.name, w, s)) for s in seeds] if choice["lr"] is not None else []
            accs = [r.get("test_acc") for r in mine if r is not None and not r.get("missing")]
            accs = [a for a in accs if a is not None]
            summaries[str(w)] = {
                "lr": choice["lr"], "epochs": [choice["epochs"].get(s) for s in seeds], "held_out": choice["held_out"],
                "edge": choice["edge"], "rates": sorted(float(k) for k in choice["rates"]), "n": len(accs),
                "test_acc": mean_of(accs), "std": float(np.std(accs, ddof=1)) if len(accs) > 1 else 0.0 if accs else None,
                "per_seed": accs, "test_selected": chosen_on_test(cells[(arm.name, w)]),
            }
        out["arms"][arm.name] = {"plugin": arm.plugin, "cells": summaries}
    return out


def with_optimum(ws: Workspace, payload: dict, result, convex: dict, plan, arms,
                 reporter: Reporter = Reporter()) -> dict:
    """A ``--readout both`` ladder payload (``convex_wall.with_convex``'s) with the trained side at its optimum, as
    ``lazylab ladder --readout both --json`` writes it: ``optimum`` (``run_optimum`` for the trained arms among
    ``arms`` at ``plan``'s widths, seeds and protocol, budget ``optimum_budget(plan.epochs)``; in memo-only mode
    the records missing from the memo left out) and ``analysis.fair`` (``fair_answer``). Nothing is added
    without a trained arm. Returns: ``payload``, filled."""
    from lazylab.model import N_REF

    trained = tuple(a for a in arms if a.trained)
    if not trained:
        return payload
    optimum = run_optimum(ws, trained, plan.widths, plan.seeds, plan.train_size, plan.fan_in,
                          optimum_budget(plan.epochs), reporter)
    optimum["runs"] = [r for r in optimum["runs"] if not r.get("missing")]
    optimum["fits"] = [r for r in optimum["fits"] if not r.get("missing")]
    payload["optimum"] = optimum
    payload["analysis"]["fair"] = fair_answer(result, convex, optimum, arms, ws.data.x_train[:N_REF])
    return payload


# ------------------------------------------------------------------ the fair answer
def network_cost(arm: Arm, x_ref) -> dict:
    """What a network of ``arm`` costs per width, as lines ``a + b m``: ``{"bank": weights of the bank, "head":
    weights of the linear head, "flops": floating-point operations of one image's forward pass}``, each
    ``[a, b]``, measured on networks of 64 and 128 units (parameter counts of ``nnx.state``; FLOPs from XLA's
    cost analysis of the compiled forward pass). ``x_ref``: ``(>= 128, 784)`` training images."""
    import jax
    import jax.numpy as jnp
    from flax import nnx

    from lazylab.model import build_model

    points = []
    for m in (64, 128):
        model = build_model(arm, m, 0, np.asarray(x_ref), "unit")
        size = lambda module: sum(int(x.size) for x in jax.tree.leaves(nnx.state(module, nnx.Param)))
        graph, state = nnx.split(model)
        cost = jax.jit(lambda x: nnx.merge(graph, state)(x)).lower(jnp.zeros((1, x_ref.shape[1]))).compile()
        cost = cost.cost_analysis()
        cost = cost[0] if isinstance(cost, list) else cost
        points.append((m, size(model.feat), size(model.head), float((cost or {}).get("flops") or 0.0)))
    (m0, *p0), (m1, *p1) = points
    line = lambda a, b: [a - (b - a) / (m1 - m0) * m0, (b - a) / (m1 - m0)]
    return dict(zip(("bank", "head", "flops"), (line(a, b) for a, b in zip(p0, p1))))


def _at(line, m: float) -> float:
    return line[0] + line[1] * m


def _per_seed(records, value: str) -> dict:
    """``{arm: {width: [value per seed]}}`` of records (missing and failed ones, and None values, left out)."""
    out: dict = {}
    for r in records:
        if r.get("missing") or r.get("failed") or r.get(value) is None:
            continue
        c = r["config"]
        out.setdefault(c["arm"], {}).setdefault(c["width"], []).append(r[value])
    return out


def fair_answer(result, convex: dict, optimum: dict, arms, x_ref=None) -> dict:
    """The study's answer with both sides at their held-out optimum, beside the choices that move it.

    Three answers, each per trained arm and width (``optimum``'s widths) and per frozen arm, the matching
    frozen width (``exchange.match``: crossing of the frozen means, t-inverted seed interval):

    * ``fair``: trained side = each seed's refit at the rate and epoch chosen on held-out images
      (``run_optimum``); frozen side = the convex readout at the refined held-out lambda (``run_convex_ladder``).
    * ``test_selected``: the trained side's best test accuracy over the selection runs' epochs and rates (what
      choosing on the test set gives; the frozen side as in ``fair``).
    * ``trained_protocol``: the trained side as the protocol reads it (12-epoch ``best_acc``, its epoch chosen on
      the test set), the frozen side at its optimum: the answer before the trained side had an optimum.
    * ``protocol``: both sides as SPEC section 5 reads them, 12-epoch constant-rate AdamW ``best_acc``.

    Args: ``result`` a ``LadderResult``; ``convex`` from ``run_convex_ladder``; ``optimum`` from ``run_optimum``;
      ``arms`` the ladder's arms; ``x_ref`` ``(>= 128, 784)`` training images for ``network_cost`` (None: no
      costs).
    Returns: ``{"sweep", "level", "answers": {"fair" | "test_selected" | "trained_protocol" | "protocol": [row]}, "costs": {arm:
      network_cost}, "capped": {frozen arm: [readouts stopped by the iteration cap, readouts]}, "unrefined":
      [[frozen arm, width], ...] (its lambda the walk's, the refinement not computed yet), "sentence", "method"}``; a row is ``{"trained", "width", "trained_acc", "per_seed",
      "matches": {frozen arm: match + "per_unit": [point, low, high] / width | None, "params", "flops"}}``.
    """
    from lazylab import exchange as ex
    from lazylab.experiments.laws import ladder_records

    widths = list((convex.get("partial") or {}).get("widths") or result.plan["widths"])
    trained_arms = [a for a in arms if a.trained and a.name in optimum.get("arms", {})]
    frozen_arms = [a for a in arms if not a.trained]
    protocol = _per_seed([r for a in arms for r in ladder_records(result, a.name)], "best_acc")
    convex_seeds = _per_seed(convex["runs"], "test_acc")
    fits = _per_seed(optimum["fits"], "test_acc")
    peeked: dict = {}
    for a in trained_arms:
        for w, cell in optimum["arms"][a.name]["cells"].items():
            if cell.get("test_selected", {}).get("per_seed"):
                peeked.setdefault(a.name, {})[int(w)] = cell["test_selected"]["per_seed"]
    sides = {"fair": (fits, convex_seeds), "test_selected": (peeked, convex_seeds),
             "trained_protocol": (protocol, convex_seeds), "protocol": (protocol, protocol)}
    costs = {a.name: network_cost(a, x_ref) for a in trained_arms + frozen_arms} if x_ref is not None else {}
    answers = {}
    for name, (trained, frozen) in sides.items():
        rows = []
        for a in trained_arms:
            for w in sorted(trained.get(a.name, {})):
                accs = trained[a.name][w]
                row = {"trained": a.name, "width": int(w), "trained_acc": float(np.mean(accs)), "per_seed": accs,
                       "matches": {}}
                for f in frozen_arms:
                    if f.name not in frozen:
                        continue
                    hit = ex.match(widths, frozen[f.name], accs)
                    units = lambda v: v / w if isinstance(v, float) else v
                    hit["per_unit"] = [units(hit["width"]), *map(units, hit["interval"])]
                    if costs and isinstance(hit["width"], float):
                        c, t = costs[f.name], costs[a.name]
                        hit["params"] = {"trained": _at(t["bank"], w) + _at(t["head"], w),
                                         "frozen_fixed": _at(c["bank"], hit["width"]),
                                         "frozen_trained": _at(c["head"], hit["width"])}
                        hit["flops"] = {"trained": _at(t["flops"], w), "frozen": _at(c["flops"], hit["width"])}
                    row["matches"][f.name] = hit
                rows.append(row)
        answers[name] = rows
    # A readout stopped by the iteration cap is short of its optimum: its accuracy a lower bound.
    used = [r for r in convex["runs"] if not r.get("missing") and r["config"]["width"] in widths]
    capped = {f.name: [sum(r["stop"] == "max_iter" for r in used if r["config"]["arm"] == f.name),
                       sum(r["config"]["arm"] == f.name for r in used)] for f in frozen_arms}
    return {"sweep": widths, "level": ex.INTERVAL_LEVEL, "answers": answers, "costs": costs, "capped": capped,
            "unrefined": convex.get("unrefined") or [],
            "sentence": fair_sentence(answers["fair"], widths, {a.name: a.init for a in arms}),
            "method": FAIR_METHOD.format(budget=optimum["budget"], images=f"{result.plan['train_size']:,}")}


FAIR_METHOD = (
    "Both sides at their optimum, chosen on held-out training images (the last sixth), the test set read once: "
    "trained networks annealed by a cosine over up to {budget} epochs, rate and stopping epoch chosen on held-out "
    "accuracy, then refitted on all {images} training images; frozen banks read out by the convex optimum at the held-out "
    "lambda, refined to half a decade. Matching width: where the frozen curve of mean test accuracy (linear in "
    "log width between measured widths) reaches the trained mean; interval: the widths where the two means do "
    "not differ at the 5 % level by Welch's t test over seeds (it covers seed noise, not the hyperparameter "
    "choices).")


def fair_sentence(rows: list[dict], sweep, inits: dict | None = None) -> str:
    """The fair answer in plain words: what one trained unit of the first trained arm is worth in frozen units
    of the cheapest matching bank, at its smallest trained width, and at its widest where measured, or from the
    narrowest trained width on which no frozen bank of the sweep matches any wider one. ``inits``:
    ``{arm: init}`` (a data-seeded bank is named as such, ``exchange.bank_words``)."""
    from lazylab.exchange import bank_words, round_ratio, unit_name

    inits = inits or {}
    if not rows:
        return "No trained arm at its optimum in this ladder: no fair exchange rate."
    first = [r for r in rows if r["trained"] == rows[0]["trained"]]
    unit = unit_name(first[0]["trained"])

    def cheapest(r):  # (width, already matched at the smallest width, frozen arm) of the cheapest match, or None
        found = [(min(sweep), True, f) if m["width"] == "below" else (m["width"], False, f)
                 for f, m in r["matches"].items() if m["width"] == "below" or isinstance(m["width"], (int, float))]
        return min(found) if found else None

    r = first[0]
    best = cheapest(r)
    top = max(sweep)
    if best is None:
        return (f"{r['width']} trained {unit} units ({r['trained_acc']:.1f} %) are matched by no frozen bank up to "
                f"{top:,} units: at their optimum, one trained {unit} unit is worth more than {top // r['width']:,} "
                f"frozen ones.")
    width, below, frozen = best
    if below:  # the smallest bank measured already matches: an upper bound
        text = (f"{r['width']} trained {unit} units ({r['trained_acc']:.1f} %) are matched already by the smallest "
                f"frozen bank measured, {width:,} {bank_words(frozen, inits.get(frozen))}: one trained {unit} "
                f"unit is worth at most {round_ratio(width / r['width'])} of them")
    else:
        text = (f"One trained {unit} unit is worth about {round_ratio(width / r['width'])} "
                f"{bank_words(frozen, inits.get(frozen))}: {r['width']} trained {unit} units "
                f"({r['trained_acc']:.1f} %) are matched by {r['matches'][frozen]['text']} of them")
    # the narrowest trained width from which no frozen bank matches any wider one: the price has outgrown the sweep
    gone = next((i for i in range(1, len(first)) if all(cheapest(x) is None for x in first[i:])), None)
    wide = first[-1] if gone is None else first[gone]
    if wide is not r:
        b = cheapest(wide)
        if b is None:
            wider = "" if wide is first[-1] else " and every wider layer measured"
            text += (f"; {wide['width']} trained units ({wide['trained_acc']:.1f} %){wider} by no frozen bank up to "
                     f"{top:,} units (more than {top // wide['width']:,} per trained unit)")
        elif b[1]:
            text += (f"; {wide['width']} trained units already by the smallest, {b[0]:,} "
                     f"{bank_words(b[2], inits.get(b[2]))} (at most {round_ratio(b[0] / wide['width'])} per trained unit)")
        else:
            text += (f"; {wide['width']} trained units by {wide['matches'][b[2]]['text']} "
                     f"{bank_words(b[2], inits.get(b[2]))} (about {round_ratio(b[0] / wide['width'])} per trained unit)")
    return text + "."
