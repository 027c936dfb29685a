"""Which ladders ``lazylab render`` shows: yours (a preset, an explicit plan or a ``ladder --json`` file)
and the paper ladder (from the memo when complete, else the shipped reference results).

Nothing here draws; ``lazylab.render.report`` does. ``ladder_result`` computes the
missing runs of your ladder; the paper ladder is never computed here.
"""

from __future__ import annotations

from lazylab.errors import LazylabError
from lazylab.experiments import Workspace
from lazylab.experiments.render.results import Progress, _arm, _quiet, _StageReporter
from lazylab.experiments.render.settings import LADDER_CHOICES, LadderSettings, load_ladder_json


def _plan(preset: str | None, explicit: dict | None = None):
    from lazylab.experiments.ladder import PRESETS, LadderPlan

    if explicit is not None:
        p = dict(explicit)
        return LadderPlan(arms=tuple(_arm(n) for n in p["arms"]), widths=tuple(p["widths"]), seeds=tuple(p["seeds"]),
                          epochs=p.get("epochs", 12), train_size=p.get("train_size", 60000), lr=p.get("lr"),
                          fan_in=p.get("fan_in", "unit"),
                          # a file written before the bracket rule was recorded used SPEC section 5's argmax
                          bracket=(p.get("bracket") or {}).get("rule", "argmax"))
    p = PRESETS[preset]
    # Exactly what `lazylab ladder --preset <preset>` runs with no other option.
    return LadderPlan(arms=tuple(_arm(n) for n in p["arms"]), widths=p["widths"], seeds=p["seeds"], epochs=p["epochs"],
                      train_size=p["train_size"], lr=None, fan_in="unit")


def ladder_in_memo(ws: Workspace, plan) -> tuple[int, int]:
    """``(runs present, runs missing)`` of a ladder plan, looking only in the memo."""
    from lazylab.experiments.ladder import run_ladder

    saved = ws.memo_only, ws.missing
    ws.memo_only, ws.missing = True, []
    try:
        result = run_ladder(ws, plan)
        missing = len({k for k in ws.missing if k.startswith("run-")})
        # An arm whose whole bracket is missing has no rate: its cells were never looked up.
        for a in result.arms:
            if a.lr is None and plan.lr is None:
                missing += len(plan.widths) * len(plan.seeds)
        present = sum(1 for r in result.runs if not r.get("missing"))
        # a missing bracket run is also an unlooked-up cell; grid extensions run beyond n_runs()
        missing = max(0, min(missing, plan.n_runs() - present)) if missing else 0
    finally:
        ws.memo_only, ws.missing = saved
    return present, missing


def ladder_spec(ws: Workspace, s: LadderSettings) -> dict:
    """Which ladder is shown: ``{"name", "plan" (LadderPlan), "plan_json", "note"}``.

    ``auto`` looks in the memo only: the paper ladder if all its runs are
    there, else the quick one (whose missing runs ``ladder_result`` computes).
    A file (``s.source``) gives ``name`` ``"file"``, ``plan`` None and adds
    ``"payload"``, its ``"sha256"`` and ``"path"``.
    """
    if s.source is not None:
        payload, sha = load_ladder_json(s.source)
        plan_json = {**payload["plan"], "plugins": {a["arm"]: a.get("plugin") for a in payload["arms"]}}
        return {"name": "file", "plan": None, "plan_json": plan_json, "note": f"from {s.source}",
                "payload": payload, "sha256": sha, "path": str(s.source)}
    if s.plan is not None:
        name, plan, note = "custom", _plan(None, dict(s.plan)), "an explicit plan"
    elif s.preset == "auto":
        name, plan = "quick", None
        try:
            paper = _plan("paper")
            present, missing = ladder_in_memo(ws, paper)
            if missing == 0:
                name, plan, note = "paper", paper, "auto: every run of the paper preset is in the memo"
            else:
                note = (f"auto: the paper preset is not complete in the memo ({present} of its runs present, "
                        f"at least {missing} missing), so the quick preset is shown")
        except LazylabError as exc:  # a paper arm is not loaded (LAZYLAB_ARMS)
            note = f"auto: the paper preset cannot be used ({exc}); the quick preset is shown"
        if plan is None:
            plan = _plan("quick")
    elif s.preset in ("quick", "paper"):
        name, plan, note = s.preset, _plan(s.preset), f"--preset {s.preset}"
    else:
        raise LazylabError(f"unknown ladder preset {s.preset!r}; choose one of {', '.join(LADDER_CHOICES)}")
    plan_json = {"arms": [a.name for a in plan.arms], "plugins": {a.name: a.plugin for a in plan.arms},
                 "widths": list(plan.widths), "seeds": list(plan.seeds), "lr": plan.lr, "data": ws.fingerprint,
                 **plan.protocol()}
    return {"name": name, "plan": plan, "plan_json": plan_json, "note": note}


def ladder_result(ws: Workspace, spec: dict, progress: Progress = _quiet) -> dict:
    """The ladder's payload (``LadderResult.to_json()`` plus ``"analysis"``), computing missing runs.

    Adds ``"computed"`` and ``"cached"`` (runs) and ``"name"``/``"note"`` (which ladder, why).
    """
    from lazylab.experiments.ladder import run_ladder
    from lazylab.experiments.laws import analyse_ladder

    if spec.get("payload") is not None:  # a ladder --json file: shown as written, nothing computed
        return {**spec["payload"], "computed": 0, "cached": 0, "name": spec["name"], "note": spec["note"]}
    plan = spec["plan"]
    reporter = _StageReporter(progress, f"ladder ({spec['name']})")
    result = run_ladder(ws, plan, reporter)
    progress("ladder: laws and redundancy", 0, 1)
    analysis = analyse_ladder(ws, result, plan.arms)
    progress("ladder: laws and redundancy", 1, 1)
    extras = wall_analysis(ws, plan, result, analysis)
    return {**result.to_json(), "analysis": analysis, **extras, "computed": reporter.computed, "cached": reporter.cached,
            "name": spec["name"], "note": spec["note"]}


def _from_memo(ws: Workspace, compute, optional: tuple[str, ...] = ()):
    """``(compute(), complete)`` with the workspace in memo-only mode: nothing is computed. Records whose keys
    start with one of ``optional`` may be missing from a complete result."""
    was, before = ws.memo_only, len(ws.missing)
    ws.memo_only = True
    try:
        value = compute()
    finally:
        ws.memo_only = was
    complete = all(k.startswith(optional) for k in ws.missing[before:]) if optional else len(ws.missing) == before
    del ws.missing[before:]
    return value, complete


PARTIAL_FRONTIER_WIDTHS = 5  # the fewest widths a partial frontier is shown with


def _memo_extras(ws: Workspace, plan) -> tuple[dict | None, list | None]:
    """``(convex, grid)``: the plan's frozen arms' convex readouts (``run_convex_ladder``) and the
    default ``redundancy_grid`` (yat and yat-data banks), each only if all of it is in the memo.

    A frontier still being computed (the widest banks last) counts when every readout at the first
    ``k >= PARTIAL_FRONTIER_WIDTHS`` widths is in the memo: ``convex["partial"]`` then says
    ``{"widths": the k widths, "of": the plan's}``, and ``convex["pending"]``, when there are any, holds the
    records already computed at the other widths (``{"runs", "choices"}``), which no analysis reads.
    """
    import dataclasses

    from lazylab.experiments.convex import run_convex_ladder
    from lazylab.experiments.laws import redundancy_grid

    frozen = tuple(a for a in plan.arms if not a.trained)
    convex = None
    for k in range(len(plan.widths), min(PARTIAL_FRONTIER_WIDTHS, len(plan.widths)) - 1, -1) if frozen else ():
        part = dataclasses.replace(plan, arms=frozen, widths=plan.widths[:k])
        # A width whose refinements are still to compute counts, at the walk's lambda (``convex["unrefined"]``).
        convex, complete = _from_memo(ws, lambda part=part: run_convex_ladder(ws, part), optional=("convex-refine-",))
        if complete:
            if k < len(plan.widths):
                convex["partial"] = {"widths": list(plan.widths[:k]), "of": list(plan.widths)}
            break
        convex = None
    if convex is not None and "partial" in convex:
        # Readouts already computed at the widths still incomplete: kept (not analysed) so that a
        # reference file carries them and a memo seeded from it (scripts/seed_memo.py) resumes there.
        whole = dataclasses.replace(plan, arms=frozen)
        rest, _ = _from_memo(ws, lambda: run_convex_ladder(ws, whole))
        later = lambda r: r["config"]["width"] not in convex["partial"]["widths"] and not r.get("missing")
        pending = {part: [r for r in rest[part] if later(r)] for part in ("runs", "choices", "refinements")}
        if any(pending.values()):
            convex["pending"] = pending
    grid, complete = _from_memo(ws, lambda: redundancy_grid(ws, [_arm("yat-frozen"), _arm("yat-data-frozen")]))
    return convex, grid if complete else None


def optimum_in_memo(ws: Workspace, plan) -> dict | None:
    """The plan's trained arms at their optimum (``experiments.optimum.run_optimum``) as far as the memo holds
    it: records missing from the memo are left out (a width whose choice lacks one has no refits, ``n = 0``),
    and those of widths not yet chosen are kept (a reference file carries them, so a memo seeded from it
    resumes there). None when the plan has no trained arm or the memo holds no refit."""
    from lazylab.experiments.optimum import optimum_budget, run_optimum

    trained = tuple(a for a in plan.arms if a.trained)
    if not trained:
        return None
    optimum, _ = _from_memo(ws, lambda: run_optimum(ws, trained, plan.widths, plan.seeds, plan.train_size,
                                                    plan.fan_in, optimum_budget(plan.epochs)))
    optimum["runs"] = [r for r in optimum["runs"] if not r.get("missing")]
    optimum["fits"] = [r for r in optimum["fits"] if not r.get("missing")]
    return optimum if optimum["fits"] else None


def memo_extras(ws: Workspace, plan) -> dict:
    """``{"wall": bool, "redundancy_grid": bool, "optimum": bool}``: whether ``wall_analysis`` finds each in the memo."""
    convex, grid = _memo_extras(ws, plan)
    return {"wall": convex is not None, "redundancy_grid": grid is not None,
            "optimum": optimum_in_memo(ws, plan) is not None}


def wall_analysis(ws: Workspace, plan, result, analysis: dict) -> dict:
    """Add what ``ladder --readout both`` and ``lazylab redundancy`` left in the memo for this ladder.

    ``analysis["wall"]`` and ``analysis["answer"]``: the wall table and the answer at both readouts
    (``experiments.convex_wall.wall``, ``answer``) when every frozen arm's convex readout at the plan's widths
    and seeds (default lambda grid) is in the memo; ``analysis["fair"]``: the fair answer
    (``experiments.optimum.fair_answer``) when the trained optimum is there too (``optimum_in_memo``);
    ``analysis["redundancy_grid"]``: the default ``redundancy_grid`` when all its measurements are. Absent
    ones are left out: the report says how to add them.
    Returns: ``{"convex": run_convex_ladder's result, "optimum": optimum_in_memo's}``, each only when found.
    """
    from lazylab.experiments.convex_wall import answer, wall
    from lazylab.experiments.optimum import fair_answer
    from lazylab.model import N_REF

    convex, grid = _memo_extras(ws, plan)
    optimum = optimum_in_memo(ws, plan)
    if convex is not None:
        analysis["wall"] = wall(result, convex)
        analysis["answer"] = answer(result, convex, plan.arms, analysis.get("exchange"))
        if optimum is not None:
            analysis["fair"] = fair_answer(result, convex, optimum, plan.arms, ws.data.x_train[:N_REF])
    if grid is not None:
        analysis["redundancy_grid"] = grid
    return {**({"convex": convex} if convex else {}), **({"optimum": optimum} if optimum else {})}


def paper_spec(ws: Workspace, reference: str | None = None) -> dict:
    """Which paper ladder leads the report: ``{"source", "plan", "plan_json", "note", "provenance", "sha256", "path"}``.

    ``source`` is ``"memo"`` when every run of the paper preset is in the memo, else
    ``"reference"`` when the reference file (``reference``, default the shipped
    ``lazylab/reference/paper.json``) loads, else ``"none"``: ``note`` says in one line why, e.g. that the
    reference is unavailable because its digest does not match its contents (``load_reference``); the report
    is then drawn without it. Nothing is trained.
    """
    import hashlib

    from lazylab.reference import load_reference, reference_path

    plan, why = None, ""
    try:
        plan = _plan("paper")
        present, missing = ladder_in_memo(ws, plan)
        if missing == 0:
            plan_json = {"arms": [a.name for a in plan.arms], "plugins": {a.name: a.plugin for a in plan.arms},
                         "widths": list(plan.widths), "seeds": list(plan.seeds), "lr": None, "data": ws.fingerprint,
                         **plan.protocol()}
            return {"source": "memo", "plan": plan, "plan_json": plan_json, "provenance": None, "sha256": None,
                    "path": None, "note": f"every one of its {present} runs is in the memo at {ws.memo.directory}"}
        why = f"the memo holds {present} of its runs, at least {missing} missing"
    except LazylabError as exc:  # a paper arm is not loaded
        why = str(exc)
    path = reference or reference_path()
    try:
        doc = load_reference(path)
    except LazylabError as exc:  # absent, damaged or changed after export (its digest): the report goes on without it
        return {"source": "none", "plan": None, "plan_json": None, "provenance": None, "sha256": None,
                "path": str(path), "note": f"not complete in the memo ({why}), and the reference results are "
                                          f"unavailable: {exc}"}
    from pathlib import Path

    sha = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    return {"source": "reference", "plan": None, "plan_json": doc["payload"]["plan"], "provenance": doc["provenance"],
            "sha256": sha, "path": str(path), "doc": doc,
            "note": f"the memo does not hold the whole paper ladder ({why}), so the shipped reference results are shown"}


def paper_result(ws: Workspace, spec: dict, progress: Progress = _quiet) -> dict | None:
    """The paper ladder's payload (as ``ladder_result``) from the memo or the reference file; None if neither."""
    if spec["source"] == "memo":
        return ladder_result(ws, {"name": "paper", "plan": spec["plan"], "note": spec["note"]}, progress)
    if spec["source"] == "reference":
        return {**spec["doc"]["payload"], "computed": 0, "cached": 0, "name": "paper", "note": spec["note"],
                "provenance": spec["provenance"]}
    return None
