"""The schema of a ladder payload's ``convex`` part (``lazylab.experiments.convex.run_convex_ladder``): every convex
readout's record and every arm's lambda choice, as ``ladder --readout both|convex --json`` writes them and the
shipped reference carries them."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from lazylab.limits import MAX_LIST
from lazylab.schemas.fields import (
    Accuracy,
    Count,
    FanIn,
    Model,
    Name,
    Positive,
    Seed,
    Spread,
    TrainSize,
    Width,
    WidthKey,
)


class ConvexBank(Model):
    """The bank fields of a convex readout's or lambda choice's ``config`` (``experiments.convex._Bank``)."""

    arm: Name
    plugin: str
    width: Width
    seed: Seed
    train_size: TrainSize
    fan_in: FanIn
    data: str
    tol: Annotated[float, Field(gt=0)]
    max_iter: Annotated[int, Field(ge=1)]
    version: int
    schema_: int = Field(alias="schema")


class ConvexCellConfig(ConvexBank):
    lam: Annotated[float, Field(gt=0)]


class LambdaChoiceConfig(ConvexBank):
    lambdas: Annotated[list[Annotated[float, Field(gt=0)]], Field(min_length=1, max_length=MAX_LIST)]
    holdout: Annotated[int, Field(ge=1)]


STOPS = ("gradient", "objective", "max_iter", "line_search")


class ConvexRecord(Model):
    """``convex.runs[i]``: one convex readout's memo record (``experiments.convex.convex_cells``)."""

    key: Annotated[str, Field(pattern=r"^convex-[0-9a-f]{32}$")]
    config: ConvexCellConfig
    test_acc: Accuracy
    train_acc: Accuracy
    train_loss: Positive
    objective: Positive
    grad_norm: Positive
    iterations: Count
    evaluations: Annotated[int, Field(ge=0)]
    converged: bool
    stop: Literal[STOPS]
    lambda_: Annotated[float, Field(gt=0)] = Field(alias="lambda")
    seconds: Positive


class LambdaChoice(Model):
    """``convex.choices[i]``: an arm's choice of lambda at one width (``experiments.convex.lambda_cells``)."""

    key: Annotated[str, Field(pattern=r"^convex-lambda-[0-9a-f]{32}$")]
    config: LambdaChoiceConfig
    lambda_: Annotated[float, Field(gt=0)] = Field(alias="lambda")
    selection: dict[str, Accuracy]
    selection_iterations: dict[str, Count]
    evaluations: Annotated[int, Field(ge=0)]
    holdout_scored: Annotated[int, Field(ge=1)]
    seconds: Positive


class RefineConfig(LambdaChoiceConfig):
    walk: list[Annotated[list[float], Field(min_length=2, max_length=2)]]
    coarse: Annotated[float, Field(gt=0)]
    step: Annotated[float, Field(gt=0)]
    gain: Annotated[float, Field(ge=0)]
    beyond: Annotated[int, Field(ge=0)]


class LambdaRefinement(Model):
    """``convex.refinements[i]``: a lambda choice refined on a half-decade grid
    (``experiments.convex.refine_cells``)."""

    key: Annotated[str, Field(pattern=r"^convex-refine-[0-9a-f]{32}$")]
    config: RefineConfig
    lambda_: Annotated[float, Field(gt=0)] = Field(alias="lambda")
    coarse: Annotated[float, Field(gt=0)]
    selection: dict[str, Accuracy]
    selection_iterations: dict[str, Count]
    stops: dict[str, Literal[STOPS]]
    evaluations: Annotated[int, Field(ge=0)]
    holdout_scored: Annotated[int, Field(ge=1)]
    best: Accuracy
    seconds: Positive


class ConvexSummary(Model):
    n: Count
    mean: Accuracy | None = None
    std: Spread | None = None
    train_loss: Positive | None = None
    grad_norm: Positive | None = None
    iterations: Positive | None = None
    converged: bool
    lambdas: list[Annotated[float, Field(gt=0)]] = []


class ConvexArm(Model):
    plugin: str
    lambdas: dict[WidthKey, Annotated[float, Field(gt=0)] | None]
    cells: dict[WidthKey, ConvexSummary]


class ConvexPartial(Model):
    """``convex.partial``: a frontier whose first widths only are complete (``experiments.render.ladders``)."""

    widths: Annotated[list[Width], Field(min_length=1, max_length=MAX_LIST)]
    of: Annotated[list[Width], Field(min_length=1, max_length=MAX_LIST)]


class ConvexPending(Model):
    """``convex.pending``: records already computed at a partial frontier's incomplete widths (not analysed)."""

    runs: list[ConvexRecord]
    choices: list[LambdaChoice]
    refinements: list[LambdaRefinement] = []


class ConvexPart(Model):
    """``convex`` (``ladder --readout both|convex``): ``experiments.convex.run_convex_ladder``."""

    lambdas: Annotated[list[Annotated[float, Field(gt=0)]], Field(min_length=1, max_length=MAX_LIST)]
    tol: Annotated[float, Field(gt=0)]
    max_iter: Annotated[int, Field(ge=1)]
    holdout_fraction: str
    lambda_seed: Seed
    arms: dict[str, ConvexArm]
    runs: list[ConvexRecord]
    choices: list[LambdaChoice]
    refinements: list[LambdaRefinement] = []
    unrefined: list[Annotated[list[Name | Width], Field(min_length=2, max_length=2)]] = []
    partial: ConvexPartial | None = None
    pending: ConvexPending | None = None


# --------------------------------------------------------------------- the trained side at its optimum
class OptimumConfig(Model):
    """The fields common to a selection run's and a refit's ``config`` (``experiments.optimum``)."""

    arm: Name
    plugin: str
    width: Width
    seed: Seed
    lr: Annotated[float, Field(gt=0)]
    budget: Annotated[int, Field(ge=1)]
    schedule: Literal["cosine"]
    batch: Annotated[int, Field(ge=1)]
    train_size: TrainSize
    weight_decay: Annotated[float, Field(ge=0)]
    fan_in: FanIn
    data: str
    version: int
    schema_: int = Field(alias="schema")
    code: str


class SelectionConfig(OptimumConfig):
    patience: Annotated[int, Field(ge=1)]
    holdout: Annotated[int, Field(ge=1)]


class RefitConfig(OptimumConfig):
    epochs: Annotated[int, Field(ge=1)]


OPTIMUM_STOPS = ("patience", "budget", "epochs", "diverged")


class SelectionRecord(Model):
    """``optimum.runs[i]``: one selection run (``experiments.optimum.selection_runs``)."""

    key: Annotated[str, Field(pattern=r"^optimum-run-[0-9a-f]{32}$")]
    config: SelectionConfig
    held_out: list[Accuracy]
    test_curve: list[Accuracy]
    train_loss: list[float]
    best_epoch: Annotated[int, Field(ge=1)] | None
    held_out_best: Accuracy | None
    epochs: Annotated[int, Field(ge=0)]
    stop: Literal[OPTIMUM_STOPS]
    diverged: dict | None
    holdout_scored: Annotated[int, Field(ge=1)]
    seconds: Positive


class RefitRecord(Model):
    """``optimum.fits[i]``: one refit on every training image (``experiments.optimum.refit_runs``)."""

    key: Annotated[str, Field(pattern=r"^optimum-fit-[0-9a-f]{32}$")]
    config: RefitConfig
    test_acc: Accuracy | None
    train_loss: list[float]
    epochs: Annotated[int, Field(ge=0)]
    diverged: dict | None
    seconds: Positive


class TestSelected(Model):
    lr: Annotated[float, Field(gt=0)] | None = None
    test_acc: Accuracy | None = None
    per_seed: list[Accuracy] = []


class OptimumCell(Model):
    """``optimum.arms[arm].cells[width]``: the choice and the refits' test accuracy (``run_optimum``)."""

    lr: Annotated[float, Field(gt=0)] | None
    epochs: list[Annotated[int, Field(ge=1)] | None]
    held_out: Accuracy | None
    edge: Literal["top", "bottom"] | None
    rates: list[Annotated[float, Field(gt=0)]]
    n: Count
    test_acc: Accuracy | None
    std: Spread | None
    per_seed: list[Accuracy]
    test_selected: TestSelected


class OptimumArm(Model):
    plugin: str
    cells: dict[WidthKey, OptimumCell]


class OptimumPending(Model):
    """``optimum.pending``: records computed at widths whose choice is not complete yet (not analysed)."""

    runs: list[SelectionRecord] = []
    fits: list[RefitRecord] = []


class OptimumPart(Model):
    """``optimum`` (``ladder --readout both`` with trained arms): ``experiments.optimum.run_optimum``."""

    budget: Annotated[int, Field(ge=1)]
    patience: Annotated[int, Field(ge=1)]
    schedule: Literal["cosine"]
    holdout_fraction: str
    arms: dict[str, OptimumArm]
    runs: list[SelectionRecord]
    fits: list[RefitRecord]
    pending: OptimumPending | None = None
