"""Reference results shipped with lazylab: the paper ladder's records, so a fresh clone's report shows them.

``paper.json`` (beside this file, package data) holds what ``lazylab ladder --preset paper --report
--json`` writes for a complete paper ladder (the plan, every arm's rate, bracket and per-width
summary, every run record: config, curves, summaries, no arrays, and ``analysis``) inside a small
envelope that says where, when and by which lazylab it was computed::

    {"schema": 1, "kind": "lazylab reference results", "preset": "paper",
     "provenance": {"where": str, "when": "YYYY-MM-DD" (UTC), "exported_at": ISO-8601 UTC,
                    "lazylab": version, "code": code identity, "command": str, "data": fingerprint,
                    "runs": int, "digest": SHA-256 (hex) of the payload's canonical JSON},
     "payload": {"plan", "arms", "runs", "analysis"}}

The digest is recorded at export (``dump_reference``) and checked at load: a number changed by hand, or a
damaged file, is refused in one line, and ``lazylab render`` then draws its report without the reference.

``scripts/export_reference.py`` writes it from a memo holding the complete paper ladder
(``lazylab.experiments.render.build_reference``, on the experiments' side: this module reads, writes
and checks files and imports no experiment); ``load_reference`` reads and checks it. ``lazylab render`` shows it
when the memo does not hold the whole paper ladder (docs/render.md).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from pathlib import Path

from lazylab.errors import LazylabError

REFERENCE_SCHEMA = 2
KIND = "lazylab reference results"
REFERENCE_FILE = Path(__file__).with_name("paper.json")
PROVENANCE_KEYS = ("where", "when", "exported_at", "lazylab", "code", "command", "data", "runs", "digest")


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


def check_payload(payload, where="ladder JSON") -> dict:
    """Check a ladder payload (what ``lazylab ladder --json`` writes) against its schema; returns it.

    The schema is ``lazylab.schemas.ladder.LadderPayload``: every field the readers use (the render's
    ladder pictures and report, ``lazylab.api``, ``lazylab.verify``), with the ranges of the options that
    produced it (seeds 0..MAX_SEED, widths 1..MAX_WIDTH, rates (0, MAX_LR], epochs, training set size,
    accuracies 0..100 %); one summary per plan arm in its order, cells at the plan's widths, runs of the
    plan's arms. Newer fields (``unstable``, ``selection``, ``analysis["exchange"]``, ``["warnings"]``,
    ...) are optional; missing ``unstable`` marks are derived from the runs' loss curves
    (``_mark_unstable``). Unknown fields are ignored and kept.
    Returns: ``payload`` itself (the plain dict, ``unstable`` marks filled in).
    Raises: LazylabError (one line: ``<where>: field <path>: <problem>``, naming the first problem found).
    """
    from lazylab.schemas.ladder import check_ladder_payload

    check_ladder_payload(payload, where)
    _mark_unstable(payload)
    return payload


def payload_digest(payload: dict) -> str:
    """SHA-256 (hex) of a payload's canonical JSON (sorted keys, no spaces, floats by ``repr``).

    The same numbers give the same digest however the file is laid out; any changed value changes it.
    """
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


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
    docstring); ``payload`` is a ladder payload checked by ``check_payload``, and its canonical JSON has
    the SHA-256 ``provenance["digest"]`` recorded at export.
    Raises: LazylabError (one line) when the file is absent, unreadable, not a regular file or too
      large, not JSON, of another schema or kind, lacks a provenance field, holds a malformed payload,
      or its digest does not match its payload (a number changed after export).
    """
    from lazylab.schemas import read_json

    path = Path(path) if path is not None else reference_path()
    what = f"reference results {path}"
    if not path.exists() and not path.is_symlink():
        raise _bad(what, "no such file")
    return check_reference(read_json(path, "reference results"), what)


def check_reference(doc, what: str) -> dict:
    """Check a reference document (``load_reference``'s) read from anywhere; ``what`` names it in errors.

    Returns: ``doc`` itself, its payload's missing ``unstable`` marks filled in (``_mark_unstable``).
    Raises: LazylabError (one line) as ``load_reference`` does for the document's contents.
    """
    from lazylab.schemas import validate
    from lazylab.schemas.ladder import ReferenceEnvelope, check_ladder_payload

    if not isinstance(doc, dict) or doc.get("kind") != KIND:
        raise _bad(what, f"not a lazylab reference file (kind is not {KIND!r})")
    if doc.get("schema") != REFERENCE_SCHEMA or isinstance(doc.get("schema"), bool):
        raise _bad(what, f"schema {str(doc.get('schema'))[:40]}; this lazylab reads schema {REFERENCE_SCHEMA}")
    prov = validate(ReferenceEnvelope, doc, what).provenance
    check_ladder_payload(doc.get("payload"), what, "payload")
    digest = payload_digest(doc["payload"])  # before _mark_unstable fills in what an older payload lacks
    _mark_unstable(doc["payload"])
    if prov.runs != len(doc["payload"]["runs"]):
        raise _bad(what, f"provenance says {prov.runs} runs, the payload holds {len(doc['payload']['runs'])}")
    if digest != prov.digest:
        raise _bad(what, "its digest does not match its contents (changed after export?)")
    return doc


def dump_reference(doc: dict) -> str:
    """The file's text: one JSON object, one run record per line (diffs stay readable, the file small).

    ``provenance["digest"]`` is written as the SHA-256 of the payload written (``payload_digest``), so a payload
    changed after ``lazylab.experiments.render.build_reference`` (tests plant differences) is recorded as it
    is; ``doc`` is not changed.
    """
    payload = doc["payload"]
    head = {k: v for k, v in doc.items() if k != "payload"}
    head["provenance"] = {**head.get("provenance", {}), "digest": payload_digest(payload)}
    body = {k: v for k, v in payload.items() if k != "runs"}
    lines = ["{", *[f" {json.dumps(k)}: {json.dumps(v, sort_keys=True)}," for k, v in head.items()], ' "payload": {']
    lines += [f"  {json.dumps(k)}: {json.dumps(v, sort_keys=True)}," for k, v in body.items()]
    runs = [json.dumps(r, sort_keys=True, separators=(",", ":")) for r in payload["runs"]]
    lines.append('  "runs": [')
    lines += [f"   {r}," for r in runs[:-1]] + ([f"   {runs[-1]}"] if runs else [])
    lines += ["  ]", " }", "}"]
    return "\n".join(lines) + "\n"
