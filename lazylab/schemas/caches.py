"""Schemas of the caches lazylab reads back (issue 32): the calibration, memo records and their metadata.

A cache that fails its schema is never an error: it is set aside (the calibration) or deleted (a
memo entry, a parsed data copy) and computed again, with one line saying so. The models use the
ranges of the options that produced the values (``lazylab.limits``, which ``lazylab.cli.options``
re-exports); strict mode refuses the coercions a damaged file relies on (``"4"`` for 4, ``true``
for 1) and NaN and Infinity.

* ``CalibrationDoc``: ``$XDG_CACHE_HOME/lazylab/calibration.json`` (``lazylab.calibration``).
* ``RunRecordDoc``: a training run's record in the memo (``run-<32 hex digits>``, written by
  ``lazylab.experiments.train_runs``), and ``RedundancyRecordDoc``, a bank's redundancy
  (``redundancy-<32 hex digits>``), the two records every ladder reads back; the other kinds of memo
  entry are in ``lazylab.schemas.entries``, which maps every key to its schema (``RecordEnvelope``, any
  JSON object, for a key of no known kind).
* ``FeatureHeader``: the header line of a feature-store entry (``lazylab.cache``).
* ``DataCopyDigests``: ``sha256.json`` beside a parsed data copy (``lazylab.data``).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, RootModel

from lazylab.limits import CALIBRATION_VERSION, MAX_LIST, MAX_LR, MAX_SEED, MAX_WIDTH
from lazylab.schemas import STRICT
from lazylab.text import CONTROLS

# Bounds on a calibration's constants, about 1000 to 10,000 times the 2-core development machine's
# (calibration.REFERENCE: a step 2.3e-4 s plus 6.2e-6 s per unit, a feature output 1.1e-8 s, a cold
# compilation 1.6 s). A value past them is a damaged file, and would turn every estimate into years.
MAX_COST_S = 1.0  # seconds: the fixed cost of one step (trained, or of the head alone)
MAX_UNIT_COST_S = 0.01  # seconds: one unit's share of a step
MAX_FEATURE_S = 1e-4  # seconds: one feature output (one image x one unit)
MAX_COMPILE_S = 86400.0  # seconds: compiling one program
MAX_LOAD = 1e6  # the 1-minute load average
MAX_CORES = 2**20  # os.cpu_count()
MAX_TEXT = 4096  # characters of a text field (code identity, time stamp, names)

# 0 is measured: calibration clips differences at 0
Cost = Annotated[float, Field(ge=0, le=MAX_COST_S)]
UnitCost = Annotated[float, Field(ge=0, le=MAX_UNIT_COST_S)]
FeatureCost = Annotated[float, Field(ge=0, le=MAX_FEATURE_S)]
CompileS = Annotated[float, Field(ge=0, le=MAX_COMPILE_S)]
# No control characters (lazylab.text.CONTROLS: C0, DEL, C1, bidirectional overrides): a newline or an escape
# sequence would forge lines on the terminal.
Text = Annotated[str, Field(max_length=MAX_TEXT, pattern=f"^[^{CONTROLS}]*$")]


class CalibrationDoc(BaseModel):
    """``calibration.json``: the fields of ``lazylab.calibration.Calibration`` with their ranges."""

    model_config = STRICT
    step_a: Cost
    step_b: UnitCost
    head_a: Cost
    head_b: UnitCost
    feature_s: FeatureCost
    compile_s: CompileS
    warm_compile_s: CompileS
    frozen_compile_s: CompileS
    warm_frozen_compile_s: CompileS
    cores: Annotated[int, Field(ge=1, le=MAX_CORES)]
    load: Annotated[float, Field(ge=0, le=MAX_LOAD)]
    code: Text
    version: Annotated[int, Field(ge=1)] = CALIBRATION_VERSION
    measured_at: Text = ""
    seconds: Annotated[float, Field(ge=0, le=MAX_COMPILE_S)] = 0.0
    # Version 2 (defaults: a version-1 file still reads back, and is measured again for its version)
    convex_eval_a: FeatureCost = 2.7e-7  # seconds per image of one convex evaluation
    convex_eval_b: FeatureCost = 1.2e-9  # seconds per image x unit


# ------------------------------------------------------------------ memo records

Accuracy = Annotated[float, Field(ge=0, le=100)]  # test accuracy, percent
# Any other number a record holds: finite (STRICT), and small enough that sums and means over up to
# MAX_LIST records stay finite (a ladder averages seeds, sums seconds); far past any real value.
MAX_VALUE = 1e300
Finite = Annotated[float, Field(ge=-MAX_VALUE, le=MAX_VALUE)]
NonNegative = Annotated[float, Field(ge=0, le=MAX_VALUE)]


class RunConfigDoc(BaseModel):
    """A run record's ``config`` (``lazylab.config.RunConfig`` as JSON), within the command line's ranges.

    Records by lazylab 0.1.0 have no ``code``; the fields after ``lr`` are optional so that
    ``lazylab runs --any-code`` still lists them.
    """

    model_config = STRICT
    arm: Text
    width: Annotated[int, Field(ge=1, le=MAX_WIDTH)]
    seed: Annotated[int, Field(ge=0, le=MAX_SEED)]
    lr: Annotated[float, Field(gt=0, le=MAX_LR)]
    plugin: Text | None = None
    epochs: Annotated[int, Field(ge=1, le=MAX_LIST)] | None = None
    batch: Annotated[int, Field(ge=1)] | None = None
    train_size: Annotated[int, Field(ge=1)] | None = None
    weight_decay: NonNegative | None = None
    fan_in: Text | None = None
    data: Text | None = None
    schema_: Annotated[int | None, Field(alias="schema")] = None
    code: Text | None = None


class Diverged(BaseModel):
    """Where a run's loss turned non-finite (``lazylab.train.fit_batch``)."""

    model_config = STRICT
    epoch: Annotated[int, Field(ge=1)]
    step: Annotated[int, Field(ge=0)]
    loss: Text  # the loss as text: it is NaN or Infinity, which JSON cannot hold


class Movement(BaseModel):
    """Prototype movement (``lazylab.experiments.movement``), dimensionless."""

    model_config = STRICT
    w_move_rel: NonNegative
    unit_median: NonNegative
    unit_max: NonNegative


class Scalars(BaseModel):
    """The bank's learned scalars at the start and (unless diverged) the end of training."""

    model_config = STRICT
    start: dict[str, Finite]
    end: dict[str, Finite] | None = None


class RunRecordDoc(BaseModel):
    """A training run's memo record: the fields ladders, brackets, reports and ``lazylab runs`` read.

    Readers rely on: ``key``, ``config`` (compared with the configuration looked up), ``best_acc``
    and ``final_acc`` (percent, None when diverged), the accuracy ``curve`` and ``train_loss`` per
    epoch (finite numbers), ``best_epoch``, ``diverged``, ``scalars``, ``movement``, ``seconds``.
    Only the first three are required (a lazylab 0.1.0 record, or a test's, lacks the others);
    ``lazylab.memo_disk`` serves a record with the defaults below filled in for those it lacks.
    """

    model_config = STRICT
    key: Text
    config: RunConfigDoc
    best_acc: Accuracy | None
    final_acc: Accuracy | None = None
    curve: Annotated[list[Accuracy], Field(max_length=MAX_LIST)] = []
    train_loss: Annotated[list[Finite], Field(max_length=MAX_LIST)] = []
    best_epoch: Annotated[int, Field(ge=1, le=MAX_LIST)] | None = None
    diverged: Diverged | None = None
    scalars: Scalars | None = None
    movement: Movement | None = None
    seconds: NonNegative = 0.0


class RedundancyRecordDoc(BaseModel):
    """A bank's redundancy measurement (``lazylab.experiments.laws.bank_redundancy``, ``analysis.redundancy``),
    read by every ladder's analysis and by ``lazylab redundancy``; nothing else checks it on read."""

    model_config = STRICT
    key: Text
    config: dict[str, Any]
    bank: Text
    seed: Annotated[int, Field(ge=0, le=MAX_SEED)]
    mean_abs_corr: NonNegative
    participation_ratio: NonNegative
    m: Annotated[int, Field(ge=1, le=MAX_WIDTH)]
    n: Annotated[int, Field(ge=2)]
    constant_units: Annotated[int, Field(ge=0, le=MAX_WIDTH)]


class RecordEnvelope(RootModel[dict[str, Any]]):
    """A memo record under a key of no known kind (``lazylab.schemas.entries``): any JSON object."""

    model_config = ConfigDict(strict=True)


# ------------------------------------------------------------------ metadata

DTYPE = r"[<>|=]?[biufc][1-9][0-9]?"  # plain numbers only, as lazylab.cache._ARRAY_KINDS
Dim = Annotated[int, Field(ge=0)]


class FeatureArray(BaseModel):
    """One array of a feature-store entry: its name, numpy dtype string and shape."""

    model_config = STRICT
    name: Annotated[str, Field(min_length=1, max_length=MAX_TEXT)]
    dtype: Annotated[str, Field(pattern=rf"^{DTYPE}$")]
    shape: Annotated[list[Dim], Field(max_length=32)]  # numpy's own limit on dimensions is 64


class FeatureHeader(BaseModel):
    """The JSON header line of a feature-store entry: ``{"arrays": [{name, dtype, shape}, ...]}``."""

    model_config = STRICT
    arrays: Annotated[list[FeatureArray], Field(max_length=MAX_LIST)]


Digest = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


class DataCopyDigests(BaseModel):
    """``sha256.json`` of a parsed data copy: the SHA-256 (hex) of each array (``lazylab.data._array_digest``)."""

    model_config = STRICT
    train_images: Digest
    train_labels: Digest
    test_images: Digest
    test_labels: Digest
