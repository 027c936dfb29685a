"""Reference results shipped with lazylab: the paper ladder's records, so a fresh clone's report shows them.

``paper.json`` (beside this file, package data) holds what ``lazylab ladder --preset paper --report
--json`` writes for a complete paper ladder (the plan, every arm's rate, bracket and per-width
summary, every run record: config, curves, summaries, no arrays, and ``analysis``) inside a small
envelope that says where, when and by which lazylab it was computed::

    {"schema": 1, "kind": "lazylab reference results", "preset": "paper",
     "provenance": {"where": str, "when": "YYYY-MM-DD" (UTC), "exported_at": ISO-8601 UTC,
                    "lazylab": version, "code": code identity, "command": str, "data": fingerprint,
                    "runs": int},
     "payload": {"plan", "arms", "runs", "analysis"}}

``scripts/export_reference.py`` writes it from a memo holding the complete paper ladder
(``build_reference`` here); ``load_reference`` reads and checks it. ``lazylab render`` shows it
when the memo does not hold the whole paper ladder (docs/render.md).
"""

from __future__ import annotations

import json
import math
import os
import platform
from datetime import datetime, timezone
from pathlib import Path

from lazylab.errors import LazylabError

REFERENCE_SCHEMA = 1
KIND = "lazylab reference results"
REFERENCE_FILE = Path(__file__).with_name("paper.json")
PROVENANCE_KEYS = ("where", "when", "exported_at", "lazylab", "code", "command", "data", "runs")


def reference_path() -> Path:
    """The shipped reference file (``lazylab/reference/paper.json``); it may be absent in a development tree."""
    return REFERENCE_FILE


def cpu_model() -> str:
    """This machine's CPU model, as the first ``model name`` line of ``/proc/cpuinfo`` gives it.

    Returns: the model string (e.g. ``"AMD EPYC"``), else ``platform.processor()`` where there is no
    ``/proc/cpuinfo`` or no model name in it, else ``platform.machine()`` (e.g. ``"x86_64"``).
    """
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    if model:
                        return model
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_description() -> str:
    """One line describing this machine: OS, CPU model and count, accelerators seen by jax (if loaded)."""
    cpu = cpu_model()
    n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{platform.system()} {platform.release()}, {cpu}, {n} CPU core{'s' * (n != 1)} available"


def _bad(path, what: str):
    """A one-line error naming the file (``path``: a path, or a phrase such as ``--from FILE``)."""
    return LazylabError(f"{path}: {what}")


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def check_payload(payload, where="ladder JSON") -> dict:
    """Check a ladder payload's structure (what ``lazylab ladder --json`` writes); returns it.

    Required: ``plan`` with ``arms`` (names), ``widths`` (positive ints), ``seeds``
    (ints) and ``epochs``; ``arms``: one dict per plan arm with ``arm`` and ``cells``
    (``{str(width): {"mean": float | None, ...}}``); ``runs``: a list of records each with
    ``config`` (``arm``, ``width``, ``seed``, ``lr``) and ``best_acc`` (a number or None);
    ``analysis``: a dict with ``ladder_law``. Newer fields (``unstable``, ``analysis["exchange"]``,
    ``analysis["warnings"]``) are optional; missing ``unstable`` marks are derived from the runs'
    loss curves (``_mark_unstable``).
    Raises: LazylabError (one line, naming ``where`` and the first problem found).
    """
    if not isinstance(payload, dict):
        raise _bad(where, "not a JSON object")
    plan = payload.get("plan")
    if not isinstance(plan, dict):
        raise _bad(where, "no 'plan' object (not a ladder --json file?)")
    arms = plan.get("arms")
    if not isinstance(arms, list) or not arms or not all(isinstance(a, str) and a for a in arms):
        raise _bad(where, "plan.arms is not a non-empty list of arm names")
    widths = plan.get("widths")
    if not isinstance(widths, list) or not widths or not all(isinstance(w, int) and not isinstance(w, bool) and w > 0
                                                             for w in widths):
        raise _bad(where, "plan.widths is not a non-empty list of positive integers")
    seeds = plan.get("seeds")
    if not isinstance(seeds, list) or not seeds or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
        raise _bad(where, "plan.seeds is not a non-empty list of integers")
    for field in ("epochs", "train_size"):
        if not isinstance(plan.get(field), int) or plan[field] < 1:
            raise _bad(where, f"plan.{field} is not a positive integer")
    summaries = payload.get("arms")
    if not isinstance(summaries, list) or [a.get("arm") if isinstance(a, dict) else None for a in summaries] != arms:
        raise _bad(where, "'arms' does not hold one summary per arm of the plan, in its order")
    for a in summaries:
        cells = a.get("cells")
        if not isinstance(cells, dict):
            raise _bad(where, f"arm {a['arm']}: no 'cells' object")
        for w, c in cells.items():
            if str(w) not in {str(x) for x in widths} or not isinstance(c, dict):
                raise _bad(where, f"arm {a['arm']}: cell {w!r} is not a width of the plan")
            if c.get("mean") is not None and not _is_num(c["mean"]):
                raise _bad(where, f"arm {a['arm']}, m = {w}: mean is not a number")
            if not isinstance(c.get("n"), int) or (c.get("std") is not None and not _is_num(c["std"])):
                raise _bad(where, f"arm {a['arm']}, m = {w}: no seed count n, or std is not a number")
        if a.get("lr") is not None and not _is_num(a["lr"]):
            raise _bad(where, f"arm {a['arm']}: lr is not a number")
    runs = payload.get("runs")
    if not isinstance(runs, list):
        raise _bad(where, "no 'runs' list")
    for i, r in enumerate(runs):
        cfg = r.get("config") if isinstance(r, dict) else None
        if not isinstance(cfg, dict) or not {"arm", "width", "seed", "lr"} <= set(cfg):
            raise _bad(where, f"run {i}: no config with arm, width, seed and lr")
        if cfg["arm"] not in arms:
            raise _bad(where, f"run {i}: arm {cfg['arm']!r} is not in the plan")
        if r.get("best_acc") is not None and not _is_num(r["best_acc"]):
            raise _bad(where, f"run {i}: best_acc is not a number")
    if not isinstance(payload.get("analysis"), dict) or not isinstance(payload["analysis"].get("ladder_law"), dict):
        raise _bad(where, "no 'analysis' object with a 'ladder_law'")
    _mark_unstable(payload)
    return payload


def _mark_unstable(payload: dict) -> None:
    """Fill ``unstable`` (``lazylab.analysis.unstable_reason``) into the runs and cells of a payload written before
    the field existed; their loss curves hold everything the rule needs."""
    from lazylab.analysis import unstable_reason

    runs = payload["runs"]
    if all("unstable" in r for r in runs):
        return
    for r in runs:
        if "unstable" not in r:
            r["unstable"] = unstable_reason(r) if "train_loss" in r and "best_epoch" in r else None
    for a in payload["arms"]:
        for w, c in a["cells"].items():
            c["unstable"] = sum(bool(r["unstable"]) for r in runs if r["config"]["arm"] == a["arm"]
                                and str(r["config"]["width"]) == str(w) and r["config"]["lr"] == a.get("lr")
                                and r["config"]["seed"] in payload["plan"]["seeds"])


def load_reference(path: str | Path | None = None) -> dict:
    """Read and check the reference results (default: the shipped ``paper.json``).

    Returns the whole document: ``{"schema", "kind", "preset", "provenance", "payload"}`` (module
    docstring); ``payload`` is a ladder payload checked by ``check_payload``.
    Raises: LazylabError (one line) when the file is absent or unreadable, not JSON, of
      another schema or kind, lacks a provenance field, or holds a malformed payload.
    """
    path = Path(path) if path is not None else reference_path()
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise _bad(f"reference results {path}", "no such file") from None
    except OSError as exc:
        raise _bad(f"reference results {path}", f"cannot be read: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise _bad(f"reference results {path}", f"not JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("kind") != KIND:
        raise _bad(f"reference results {path}", f"not a lazylab reference file (kind is not {KIND!r})")
    if doc.get("schema") != REFERENCE_SCHEMA:
        raise _bad(f"reference results {path}", f"schema {doc.get('schema')!r}; this lazylab reads schema {REFERENCE_SCHEMA}")
    prov = doc.get("provenance")
    if not isinstance(prov, dict):
        raise _bad(f"reference results {path}", "no provenance object")
    for k in PROVENANCE_KEYS:
        if k not in prov:
            raise _bad(f"reference results {path}", f"provenance lacks {k!r}")
    check_payload(doc.get("payload"), f"reference results {path}")
    if prov["runs"] != len(doc["payload"]["runs"]):
        raise _bad(f"reference results {path}",
                   f"provenance says {prov['runs']} runs, the payload holds {len(doc['payload']['runs'])}")
    return doc


def build_reference(ws, plan, preset: str = "paper", where: str | None = None, when: str | None = None,
                    command: str | None = None) -> dict:
    """The reference document for ``plan`` from the memo alone (nothing is trained).

    Args:
      ws: a ``Workspace`` whose memo holds every run of ``plan`` (brackets included).
      plan: a ``LadderPlan`` (``lazylab.experiments.render._plan("paper")`` for the shipped file).
      preset: the preset's name, recorded.
      where: the machine that computed the runs [default: ``machine_description()`` of this one].
      when: the UTC date they were computed [default: today, UTC].
      command: the command that computed them [default: ``lazylab ladder --preset <preset>``].
    Returns: the document ``load_reference`` reads (module docstring); its payload is what
      ``lazylab ladder --preset <preset> --report --json`` writes, plus the wall and the redundancy
      grid when the memo has them (``experiments.render.wall_analysis``).
    Raises: LazylabError (one line) if any run of the plan is missing from the memo.
    """
    from lazylab import __version__
    from lazylab.config import code_identity
    from lazylab.experiments.laws import analyse_ladder
    from lazylab.experiments.ladder import run_ladder
    from lazylab.experiments.render import ladder_in_memo, wall_analysis

    present, missing = ladder_in_memo(ws, plan)
    if missing:
        raise LazylabError(f"the memo at {ws.memo.directory} lacks {missing} of the {preset} ladder's "
                           f"{present + missing} runs ({present} present); finish `lazylab ladder --preset {preset}` first")
    ws.memo_only = True
    try:
        result = run_ladder(ws, plan)
        analysis = analyse_ladder(ws, result, plan.arms)
        wall_analysis(ws, plan, result, analysis)
    finally:
        ws.memo_only = False
    payload = json.loads(json.dumps({**result.to_json(), "analysis": analysis}))
    now = datetime.now(timezone.utc)
    prov = {"where": where or machine_description(), "when": when or now.date().isoformat(),
            "exported_at": now.isoformat(timespec="seconds"), "lazylab": __version__, "code": code_identity(),
            "command": command or f"lazylab ladder --preset {preset}", "data": ws.fingerprint,
            "runs": len(payload["runs"])}
    return {"schema": REFERENCE_SCHEMA, "kind": KIND, "preset": preset, "provenance": prov, "payload": payload}


def dump_reference(doc: dict) -> str:
    """The file's text: one JSON object, one run record per line (diffs stay readable, the file small)."""
    payload = doc["payload"]
    head = {k: v for k, v in doc.items() if k != "payload"}
    body = {k: v for k, v in payload.items() if k != "runs"}
    lines = ["{", *[f" {json.dumps(k)}: {json.dumps(v, sort_keys=True)}," for k, v in head.items()], ' "payload": {']
    lines += [f"  {json.dumps(k)}: {json.dumps(v, sort_keys=True)}," for k, v in body.items()]
    runs = [json.dumps(r, sort_keys=True, separators=(",", ":")) for r in payload["runs"]]
    lines.append('  "runs": [')
    lines += [f"   {r}," for r in runs[:-1]] + ([f"   {runs[-1]}"] if runs else [])
    lines += ["  ]", " }", "}"]
    return "\n".join(lines) + "\n"
