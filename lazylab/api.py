"""lazylab from Python: ladders, runs and their analyses as plain dataclasses (docs/api.md).

For notebooks and scripts. Every function goes through the same experiment code as the
command line (``lazylab.experiments.ladder.run_ladder``, ``lazylab.experiments.laws.analyse_ladder``,
``lazylab.runs.list_runs``, ``lazylab.reference.load_reference``) and the same memo, so a
ladder computed here is a ladder ``lazylab ladder`` finds in the memo, and the other way round.

    >>> from lazylab import api
    >>> paper = api.reference()                    # the shipped paper ladder: nothing computed
    >>> paper.cell("yat-frozen", 512).mean          # mean best_acc over 3 seeds, percent
    >>> paper.exchange_sentence
    >>> mine = api.ladder(arms=["yat-frozen", "yat-trained"], widths=[16, 64, 256], seeds=[0],
    ...                   epochs=1, train_size=2048)
    >>> api.runs(arm=["yat-frozen"]).to_dataframe()  # needs pandas: pip install 'lazylab[pandas]'
    >>> api.runs(kind="convex")                     # the convex readouts (training runs by default)
    >>> api.load("results.json")                    # any --json file a command wrote, read back

Accuracies are test accuracies in percent (0-100); widths are units ``m``; times are seconds.
Every collection (``Rows``) is a plain ``list`` with ``to_dataframe()``. Bad arguments raise
``lazylab.errors.LazylabError`` with a one-line message, as the command line prints them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Iterable

from lazylab.analysis import movement_law_or_why
from lazylab.api_types import (PANDAS_HINT, ArmRate, Cell, ConvexCell, ExchangeRow, Gap, GramFrame, Ladder, LadderLaw,
                               MovementLaw, NtkCheck, ReadoutPoint, Result, Rows, TrajectoryEpoch, WallRow)
from lazylab.errors import LazylabError
from lazylab.runs import KINDS, Run, list_runs

__all__ = ["Rows", "Run", "Cell", "ArmRate", "LadderLaw", "MovementLaw", "Gap", "ExchangeRow", "ConvexCell",
           "WallRow", "Ladder", "GramFrame", "ReadoutPoint", "TrajectoryEpoch", "NtkCheck", "Result",
           "ladder", "reference", "load", "runs", "KINDS", "PANDAS_HINT"]

# --------------------------------------------------------------------------- building a Ladder
def _f(v) -> float | None:
    return None if v is None else float(v)


def _ladder_from_payload(payload: dict, source: str, provenance: dict | None = None,
                         notes: list[str] | None = None, stored: dict[str, str] | None = None,
                         where: str | None = None) -> Ladder:
    """A ``Ladder`` from what ``lazylab ladder --json`` writes (plan, arms, runs, analysis; ``convex`` with
    ``--readout both``); ``where`` names it in errors about its convex part [default: ``source``]."""
    from lazylab.runs import run_from_record, sort_key

    plan, analysis = payload["plan"], payload["analysis"]
    widths = [int(w) for w in plan["widths"]]
    rates, cells = Rows(), Rows()
    for a in payload["arms"]:
        rates.append(ArmRate(arm=a["arm"], plugin=a.get("plugin"), unit=a.get("unit"), init=a.get("init"), lr=_f(a.get("lr")),
                             bracket={float(k): _f(v) for k, v in (a.get("bracket") or {}).items()},
                             failed=a.get("failed")))
        for w in widths:
            c = (a.get("cells") or {}).get(str(w))
            if c is None:
                continue
            cells.append(Cell(arm=a["arm"], width=w, lr=_f(a.get("lr")), n=int(c.get("n", 0)), mean=_f(c.get("mean")),
                              std=_f(c.get("std")), final_mean=_f(c.get("final_mean")),
                              diverged=int(c.get("diverged") or 0), unstable=int(c.get("unstable") or 0),
                              seeds=list(c.get("seeds") or [])))
    runs = Rows()
    for rec in payload["runs"]:
        run = run_from_record(rec)
        run.stored = (stored or {}).get(run.key)
        runs.append(run)
    runs.sort(key=sort_key)
    laws = Rows(LadderLaw(arm=arm, floor=_f(f.get("floor")), c=_f(f.get("c")), alpha=_f(f.get("alpha")),
                          r2=_f(f.get("r2")), widths=list(f.get("widths") or []), n=f.get("n"),
                          at_bound=bool(f.get("at_bound")), rule=f.get("rule"), skipped=f.get("skipped"))
                for arm, f in analysis.get("ladder_law", {}).items())
    movement = Rows(MovementLaw(arm=arm, slope=_f(f.get("slope")), intercept=_f(f.get("intercept")),
                                r2=_f(f.get("r2")), widths=list(f.get("widths") or []), n=f.get("n"),
                                skipped=f.get("skipped"))
                    for arm, f in ((arm, movement_law_or_why(f)) for arm, f in analysis.get("movement_law", {}).items()))
    gaps = Rows(Gap(trained=g["trained"], frozen=g["frozen"], width=int(w), gap=_f(v), se=_f(g.get("se", {}).get(w)))
                for g in analysis.get("gap", {}).values()
                for w, v in sorted(g.get("per_width", {}).items(), key=lambda kv: int(kv[0])))
    exchange = analysis.get("exchange") or {}
    rows = Rows(ExchangeRow(trained=r["trained"], frozen=r["frozen"], width=int(r["width"]),
                            trained_acc=_f(r.get("trained_acc")), frozen_width=_f(r.get("frozen_width")),
                            method=r.get("method", "none"), floor_acc=_f(r.get("floor_acc")), text=r.get("text", ""),
                            note=r.get("note") or r.get("between") or r.get("why"))
                for r in exchange.get("rows", []))
    between = [r for r in rows if isinstance(r.note, (list, tuple))]
    for r in between:  # an interpolated row's ``between`` is the bracketing pair of widths
        r.note = f"between m = {r.note[0]} and {r.note[1]}"
    return Ladder(arms=list(plan["arms"]), widths=widths, seeds=[int(s) for s in plan["seeds"]],
                  epochs=int(plan["epochs"]), train_size=int(plan["train_size"]), lr=_f(plan.get("lr")),
                  rates=rates, cells=cells, runs=runs, laws=laws, movement=movement, gaps=gaps, exchange=rows,
                  exchange_sentence=exchange.get("sentence", ""), warnings=list(analysis.get("warnings") or []),
                  analysis=analysis, source=source, provenance=provenance, notes=list(notes or []),
                  convex=_convex_cells(payload.get("convex"), where or source, "convex"),
                  wall=_wall_rows(analysis.get("wall"), where or source))


def _malformed(where: str, field_: str, exc: Exception) -> LazylabError:
    return LazylabError(f"{where}: field {field_}: malformed ({type(exc).__name__}: {str(exc)[:80]})")


def _convex_cells(convex: dict | None, where: str, at: str) -> Rows:
    """``ConvexCell`` rows of a ladder file's ``convex`` part (``run_convex_ladder``), widths ascending."""
    out = Rows()
    if convex is None:
        return out
    try:
        for arm, a in convex["arms"].items():
            for w, c in sorted(a["cells"].items(), key=lambda kv: int(kv[0])):
                out.append(ConvexCell(arm=arm, width=int(w), n=int(c["n"]), mean=_f(c.get("mean")), std=_f(c.get("std")),
                                      train_loss=_f(c.get("train_loss")), grad_norm=_f(c.get("grad_norm")),
                                      iterations=_f(c.get("iterations")),
                                      converged=None if c.get("converged") is None else bool(c["converged"]),
                                      lambdas=[float(v) for v in c.get("lambdas") or []]))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise _malformed(where, f"{at}.arms", exc) from None
    return out


def _wall_rows(wall: dict | None, where: str) -> Rows:
    """``WallRow`` rows of ``analysis["wall"]`` (``experiments.convex.wall``), arms in file order, widths ascending."""
    out = Rows()
    if wall is None:
        return out
    try:
        for arm, per in wall["arms"].items():
            for w, r in sorted(per.items(), key=lambda kv: int(kv[0])):
                out.append(WallRow(arm=arm, width=int(w), seeds=r.get("seeds"), best_acc=_f(r.get("best_acc")),
                                   final_acc=_f(r.get("final_acc")), convex_acc=_f(r.get("convex_acc")),
                                   gap=_f(r.get("gap")), protocol_loss=_f(r.get("protocol_loss")),
                                   convex_loss=_f(r.get("convex_loss")), loss_gap=_f(r.get("loss_gap")),
                                   grad_norm=_f(r.get("grad_norm")),
                                   converged=None if r.get("converged") is None else bool(r["converged"])))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise _malformed(where, "analysis.wall.arms", exc) from None
    return out


# --------------------------------------------------------------------------- the functions
def _ints(values, name: str, low: int) -> tuple[int, ...] | None:
    if values is None:
        return None
    if isinstance(values, int) and not isinstance(values, bool):
        values = [values]
    out = tuple(values)
    bad = [v for v in out if not isinstance(v, int) or isinstance(v, bool) or v < low]
    if bad or not out:
        raise LazylabError(f"{name}: expected integers >= {low}, got {list(out)!r}")
    if len(set(out)) < len(out):
        raise LazylabError(f"{name}: a value is given more than once in {list(out)!r}")
    return out


def _names(values, name: str) -> tuple[str, ...] | None:
    if values is None:
        return None
    out = tuple(v.strip() for v in values.split(",")) if isinstance(values, str) else tuple(values)
    if not out or not all(isinstance(v, str) and v for v in out):
        raise LazylabError(f"{name}: expected names such as 'yat-frozen', got {values!r}")
    if len(set(out)) < len(out):
        raise LazylabError(f"{name}: a name is given more than once in {values!r}")
    return out


def ladder(arms: Iterable[str] | str | None = None, widths: Iterable[int] | None = None,
           seeds: Iterable[int] | None = None, epochs: int | None = None, preset: str = "paper", *,
           train_size: int | None = None, lr: float | None = None, fan_in: str = "unit", bracket: str = "1se",
           cache_dir: str | Path | None = None, data_dir: str | Path | None = None, memo_only: bool = False,
           redundancy: bool = True, on_run: Callable[[Run, bool], None] | None = None) -> Ladder:
    """Run (or read from the memo) a width ladder and analyse it: ``lazylab ladder`` as a function.

    Every argument not given takes ``preset``'s value (``lazylab.experiments.ladder.PRESETS``: ``paper``,
    the full protocol of SPEC section 5, 8 arms x 10 widths x 3 seeds x 12 epochs, 260 runs and about
    70-100 minutes on 2 cores when nothing is in the memo; ``quick``, 4 arms x 4 widths x 1 seed x
    3 epochs). Runs already in the memo are read, the others trained and stored (the same records the
    command line would store). Without ``lr`` each arm's rate is bracketed at m = 256, seed 0.

    Args:
      arms: arm names (``lazylab arms`` lists them) or one comma-separated string.
      widths: bank widths m (>= 1); seeds: seeds (>= 0); epochs: epochs per run (>= 1).
      preset: ``paper`` or ``quick``.
      train_size: the first N training images (256..60000); lr: one fixed rate for every arm.
      fan_in: ``unit`` or ``d`` (the random init's fan-in convention).
      bracket: the rate bracket's rule, ``1se`` or ``argmax`` (``lazylab.bracket``).
      cache_dir: the memo [default: ``$LAZYLAB_CACHE``, else ``~/.cache/lazylab/memo``].
      data_dir: Fashion-MNIST [default: ``$LAZYLAB_DATA`` or the Debian package's folder].
      memo_only: train nothing (``lazylab ladder --report``): every run must be in the memo.
      redundancy: measure each bank's redundancy (SPEC section 6; a few seconds per bank).
      on_run: called as ``on_run(run, cached)`` for each run as it finishes or is read.
    Returns: Ladder (``source`` names the memo).
    Raises: LazylabError (one line) for an unknown preset, arm or fan-in, a value out of range, data
      that cannot be found, or, with ``memo_only``, runs missing from the memo (how many).
    """
    from lazylab.arms import get_arm
    from lazylab.experiments import Reporter, Workspace
    from lazylab.experiments.ladder import preset_plan, run_ladder
    from lazylab.experiments.laws import analyse_ladder, missing_message

    names = _names(arms, "arms")
    for name, v, lo, hi in (("epochs", epochs, 1, 1000), ("train_size", train_size, 256, 60000)):
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi):
            raise LazylabError(f"{name}: expected an integer from {lo} to {hi}, got {v!r}")
    if lr is not None and not (isinstance(lr, (int, float)) and 0 < lr < float("inf")):
        raise LazylabError(f"lr: expected a positive finite rate, got {lr!r}")
    if fan_in not in ("unit", "d"):
        raise LazylabError(f"fan_in: expected 'unit' or 'd', got {fan_in!r}")
    from lazylab.bracket import RULES

    if bracket not in RULES:
        raise LazylabError(f"bracket: expected one of {', '.join(RULES)}, got {bracket!r}")
    plan = preset_plan(preset, tuple(get_arm(n) for n in names) if names else None, _ints(widths, "widths", 1),
                       _ints(seeds, "seeds", 0), epochs, train_size, lr, fan_in, bracket)

    class _Hook(Reporter):
        def done(self, cfg, record, cached):
            if on_run is not None:
                from lazylab.runs import run_from_record

                on_run(run_from_record(record), cached)

    ws = Workspace(data_dir, cache_dir)
    try:
        ws.memo_only = memo_only
        result = run_ladder(ws, plan, _Hook())
        if not (memo_only and ws.missing):
            analysis = analyse_ladder(ws, result, plan.arms, redundancy=redundancy)
        if memo_only and ws.missing:  # runs (or a redundancy measurement) not in the memo
            raise LazylabError("memo_only: " + missing_message(ws, plan, result).removeprefix("--report: ").replace(
                "run the same command without --report", "call ladder() without memo_only"))
        payload = json.loads(json.dumps({**result.to_json(), "analysis": analysis}))
        return _ladder_from_payload(payload, source=f"memo at {ws.memo.directory}", notes=ws.memo.problems,
                                    stored=_stored_times(ws.memo))
    finally:
        ws.memo.close()


def _stored_times(memo) -> dict[str, str]:
    """``{key: ISO 8601 UTC}`` of the memo's run entries."""
    from datetime import datetime, timezone

    return {k: datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="seconds")
            for k, _, t in memo.entries() if k.startswith("run-") and t is not None}


def reference(path: str | Path | None = None) -> Ladder:
    """The paper ladder shipped with lazylab (``lazylab/reference/paper.json``), or another reference file.

    Nothing is computed: 8 arms x 10 widths (16-8192) x 3 seeds x 12 epochs on all 60,000 images, as
    computed on the machine and date in ``provenance`` (``where``, ``when``, ``lazylab``, ``code``,
    ``command``, ``data``, ``runs``); docs/results.md discusses its numbers.

    Returns: Ladder (``source`` says ``reference results``; ``provenance`` set; run rows have no
      ``stored`` time).
    Raises: LazylabError (one line) when the file is absent, unreadable or malformed; for a file that
      is not a reference file (a ``lazylab ladder --json`` file, say) the line points to ``load``.
    """
    from lazylab.reference import load_reference, reference_path

    try:
        doc = load_reference(path)
    except LazylabError as exc:
        if path is not None and "not a lazylab reference file" in str(exc):
            raise LazylabError(f"{exc}; api.load(path) reads the --json files lazylab commands write") from None
        raise
    prov = doc["provenance"]
    return _ladder_from_payload(doc["payload"], provenance=prov,
                                source=f"reference results {path or reference_path()} (computed {prov['when']} "
                                       f"by {prov['code']}: {prov['where']})")


LOAD_KINDS = ("ladder", "gram", "readout", "trajectory", "ntk")


def load(path: str | Path) -> Ladder | Result:
    """Read back a ``--json`` file written by the command line, checked like the options that wrote it.

    What each file becomes:
      * ``lazylab ladder --json`` (``--readout adamw`` or ``both``): a ``Ladder``, as ``ladder`` returns it
        (``source`` names the file; run rows have no ``stored`` time); a ``--readout both`` file also fills
        ``convex`` (``ConvexCell`` per frozen arm x width) and ``wall`` (``WallRow``). A reference file
        (``lazylab/reference/paper.json``) is read as ``reference(path)`` does.
      * ``lazylab ladder --readout convex --json``: a ``Result`` of kind ``convex`` (``ConvexCell`` rows:
        test accuracy in %, loss in nats).
      * ``lazylab gram --json``: ``Result`` kind ``gram``, one ``GramFrame`` per frame (widths in units).
      * ``lazylab readout --json``: ``Result`` kind ``readout``, one ``ReadoutPoint`` per width x evaluation
        (accuracy %, loss nats).
      * ``lazylab trajectory --json``: ``Result`` kind ``trajectory``, one ``TrajectoryEpoch`` per arm x
        epoch (epoch 0 the initialisation).
      * ``lazylab ntk scalar --json``: ``Result`` kind ``ntk``, one ``NtkCheck`` per check (the table, one
        column per quantity and one value per report time, in ``data["table"]``); ``ntk audit --json``:
        kind ``ntk-audit``.
    The file is read by the bounded reader (``lazylab.schemas.read_json``: a regular file, at most
    ``MAX_FILE_BYTES``); a ladder is checked by ``lazylab.reference.check_payload``, the others by
    the pydantic models of ``lazylab.schemas.results``. Nothing is computed and the memo is not read;
    a plugin arm needs no installed unit.
    Raises: LazylabError, one line naming the file (and the field, when one is wrong): missing,
      unreadable, not a regular file, too large, not JSON, not a file lazylab writes (``ntk lab``,
      ``ntk arm`` and ``redundancy`` files are not read back), a field missing, of the wrong type or
      out of its option's range.
    """
    from lazylab.experiments.render.settings import json_kind
    from lazylab.reference import KIND as REFERENCE_KIND
    from lazylab.reference import check_payload
    from lazylab.schemas import read_json, validate
    from lazylab.schemas.results import RESULT_FILES

    path = Path(path)
    doc = read_json(path, "load:")
    where = f"load: {path}"
    if isinstance(doc, dict) and doc.get("kind") == REFERENCE_KIND:
        return reference(path)
    if isinstance(doc, list) and doc and all(isinstance(c, dict) and "passed" in c for c in doc):
        from lazylab.schemas.results import NtkCheckDoc

        what = f"{where} (`lazylab ntk audit --json` output)"
        checks = [validate(NtkCheckDoc, c, f"{what}: check [{i}]") for i, c in enumerate(doc)]
        return Result(kind="ntk-audit", config={}, rows=Rows(_ntk_checks(checks)), data=doc, source=str(path))
    kind = json_kind(doc)
    if kind is None and isinstance(doc, dict) and {"arms", "runs", "analysis"} & doc.keys():
        kind = "ladder"  # a ladder file that lost its plan: the checker names what is missing
    if kind is None:
        raise LazylabError(f"{where}: not a --json file lazylab.api.load reads (the --json output of "
                           f"{', '.join(LOAD_KINDS)}, or a ladder --readout convex file)")
    if kind == "ladder":
        plan = doc.get("plan")
        if isinstance(plan, dict) and plan.get("readout") == "convex":
            return _convex_result(doc, path, where)
        what = f"{where} (`lazylab ladder --json` output)"
        return _ladder_from_payload(check_payload(doc, what), source=f"ladder --json file {path}", where=what)
    what = f"{where} (`lazylab {kind}{' scalar' * (kind == 'ntk')} --json` output)"
    checked = validate(RESULT_FILES[kind], doc, what)
    try:
        if kind == "gram":
            n = len(doc["widths"])
            col = {k: doc.get(k) or [None] * n for k in ("block_contrast", "distance_to_reference",
                                                          "raw_relative_distance")}
            rows = Rows(GramFrame(width=int(w), block_contrast=_f(c), distance=_f(d), raw_distance=_f(r))
                        for w, c, d, r in zip(doc["widths"], *col.values(), strict=True))
            return Result(kind, doc["config"], rows, doc, str(path))
        if kind == "readout":
            rows = Rows()
            for curve in doc["curves"]:
                w = curve["config"]["width"]
                loss = curve.get("train_loss") or [None] * len(curve["steps"])
                rows.extend(ReadoutPoint(width=int(w), step=int(s), test_acc=_f(a), train_loss=_f(v))
                            for s, a, v in zip(curve["steps"], curve["test_acc"], loss, strict=True))
            first = {k: v for k, v in doc["curves"][0]["config"].items() if k != "width"}
            return Result(kind, {**first, "widths": [c.config.width for c in checked.curves]}, rows, doc, str(path))
        if kind == "trajectory":
            rows = Rows()
            for a in doc["arms"]:
                r = a["record"]
                rows.extend(TrajectoryEpoch(arm=a["arm"], epoch=int(e), accuracy=_f(acc), w_move_rel=_f(wm),
                                            travel_median=_f(tm), travel_max=_f(tx))
                            for e, acc, wm, tm, tx in zip(r["epochs"], r["accuracy"], r["w_move_rel"],
                                                          r["travel_median"], r["travel_max"], strict=True))
            return Result(kind, doc["plan"], rows, doc, str(path))
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise _malformed(what, {"gram": "widths", "readout": "curves", "trajectory": "arms"}[kind], exc) from None
    return Result("ntk", {"w0": checked.w0, "dt": checked.dt}, Rows(_ntk_checks(checked.checks)), doc, str(path))


def _ntk_checks(checks) -> list[NtkCheck]:
    return [NtkCheck(name=c.name, value=_f(c.value), passed=c.passed, expect=c.expect) for c in checks]


def _convex_result(doc: dict, path: Path, where: str) -> Result:
    """A ``ladder --readout convex`` file as a ``Result`` of ``ConvexCell`` rows."""
    what = f"{where} (`lazylab ladder --readout convex --json` output)"
    if not isinstance(doc.get("convex"), dict):
        raise LazylabError(f"{what}: field convex: missing or not an object")
    return Result("convex", doc["plan"], _convex_cells(doc["convex"], what, "convex"), doc, str(path))


def runs(arm: Iterable[str] | str | None = None, width: Iterable[int] | int | None = None,
         seed: Iterable[int] | int | None = None, kind: Iterable[str] | str | None = "run", *,
         cache_dir: str | Path | None = None, any_code: bool = False, include_stale: bool = False) -> Rows:
    """The memo's results of one kind as ``Run`` rows (``lazylab runs``; ``lazylab.runs.list_runs``).

    Args:
      arm, width, seed: keep only rows with one of these values (a single value or a list; None: any).
      kind: which kind of result [default: ``"run"``, the training runs: ladder cells and rate-bracket
        runs, every one with a rate ``lr``]. Another of ``lazylab.runs.KINDS`` (``convex``, the convex
        readouts, ``lr`` None and the lambda in ``detail``; ``trajectory``, ``redundancy``, ``gram``,
        ``readout``, ``ntk-arm``, ``ntk-lab``, ``ntk-sweep``, ``ntk-scalar``, ``ntk-audit``), a list of
        kinds, or None for every kind (rows of several kinds then share the columns, with None where a
        kind has no such field, as ``lazylab runs`` lists them).
      cache_dir: the memo [default: ``$LAZYLAB_CACHE``, else ``~/.cache/lazylab/memo``].
      any_code: also results computed by other code identities (never reused).
      include_stale: also results whose plugin is not the installed one (``Run.provenance``: an edited
        plugin's older source, another version, one no longer installed), never reused [default: the
        results the installed plugins would reuse].
    Returns: Rows of Run (a list), sorted by kind, arm, width, seed.
    Raises: LazylabError (one line) for an unknown kind, an arm neither installed nor in the memo,
      a width below 1 or a negative seed.
    """
    listing = list_runs(cache_dir, arms=_names(arm, "arm"), widths=_ints(width, "width", 1),
                        seeds=_ints(seed, "seed", 0), kinds=_names(kind, "kind"), any_code=any_code,
                        include_stale=include_stale)
    return Rows(listing.runs)
