"""``lazylab verify``: rerun a sample of the reference results on this machine and compare them (issue 30).

XLA compiles different CPU code for different CPU models, so a run's last bits may change from one
machine to the next. Stable runs reproduce bit for bit on another x86-64 CPU; unstable ones (large
rates, loss spikes) do not. ``verify`` reruns a sample of a reference file's runs (by default the
shipped ``paper.json``: every arm's seed-0 runs at m = 256, at every rate the reference holds there,
the rate brackets) as normal runs, rebuilt from each record's ``config``, and classifies each
(``classify``):

- ``identical``: every number of the record equals the reference's: ``best_acc``, ``final_acc``,
  ``best_epoch``, ``curve``, ``train_loss``, ``diverged``, ``movement``, ``scalars`` (every field
  but ``seconds``, ``key``, ``config`` and the derived ``unstable``; ``config`` is equal by construction);
- ``within noise``: not identical, but ``best_acc`` differs by at most the reference's seed-to-seed
  noise of that run (``noise_bound``), or both runs diverged (no accuracy);
- ``diverged``: beyond that (or one of the two runs diverged and the other did not).

The noise bound (``noise_bound``) is 2 x the sample standard deviation (ddof = 1) of ``best_acc``
over the reference's seeds of the same (arm, width, rate); where the reference holds fewer than 2
seeds with an accuracy there, 2 x the sample std of the arm's cell at the same width at its chosen
rate (``arms[].lr``: the m = 256 cell of the paper ladder); where that is missing too, 0 (any change
of ``best_acc`` is then ``diverged``).

A reference run is *stable* when its ``unstable`` field is null (``analysis.unstable_reason``) and it
did not diverge (a non-finite loss); otherwise *unstable*. Per arm: *reproduced bit for bit* (every
run identical), *within noise* (none diverged), or *not reproduced*. The command fails (exit 1) only
when a stable run is ``diverged``.

An arm whose installed unit (its plugin identity, ``Arm.plugin``) or whose code identity
(``config.code_identity()``) differs from the reference's is skipped: its code differs, so a
comparison would not say anything about the machine.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np

from lazylab.errors import LazylabError

DEFAULT_WIDTH = 256  # the rate bracket's width (SPEC section 5): every rate of every arm's grid runs there
DEFAULT_SEEDS = (0,)
NOISE_SIGMAS = 2.0  # the bound: this many sample standard deviations of best_acc over the reference's seeds
IGNORED = ("seconds", "key", "config", "unstable")  # fields of a record not compared (timing, derived, identity)
VERDICTS = ("identical", "within noise", "diverged")
TOLERANCE = 1e-9  # best_acc holds 2 decimals: a difference equal to the bound stays within it


# ----------------------------------------------------------------- the rule
def differing_fields(reference: dict, record: dict) -> list[str]:
    """The fields (other than ``IGNORED``) whose values differ between two run records, sorted.

    Values are compared as JSON holds them (a record computed here is normalised through JSON first,
    exactly as the reference file stores it: floats by ``repr``, so equal means bit for bit)."""
    mine = json.loads(json.dumps(record))
    ref = json.loads(json.dumps(reference))
    names = (set(ref) | set(mine)) - set(IGNORED) - {"missing", "failed"}
    return sorted(n for n in names if ref.get(n) != mine.get(n)) + (["failed"] if mine.get("failed") else [])


def classify(reference: dict, record: dict, bound: float) -> tuple[str, float | None]:
    """``(verdict, delta)`` of a rerun ``record`` against its ``reference`` record; ``bound`` in points.

    ``identical`` when no field differs (``differing_fields``); else ``within noise`` when
    ``|best_acc - reference best_acc| <= bound`` (or both runs diverged: no accuracy to compare), else
    ``diverged``. ``delta`` is ``record best_acc - reference best_acc`` in points (None when either is None).
    """
    a, b = reference.get("best_acc"), None if record.get("failed") else record.get("best_acc")
    delta = None if a is None or b is None else round(b - a, 10)
    if not differing_fields(reference, record):
        return "identical", delta
    if a is None and b is None and not record.get("failed"):
        return "within noise", None
    if delta is None:
        return "diverged", None
    return ("within noise" if abs(delta) <= bound + TOLERANCE else "diverged"), delta


def stable(reference: dict) -> bool:
    """Whether a reference run is stable: its ``unstable`` field is null and it did not diverge."""
    return reference.get("unstable") is None and reference.get("diverged") is None


def _std(values: list[float]) -> float | None:
    return float(np.std(values, ddof=1)) if len(values) >= 2 else None


def noise_bound(payload: dict, arm: str, width: int, lr: float) -> tuple[float, str]:
    """``(bound, where from)``: the seed-to-seed noise of ``best_acc`` (points) for a run of ``arm`` at
    ``width`` and rate ``lr`` in a reference ``payload`` (the rule in the module docstring).

    ``where from`` names it: ``"3 seeds at this rate"``, ``"3 seeds at the chosen rate 0.1"``, or
    ``"no seed spread in the reference"`` (bound 0).
    """
    def accs(rate):
        return [r["best_acc"] for r in payload["runs"] if r["config"]["arm"] == arm and r["config"]["width"] == width
                and r["config"]["lr"] == rate and r.get("best_acc") is not None]

    own = accs(lr)
    if _std(own) is not None:
        return NOISE_SIGMAS * _std(own), f"{len(own)} seeds at this rate"
    summary = next((a for a in payload["arms"] if a["arm"] == arm), {})
    chosen = summary.get("lr")
    if chosen is not None:
        theirs = accs(chosen)
        if _std(theirs) is not None:
            return NOISE_SIGMAS * _std(theirs), f"{len(theirs)} seeds at the chosen rate {chosen:g}"
        cell = (summary.get("cells") or {}).get(str(width)) or {}
        if (cell.get("n") or 0) > 1 and cell.get("std") is not None:
            return NOISE_SIGMAS * float(cell["std"]), f"{cell['n']} seeds at the chosen rate {chosen:g}"
    return 0.0, "no seed spread in the reference"


# ----------------------------------------------------------------- the sample
@dataclasses.dataclass
class Sample:
    """What ``verify`` reruns: per arm, the reference records and the configurations rebuilt from them.

    ``runs`` maps arm name -> ``[(reference record, RunConfig), ...]`` in the reference's order;
    ``skipped`` maps arm name -> the one-line reason it is not compared (other code, not installed);
    ``arms`` holds the installed ``Arm`` of each compared arm.
    """

    runs: dict
    skipped: dict
    arms: dict

    def cells(self) -> list:
        """``[(Arm, RunConfig), ...]`` for ``Workspace.run_cells``."""
        return [(self.arms[name], cfg) for name, pairs in self.runs.items() for _, cfg in pairs]


def choose(doc: dict, fingerprint: str, arms: tuple[str, ...] | None = None, width: int = DEFAULT_WIDTH,
           seeds: tuple[int, ...] = DEFAULT_SEEDS) -> Sample:
    """The sample of reference ``doc`` (``lazylab.reference.load_reference``) to rerun on data ``fingerprint``.

    The runs of ``arms`` (default: every arm of the reference's plan) at ``width`` with a seed in ``seeds``,
    at every rate the reference holds there. Each ``RunConfig`` is rebuilt from the record's ``config``.
    Raises: LazylabError (one line) when an arm asked for is not in the reference, when the sample is
      empty, when the data's fingerprint differs from the one the reference's runs were computed on, or
      when every arm is skipped.
    """
    from lazylab.arms import get_arm
    from lazylab.config import RunConfig, code_identity
    from lazylab.experiments import json_config

    payload = doc["payload"]
    known = list(payload["plan"]["arms"])
    names = list(arms) if arms else known
    stray = [n for n in names if n not in known]
    if stray:
        raise LazylabError(f"--arms: {stray[0]} is not in the reference (its arms: {', '.join(known)})")
    picked = [r for r in payload["runs"] if r["config"]["arm"] in names and r["config"]["width"] == width
              and r["config"]["seed"] in seeds]
    if not picked:
        raise LazylabError(f"the reference holds no run of {', '.join(names)} at m = {width} with seed "
                           f"{','.join(map(str, seeds))} (--width, --seeds)")
    data = sorted({r["config"].get("data") for r in picked} - {fingerprint}, key=str)
    if data:
        raise LazylabError(f"the data here has fingerprint {fingerprint}, the reference's runs were computed on "
                           f"{data[0]}: another Fashion-MNIST, so no run can be compared (--data-dir)")
    picked.sort(key=lambda r: (names.index(r["config"]["arm"]), r["config"]["lr"], r["config"]["seed"]))
    runs: dict = {}
    skipped: dict = {}
    installed: dict = {}
    fields = {f.name for f in dataclasses.fields(RunConfig)}
    for name in names:
        mine = [r for r in picked if r["config"]["arm"] == name]
        if not mine:
            continue
        try:
            arm = get_arm(name)
        except LazylabError:
            skipped[name] = "not installed here (lazylab arms lists the installed arms)"
            continue
        theirs = sorted({r["config"].get("plugin") for r in mine}, key=str)
        codes = sorted({r["config"].get("code") for r in mine}, key=str)
        if theirs != [arm.plugin]:
            skipped[name] = (f"the installed unit is {arm.plugin}, the reference's {', '.join(map(str, theirs))}: "
                             "its code differs, so a comparison would not be meaningful")
            continue
        if codes != [code_identity()]:
            skipped[name] = (f"this lazylab is {code_identity()}, the reference's runs {', '.join(map(str, codes))}: "
                             "its code differs, so a comparison would not be meaningful")
            continue
        pairs = []
        for r in mine:
            cfg = r["config"]
            rebuilt = RunConfig(**{k: v for k, v in cfg.items() if k in fields})
            if json_config(rebuilt) != cfg:
                skipped[name] = ("its reference configurations hold fields this lazylab does not know "
                                 f"({', '.join(sorted(set(cfg) - fields)) or 'other values'}): another cache schema")
                break
            pairs.append((r, rebuilt))
        else:
            runs[name] = pairs
            installed[name] = arm
    if not runs:
        raise LazylabError("no arm can be compared: " + "; ".join(f"{a}: {why}" for a, why in skipped.items()))
    return Sample(runs=runs, skipped=skipped, arms=installed)


# ----------------------------------------------------------------- the convex readouts
CONVEX_TOLERANCE = 0.1  # points of test accuracy: a rerun convex readout within this of the reference's agrees
CONVEX_IGNORED = ("seconds", "key", "config")


def choose_convex(doc: dict, arms: dict, width: int = DEFAULT_WIDTH, seeds: tuple[int, ...] = DEFAULT_SEEDS) -> list:
    """``[(reference record, ConvexConfig), ...]``: the reference's convex readouts (``payload.convex.runs``) of the
    frozen arms among ``arms`` (name -> installed ``Arm``, the sample's) at ``width`` with a seed in ``seeds``,
    each ``ConvexConfig`` rebuilt from its record; readouts whose unit's identity differs here are left out."""
    from lazylab.experiments.convex import ConvexConfig

    fields = {f.name for f in dataclasses.fields(ConvexConfig)}
    picked = []
    for r in (doc["payload"].get("convex") or {}).get("runs", []):
        c = r["config"]
        arm = arms.get(c["arm"])
        if arm is None or arm.trained or c["width"] != width or c["seed"] not in seeds or c.get("plugin") != arm.plugin:
            continue
        cfg = ConvexConfig(**{k: v for k, v in c.items() if k in fields})
        if cfg.key() == r["key"]:  # the same code identity and fields: the same readout
            picked.append((r, cfg))
    return picked


def classify_convex(reference: dict, record: dict) -> tuple[str, float | None]:
    """``(verdict, delta)`` of a rerun convex readout: ``identical`` when every field but timing and identity
    is equal, ``within noise`` when its test accuracy is within ``CONVEX_TOLERANCE`` points of the reference's
    (another CPU's BLAS rounds the products otherwise, so the solve may stop an iteration earlier or later),
    else ``diverged``; ``delta`` in points."""
    mine, ref = json.loads(json.dumps(record)), json.loads(json.dumps(reference))
    delta = round(mine["test_acc"] - ref["test_acc"], 10)
    if all(mine.get(k) == ref.get(k) for k in (set(ref) | set(mine)) - set(CONVEX_IGNORED)):
        return "identical", delta
    return ("within noise" if abs(delta) <= CONVEX_TOLERANCE + TOLERANCE else "diverged"), delta


def convex_rows(picked: list, records: dict) -> list[dict]:
    """One row per rerun convex readout: ``arm``, ``width``, ``seed``, ``lambda``, both test accuracies, ``delta``,
    ``objective`` (both), ``stop`` (both), ``verdict``."""
    rows = []
    for ref, cfg in picked:
        rec = records[cfg.key()]
        verdict, delta = classify_convex(ref, rec)
        rows.append({"arm": cfg.arm, "width": cfg.width, "seed": cfg.seed, "lambda": cfg.lam,
                     "reference_acc": ref["test_acc"], "acc": rec["test_acc"], "delta": delta,
                     "reference_objective": ref["objective"], "objective": rec["objective"],
                     "stop": [ref["stop"], rec["stop"]], "verdict": verdict})
    return rows


# ----------------------------------------------------------------- the comparison
@dataclasses.dataclass
class Verification:
    """The outcome of ``verify``: one row per rerun, one summary per arm, and the verdict.

    Attributes:
      rows: dicts with ``arm``, ``width``, ``seed``, ``lr``, ``reference_best``, ``best``, ``delta``
        (points), ``bound`` (points), ``bound_from``, ``stable``, ``unstable`` (the reference's
        reason or None), ``verdict`` (``VERDICTS``), ``differs`` (the fields that differ).
      arms: dicts with ``arm``, ``status`` (``reproduced bit for bit``, ``within noise``,
        ``not reproduced`` or ``skipped``), ``runs``, the counts per verdict, ``only_unstable_differ``
        and ``line`` (one sentence).
      verdict: one line (``verify: ...: exit N``); exit_code: 1 when a stable run is ``diverged``, else 0.
    """

    rows: list
    arms: list
    verdict: str = ""
    exit_code: int = 0
    convex: list = dataclasses.field(default_factory=list)  # ``convex_rows``: the convex readouts rerun

    def counts(self) -> dict:
        return {v: sum(r["verdict"] == v for r in self.rows) for v in VERDICTS}

    def to_json(self) -> dict:
        return {"rows": self.rows, "arms": self.arms, "counts": self.counts(), "convex": self.convex,
                "verdict": self.verdict, "exit": self.exit_code}


def _arm_summary(name: str, rows: list) -> dict:
    n = len(rows)
    counts = {v: sum(r["verdict"] == v for r in rows) for v in VERDICTS}
    differ = [r for r in rows if r["verdict"] != "identical"]
    only_unstable = bool(differ) and all(not r["stable"] for r in differ)
    tail = "; only unstable runs differ" if only_unstable else ""
    seeds = len({r["seed"] for r in rows}) > 1
    if counts["identical"] == n:
        status, why = "reproduced bit for bit", f"{n} of {n} runs identical"
    elif not counts["diverged"]:
        status = "within noise"
        why = f"{counts['identical']} of {n} runs identical, {counts['within noise']} within noise"
    else:
        status = "not reproduced"
        worst = [f"lr {r['lr']:g}" + (f" seed {r['seed']}" if seeds else "")
                 + (f" {r['delta']:+.2f} points against ±{r['bound']:.2f}" if r["delta"] is not None
                    else " (one of the two runs diverged)")
                 for r in rows if r["verdict"] == "diverged"]
        why = f"{counts['diverged']} of {n} runs diverged: {', '.join(worst)}"
    return {"arm": name, "status": status, "runs": n, **{k.replace(" ", "_"): v for k, v in counts.items()},
            "only_unstable_differ": only_unstable, "line": f"{name}: {status} ({why}{tail})"}


def compare(sample: Sample, records: dict, payload: dict) -> Verification:
    """Compare the rerun ``records`` (by memo key) with the reference's records in ``sample``."""
    rows, arms = [], []
    for name, pairs in sample.runs.items():
        mine = []
        for ref, cfg in pairs:
            rec = records[cfg.key()]
            bound, source = noise_bound(payload, name, cfg.width, cfg.lr)
            verdict, delta = classify(ref, rec, bound)
            mine.append({"arm": name, "width": cfg.width, "seed": cfg.seed, "lr": cfg.lr,
                         "reference_best": ref.get("best_acc"),
                         "best": None if rec.get("failed") else rec.get("best_acc"), "delta": delta,
                         "bound": round(bound, 6), "bound_from": source, "stable": stable(ref),
                         "unstable": ref.get("unstable") or (f"diverged at epoch {ref['diverged'].get('epoch')}"
                                                             if isinstance(ref.get("diverged"), dict) else None),
                         "verdict": verdict, "differs": differing_fields(ref, rec)})
        rows += mine
        arms.append(_arm_summary(name, mine))
    for name, why in sample.skipped.items():
        arms.append({"arm": name, "status": "skipped", "runs": 0, "identical": 0, "within_noise": 0, "diverged": 0,
                     "only_unstable_differ": False, "line": f"{name}: skipped: {why}"})
    result = Verification(rows=rows, arms=arms)
    result.exit_code = int(any(r["verdict"] == "diverged" and r["stable"] for r in rows))
    result.verdict = verdict_line(result)
    return result


def _names(arms: list, status: str) -> list[str]:
    return [a["arm"] for a in arms if a["status"] == status]


def verdict_line(result: Verification) -> str:
    """``verify: 24 of 28 runs identical, 3 within noise, 1 diverged (unstable in the reference); this machine
    reproduces a, b bit for bit; c within noise; d not reproduced: exit 0``."""
    c, n = result.counts(), len(result.rows)
    unstable = sum(r["verdict"] == "diverged" and not r["stable"] for r in result.rows)
    text = f"verify: {c['identical']} of {n} runs identical, {c['within noise']} within noise, {c['diverged']} diverged"
    if c["diverged"]:
        text += (" (unstable in the reference)" if unstable == c["diverged"] else
                 f" ({unstable} of them unstable in the reference)" if unstable else " (stable in the reference)")
    parts = []
    same = _names(result.arms, "reproduced bit for bit")
    if same:
        parts.append(f"this machine reproduces {', '.join(same)} bit for bit")
    close = _names(result.arms, "within noise")
    if close:
        parts.append(f"{', '.join(close)} within noise")
    bad = [a["arm"] + (" (only unstable runs differ)" if a["only_unstable_differ"] else "")
           for a in result.arms if a["status"] == "not reproduced"]
    if bad:
        parts.append(f"not reproduced: {', '.join(bad)}")
    skipped = _names(result.arms, "skipped")
    if skipped:
        parts.append(f"skipped (other code): {', '.join(skipped)}")
    if result.convex:
        same = sum(r["verdict"] == "identical" for r in result.convex)
        close = sum(r["verdict"] == "within noise" for r in result.convex)
        parts.append(f"convex readouts: {same} of {len(result.convex)} identical, {close} within "
                     f"{CONVEX_TOLERANCE:g} points, {len(result.convex) - same - close} beyond")
    return "; ".join([text, *parts]) + f": exit {result.exit_code}"


def verify(ws, doc: dict, arms: tuple[str, ...] | None = None, width: int = DEFAULT_WIDTH,
           seeds: tuple[int, ...] = DEFAULT_SEEDS, reporter=None, sample: Sample | None = None) -> Verification:
    """Rerun the sample of ``doc`` (``choose``; or ``sample`` when given) through ``ws.run_cells``, as one
    call (the rates of a trained arm train together), and compare (``compare``).

    ``ws`` should have a memo of its own (``lazylab verify`` gives it a throwaway one): a run served
    from a memo filled elsewhere would compare the reference with itself.
    Raises: LazylabError as ``choose``.
    """
    from lazylab.experiments import Reporter

    from lazylab.experiments.convex import run_convex

    sample = sample or choose(doc, ws.fingerprint, arms, width, seeds)
    cells = sample.cells()
    picked = choose_convex(doc, sample.arms, width, seeds)
    reporter = reporter or Reporter()
    reporter.plan(len(cells) + len(picked))
    records = {cfg.key(): rec for (_, cfg), rec in zip(cells, ws.run_cells(cells, reporter))}
    convex = [(sample.arms[cfg.arm], cfg) for _, cfg in picked]
    records.update((cfg.key(), rec) for (_, cfg), rec in zip(convex, run_convex(ws, convex, reporter)))
    result = compare(sample, records, doc["payload"])
    result.convex = convex_rows(picked, records)
    result.exit_code = max(result.exit_code, int(any(r["verdict"] == "diverged" for r in result.convex)))
    result.verdict = verdict_line(result)
    return result


def estimate(ws, sample: Sample, cal=None, doc: dict | None = None, width: int = DEFAULT_WIDTH,
             seeds: tuple[int, ...] = DEFAULT_SEEDS):
    """The ``lazylab.estimate.Estimate`` of rerunning ``sample`` in ``ws`` (nothing is trained), with the convex
    readouts of ``doc`` at ``width`` and ``seeds`` (``choose_convex``) when ``doc`` is given."""
    from lazylab import estimate as E
    from lazylab.calibration import calibration

    pricer = E.Pricer(cal or calibration(measure_now=False), cache_limit=ws.memo.feature_limit)
    parts = []
    for name, pairs in sample.runs.items():
        cfgs = [cfg for _, cfg in pairs]
        rows, seconds = E._run_rows("verify", sample.arms[name], cfgs, True,
                                    [ws._memo_record(c) is not None for c in cfgs], pricer)
        parts.append((rows, seconds, []))
    from lazylab.estimate_convex import convex_cell_jobs

    picked = choose_convex(doc, sample.arms, width, seeds) if doc is not None else []
    parts.append(convex_cell_jobs(ws, [(sample.arms[cfg.arm], cfg) for _, cfg in picked], pricer, E.run_row))
    return E._estimate("verify", ws, parts, 0.0, pricer)
