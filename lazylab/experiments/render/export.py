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
    """The reference document for ``plan`` from the memo alone (nothing is trained).

    Args:
      ws: a ``Workspace`` whose memo holds every run of ``plan`` (brackets included).
      plan: a ``LadderPlan`` (``lazylab.experiments.render._plan("paper")`` for the shipped file).
      preset: the preset's name, recorded.
      where: the machine that computed the runs [default: ``lazylab.reference.machine_description()`` of this one].
      when: the UTC date they were computed [default: today, UTC].
      command: the command that computed them [default: ``lazylab ladder --preset <preset>``].
    Returns: the document ``lazylab.reference.load_reference`` reads (that module's docstring); its payload is
      what ``lazylab ladder --preset <preset> --report --json`` writes, plus the convex readouts (``convex``:
      every record and lambda choice), the wall, the answer at both readouts and the redundancy grid when
      the memo has them (``wall_analysis``).
    Raises: LazylabError (one line) if any run of the plan is missing from the memo.
    """
    from lazylab import __version__
    from lazylab.config import code_identity
    from lazylab.experiments.ladder import run_ladder
    from lazylab.experiments.laws import analyse_ladder

    present, missing = ladder_in_memo(ws, plan)
    if missing:
        raise LazylabError(f"the memo at {ws.memo.directory} lacks {missing} of the {preset} ladder's "
                           f"{present + missing} runs ({present} present); finish `lazylab ladder --preset {preset}` first")
    ws.memo_only = True
    try:
        result = run_ladder(ws, plan)
        analysis = analyse_ladder(ws, result, plan.arms)
        convex = wall_analysis(ws, plan, result, analysis)
    finally:
        ws.memo_only = False
    payload = json.loads(json.dumps({**result.to_json(), "analysis": analysis, **({"convex": convex} if convex else {})}))
    now = datetime.now(timezone.utc)
    prov = {"where": where or machine_description(), "when": when or now.date().isoformat(),
            "exported_at": now.isoformat(timespec="seconds"), "lazylab": __version__, "code": code_identity(),
            "command": command or f"lazylab ladder --preset {preset}", "data": ws.fingerprint,
            "runs": len(payload["runs"]), "digest": payload_digest(payload)}
    return {"schema": REFERENCE_SCHEMA, "kind": KIND, "preset": preset, "provenance": prov, "payload": payload}
