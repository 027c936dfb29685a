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
from lazylab.api_types import (PANDAS_HINT, ROWS_KIND, ArmRate, Cell, ConvexCell, ExchangeRow, Gap, GramFrame, Ladder,
                               LadderLaw, MovementLaw, NtkCheck, ReadoutPoint, Record, Result, Rows, TrajectoryEpoch,
                               WallRow)
from lazylab.errors import LazylabError
from lazylab.runs import KINDS, Run, list_runs

__all__ = ["Rows", "Run", "Cell", "ArmRate", "LadderLaw", "MovementLaw", "Gap", "ExchangeRow", "ConvexCell",
           "WallRow", "Record", "Ladder", "GramFrame", "ReadoutPoint", "TrajectoryEpoch", "NtkCheck", "Result",
           "ladder", "reference", "load", "runs", "KINDS", "READOUTS", "PANDAS_HINT"]
READOUTS = ("adamw", "convex", "both")  # ``ladder(readout=...)``, as ``lazylab ladder --readout``

# --------------------------------------------------------------------------- building a Ladder
def _f(v) -> float | None:
    return None if v is None else float(v)


def _ladder_from_payload(payload: dict, source: str, provenance: dict | None = None,
                         notes: list[str] | None = None, stored: dict | None = None,
                         where: str | None = None, document: dict | None = None) -> Ladder:
    """A ``Ladder`` from what ``lazylab ladder --json`` writes (plan, arms, runs, analysis; ``convex`` with
    ``--readout both``); ``where`` names it in errors about its convex part [default: ``source``];
    ``document``: the file it is (``Ladder.to_dict``) [default: ``payload``]; ``stored``: ``{key: datetime}``."""
    from lazylab.runs import run_from_record, sort_key

    plan, analysis = payload["plan"], payload["analysis"]
    widths = [int(w) for w in plan["widths"]]
    rates, cells = Rows(), Rows()
    for a in payload["arms"]:
        rates.append(ArmRate(arm=a["arm"], plugin=a.get("plugin"), unit=a.get("unit"), init=a.get("init"), lr=_f(a.get("lr")),
                             bracket={float(k): _f(v) for k, v in (a.get("bracket") or {}).items()},
                             failed=a.get("failed"), colour=a.get("colour"),
                             checks_failed=list(a.get("checks_failed") or [])))
        for w in widths:
            c = (a.get("cells") or {}).get(str(w))
            if c is None:
                continue
            cells.append(Cell(arm=a["arm"], width=w, lr=_f(a.get("lr")), n=int(c.get("n", 0)), mean=_f(c.get("mean")),
                              std=_f(c.get("std")), final_mean=_f(c.get("final_mean")),
                              diverged=int(c.get("diverged") or 0), unstable=int(c.get("unstable") or 0),
                              seeds=list(c.get("seeds") or []), failed=int(c.get("failed") or 0)))
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
    convex = _convex_cells(payload.get("convex"), where or source, "convex")
    return Ladder(arms=list(plan["arms"]), widths=widths, seeds=[int(s) for s in plan["seeds"]],
                  epochs=int(plan["epochs"]), train_size=int(plan["train_size"]), lr=_f(plan.get("lr")),
                  rates=rates, cells=cells, runs=runs, laws=laws, movement=movement, gaps=gaps, exchange=rows,
                  exchange_sentence=exchange.get("sentence", ""), warnings=list(analysis.get("warnings") or []),
                  analysis=analysis, source=source, provenance=provenance, notes=list(notes or []), convex=convex,
                  wall=_wall_rows(analysis.get("wall"), where or source),
                  records=_records(payload, rates, cells, convex, where or source),
                  document=payload if document is None else document)


def _records(payload: dict, rates: Rows, cells: Rows, convex: Rows, where: str) -> Rows:
    """``Record`` per run record (plan order of arms, then width, seed, rate) and per convex record of a payload."""
    rate = {r.arm: r.lr for r in rates}
    cell = {(c.arm, c.width): c for c in cells}
    convex_cell = {(c.arm, c.width): c for c in convex}
    plan = payload["plan"]
    out = Rows()
    try:
        for rec in payload["runs"]:
            cfg = rec["config"]
            ladder_cell = (cfg["lr"] == rate.get(cfg["arm"]) and cfg["width"] in plan["widths"]
                           and cfg["seed"] in plan["seeds"])
            c = cell.get((cfg["arm"], cfg["width"])) if ladder_cell else None
            loss = rec.get("train_loss") or []
            out.append(Record("adamw", cfg["arm"], int(cfg["width"]), int(cfg["seed"]), _f(cfg["lr"]), None,
                              not ladder_cell, _f(rec.get("best_acc")), _f(rec.get("final_acc")),
                              _f(loss[-1]) if loss else None, c and c.n, c and c.mean, c and c.std, rec.get("key", ""),
                              list(rec.get("checks_failed") or [])))
        for rec in (payload.get("convex") or {}).get("runs") or []:
            if rec.get("missing"):
                continue
            cfg = rec["config"]
            c = convex_cell.get((cfg["arm"], cfg["width"]))
            out.append(Record("convex", cfg["arm"], int(cfg["width"]), int(cfg["seed"]), None, _f(rec.get("lambda")),
                              False, _f(rec.get("test_acc")), _f(rec.get("test_acc")), _f(rec.get("train_loss")),
                              c and c.n, c and c.mean, c and c.std, rec.get("key", ""),
                              list(rec.get("checks_failed") or [])))
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise _malformed(where, "runs", exc) from None
    order = {a: i for i, a in enumerate(plan["arms"])}
    out.sort(key=lambda r: (r.readout != "adamw", order.get(r.arm, len(order)), r.width, r.seed, r.lr or 0.0))
    return out


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
    """``WallRow`` rows of ``analysis["wall"]`` (``experiments.convex_wall.wall``), arms in file order, widths ascending."""
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
           readout: str = "adamw", lambdas: Iterable[float] | None = None,
           cache_dir: str | Path | None = None, data_dir: str | Path | None = None, memo_only: bool = False,
           redundancy: bool = True, on_run: Callable[[Run, bool], None] | None = None) -> Ladder | Result:
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
      readout: the frozen heads, as ``lazylab ladder --readout`` (``READOUTS``; docs/convex.md): ``adamw``, the
        protocol's epochs; ``convex``, the convex optimum of the same objective (frozen arms only; no AdamW
        runs); ``both``, the protocol and the optimum with the wall table (``Ladder.convex``, ``Ladder.wall``).
      lambdas: the convex readout's L2 penalty path (distinct, within ``convex_solve.lambda_path``'s bounds;
        walked largest first) [default: ``lazylab.experiments.convex.LAMBDAS``].
      cache_dir: the memo [default: ``$LAZYLAB_CACHE``, else ``~/.cache/lazylab/memo``].
      data_dir: Fashion-MNIST [default: ``$LAZYLAB_DATA`` or the Debian package's folder].
      memo_only: train nothing (``lazylab ladder --report``): every run (and convex readout) must be in the memo.
      redundancy: measure each bank's redundancy (SPEC section 6; a few seconds per bank).
      on_run: called as ``on_run(run, cached)`` for each training run as it finishes or is read.
    Returns: Ladder (``source`` names the memo; ``to_json()`` is what ``lazylab ladder --json`` writes); for
      ``readout="convex"`` the ``Result`` of kind ``convex`` that ``load`` makes of the command's file.
    Raises: LazylabError (one line) for an unknown preset, arm, fan-in or readout, a value out of range, a
      convex readout of trained arms alone, data that cannot be found, or, with ``memo_only``, runs
      missing from the memo (how many).
    """
    import dataclasses

    from lazylab.arms import get_arm
    from lazylab.experiments import Reporter, Workspace
    from lazylab.experiments.convex import LAMBDAS
    from lazylab.experiments.convex_wall import convex_file, with_convex
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
    if readout not in READOUTS:
        raise LazylabError(f"readout: expected one of {', '.join(READOUTS)}, got {readout!r}")
    path = _lambdas(lambdas) or LAMBDAS
    plan = preset_plan(preset, tuple(get_arm(n) for n in names) if names else None, _ints(widths, "widths", 1),
                       _ints(seeds, "seeds", 0), epochs, train_size, lr, fan_in, bracket)
    trained = [a.name for a in plan.arms if a.trained]
    if readout == "convex" and trained or readout == "both" and len(trained) == len(plan.arms):
        raise LazylabError(f"readout {readout!r} reads out frozen banks; trained arms: {', '.join(trained)}")

    class _Hook(Reporter):
        def done(self, cfg, record, cached):
            if on_run is not None:
                from lazylab.runs import run_from_record

                on_run(run_from_record(record), cached)

    ws = Workspace(data_dir, cache_dir)
    source = f"memo at {ws.memo.directory}"
    try:
        ws.memo_only = memo_only
        if readout == "convex":
            doc = json.loads(json.dumps(convex_file(plan, _convex_readouts(ws, plan, path, memo_only))))
            return _convex_result(doc, source, f"ladder(readout='convex') from the {source}")
        result = run_ladder(ws, plan, _Hook())
        healthy = tuple(a for a in plan.arms if a.name not in ws.failures)  # as the command line: failed arms aside
        if not (memo_only and ws.missing):
            analysis = analyse_ladder(ws, result, healthy, redundancy=redundancy)
        if memo_only and ws.missing:  # runs (or a redundancy measurement) not in the memo
            raise LazylabError("memo_only: " + missing_message(ws, plan, result).removeprefix("--report: ").replace(
                "run the same command without --report", "call ladder() without memo_only"))
        payload = {**result.to_json(), "analysis": analysis}
        if readout == "both":
            from lazylab.experiments.optimum import with_optimum

            frozen = dataclasses.replace(plan, arms=tuple(a for a in healthy if not a.trained))
            convex = _convex_readouts(ws, frozen, path, memo_only)
            with_convex(payload, result, convex, healthy)
            with_optimum(ws, payload, result, convex, plan, healthy)
            lacking = [k for k in ws.missing if k.startswith("optimum-")]
            if memo_only and lacking:
                raise LazylabError(f"memo_only: the memo at {ws.memo.directory} lacks {len(lacking)} trained-optimum "
                                   "run(s); call ladder() without memo_only to compute them")
        return _ladder_from_payload(json.loads(json.dumps(payload)), source=source, notes=ws.memo.problems,
                                    stored=_stored_times(ws.memo))
    finally:
        ws.memo.close()


def _lambdas(values) -> tuple[float, ...] | None:
    """``ladder``'s ``lambdas`` (``convex_solve.lambda_path``), largest first; None when not given."""
    from lazylab.experiments.convex_solve import lambda_path

    if values is None:
        return None
    try:
        return lambda_path(values)
    except ValueError as err:
        raise LazylabError(f"lambdas: {err}") from None


def _convex_readouts(ws, plan, lambdas, memo_only: bool) -> dict:
    """``run_convex_ladder``; with ``memo_only``, every readout must be in the memo. Raises: LazylabError."""
    from lazylab.experiments.convex import run_convex_ladder

    convex = run_convex_ladder(ws, plan, lambdas)
    lacking = [k for k in ws.missing if k.startswith("convex-")]
    if memo_only and lacking:
        raise LazylabError(f"memo_only: the memo at {ws.memo.directory} lacks {len(lacking)} convex readout"
                           f"{'s' if len(lacking) != 1 else ''}; call ladder() without memo_only to compute them")
    return convex


def _stored_times(memo) -> dict:
    """``{key: datetime in UTC, to the second}`` of the memo's run entries (as ``lazylab.runs.list_runs`` gives them)."""
    from datetime import datetime, timezone

    return {k: datetime.fromtimestamp(t, timezone.utc).replace(microsecond=0)
            for k, _, t in memo.entries() if k.startswith("run-") and t is not None}


def reference(path: str | Path | None = None) -> Ladder:
    """The paper ladder shipped with lazylab (``lazylab/reference/paper.json``), or another reference file.

    Nothing is computed: 8 arms x 10 widths (16-8192) x 3 seeds x 12 epochs on all 60,000 images, as
    computed on the machine and date in ``provenance`` (``where``, ``when``, ``lazylab``, ``code``,
    ``command``, ``data``, ``runs``); docs/results.md discusses its numbers.

    Returns: Ladder (``source`` says ``reference results``; ``provenance`` set; run rows have no
      ``stored`` time; ``to_json()`` is the reference file's document).
    Raises: LazylabError (one line) when the file is absent, unreadable or malformed; for a file that
      is not a reference file (a ``lazylab ladder --json`` file, say) the line points to ``load``.
    """
    from lazylab.reference import load_reference, reference_path
    from lazylab.schemas import read_json

    try:
        doc = load_reference(path)
    except LazylabError as exc:
        if path is not None and "not a lazylab reference file" in str(exc):
            raise LazylabError(f"{exc}; api.load(path) reads the --json files lazylab commands write") from None
        raise
    path = path or reference_path()
    return _reference_ladder(doc, read_json(path, "reference results"), f"reference results {path}")


def _reference_ladder(doc: dict, raw: dict, name: str) -> Ladder:
    """The ``Ladder`` of a checked reference document ``doc`` (``raw``: the document as written, ``to_dict``)."""
    prov = doc["provenance"]
    return _ladder_from_payload(doc["payload"], provenance=prov, document=raw,
                                source=f"{name} (computed {prov['when']} by {prov['code']}: {prov['where']})")


LOAD_KINDS = ("ladder (any --readout)", "gram", "readout", "trajectory", "ntk scalar", "ntk audit", "runs")


def load(source: str | Path) -> Ladder | Result | Rows:
    """Read back a ``--json`` file written by the command line, or JSON text written by this module, checked
    like the options that wrote it.

    ``source`` is a path, or JSON text (a ``str`` whose first character other than white space is ``{`` or
    ``[``: ``Ladder.to_json()``, ``Result.to_json()``, ``Rows.to_json()``). What each document becomes:
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
      * ``lazylab runs --json``: ``Rows`` of ``Run``; ``Rows.to_json()`` text: ``Rows`` of its row class.
    A file is read by the bounded reader (``lazylab.schemas.read_json``: a regular file, at most
    ``MAX_FILE_BYTES``); a ladder is checked by ``lazylab.reference.check_payload``, the others by
    the pydantic models of ``lazylab.schemas.results``. Nothing is computed and the memo is not read;
    a plugin arm needs no installed unit.
    Raises: LazylabError, one line naming the file (and the field, when one is wrong): missing,
      unreadable, not a regular file, too large, not JSON, not a document listed above (``ntk arm``,
      ``ntk lab``, ``ntk sweep`` and ``redundancy`` files are not read back), a field missing, of the
      wrong type or out of its option's range.
    """
    import copy

    from lazylab.experiments.render.settings import json_kind
    from lazylab.reference import KIND as REFERENCE_KIND
    from lazylab.reference import check_payload, check_reference
    from lazylab.schemas import parse_json, read_json, validate
    from lazylab.schemas.results import RESULT_FILES

    if isinstance(source, str) and source.lstrip()[:1] in ("{", "["):
        path, where = "JSON text", "load: JSON text"
        doc = parse_json(source, where)
    else:
        path = Path(source)
        doc, where = read_json(path, "load:"), f"load: {path}"
    if isinstance(doc, dict) and doc.get("kind") == REFERENCE_KIND:
        if isinstance(path, Path):
            return reference(path)
        return _reference_ladder(check_reference(copy.deepcopy(doc), where), doc, "reference results (JSON text)")
    if isinstance(doc, dict) and doc.get("kind") == ROWS_KIND:
        return _rows(doc, where)
    if isinstance(doc, dict) and {"memo", "count", "runs"} <= doc.keys() and isinstance(doc["runs"], list):
        return _rows({"row": "Run", "rows": doc["runs"]}, f"{where} (`lazylab runs --json` output)")
    if isinstance(doc, list) and doc and all(isinstance(c, dict) and "passed" in c for c in doc):
        from lazylab.schemas.results import NtkCheckDoc

        what = f"{where} (`lazylab ntk audit --json` output)"
        checks = [validate(NtkCheckDoc, c, f"{what}: check [{i}]") for i, c in enumerate(doc)]
        return Result(kind="ntk-audit", config={}, rows=Rows(_ntk_checks(checks)), data=doc, source=str(path))
    kind = json_kind(doc)
    if kind is None and isinstance(doc, dict) and {"arms", "runs", "analysis"} & doc.keys():
        kind = "ladder"  # a ladder file that lost its plan: the checker names what is missing
    if kind is None:
        what = " (an `ntk arm` file: not read back)" if isinstance(doc, dict) and {"ntk", "drift"} <= doc.keys() else ""
        raise LazylabError(f"{where}: not a document lazylab.api.load reads{what}; it reads the --json output of "
                           f"{', '.join(LOAD_KINDS)}, and the to_json() text of a Ladder, Result or Rows")
    if kind == "ladder":
        plan = doc.get("plan")
        if isinstance(plan, dict) and plan.get("readout") == "convex":
            return _convex_result(doc, str(path), where)
        what = f"{where} (`lazylab ladder --json` output)"
        return _ladder_from_payload(check_payload(doc, what), source=f"ladder --json {'file ' * isinstance(path, Path)}{path}",
                                    where=what)
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


def _rows(doc: dict, where: str) -> Rows:
    """``Rows`` of the row class ``doc["row"]`` names (``Rows.to_json``): each item that class's fields."""
    from dataclasses import fields

    types = {c.__name__: c for c in (Run, Cell, ArmRate, LadderLaw, MovementLaw, Gap, ExchangeRow, ConvexCell, WallRow,
                                     Record, GramFrame, ReadoutPoint, TrajectoryEpoch, NtkCheck)}
    name, items = doc.get("row"), doc.get("rows")
    if not isinstance(items, list) or (name not in types and (items or name is not None)):
        raise LazylabError(f"{where}: field row: {str(name)[:40]!r} is not a row class lazylab.api.Rows holds "
                           f"({', '.join(types)}), or rows is not a list")
    out = Rows()
    for i, item in enumerate(items):
        try:
            if types[name] is Run:
                out.append(Run.from_json(item))
                continue
            names = {f.name for f in fields(types[name])}
            if not isinstance(item, dict) or not set(item) <= names:
                raise TypeError(f"fields {sorted(set(item) - names) if isinstance(item, dict) else item!r} "
                                f"are not {name}'s")
            row = types[name](**item)
            if isinstance(row, ArmRate):  # JSON keys are text: the rates are numbers
                row.bracket = {float(k): v for k, v in row.bracket.items()}
            out.append(row)
        except (TypeError, ValueError, LazylabError) as exc:
            raise LazylabError(f"{where}: rows[{i}]: not a {name} ({str(exc)[:120]})") from None
    return out


def _ntk_checks(checks) -> list[NtkCheck]:
    return [NtkCheck(name=c.name, value=_f(c.value), passed=c.passed, expect=c.expect) for c in checks]


def _convex_result(doc: dict, source: str, where: str) -> Result:
    """A ``ladder --readout convex`` document as a ``Result`` of ``ConvexCell`` rows (``source``: where it came from)."""
    what = f"{where} (`lazylab ladder --readout convex --json` output)"
    if not isinstance(doc.get("convex"), dict):
        raise LazylabError(f"{what}: field convex: missing or not an object")
    return Result("convex", doc["plan"], _convex_cells(doc["convex"], what, "convex"), doc, source)


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
