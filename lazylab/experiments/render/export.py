"""The reference document of a ladder, built from the memo alone (``scripts/export_reference.py`` writes it).

It lives on the experiments' side, beside the ladder it reads (``ladder_in_memo``, ``wall_analysis``):
``lazylab.reference`` only reads, writes and checks reference files, and imports nothing from here
(no import circle: tests/test_imports.py).
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

from lazylab.errors import LazylabError
from lazylab.experiments.render.ladders import ladder_in_memo, wall_analysis
from lazylab.reference import KIND, REFERENCE_SCHEMA, machine_description, payload_digest


def build_reference(ws, plan, preset: str = "paper", where: str | None = None, when: str | None = None,
                    command: str | None = None) -> dict:
    """The reference document for ``plan`` from the memo (nothing is trained; the redundancy measurements,
    seconds of initial-bank features, are computed when the memo lacks them).

    Args:
      ws: a ``Workspace`` whose memo holds every run of ``plan`` (brackets included).
      plan: a ``LadderPlan`` (``lazylab.experiments.render._plan("paper")`` for the shipped file).
      preset: the preset's name, recorded.
      where: the machine that computed the runs [default: ``lazylab.reference.machine_description()`` of this one].
      when: the UTC date they were computed [default: today, UTC].
      command: the command that computed them [default: ``lazylab ladder --preset <preset>``].
    Returns: the document ``lazylab.reference.load_reference`` reads (that module's docstring); its payload is
      what ``lazylab ladder --preset <preset> --report --json`` writes, plus the convex readouts (``convex``:
      every record, lambda choice and refinement), the trained optimum (``optimum``: every selection run and
      refit), the wall, the answer at both readouts and the fair answer when the memo has them
      (``wall_analysis``), and the redundancy grid.
    Raises: LazylabError (one line) if any run of the plan is missing from the memo.
    """
    from lazylab import __version__
    from lazylab.config import code_identity
    from lazylab.experiments.ladder import run_ladder
    from lazylab.experiments.laws import analyse_ladder, redundancy_grid
    from lazylab.experiments.render.results import _arm

    present, missing = ladder_in_memo(ws, plan)
    if missing:
        raise LazylabError(f"the memo at {ws.memo.directory} lacks {missing} of the {preset} ladder's "
                           f"{present + missing} runs ({present} present); finish `lazylab ladder --preset {preset}` first")
    # The redundancy measurements read initial banks only (seconds): computed here when the memo lacks them,
    # so a memo seeded from a reference file (scripts/seed_memo.py) exports the whole analysis.
    if preset == "paper":  # the paper's table of docs/results.md (wall_analysis adds it)
        redundancy_grid(ws, [_arm("yat-frozen"), _arm("yat-data-frozen")])
    ws.memo_only = True
    try:
        result = run_ladder(ws, plan)
    finally:
        ws.memo_only = False
    analysis = analyse_ladder(ws, result, plan.arms)  # trains nothing: its only computation is the redundancy
    extras = wall_analysis(ws, plan, result, analysis)  # reads the memo only
    payload = json.loads(json.dumps({**result.to_json(), "analysis": analysis, **extras}))
    now = datetime.now(timezone.utc)
    prov = {"where": where or machine_description(), "when": when or now.date().isoformat(),
            "exported_at": now.isoformat(timespec="seconds"), "lazylab": __version__, "code": code_identity(),
            "command": command or f"lazylab ladder --preset {preset}", "data": ws.fingerprint,
            "runs": len(payload["runs"]), "digest": payload_digest(payload)}
    return {"schema": REFERENCE_SCHEMA, "kind": KIND, "preset": preset, "provenance": prov, "payload": payload}
