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
    partial: ConvexPartial | None = None
    pending: ConvexPending | None = None
