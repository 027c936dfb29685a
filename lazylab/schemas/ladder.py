"""The schema of a ladder payload: what ``lazylab ladder --json`` writes, ``render --from`` reads and the shipped
reference (``lazylab/reference/paper.json``) carries (issue 32).

``LadderPayload`` covers every field a reader of the payload uses (``lazylab.render``: the ladder figures and the
report's ladder sections; ``lazylab.api``: ``Ladder``; ``lazylab.verify``: the runs it reruns; ``lazylab.published``)
with the types and ranges of the options that produced it: seeds 0..MAX_SEED, widths 1..MAX_WIDTH, rates
(0, MAX_LR], epochs 1..MAX_EPOCHS, training sets MIN_TRAIN_SIZE..MAX_TRAIN_SIZE, accuracies 0..100 %. Fields newer
than the first ladder files (``unstable``, ``selection``, ``exchange``, ``warnings``, ``wall``, ...) are optional,
so every file an older lazylab wrote still reads. Unknown fields are ignored (and kept in the payload).

``check_ladder_payload`` adds what one model cannot see: one summary per plan arm in its order, cells at the
plan's widths only, runs of the plan's arms, and a bound on nesting (an unknown field nested thousands deep
would exhaust the recursion of whatever later walks the payload).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, model_validator

from lazylab.errors import LazylabError
from lazylab.limits import MAX_EPOCHS, MAX_LIST, MAX_TRAIN_SIZE
from lazylab.schemas.convex import ConvexPart, OptimumPart
from lazylab.schemas.fields import (
    MAX_DEPTH,
    PROTOCOL,
    R2,
    Accuracy,
    Batch,
    Count,
    Epochs,
    FanIn,
    Finite,
    Model,
    Name,
    Points,
    Positive,
    Rate,
    RateKey,
    Rule,
    Seed,
    Seeds,
    Spread,
    TrainSize,
    WeightDecay,
    Width,
    WidthKey,
    unique,
)


class BracketPlan(Model):
    """``plan.bracket``: how the rates were chosen (``lazylab.bracket``); null for a fixed ``--lr``."""

    rule: Rule
    width: Width = 1
    seeds: Annotated[Seeds, Field(min_length=1), AfterValidator(unique)] = [0]

    @model_validator(mode="after")
    def _rule_seeds(self):
        if self.rule != "argmax" and "seeds" not in self.model_fields_set:
            raise ValueError(f"the {self.rule} rule needs its seeds")
        return self


class Plan(Model):
    """``plan``: the ladder's options."""

    arms: Annotated[list[Name], Field(min_length=1, max_length=MAX_LIST), AfterValidator(unique)]
    widths: Annotated[list[Width], Field(min_length=1, max_length=MAX_LIST), AfterValidator(unique)]
    seeds: Annotated[Seeds, Field(min_length=1), AfterValidator(unique)]
    epochs: Epochs
    train_size: TrainSize
    lr: Rate | None = None
    batch: Batch = PROTOCOL["batch"]
    fan_in: FanIn = "unit"
    data: str = ""
    bracket: BracketPlan | None = None
    readout: str = ""


# ------------------------------------------------------------------- arms
class Cell(Model):
    """``arms[i].cells[str(width)]``: ``lazylab.experiments.ladder.summarise``."""

    n: Count
    mean: Accuracy | None = None
    std: Spread | None = None
    final_mean: Accuracy | None = None
    diverged: Count = 0
    unstable: Count = 0
    failed: Count = 0  # seeds whose unit failed (no result)
    seeds: Annotated[Seeds, AfterValidator(unique)] = []

    @model_validator(mode="after")
    def _spread(self):
        if self.mean is not None and self.n > 1 and self.std is None:
            raise ValueError(f"a mean over n = {self.n} seeds needs its std")
        return self


class RateScore(Model):
    """One rate of ``selection.rates`` (``lazylab.bracket.RateScore.to_json``)."""

    lr: Rate
    seeds: Seeds = []
    accs: Annotated[list[Accuracy | None], Field(max_length=MAX_LIST)] = []
    mean: Accuracy | None = None
    std: Spread | None = None
    se: Spread | None = None
    unstable: Count = 0
    diverged: Count = 0
    eligible: bool = True


class Selection(Model):
    """``arms[i].selection``: the bracket's choice (``lazylab.bracket.Bracket.to_json``); ``{}`` for a fixed rate."""

    rule: Rule = "argmax"
    rates: Annotated[list[RateScore], Field(max_length=MAX_LIST)] = []
    grid: Annotated[list[Rate], Field(max_length=MAX_LIST)] | None = None
    extended: Annotated[list[Rate], Field(max_length=MAX_LIST)] = []
    best: Rate | None = None
    chosen: Rate | None = None
    runner_up: Rate | None = None
    margin: Points | None = None
    spread: Spread | None = None
    edge: str | None = None
    why: str | None = None
    width: Width = 1
    seeds: Seeds = []

    @model_validator(mode="after")
    def _rule(self):
        if self.rates and "rule" not in self.model_fields_set:
            raise ValueError("rates without the rule that chose among them")
        return self


class ArmSummary(Model):
    """``arms[i]``: one arm's rate, bracket and cells (``LadderResult.to_json``)."""

    arm: Name
    plugin: str | None = None
    unit: str | None = None  # absent from files written before the field
    init: Literal["random", "data"] | None = None
    lr: Rate | None = None
    bracket: dict[RateKey, Accuracy | None] = {}
    selection: Selection | None = None
    cells: dict[WidthKey, Cell]
    failed: str | None = None
    checks_failed: Annotated[list[str], Field(max_length=MAX_LIST)] = []  # its unit's failed conformance checks
    colour: Annotated[str, Field(pattern=r"^#[0-9a-fA-F]{6}$")] | None = None  # the unit's colour in pictures


# -------------------------------------------------------------------- runs
class RunConfig_(Model):
    """``runs[i].config``: ``lazylab.config.RunConfig`` within the command line's ranges (``lazylab verify``
    rebuilds a configuration from it and stores its rerun under that configuration's key)."""

    arm: Name
    width: Width
    seed: Seed
    lr: Rate
    plugin: str = ""
    epochs: Epochs = 1
    batch: Batch = PROTOCOL["batch"]
    train_size: TrainSize = MAX_TRAIN_SIZE
    weight_decay: WeightDecay = PROTOCOL["weight_decay"]
    fan_in: FanIn = "unit"
    data: str = ""
    schema_: Annotated[int, Field(alias="schema", ge=0)] = 0
    code: str = ""


class Diverged(Model):
    """``runs[i].diverged``: where the loss turned non-finite (``lazylab.train.fit_batch``)."""

    epoch: Epochs = 1
    step: Annotated[int, Field(ge=0)] = 0
    loss: str = ""  # as text: NaN or Infinity, which JSON cannot hold


class Movement(Model):
    """``runs[i].movement`` (``lazylab.experiments.movement``), dimensionless."""

    w_move_rel: Positive = 0.0
    unit_median: Positive = 0.0
    unit_max: Positive = 0.0


class RunScalars(Model):
    start: dict[str, Finite] = {}
    end: dict[str, Finite] | None = None


class Run(Model):
    """``runs[i]``: a run record (``lazylab.experiments.train_runs``) plus its ``unstable`` reason."""

    key: Annotated[str, Field(pattern=r"^run-[0-9a-f]{32}$")] = ""
    config: RunConfig_
    best_acc: Accuracy | None = None
    final_acc: Accuracy | None = None
    best_epoch: Epochs | None = None
    curve: Annotated[list[Accuracy], Field(max_length=MAX_EPOCHS)] = []
    train_loss: Annotated[list[Positive], Field(max_length=MAX_EPOCHS)] = []
    diverged: Diverged | None = None
    scalars: RunScalars | None = None
    movement: Movement | None = None
    seconds: Positive | None = None
    unstable: str | None = None
    missing: bool = False
    failed: str | None = None


# ---------------------------------------------------------------- analysis
class LadderLaw(Model):
    """``analysis.ladder_law[arm]``: ``lazylab.analysis.ladder_law``, a fit or ``skipped`` with its reason."""

    floor: Finite | None = None
    c: Finite | None = None
    alpha: Finite | None = None
    r2: R2 | None = None
    sse: Positive = 0.0
    widths: Annotated[list[Width], Field(max_length=MAX_LIST)] = []
    n: Count = 0
    dof: Annotated[int, Field(ge=-3, le=MAX_LIST)] = 0
    at_bound: bool = False
    rule: str | None = None
    skipped: str | None = None

    @model_validator(mode="after")
    def _fit_or_skipped(self):
        # the report shows {} as "no data", a dict with 'skipped' as its reason, anything else as a fit
        if "skipped" not in self.model_fields_set and self.model_fields_set and \
                None in (self.floor, self.c, self.alpha, self.r2):
            raise ValueError("a fit needs floor, c, alpha and r2 (or 'skipped' with its reason)")
        return self


class MovementStat(Model):
    """``analysis.movement[arm][str(width)]``: ``lazylab.analysis.per_width_stats`` of ``w_move_rel``."""

    mean: Positive | None = None
    std: Positive | None = None
    n: Count = 0


class MovementLaw(Model):
    """``analysis.movement_law[arm]``: ``lazylab.analysis.movement_law``, a fit or ``skipped``."""

    slope: Finite = 0.0
    intercept: Finite = 0.0
    r2: R2 = 0.0
    widths: Annotated[list[Width], Field(max_length=MAX_LIST)] = []
    n: Count = 0
    skipped: str | None = None

    @model_validator(mode="after")
    def _fit(self):
        if "skipped" not in self.model_fields_set and "slope" in self.model_fields_set and \
                not {"intercept", "r2"} <= self.model_fields_set:
            raise ValueError("a fit needs slope, intercept and r2")
        return self


class Gap(Model):
    """``analysis.gap["<trained> - <frozen>"]``: ``lazylab.analysis.gap``."""

    trained: Name
    frozen: Name
    per_width: dict[WidthKey, Points]
    se: dict[WidthKey, Spread] = {}
    largest_at: Width | None = None
    smallest_at: Width | None = None


class ExchangeRow(Model):
    """``analysis.exchange.rows[i]``: ``lazylab.experiments.laws.exchange_table``."""

    trained: Name
    frozen: Name
    width: Width
    trained_acc: Accuracy | None = None
    frozen_width: Annotated[float, Field(gt=0)] | None = None
    method: str = "none"
    floor_acc: Finite | None = None
    text: str = ""
    note: str | None = None
    between: Annotated[list[Annotated[float, Field(gt=0)]], Field(min_length=2, max_length=2)] | None = None
    why: str | None = None
    below: bool = False
    peak: Annotated[list[Finite], Field(max_length=2)] = []


class Exchange(Model):
    """``analysis.exchange``: the exchange rate's rows and its sentence."""

    rows: Annotated[list[ExchangeRow], Field(max_length=MAX_LIST)] = []
    sentence: str = ""


class Redundancy(Model):
    """``analysis.redundancy[bank]``: ``lazylab.analysis.redundancy`` of one bank."""

    mean_abs_corr: Annotated[float, Field(ge=0, le=1)] | None = None
    participation_ratio: Positive | None = None
    m: Width = 1
    n: Count = 0
    constant_units: Count = 0
    bank: str = ""
    key: str = ""
    seed: Seed = 0


class Settings(Model):
    """``analysis.settings``: the analysis's own options (``lazylab.experiments.laws.analyse_ladder``)."""

    min_gain: Finite = 0.0
    climb_widths: Annotated[list[Width], Field(max_length=MAX_LIST)] | None = None
    accuracy: str = ""
    redundancy_width: Width = 1
    redundancy_images: Count = 0
    redundancy_seed: Seed = 0
    redundancy_sample: str = ""


class GridStat(Model):
    values: Annotated[list[Positive], Field(max_length=MAX_LIST)] = []
    mean: Positive
    std: Positive


class GridRow(Model):
    """``analysis.redundancy_grid[i]``: ``lazylab.experiments.laws.redundancy_grid``."""

    bank: str
    fan_in: str
    sample: str
    m: Width
    n: Count
    seeds: Seeds
    mean_abs_corr: GridStat
    participation_ratio: GridStat


class WallRow(Model):
    """``analysis.wall.arms[arm][str(width)]``: ``lazylab.experiments.convex_wall.wall``."""

    best_acc: Accuracy
    final_acc: Accuracy | None = None
    convex_acc: Accuracy
    gap: Points | None = None
    loss_gap: Finite | None = None
    protocol_loss: Finite | None = None
    convex_loss: Finite | None = None
    grad_norm: Positive
    converged: bool
    seeds: Count = 0


class Wall(Model):
    """``analysis.wall`` (``ladder --readout both``): per frozen arm and width, the protocol against the optimum."""

    arms: dict[str, dict[WidthKey, WallRow]]
    law: dict[str, dict[str, LadderLaw]] = {}
    lambda_at_edge: Annotated[list[Count], Field(min_length=2, max_length=2)] = [0, 0]


MatchWidth = Annotated[float, Field(gt=0)] | Literal["below", "beyond"]


class Match(Model):
    """A matching frozen bank of ``analysis.answer.rows[i]`` (``lazylab.exchange.answer_rows``)."""

    frozen: Name
    width: MatchWidth
    interval: Annotated[list[MatchWidth], Field(min_length=2, max_length=2)]
    text: str


class AnswerRow(Model):
    """``analysis.answer.rows[i]``: ``lazylab.experiments.convex_wall.answer``."""

    trained: Name
    width: Width
    trained_acc: Accuracy
    same: Match | None = None
    cheapest: Match | None = None
    protocol: ExchangeRow | None = None


class Answer(Model):
    """``analysis.answer`` (``ladder --readout both``): the answer at the optimum beside the protocol's."""

    rows: Annotated[list[AnswerRow], Field(max_length=MAX_LIST)] = []
    sentence: str = ""


FairWidth = Annotated[float, Field(ge=0)] | Literal["below", "beyond"]


class FairMatch(Model):
    """One frozen arm's match in a fair-answer row (``lazylab.exchange.match``)."""

    width: FairWidth
    interval: Annotated[list[FairWidth], Field(min_length=2, max_length=2)]
    text: str
    range: bool
    per_unit: Annotated[list[FairWidth], Field(min_length=3, max_length=3)]
    params: dict[str, Positive] | None = None
    flops: dict[str, Positive] | None = None


class FairRow(Model):
    trained: Name
    width: Width
    trained_acc: Accuracy
    per_seed: list[Accuracy]
    matches: dict[str, FairMatch]


class FairAnswers(Model):
    """The four readings of ``analysis.fair.answers``, every one written by ``fair_answer`` (``fair`` is empty
    where a memo-only ladder found none of the trained optimum's fits: the renderers then leave the fair answer
    out)."""

    fair: list[FairRow]
    test_selected: list[FairRow]
    trained_protocol: list[FairRow]
    protocol: list[FairRow]


class Fair(Model):
    """``analysis.fair`` (``ladder --readout both`` with trained arms): ``experiments.optimum.fair_answer``."""

    sweep: list[Width]
    level: Annotated[float, Field(gt=0, lt=1)]
    answers: FairAnswers
    costs: dict[str, dict[str, Annotated[list[float], Field(min_length=2, max_length=2)]]] = {}
    capped: dict[str, Annotated[list[Count], Field(min_length=2, max_length=2)]] = {}
    unrefined: list[Annotated[list[Name | Width], Field(min_length=2, max_length=2)]] = []
    sentence: str
    method: str


class ScalarStat(Model):
    start: Finite | None = None
    end: Finite | None = None
    n: Count = 0


class Analysis(Model):
    """``analysis``: ``lazylab.experiments.laws.analyse_ladder`` (plus ``wall`` and ``redundancy_grid`` when the
    memo had them, ``experiments.render.wall_analysis``)."""

    ladder_law: dict[str, LadderLaw]
    movement: dict[str, dict[WidthKey, MovementStat]] = {}
    movement_law: dict[str, MovementLaw] = {}
    gap: dict[str, Gap] = {}
    redundancy: dict[str, Redundancy] = {}
    scalars: dict[str, dict[str, dict[WidthKey, ScalarStat]]] = {}
    settings: Settings = Settings()
    exchange: Exchange | None = None
    warnings: Annotated[list[str], Field(max_length=MAX_LIST)] | None = None
    wall: Wall | None = None
    answer: Answer | None = None
    fair: Fair | None = None
    redundancy_grid: Annotated[list[GridRow], Field(max_length=MAX_LIST)] | None = None

    @model_validator(mode="after")
    def _redundancy_width(self):
        if self.redundancy and "redundancy_width" not in self.settings.model_fields_set:
            raise ValueError("a redundancy needs settings.redundancy_width, the width it was measured at")
        return self


class LadderPayload(Model):
    """A ladder payload: ``{"plan", "arms", "runs", "analysis"}`` (``LadderResult.to_json()`` plus ``analysis``)."""

    plan: Plan
    arms: Annotated[list[ArmSummary], Field(max_length=MAX_LIST)]
    runs: list[Run]
    analysis: Analysis
    convex: ConvexPart | None = None
    optimum: OptimumPart | None = None


# --------------------------------------------------------------------- the check
def too_deep(doc: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether ``doc`` (parsed JSON) nests dicts and lists more than ``limit`` levels deep; no recursion."""
    stack = [(doc, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            value = value.values()
        elif not isinstance(value, list):
            continue
        if depth >= limit:
            return True
        stack.extend((v, depth + 1) for v in value if isinstance(v, (dict, list)))
    return False


class _PlanOf(Model):
    plan: Plan


class _InReference(Model):  # so that error paths start at the reference file's own field, ``payload``
    payload: LadderPayload


class _PlanInReference(Model):
    payload: _PlanOf


def check_ladder_payload(payload: Any, where: str, field: str = "") -> LadderPayload:
    """``payload`` checked against ``LadderPayload`` and against its own plan.

    Args:
      payload: parsed JSON (``lazylab ladder --json``'s document, or a reference file's ``payload``).
      where: how errors name the file (``--from FILE``, ``reference results FILE``).
      field: where the payload sits in its file: ``""`` (the whole file) or ``"payload"`` (a reference file);
        error paths start there.
    Returns: the validated model (the caller keeps using the plain dict: unknown fields stay in it).
    Raises: LazylabError, one line: ``<where>: field <path>: <problem>``, or ``<where>: nested more than
      MAX_DEPTH levels deep``.
    """
    from lazylab.schemas import validate

    at = f"{field}." if field else ""
    if not isinstance(payload, dict):
        raise LazylabError(f"{where}: {'field ' + field + ' is ' if field else ''}not a JSON object")
    if not isinstance(payload.get("plan"), dict):
        raise LazylabError(f"{where}: no '{at}plan' object (not a ladder --json file?)")
    if too_deep(payload):
        raise LazylabError(f"{where}: nested more than {MAX_DEPTH} levels deep (a ladder file has 7)")
    # the plan first, then whether the arms follow it: what is wrong with the file's shape before its details
    plan = (validate(_PlanInReference, {field: payload}, where).payload if field
            else validate(_PlanOf, payload, where)).plan
    summaries = payload.get("arms")
    if isinstance(summaries, list) and [a.get("arm") if isinstance(a, dict) else None for a in summaries] != plan.arms:
        raise LazylabError(f"{where}: field {at}arms: 'arms' does not hold one summary per arm of the plan, in its order")
    model = validate(_InReference, {field: payload}, where).payload if field else validate(LadderPayload, payload, where)
    widths = {str(w) for w in plan.widths}
    for i, a in enumerate(model.arms):
        stray = next((w for w in a.cells if w not in widths), None)
        if stray is not None:
            raise LazylabError(f"{where}: field {at}arms[{i}].cells.{stray}: not a width of the plan")
    arms = set(plan.arms)
    for i, r in enumerate(model.runs):
        if r.config.arm not in arms:
            raise LazylabError(f"{where}: field {at}runs[{i}].config.arm: {r.config.arm[:40]!r} is not in the plan")
    return model


# ----------------------------------------------------------- the shipped reference
Digest = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


class Provenance(Model):
    """A reference file's ``provenance`` (``lazylab.experiments.render.build_reference``): where, when and by
    which lazylab its runs were computed, how many, and the SHA-256 of its payload's canonical JSON (``digest``)."""

    where: str
    when: str
    exported_at: str
    lazylab: str
    code: str
    command: str
    data: str
    runs: Count
    digest: Digest


class ReferenceEnvelope(Model):
    """A reference file around its payload (checked by ``check_ladder_payload``): ``preset`` and ``provenance``."""

    preset: str
    provenance: Provenance
