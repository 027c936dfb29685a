"""The dataclasses ``lazylab.api`` returns (docs/api.md): cells, rates, laws, exchange and convex rows,
ladders and the rows of gram, readout, trajectory and NTK results. Re-exported by ``lazylab.api``.

Accuracies are test accuracies in percent (0-100); widths are units ``m``; times are seconds.
Every collection (``Rows``) is a plain ``list`` with ``to_dataframe()``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields

from lazylab.errors import LazylabError

PANDAS_HINT = "to_dataframe needs pandas: pip install 'lazylab[pandas]'"
ROWS_KIND = "lazylab.api.Rows"  # the ``kind`` of the JSON text ``Rows.to_json`` writes (``lazylab.api.load`` reads it)


class Rows(list):
    """A list of dataclass rows (``Run``, ``Cell``, ``LadderLaw``, ...) that can become a DataFrame or JSON text."""

    def to_dataframe(self):
        """A ``pandas.DataFrame``: one row per item, one column per dataclass field (in field order).

        Dict- and list-valued fields (a run's ``config``, a law's ``widths``) stay Python objects
        in their cells. An empty collection gives an empty frame with no columns.
        Raises: LazylabError (one line, ``PANDAS_HINT``) when pandas is not installed.
        """
        try:
            import pandas as pd
        except ImportError:
            raise LazylabError(PANDAS_HINT) from None
        if not self:
            return pd.DataFrame()
        columns = [f.name for f in fields(self[0])]
        return pd.DataFrame([[getattr(r, c) for c in columns] for r in self], columns=columns)

    def to_dicts(self) -> list[dict]:
        """Each row as a JSON-ready dict (``Run.to_json``, else ``dataclasses.asdict``)."""
        return [r.to_json() if hasattr(r, "to_json") else asdict(r) for r in self]

    def to_json(self) -> str:
        """JSON text ``{"kind": "lazylab.api.Rows", "row": <row class name>, "rows": [...]}`` that
        ``lazylab.api.load`` reads back into equal rows (an empty collection has ``"row": null``).
        Raises: LazylabError for rows of more than one class."""
        classes = {type(r).__name__ for r in self}
        if len(classes) > 1:
            raise LazylabError(f"to_json: rows of one class only, got {', '.join(sorted(classes))}")
        return json.dumps({"kind": ROWS_KIND, "row": next(iter(classes), None), "rows": self.to_dicts()}, indent=1)


@dataclass
class Cell:
    """One arm at one width of a ladder: ``best_acc`` over its seeds.

    Attributes:
      arm, width: the cell. lr: the arm's rate (chosen by the bracket, or fixed).
      n: seeds run; mean, std: mean and sample std (ddof=1; 0.0 for one seed) of ``best_acc`` in
        percent over the seeds that did not diverge (None if every seed diverged or is missing);
      final_mean: mean last-epoch accuracy (percent); diverged, unstable: seeds flagged
        (``lazylab.analysis.unstable_reason``; unstable seeds stay in the mean); seeds: which;
      failed: seeds whose unit failed (no result: ``ArmRate.failed`` says why).
    """

    arm: str
    width: int
    lr: float | None
    n: int
    mean: float | None
    std: float | None
    final_mean: float | None
    diverged: int
    unstable: int
    seeds: list[int] = field(default_factory=list)
    failed: int = 0


@dataclass
class ArmRate:
    """An arm's learning rate: ``lr`` chosen by the bracket at m = 256, seed 0 (SPEC section 5), or fixed.

    Attributes: arm; plugin (``"<distribution> <version>+src.<hash>"``, None in older files); lr (None
    if every bracket run diverged); bracket: ``{rate: best_acc (%) or None}`` (empty for a fixed rate);
    failed: the unit failure that stopped the arm, or None; unit and init (``"random"``/``"data"``):
    the arm's unit and initialisation (None in files written before they were recorded); colour: the
    unit's colour in pictures (``#RRGGBB``; None where the file records none); checks_failed: the
    conformance checks its unit failed (``lazylab.testing.CHECKS``; its runs may not be reproducible).
    """

    arm: str
    plugin: str | None
    lr: float | None
    bracket: dict[float, float | None] = field(default_factory=dict)
    failed: str | None = None
    unit: str | None = None
    init: str | None = None
    colour: str | None = None
    checks_failed: list[str] = field(default_factory=list)


@dataclass
class LadderLaw:
    """``err(m) = 100 - mean acc = floor + c * m^(-alpha)`` fitted on an arm's climbing region (docs/ladder.md).

    Attributes: arm; floor (accuracy points of error left at infinite width), c (points at m = 1),
    alpha (dimensionless), r2 (on ``err``): None when not fitted; widths: the widths fitted (or the
    region found); n: how many; at_bound: alpha at an end of its search range [0.001, 5]; rule: how
    the widths were chosen; skipped: why no fit was made (fewer than 3 widths, ...), else None.
    """

    arm: str
    floor: float | None
    c: float | None
    alpha: float | None
    r2: float | None
    widths: list[int]
    n: int | None
    at_bound: bool
    rule: str | None
    skipped: str | None


@dataclass
class MovementLaw:
    """A trained arm's ``log w_move_rel = intercept + slope * log m`` (natural logs; docs/ladder.md).

    Attributes: arm; slope, intercept, r2 (None when not fitted); widths, n; skipped: why not, else None.
    """

    arm: str
    slope: float | None
    intercept: float | None
    r2: float | None
    widths: list[int]
    n: int | None
    skipped: str | None


@dataclass
class Gap:
    """Trained-minus-frozen mean ``best_acc`` of a pair of arms at one width (points), with its standard error."""

    trained: str
    frozen: str
    width: int
    gap: float | None
    se: float | None


@dataclass
class ExchangeRow:
    """How many frozen units match ``trained`` at ``width`` (``lazylab.exchange.exchange_rate``, docs/ladder.md).

    Attributes:
      trained, frozen: the pair (same unit and init); width: the trained width m;
      trained_acc: its mean ``best_acc`` (%); frozen_width: the matching frozen width (units;
        fractional, as interpolated or extrapolated), None when there is none;
      method: ``interpolated``, ``extrapolated``, ``never`` or ``none``; floor_acc: the frozen law's
        ``100 - floor`` (%), None without a law; text: the table's cell (``1109 (law only: ...)``);
        note: the row's ``note``, ``between`` or ``why``, when it has one.
    """

    trained: str
    frozen: str
    width: int
    trained_acc: float | None
    frozen_width: float | None
    method: str
    floor_acc: float | None
    text: str
    note: str | None = None


@dataclass
class ConvexCell:
    """The convex readout of a frozen arm at one width (``ladder --readout convex|both``; docs/convex.md).

    Attributes: arm; width (units m); n: seeds; mean, std: test accuracy (%) at the optimum of
    cross-entropy + L2, mean and sample std over the seeds; train_loss: at the optimum (nats, mean over
    seeds); grad_norm: the gradient norm there (the largest over seeds); iterations: L-BFGS iterations
    (mean); converged: every seed converged;
    lambdas: the L2 penalty chosen for each seed (on the held-out part of the training set).
    """

    arm: str
    width: int
    n: int
    mean: float | None
    std: float | None
    train_loss: float | None
    grad_norm: float | None
    iterations: float | None
    converged: bool | None
    lambdas: list[float] = field(default_factory=list)


@dataclass
class WallRow:
    """The wall table of ``ladder --readout both``: the AdamW protocol against the convex optimum, one arm and width.

    Attributes: arm; width (units); seeds; best_acc, final_acc: the protocol's (%); convex_acc: the
    convex optimum's (%); gap: ``convex_acc - best_acc`` (points); protocol_loss, convex_loss: training
    loss (nats); loss_gap: ``protocol_loss - convex_loss``; grad_norm: at the optimum; converged.
    """

    arm: str
    width: int
    seeds: int | None
    best_acc: float | None
    final_acc: float | None
    convex_acc: float | None
    gap: float | None
    protocol_loss: float | None
    convex_loss: float | None
    loss_gap: float | None
    grad_norm: float | None
    converged: bool | None


@dataclass
class Record:
    """One stored result behind a ladder, in long format: a training run (``readout`` ``adamw``) or a convex
    readout (``convex``), beside the cell it belongs to (``Ladder.records``).

    Attributes: readout; arm; width (units m); seed; lr: the AdamW rate (None for a convex readout);
    penalty: the convex readout's L2 penalty lambda (None for a run); bracket: a rate-bracket run that is
    not one of the ladder's cells (False for convex readouts); best_acc, final_acc: test accuracy (%) at
    the best and the last epoch (a convex readout: its one test accuracy in both); train_loss (nats): the
    last epoch's mean (a run), at the optimum (a convex readout); cell_n, cell_mean, cell_std: the cell of
    this readout at (arm, width) (``Cell`` or ``ConvexCell``; None for a bracket run); key: the memo key;
    checks_failed: the conformance checks its unit failed when it was computed.
    """

    readout: str
    arm: str
    width: int
    seed: int
    lr: float | None
    penalty: float | None
    bracket: bool
    best_acc: float | None
    final_acc: float | None
    train_loss: float | None
    cell_n: int | None
    cell_mean: float | None
    cell_std: float | None
    key: str
    checks_failed: list[str] = field(default_factory=list)


@dataclass
class Ladder:
    """A width ladder and its analysis.

    Attributes:
      arms, widths, seeds, epochs, train_size: the plan (``lr`` None: bracketed per arm).
      lr: the plan's fixed rate, or None.
      rates: one ``ArmRate`` per arm (the rate used, its bracket).
      cells: one ``Cell`` per arm x width (arms in plan order, widths ascending).
      runs: every run record as a ``Run`` (kind ``run``; bracket runs included), sorted like
        ``lazylab runs`` (``stored`` None when read from a file).
      laws: the ``LadderLaw`` of each arm; movement: the ``MovementLaw`` of each trained arm;
      gaps: ``Gap`` per pair and width; exchange: ``ExchangeRow`` per trained arm and width;
      exchange_sentence: the exchange rate in one sentence; warnings: unstable runs and bracket
        edges, one line each.
      convex, wall: ``ConvexCell`` per frozen arm x width and the ``WallRow`` table of a ``--readout both``
        ladder (``ladder(readout="both")``, or its file read by ``load``; empty otherwise).
      records: every run and convex record as a ``Record``, with its cell (long format:
        ``records.to_dataframe()``).
      analysis: the whole analysis dict (``experiments.laws.analyse_ladder``: also redundancy and
        learned scalars).
      source: where it came from (``memo at DIR`` or ``reference results ...``); provenance: the
        reference file's (where, when, by which lazylab), None for a ladder of the memo.
      notes: lines the memo reported while reading (corrupt entries, other code's entries).
    """

    arms: list[str]
    widths: list[int]
    seeds: list[int]
    epochs: int
    train_size: int
    lr: float | None
    rates: Rows
    cells: Rows
    runs: Rows
    laws: Rows
    movement: Rows
    gaps: Rows
    exchange: Rows
    exchange_sentence: str
    warnings: list[str]
    analysis: dict = field(repr=False)
    source: str = ""
    provenance: dict | None = None
    notes: list[str] = field(default_factory=list)
    convex: Rows = field(default_factory=Rows)
    wall: Rows = field(default_factory=Rows)
    records: Rows = field(default_factory=Rows)
    document: dict = field(default_factory=dict, repr=False, compare=False)  # the file it is (``to_dict``)

    def to_dict(self) -> dict:
        """The ladder as the JSON document it came from: what ``lazylab ladder --json`` writes (``--readout
        both``: with ``convex``), or a reference file (with its provenance); ``lazylab.api.load`` reads it back."""
        return json.loads(json.dumps(self.document))

    def to_json(self) -> str:
        """``to_dict()`` as JSON text, which ``lazylab.api.load`` reads back into an equal ``Ladder`` (but for
        ``source``, ``notes`` and the runs' ``stored`` times, which no file holds)."""
        return json.dumps(self.document, indent=1)

    def cell(self, arm: str, width: int) -> Cell:
        """The cell of ``arm`` at ``width``. Raises: LazylabError if the ladder has none."""
        for c in self.cells:
            if c.arm == arm and c.width == width:
                return c
        raise LazylabError(f"the ladder has no cell {arm} at m = {width}; arms: {', '.join(self.arms)}; "
                           f"widths: {', '.join(map(str, self.widths))}")

    def law(self, arm: str) -> LadderLaw:
        """The ladder law of ``arm``. Raises: LazylabError if ``arm`` is not in the ladder."""
        for law in self.laws:
            if law.arm == arm:
                return law
        raise LazylabError(f"the ladder has no arm {arm!r}; arms: {', '.join(self.arms)}")

    def to_dataframe(self):
        """``cells.to_dataframe()``: one row per arm x width (the accuracy table)."""
        return self.cells.to_dataframe()


@dataclass
class GramFrame:
    """One frame of a ``lazylab gram`` file: the bank grown to ``width`` units.

    Attributes: width (units m); block_contrast: mean within-class minus mean cross-class entry of the
    normalised Gram (dimensionless); distance: ``||G_m - G_ref||_F`` to the reference bank's normalised
    Gram; raw_distance: ``||K_m - K_ref||_F / ||K_ref||_F`` of the unnormalised ``K = Phi Phi^T / m``.
    """

    width: int
    block_contrast: float | None
    distance: float | None
    raw_distance: float | None


@dataclass
class ReadoutPoint:
    """One evaluation of a ``lazylab readout`` curve: ``width`` units, after ``step`` Adam steps; test_acc (%),
    train_loss (nats, at the evaluated parameters)."""

    width: int
    step: int
    test_acc: float | None
    train_loss: float | None


@dataclass
class TrajectoryEpoch:
    """One epoch of a ``lazylab trajectory`` arm (epoch 0: the initialisation).

    Attributes: arm; epoch; accuracy: test accuracy (%); w_move_rel: relative movement of the bank from its
    initialisation (dimensionless); travel_median, travel_max: the tracked prototypes' travel (median, max).
    """

    arm: str
    epoch: int
    accuracy: float | None
    w_move_rel: float | None
    travel_median: float | None
    travel_max: float | None


@dataclass
class NtkCheck:
    """One check of ``lazylab ntk scalar`` or ``ntk audit``: its measured ``value``, whether it ``passed`` and
    whether it was ``expect``-ed to pass (a control is expected to fail)."""

    name: str
    value: float | None
    passed: bool
    expect: bool


@dataclass
class Result:
    """A ``--json`` file of ``lazylab gram``, ``readout``, ``trajectory``, ``ntk scalar``/``ntk audit`` or a
    ``ladder --readout convex`` file, read back by ``load``.

    Attributes:
      kind: ``gram``, ``readout``, ``trajectory``, ``ntk`` (``ntk scalar``), ``ntk-audit`` or ``convex``.
      config: the configuration that produced it, as the file records it (gram: ``config``; readout:
        the first curve's ``config`` without its width, plus ``widths``; trajectory and convex: ``plan``;
        ntk: ``w0`` and ``dt``; ntk-audit: empty); the options' fields are checked against their
        types and ranges.
      rows: the measurements as typed rows: ``GramFrame`` per frame, ``ReadoutPoint`` per width x
        evaluation, ``TrajectoryEpoch`` per arm x epoch, ``NtkCheck`` per check, ``ConvexCell`` per
        arm x width.
      data: the whole document, as written (fits, tables, pictures, ...).
      source: the file read.
    """

    kind: str
    config: dict
    rows: Rows
    data: dict | list = field(repr=False)
    source: str = ""

    def to_dataframe(self):
        """``rows.to_dataframe()``."""
        return self.rows.to_dataframe()

    def to_json(self) -> str:
        """The document it was read from, as JSON text (``lazylab.api.load`` reads it back)."""
        return json.dumps(self.data, indent=1)
