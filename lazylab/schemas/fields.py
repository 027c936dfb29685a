"""Field types shared by the payload schemas (``lazylab.schemas.ladder``, ``lazylab.schemas.convex``): the ranges of
the options that produce a payload (``lazylab.limits``) and the protocol's fixed values (SPEC section 5)."""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, Field

from lazylab.bracket import RULES
from lazylab.config import RunConfig
from lazylab.limits import (
    MAX_EPOCHS,
    MAX_LIST,
    MAX_LR,
    MAX_SEED,
    MAX_TRAIN_SIZE,
    MAX_WIDTH,
    MIN_TRAIN_SIZE,
)
from lazylab.schemas import STRICT
from lazylab.schemas.caches import MAX_VALUE

MAX_DEPTH = 32  # levels of nesting: a ladder payload has 7 (analysis.redundancy_grid[i].mean_abs_corr.values[j])
# The protocol's fixed values (SPEC section 5): no option changes them, so a file with others was not written by a
# command line and a run rebuilt from it (lazylab verify) would be stored under a key no command could produce.
PROTOCOL = {f.name: f.default for f in dataclasses.fields(RunConfig) if f.name in ("batch", "weight_decay")}

Seed = Annotated[int, Field(ge=0, le=MAX_SEED)]
Width = Annotated[int, Field(ge=1, le=MAX_WIDTH)]
Rate = Annotated[float, Field(gt=0, le=MAX_LR)]
Epochs = Annotated[int, Field(ge=1, le=MAX_EPOCHS)]
TrainSize = Annotated[int, Field(ge=MIN_TRAIN_SIZE, le=MAX_TRAIN_SIZE)]
Count = Annotated[int, Field(ge=0, le=MAX_LIST)]  # seeds, runs, widths or images counted
Accuracy = Annotated[float, Field(ge=0, le=100)]  # test accuracy, %
Spread = Annotated[float, Field(ge=0, le=100)]  # a std or standard error of accuracies (points)
Points = Annotated[float, Field(ge=-100, le=100)]  # a difference of two accuracies
# Finite (STRICT) and at most MAX_VALUE in size: sums and means of up to MAX_LIST of them stay finite, so a file's
# 1e308 is refused in one line instead of overflowing (with numpy's warnings) where the report averages it.
Positive = Annotated[float, Field(ge=0, le=MAX_VALUE)]  # not negative: movement, losses, correlations, seconds
Finite = Annotated[float, Field(ge=-MAX_VALUE, le=MAX_VALUE)]
R2 = Annotated[float, Field(allow_inf_nan=True)]  # analysis.r_squared is NaN for a constant curve not fitted exactly
Name = Annotated[str, Field(min_length=1)]


def unique(values: list) -> list:
    """``values``, refused when one repeats (the command line refuses a repeated width, seed or arm)."""
    seen: set = set()
    for v in values:
        if v in seen:
            raise ValueError(f"{str(v)[:40]!r} is given more than once" if isinstance(v, str) else
                             f"{v!r} is given more than once")
        seen.add(v)
    return values


def _width_key(text: str) -> str:
    """A width as a JSON key: the decimal digits of a width in 1..MAX_WIDTH, as ``str(width)`` writes them."""
    if not re.fullmatch(r"[1-9][0-9]{0,5}", text) or int(text) > MAX_WIDTH:
        raise ValueError(f"{text[:40]!r} is not a width 1..{MAX_WIDTH} written as str(width)")
    return text


def _rate_key(text: str) -> str:
    """A rate as a JSON key (``repr(lr)``): a number in (0, MAX_LR]."""
    try:
        lr = float(text)
    except ValueError:
        raise ValueError(f"{text[:40]!r} is not a rate") from None
    if not (math.isfinite(lr) and 0 < lr <= MAX_LR):
        raise ValueError(f"{text[:40]!r} is not a rate in (0, {MAX_LR:g}]")
    return text


WidthKey = Annotated[str, AfterValidator(_width_key)]
RateKey = Annotated[str, AfterValidator(_rate_key)]
Seeds = Annotated[list[Seed], Field(max_length=MAX_LIST)]


class Model(BaseModel):
    model_config = STRICT


# ------------------------------------------------------------------------ plan
# A field typed ``X | None`` may be null (a writer writes null there); one with a default but no ``None`` may be
# absent (an older file) but never null, because its readers do ``payload.get(field, default)`` and use the value.
def _choice(value: str) -> str:
    if value not in RULES:
        raise ValueError(f"{value[:40]!r} is not a bracket rule ({', '.join(RULES)})")
    return value


def _fan_in(value: str) -> str:
    if value not in ("unit", "d"):
        raise ValueError(f"{value[:40]!r} is not a fan-in convention (unit, d)")
    return value


Rule = Annotated[str, AfterValidator(_choice)]
FanIn = Annotated[str, AfterValidator(_fan_in)]
Batch = Annotated[int, Field(ge=PROTOCOL["batch"], le=PROTOCOL["batch"])]
WeightDecay = Annotated[float, Field(ge=PROTOCOL["weight_decay"], le=PROTOCOL["weight_decay"])]
