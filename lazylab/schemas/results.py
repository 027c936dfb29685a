"""Schemas of the ``--json`` files ``render --from`` reads back: ``lazylab gram``, ``readout``, ``trajectory``
and ``ntk scalar`` (issue 32).

``render --from FILE`` sets a picture's options from the configuration such a file records, and that
configuration becomes a memo key: a value the command line refuses (a seed of 2**32, which jax would fold to 0;
a rate of 0; a fractional width) must be refused in the file too, or the picture is drawn under a key no command
could have produced. Each model covers every field ``lazylab.experiments.render.with_json`` reads, with the
type and range of the option that wrote it (``lazylab.cli.studies``, ``lazylab.cli.ntk``); other fields
(the measurements, the pictures' paths) are ignored. ``tests/test_from_files.py`` checks these ranges against
the click options themselves, so the two cannot drift apart.

* ``GramFile``: ``lazylab gram --json`` (and ``out/gram/gram.json``): ``experiment`` and ``config``.
* ``ReadoutFile``: ``lazylab readout --json`` (and ``readout.json``): ``experiment`` and each curve's ``config``,
  one readout run's (the same arm, rate, steps, ... in every curve; distinct widths).
* ``TrajectoryFile``: ``lazylab trajectory --json``: its ``plan``.
* ``NtkScalarFile``: ``lazylab ntk scalar --json`` (the ``ntk`` file ``json_kind`` recognises by ``checks``):
  ``w0``, ``dt``, ``table`` and ``checks``. ``render`` draws the NTK pictures with their defaults, so a valid
  one is still refused, in its own line.

The bounds are the options' own, from ``lazylab.limits``, which the options read too; this module may not
import ``lazylab.cli`` or the experiments (``lazylab.limits`` says why).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    Field,
    ValidationInfo,
    field_validator,
)

from lazylab.limits import (
    CLASS_NAMES,
    GRAM_MAX_FRAMES,
    GRAM_MAX_PER_CLASS,
    GRAM_MAX_REF_UNITS,
    GRAM_MAX_REPEATS,
    GRAM_MAX_SEED,
    GRAM_MIN_PER_CLASS,
    MAX_EPOCHS,
    MAX_LIST,
    MAX_LR,
    MAX_SEED,
    MAX_TRAIN_SIZE,
    MAX_WIDTH,
    MIN_TRAIN_SIZE,
    NAME_MAX,
    NTK_DT,
    NTK_W0,
    READOUT_MAX_STEPS,
)
from lazylab.schemas import STRICT

Seed = Annotated[int, Field(ge=0, le=MAX_SEED)]
Width = Annotated[int, Field(ge=1, le=MAX_WIDTH)]
Rate = Annotated[float, Field(gt=0, le=MAX_LR)]
Epochs = Annotated[int, Field(ge=1, le=MAX_EPOCHS)]
TrainSize = Annotated[int, Field(ge=MIN_TRAIN_SIZE, le=MAX_TRAIN_SIZE)]
Positive = Annotated[int, Field(ge=1)]  # --eval-every, --snapshots: at least 1, no upper bound on the command line
ArmName = Annotated[str, Field(min_length=1, max_length=NAME_MAX)]  # arm names end up in output file names


def _distinct(values: list) -> list:
    seen = set()
    for v in values:
        if v in seen:
            raise ValueError(f"{v!r} is given more than once")
        seen.add(v)
    return values


def _class_index(value):
    """A class name of the dataset's list (as the file's ``classes`` map writes it) -> its index; else as given."""
    if isinstance(value, str):
        if value in CLASS_NAMES:
            return CLASS_NAMES.index(value)
        names = ", ".join(f"{i} {n}" for i, n in enumerate(CLASS_NAMES))
        raise ValueError(f"unknown class {value[:40]!r}; classes are {names}")
    return value


ClassIndex = Annotated[int, BeforeValidator(_class_index), Field(ge=0, le=len(CLASS_NAMES) - 1)]


class Model(BaseModel):
    model_config = STRICT


# ---------------------------------------------------------------------- gram
class GramConfigDoc(Model):
    """``config`` of a gram file: ``lazylab gram``'s options (``ref_units`` as resolved, or null: the default)."""

    arm: ArmName
    max_units: Width
    frames: Annotated[int, Field(ge=1, le=GRAM_MAX_FRAMES)]
    classes: Annotated[list[ClassIndex], Field(min_length=2, max_length=len(CLASS_NAMES)), AfterValidator(_distinct)]
    per_class: Annotated[int, Field(ge=GRAM_MIN_PER_CLASS, le=GRAM_MAX_PER_CLASS)]
    seed: Annotated[int, Field(ge=0, le=GRAM_MAX_SEED)]
    ref_units: Annotated[int, Field(ge=1, le=GRAM_MAX_REF_UNITS)] | None
    fit_min: Width
    repeats: Annotated[int, Field(ge=1, le=GRAM_MAX_REPEATS)]


class GramFile(Model):
    """A ``lazylab gram --json`` file."""

    experiment: Literal["gram"]
    config: GramConfigDoc


# ------------------------------------------------------------------- readout
class ReadoutConfigDoc(Model):
    """``curves[i].config`` of a readout file: ``lazylab readout``'s options for one width."""

    arm: ArmName
    width: Width
    train_size: TrainSize
    steps: Annotated[int, Field(ge=1, le=READOUT_MAX_STEPS)]
    lr: Rate
    eval_every: Positive
    seed: Seed


class ReadoutCurveDoc(Model):
    config: ReadoutConfigDoc


SHARED = ("arm", "train_size", "steps", "lr", "eval_every", "seed")  # one readout run: the same in every curve


class ReadoutFile(Model):
    """A ``lazylab readout --json`` file: one curve per width of one run."""

    experiment: Literal["readout"]
    curves: Annotated[list[ReadoutCurveDoc], Field(min_length=1, max_length=MAX_LIST)]

    @field_validator("curves")
    @classmethod
    def _one_run(cls, curves: list[ReadoutCurveDoc]) -> list[ReadoutCurveDoc]:
        first = curves[0].config
        for i, c in enumerate(curves[1:], 1):
            other = next((f for f in SHARED if getattr(c.config, f) != getattr(first, f)), None)
            if other is not None:  # with_json takes curve 0's: another value would be silently dropped
                raise ValueError(f"curve {i}'s {other} differs from curve 0's (one readout run has one {other})")
        seen = set()
        for c in curves:
            if c.config.width in seen:  # --widths refuses a repeat: one run would be drawn twice
                raise ValueError(f"width {c.config.width} is given more than once")
            seen.add(c.config.width)
        return curves


# ---------------------------------------------------------------- trajectory
class TrajectoryPlanDoc(Model):
    """``plan`` of a trajectory file: ``lazylab trajectory``'s options (``lr`` null: bracketed)."""

    arms: Annotated[list[ArmName], Field(min_length=1, max_length=MAX_LIST), AfterValidator(_distinct)]
    width: Width
    epochs: Epochs
    snapshots: Positive
    seed: Seed
    lr: Rate | None
    train_size: TrainSize
    fan_in: Literal["unit", "d"]

    @field_validator("snapshots")
    @classmethod
    def _within_width(cls, snapshots: int, info: ValidationInfo) -> int:
        width = info.data.get("width")  # absent when the width itself was refused
        if width is not None and snapshots > width:
            raise ValueError(f"{snapshots} snapshots exceed the width {width}")
        return snapshots


class TrajectoryFile(Model):
    """A ``lazylab trajectory --json`` file."""

    plan: TrajectoryPlanDoc


# ----------------------------------------------------------------------- ntk
Measured = Annotated[float, Field(allow_inf_nan=True)]  # a check's measurement may be NaN (json writes it)


class NtkCheckDoc(Model):
    name: str
    value: Measured
    passed: bool
    expect: bool


class NtkScalarFile(Model):
    """A ``lazylab ntk scalar --json`` file: its options and what it measured."""

    w0: Annotated[float, Field(ge=NTK_W0[0], le=NTK_W0[1])]
    dt: Annotated[float, Field(ge=NTK_DT[0], le=NTK_DT[1])]
    table: dict[str, list[Measured]]  # column -> one value per report time (--times)
    checks: list[NtkCheckDoc]


RESULT_FILES: dict[str, type[Model]] = {
    "gram": GramFile, "readout": ReadoutFile, "trajectory": TrajectoryFile, "ntk": NtkScalarFile,
}
