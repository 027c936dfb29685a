"""The schema of every kind of memo entry, by its key (issue 51): every field and array its readers use, with types.

A memo key is ``<prefix>-<32 hex digits>`` (``lazylab.config.memo_key``), optionally followed by a part
name (``-summary``, ``-checks``, ``-snapshots``, ``-k``, ``-p``); the prefix and part say the kind
(``ENTRY_KINDS``). A kind is either a JSON record, checked by a pydantic model (``lazylab.schemas``:
strict types, no NaN unless a field says so, ranges), or a set of arrays, checked by an ``ArraySpec``
(names, dtype kinds and shapes whose named dimensions agree across the entry). ``lazylab.memo_disk``
checks every entry it reads against its kind, so a reader never meets a field of the wrong type or an
array of the wrong rank; what only the configuration looked up can tell (a Gram's widths, a probe's
size) its reader compares itself, and an entry that disagrees is rejected like a corrupt one
(``lazylab.cache.Memo.reject``). A key of no known kind (a test's ``"r"``) holds any JSON object or
any arrays of plain numbers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Annotated, Any

import numpy as np
from pydantic import BaseModel, Field, model_validator

from lazylab.limits import MAX_LIST, MAX_WIDTH
from lazylab.schemas import STRICT
from lazylab.schemas.caches import (
    Accuracy,
    Diverged,
    Finite,
    Movement,
    NonNegative,
    RecordEnvelope,
    RedundancyRecordDoc,
    RunConfigDoc,
    RunRecordDoc,
    Text,
)
from lazylab.schemas.convex import ConvexRecord, LambdaChoice, LambdaRefinement, RefitRecord, SelectionRecord

# ``<prefix>-<32 hex digits>`` and an optional ``-<part>`` (lazylab.runs lists results by it too).
KEY = re.compile(r"(?P<prefix>[a-z]+(?:-[a-z]+)?)-(?P<digest>[0-9a-f]{32})(?:-(?P<part>[a-z]+))?")

Measured = Annotated[float, Field(allow_inf_nan=True)]  # a measurement that may be NaN (a kernel of zeros)
Count = Annotated[int, Field(ge=0)]
Curve = Annotated[list[Finite], Field(max_length=MAX_LIST)]


class Doc(BaseModel):
    model_config = STRICT


# ---------------------------------------------------------------------- arrays
@dataclass(frozen=True)
class ArraySpec:
    """The arrays of one entry kind.

    Attributes:
      required, optional: name -> ``(dtype kinds, shape)``; kinds are numpy ``dtype.kind`` letters
        (``"f"`` float, ``"iu"`` integers, ``"b"`` bool), a shape is a tuple of named dimensions (str,
        equal wherever they recur in the entry) and fixed sizes (int).
      prefixed: name prefix -> dtype kinds, for arrays named by their content (``table/<column>``,
        ``net/<parameter>``): any shape; ``at_least_one``: whether one such array is required.
    """

    required: dict[str, tuple[str, tuple]] = field(default_factory=dict)
    optional: dict[str, tuple[str, tuple]] = field(default_factory=dict)
    prefixed: dict[str, str] = field(default_factory=dict)
    at_least_one: bool = True

    def problem(self, arrays: dict[str, np.ndarray]) -> str | None:
        """Why ``arrays`` are not of this kind (one line), or None."""
        missing = [n for n in self.required if n not in arrays]
        if missing:
            return f"array {missing[0]!r} is missing"
        dims: dict[str, int] = {}
        for name, a in arrays.items():
            spec = self.required.get(name) or self.optional.get(name)
            if spec is None:
                kinds = next((k for p, k in self.prefixed.items() if name.startswith(p)), None)
                if kinds is None:
                    return f"unexpected array {name!r}"
                spec = (kinds, None)
            kinds, shape = spec
            if a.dtype.kind not in kinds or a.dtype.fields is not None:
                return f"array {name!r} has dtype {a.dtype}, not of kind {kinds!r}"
            if shape is None:
                continue
            if a.ndim != len(shape):
                return f"array {name!r} has {a.ndim} dimensions, not {len(shape)}"
            for size, want in zip(a.shape, shape):
                want = dims.setdefault(want, size) if isinstance(want, str) else want
                if size != want:
                    return f"array {name!r} has shape {a.shape}, which disagrees with the entry's other arrays"
        if self.prefixed and self.at_least_one and not any(n.startswith(tuple(self.prefixed)) for n in arrays):
            return f"no array named {' or '.join(repr(p + '...') for p in self.prefixed)}"
        return None


FLOAT, INT = "f", "iu"
ANY_NUMBERS = "biufc"


# ------------------------------------------------------------------ gram study
class FitDoc(Doc):
    """A log-log least-squares fit (``lazylab.experiments.gram_measures.loglog_slope``): all None but ``n`` and
    ``min_width`` when fewer than 3 widths qualify; ``r2`` None when the values are constant."""

    slope: Finite | None
    intercept: Finite | None
    r2: Measured | None
    widths: Annotated[list[Annotated[int, Field(ge=1, le=MAX_WIDTH)]], Field(min_length=2, max_length=2)] | None
    n: Count
    min_width: Annotated[int, Field(ge=1)]

    @model_validator(mode="after")
    def _fitted_whole(self):
        fitted = [v is not None for v in (self.slope, self.intercept, self.widths)]
        if any(fitted) and not all(fitted):
            raise ValueError("a fit has a slope, an intercept and widths together, or none of them")
        return self


class GramEnsembleDoc(Doc):
    fit: FitDoc
    raw_fit: FitDoc


class GramSummaryDoc(Doc):
    """``gram-<h>-summary``: the fits and scalars of a Gram study (``lazylab.experiments.gram.run_gram``)."""

    fit: FitDoc
    raw_fit: FitDoc
    reference_contrast: Finite
    scalars: dict[str, Finite]
    ensemble: GramEnsembleDoc | None


GRAM_ARRAYS = ArraySpec(
    required={"widths": (INT, ("F",)), "grams": (FLOAT, ("F", "n", "n")), "reference": (FLOAT, ("n", "n")),
              "contrast": (FLOAT, ("F",)), "distance": (FLOAT, ("F",)), "raw_distance": (FLOAT, ("F",)),
              "labels": (INT, ("n",)), "image_index": (INT, ("n",))},
    optional={"ens_distance": (FLOAT, ("F",)), "ens_raw_distance": (FLOAT, ("F",))})


# ----------------------------------------------------------------- trajectory
class TrajectoryRecordDoc(Doc):
    """``traj-<h>``: one trajectory (``lazylab.experiments.trajectory.trajectory_run``). Every per-epoch list
    has one entry per epoch ``0..E`` (``train_loss`` one per epoch ``1..E``), ``epochs`` is ``[0, 1, ..., E]``."""

    key: Text
    snapshots_key: Text
    config: RunConfigDoc
    snapshot_units: Annotated[int, Field(ge=1, le=MAX_WIDTH)]
    epochs: Annotated[list[Count], Field(min_length=1, max_length=MAX_LIST)]
    travel_median: list[NonNegative]
    travel_max: list[NonNegative]
    w_move_rel: list[NonNegative]
    accuracy: list[Accuracy]
    scalars: list[dict[str, Finite]]
    train_loss: list[Finite]
    diverged: Diverged | None
    seconds: NonNegative

    @model_validator(mode="after")
    def _one_entry_per_epoch(self):
        if self.epochs != list(range(len(self.epochs))):
            raise ValueError("epochs are not 0, 1, ..., E")
        for name in ("travel_median", "travel_max", "w_move_rel", "accuracy", "scalars"):
            if len(getattr(self, name)) != len(self.epochs):
                raise ValueError(f"{name} has {len(getattr(self, name))} entries for {len(self.epochs)} epochs")
        if len(self.train_loss) != len(self.epochs) - 1:
            raise ValueError(f"train_loss has {len(self.train_loss)} entries for {len(self.epochs) - 1} epochs")
        return self


# ------------------------------------------------------------------------ ntk
class CheckDoc(Doc):
    """One check of ``lazylab.ntk.checks.Check`` (``to_json``)."""

    name: Text
    value: Measured
    tol: Measured
    passed: bool
    expect: bool
    note: Text


class NtkChecksDoc(Doc):
    """``ntkaudit-<h>``: the audit's checks."""

    checks: Annotated[list[CheckDoc], Field(max_length=MAX_LIST)]


class NtkScalarChecksDoc(NtkChecksDoc):
    """``ntkscalar-<h>-checks``: the scalar model's settings and checks."""

    w0: Finite
    dt: Annotated[float, Field(gt=0)]
    offset: Finite


class NtkLabSummaryDoc(Doc):
    """``ntklab-<h>-summary``: what the 1-D lab's arrays do not hold."""

    n_params: Annotated[int, Field(ge=1)]
    jac_shape: Annotated[list[Annotated[int, Field(ge=1)]], Field(min_length=2, max_length=2)]
    start_gap: Measured


class SweepRowDoc(Doc):
    width: Annotated[int, Field(ge=1)]
    drift: Measured
    drift_std: Measured
    disagreement: Measured
    disagreement_std: Measured
    move_net: Measured
    move_lin: Measured
    train_mse: Measured
    train_mse_lin: Measured
    test_mse: Measured
    test_mse_lin: Measured


class SlopeDoc(Doc):
    """A log-log slope of the sweep (``lazylab.ntk.lab.loglog_slope``)."""

    slope: Measured
    intercept: Measured
    r2: Measured


class NtkSweepDoc(Doc):
    """``ntksweep-<h>``: the lab's width sweep (``lazylab.ntk.lab.SweepResult.to_json``), one row per width."""

    config: dict[str, Any]
    widths: Annotated[list[Annotated[int, Field(ge=1)]], Field(min_length=2, max_length=MAX_LIST)]
    seeds: Annotated[list[Count], Field(min_length=1, max_length=MAX_LIST)]
    rows: list[SweepRowDoc]
    slopes: dict[str, SlopeDoc]

    @model_validator(mode="after")
    def _row_per_width(self):
        if [r.width for r in self.rows] != self.widths:
            raise ValueError("rows are not one per width, in order")
        missing = {"drift", "disagreement", "move_net"} - set(self.slopes)
        if missing:
            raise ValueError(f"slopes lack {sorted(missing)[0]!r}")
        return self


class KernelStatsDoc(Doc):
    fro: Measured
    asym: Measured
    min_eig: Measured
    max_eig: Measured
    min_over_max: Measured


class NtkMethodDoc(Doc):
    method: Text
    notes: Text
    n_params: Annotated[int, Field(ge=1)]
    jacobian_mib: NonNegative
    work_mib: NonNegative
    seconds: Annotated[list[NonNegative], Field(min_length=2, max_length=2)]


class NtkTrainingDoc(Doc):
    """``ntkarm-train-<h>``: the network's and the linearization's training (``lazylab.experiments.ntk.run_arm``)."""

    net_curve: Annotated[list[Accuracy], Field(max_length=MAX_LIST)]
    net_train_loss: Annotated[list[Measured], Field(max_length=MAX_LIST)]
    lin_train_loss: Annotated[list[Measured], Field(max_length=MAX_LIST)]
    seconds: NonNegative


class NtkArmConfigDoc(Doc):
    run: dict[str, Any]
    ntk_schema: int
    probe: Annotated[int, Field(ge=1)]
    method: Text
    limit_bytes: Annotated[int, Field(ge=0)] | None


class NtkArmRecordDoc(Doc):
    """``ntkarm-<h>``: an arm's NTK diagnostics (``lazylab.experiments.ntk.run_arm``)."""

    config: NtkArmConfigDoc
    arm: Text
    width: Annotated[int, Field(ge=1, le=MAX_WIDTH)]
    seed: Count
    lr: Annotated[float, Field(gt=0)]
    epochs: Annotated[int, Field(ge=1)]
    train_size: Annotated[int, Field(ge=1)]
    probe: Annotated[int, Field(ge=1)]
    ntk: NtkMethodDoc
    drift: Measured
    drift_trace: Measured
    kernel_init: KernelStatsDoc
    kernel_final: KernelStatsDoc
    disagreement_rms: Measured
    disagreement_rel: Measured
    argmax_agreement: Accuracy
    logit_move_rms: Measured
    acc_net: Accuracy
    acc_lin: Accuracy
    move_net: Measured
    move_lin: Measured
    prototypes: Movement
    training: NtkTrainingDoc
    seconds: NonNegative
    cached: bool

    @model_validator(mode="after")
    def _probe_once(self):
        if self.probe != self.config.probe:
            raise ValueError(f"probe {self.probe} differs from its configuration's {self.config.probe}")
        return self


# The scalar model's table (``lazylab.ntk.scalar.ScalarResult.table``), one value per report time.
NTK_SCALAR_COLUMNS = ("t", "f_net_closed", "f_net_int", "f_lin_closed", "f_lin_int", "resid_net_int", "resid_lin_int",
                      "kernel_net_closed", "kernel_net_int", "kernel_lin", "dist_net_closed", "dist_net_int",
                      "dist_lin_closed", "dist_lin_int", "ctrl_offset_f_int", "ctrl_frozen_final_f", "mode1_closed",
                      "mode1_int", "mode2_closed", "mode2_int")

NTK_LAB_ARRAYS = ArraySpec(required={
    "theta0": (FLOAT, (3, "m")), "theta": (FLOAT, (3, "m")), "theta_lin": (FLOAT, (3, "m")),
    "loss": (FLOAT, ("T",)), "loss_lin": (FLOAT, ("T",)), "snap_steps": (INT, ("F",)),
    "pred_test": (FLOAT, ("F", "n_test")), "pred_test_lin": (FLOAT, ("F", "n_test")),
    "pred_train": (FLOAT, ("F", "n")), "pred_train_lin": (FLOAT, ("F", "n")), "drift": (FLOAT, ("F",)),
    "K0": (FLOAT, ("n", "n")), "KT": (FLOAT, ("n", "n"))})


# ------------------------------------------------------------------- the kinds
FEATURES = ArraySpec(required={"train": (FLOAT, ("n_train", "m")), "test": (FLOAT, ("n_test", "m"))})

# (prefix, part) -> the record's model, or the arrays' spec.
ENTRY_KINDS: dict[tuple[str, str | None], type[BaseModel] | ArraySpec] = {
    ("run", None): RunRecordDoc,
    ("convex", None): ConvexRecord,
    ("convex-lambda", None): LambdaChoice,
    ("convex-refine", None): LambdaRefinement,
    # one solve of a refinement, kept as it finishes (lazylab.experiments.convex.step_memo)
    ("convex-step", None): ArraySpec(required={"W": (FLOAT, ("m", 10)), "b": (FLOAT, (10,)), "iterations": (INT, ()),
                                               "evaluations": (INT, ()), "stop": (INT, ())}),
    ("optimum-run", None): SelectionRecord,
    ("optimum-fit", None): RefitRecord,
    ("redundancy", None): RedundancyRecordDoc,
    ("gram", None): GRAM_ARRAYS,
    ("gram", "summary"): GramSummaryDoc,
    ("gramfeat", None): ArraySpec(required={"phi": (FLOAT, ("n", "m"))}),
    ("gramref", None): ArraySpec(required={"kernel": (FLOAT, ("n", "n"))}),
    ("readfeat", None): FEATURES,
    ("readout", None): ArraySpec(required={"steps": (INT, ("T",)), "acc": (FLOAT, ("T",)), "loss": (FLOAT, ("T",)),
                                           "preds": (INT, ("T", "n_test"))}),
    ("traj", None): TrajectoryRecordDoc,
    ("traj", "snapshots"): ArraySpec(required={"snapshots": (FLOAT, ("E", "units", "d"))}),
    ("ntklab", None): NTK_LAB_ARRAYS,
    ("ntklab", "summary"): NtkLabSummaryDoc,
    ("ntksweep", None): NtkSweepDoc,
    ("ntkscalar", None): ArraySpec(required={"times": (FLOAT, ("T",)),
                                             **{f"table/{c}": (FLOAT, ("T",)) for c in NTK_SCALAR_COLUMNS}}),
    ("ntkscalar", "checks"): NtkScalarChecksDoc,
    ("ntkaudit", None): NtkChecksDoc,
    ("ntkarm", None): NtkArmRecordDoc,
    ("ntkarm", "k"): ArraySpec(required={"K0_trace": (FLOAT, ("N", "N")), "KT_trace": (FLOAT, ("N", "N")),
                                         "labels": (INT, ("N",))}),
    ("ntkarm-train", None): NtkTrainingDoc,
    ("ntkarm-train", "p"): ArraySpec(prefixed={"net/": FLOAT, "lin/": FLOAT}),
    ("bankfeat", None): FEATURES,  # the feature store's frozen-bank features (lazylab.experiments.Workspace)
}
ANY_ARRAYS = ArraySpec(prefixed={"": ANY_NUMBERS}, at_least_one=False)


def entry_kind(key: str) -> type[BaseModel] | ArraySpec | None:
    """The schema of the entry stored under memo key ``key``: a record's pydantic model or an ``ArraySpec``;
    None for a key of no known kind."""
    m = KEY.fullmatch(key)
    return ENTRY_KINDS.get((m["prefix"], m["part"])) if m else None


def record_model(key: str) -> type[BaseModel]:
    """The model of the JSON record stored under ``key``: its kind's, ``RecordEnvelope`` (any JSON object) for a
    key of no known kind. Raises ValueError (one line) for a key whose kind holds arrays."""
    kind = entry_kind(key)
    if isinstance(kind, ArraySpec):
        raise ValueError("a JSON record where arrays belong")
    return kind or RecordEnvelope


def array_spec(key: str) -> ArraySpec:
    """The spec of the arrays stored under ``key`` (``ANY_ARRAYS`` for a key of no known kind). Raises ValueError
    (one line) for a key whose kind is a JSON record."""
    kind = entry_kind(key)
    if kind is not None and not isinstance(kind, ArraySpec):
        raise ValueError("arrays where a JSON record belongs")
    return kind or ANY_ARRAYS
