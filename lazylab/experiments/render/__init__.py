"""What ``lazylab render`` shows, and where each result comes from (SPEC section 7, ``render``).

``render`` reads records from the memo and asks the experiments for what is
missing (DESIGN.md). This package holds the settings of every picture (the
subcommands' own defaults, so the memo entries are shared with ``lazylab
gram``, ``readout``, ``trajectory``, ``ntk`` and ``ladder``) and one function
per result that returns it from the memo or computes and stores it. No
drawing and no printing here: ``lazylab.render.report`` draws.

The package's modules: ``settings`` (the settings, ``DEFAULT_SETTINGS``, and
``with_json``/``load_ladder_json`` for ``render --from``), ``results`` (the
gram, readout, trajectory and NTK results: spec, then memo or compute),
``ladders`` (your ladder and the paper ladder) and ``export`` (``build_reference``: a ladder's
reference document from the memo, for ``scripts/export_reference.py``). Every name is importable from
``lazylab.experiments.render`` itself.

Two choices differ from the subcommands, both stated in the report:

* **Trajectory rate.** ``lazylab trajectory`` brackets each arm's rate first
  (9 runs at m = 256 for 12 epochs, about 4 minutes on two cores). ``render``
  uses each arm's bracketed rate when its whole bracket is already in the
  memo (from ``lazylab trajectory`` or a ladder with the same protocol), and
  otherwise the fixed rate 0.03 — the rate that bracketing chose for all three
  default arms on the full training set (docs/trajectory.md). A trajectory at
  0.03 has the same memo key as ``lazylab trajectory --lr 0.03`` and as the
  bracketed default whenever the bracket picks 0.03.
* **Which ladder.** ``preset="auto"`` shows the paper ladder when every one of
  its runs is in the memo, else the quick preset's ladder (computing its
  missing runs: about 70 s on two cores from nothing).

The 1-D NTK lab, its width sweep, the scalar model and the audit are cheap and
not memoized by ``lazylab ntk``; here they are memoized under keys hashed from
their configuration (``ntklab-``, ``ntksweep-``, ``ntkscalar-``, ``ntkaudit-``).
"""

from __future__ import annotations

from lazylab.experiments.render.settings import (  # noqa: F401 (re-exported)
    DEFAULT_SETTINGS,
    FIXED_TRAJECTORY_LR,
    JSON_KINDS,
    LADDER_CHOICES,
    NTK_MEMO_SCHEMA,
    SWEEP_LR,
    SWEEP_SEEDS,
    SWEEP_WIDTHS,
    GramSettings,
    LadderSettings,
    NtkSettings,
    ReadoutSettings,
    RenderSettings,
    TrajectorySettings,
    json_kind,
    load_ladder_json,
    with_json,
)
from lazylab.experiments.render.results import (  # noqa: F401 (re-exported)
    LAB_ARRAYS,
    Progress,
    audit_key,
    audit_result,
    digest,
    gram_result,
    gram_spec,
    lab_key,
    lab_result,
    readout_result,
    readout_spec,
    scalar_key,
    scalar_result,
    sweep_key,
    sweep_result,
    trajectory_rates,
    trajectory_result,
    trajectory_spec,
)
from lazylab.experiments.render.export import build_reference  # noqa: F401 (re-exported)
from lazylab.experiments.render.ladders import (  # noqa: F401 (re-exported)
    _plan,
    ladder_in_memo,
    ladder_result,
    ladder_spec,
    memo_extras,
    paper_result,
    paper_spec,
    wall_analysis,
)
