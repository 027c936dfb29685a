"""The ladder's laws measured (SPEC section 6): records in, an ``analysis`` dict out.

``analyse_ladder`` turns a ``LadderResult`` into the study's findings — the
ladder law per arm, the movement law per trained arm, the trained-minus-frozen
gap per pair, the redundancy of each bank, and the learned scalars — using
the pure functions of ``lazylab.analysis``. Only the redundancy needs new
computation (a bank's features on real images); it is memoized like a run,
keyed by a hash of its configuration. No printing.
"""

from __future__ import annotations


import numpy as np

from lazylab import analysis as an
from lazylab.exchange import exchange_rate, exchange_sentence
from lazylab.arms import Arm
from lazylab.errors import LazylabError
from lazylab.config import memo_key
from lazylab.config import CACHE_SCHEMA
from lazylab.experiments import Workspace

REDUNDANCY_WIDTH = 256  # SPEC section 6
REDUNDANCY_IMAGES = 4000
REDUNDANCY_SEED = 0
REDUNDANCY_VERSION = 1  # bump if the measurement changes meaning


def bank_name(arm: Arm) -> str:
    """The bank an arm starts from, named like its arms without the bank mode: ``yat``, ``yat-data``, ``gaussian``."""
    return arm.name.rsplit("-", 1)[0]


SAMPLES = ("first-n", "held-out", "with-seeds")


def redundancy_config(ws: Workspace, arm: Arm, width: int, n: int, seed: int, fan_in: str, train_size: int,
                      sample: str = "first-n") -> dict:
    """The canonical configuration of one redundancy measurement (what its memo key hashes)."""
    return {
        "kind": "redundancy", "version": REDUNDANCY_VERSION, "schema": CACHE_SCHEMA,
        "unit": arm.unit.name, "init": arm.init, "plugin": arm.plugin, "width": int(width), "n": int(n),
        "seed": int(seed), "fan_in": fan_in, "train_size": int(train_size), "data": ws.fingerprint,
        "sample": sample,
    }


def sample_images(arm: Arm, width: int, n: int, seed: int, train_size: int, sample: str) -> np.ndarray:
    """Indices ``(n,)`` of the training images a redundancy measurement reads (among the first ``train_size``).

    ``first-n``: the first ``n``. For a data-seeded bank, ``held-out``: the first ``n`` images that
    seed no unit; ``with-seeds``: every seed image (``width`` of them) then the first ``n - width``
    others. A random bank has no seed images: all three are the first ``n``.
    Raises: LazylabError if the sample cannot be drawn (too few images, or ``with-seeds`` with
      ``n < width``).
    """
    from lazylab.model import seed_indices

    if sample not in SAMPLES:
        raise LazylabError(f"unknown redundancy sample {sample!r}; choose from {', '.join(SAMPLES)}")
    if sample == "first-n" or arm.init != "data":
        return np.arange(n)
    seeds = seed_indices(width, seed, train_size)
    others = np.setdiff1d(np.arange(train_size), seeds)
    if sample == "held-out":
        if n > len(others):
            raise LazylabError(f"held-out sample: only {len(others)} training images seed no unit, {n} asked")
        return others[:n]
    if n < width:
        raise LazylabError(f"with-seeds sample: {n} images cannot include the bank's {width} seed images")
    return np.concatenate([np.sort(seeds), others[: n - width]])


def redundancy_key(cfg: dict) -> str:
    """``"redundancy-"`` + the first 32 hex digits of SHA-256 of the canonical JSON of ``cfg``."""
    return memo_key("redundancy", cfg)


def bank_redundancy(ws: Workspace, arm: Arm, width: int = REDUNDANCY_WIDTH, n: int = REDUNDANCY_IMAGES,
                    seed: int = REDUNDANCY_SEED, fan_in: str = "unit", train_size: int = 60000,
                    sample: str = "first-n") -> dict | None:
    """Redundancy (``lazylab.analysis.redundancy``) of ``arm``'s initial bank on ``n`` training images.

    ``sample`` picks the images (``sample_images``): the first ``n`` (the ladder's default), or
    for a data-seeded bank the images that seed no unit, or a sample holding every seed image
    (docs/results.md, "Redundancy, reconciled", says why the choice matters).

    The bank is built exactly as the ladder builds it (``build_model`` on the
    first ``train_size`` training images, seed ``seed``), so it is the bank a
    frozen arm reads out at that width and seed.

    Returns: the redundancy dict plus ``bank``, ``seed`` and ``key``; or None
      in memo-only mode when the measurement is not in the memo (its key is
      then appended to ``ws.missing``).
    Raises: LazylabError if ``n`` exceeds the training images or the width
      cannot be drawn.
    """
    # A random bank has no seed images and a data-seeded one no random draw: one measurement
    # (one memo entry) serves every sample, respectively every fan-in.
    sample = "first-n" if arm.init != "data" else sample
    fan_in = "unit" if arm.init == "data" else fan_in
    cfg = redundancy_config(ws, arm, width, n, seed, fan_in, train_size, sample)
    key = redundancy_key(cfg)
    rec = ws.memo.get_record(key)
    if rec is not None:
        return rec
    if getattr(ws, "memo_only", False):
        ws.missing.append(key)
        return None
    if n > train_size:
        raise LazylabError(f"redundancy needs {n} training images but the ladder uses {train_size}")
    from lazylab.model import build_model, features

    x = ws.data.x_train[:train_size]
    images = sample_images(arm, width, n, seed, train_size, sample)
    model = build_model(arm, width, seed, x, fan_in)
    F = np.asarray(features(model.feat, x[images]))
    try:
        measured = an.redundancy(F)
    except ValueError as exc:
        raise LazylabError(f"{bank_name(arm)} bank, m={width}, seed {seed}: {exc}") from None
    rec = {**measured, "bank": bank_name(arm), "seed": seed, "key": key, "config": cfg}
    ws.memo.put_record(key, rec)
    return rec


def redundancy_grid(ws: Workspace, arms, width: int = REDUNDANCY_WIDTH, n: int = REDUNDANCY_IMAGES,
                    seeds=(0, 1, 2), fan_ins=("unit", "d"), samples=SAMPLES, train_size: int = 60000,
                    progress=None) -> list[dict]:
    """Redundancy of each arm's bank for every fan-in x sample x seed, memoized per measurement.

    Returns: one row per (bank, fan-in, sample): ``{"bank", "fan_in", "sample", "m", "n", "seeds",
      "mean_abs_corr", "participation_ratio"}`` (each ``{"mean", "std", "values"}`` over seeds, std
      with ddof=1 when there are several), in that order. ``progress(done, total)`` is called after each.
    Raises: LazylabError as ``bank_redundancy``.
    """
    banks = {}
    for arm in arms:
        banks.setdefault(bank_name(arm), arm)
    total = len(banks) * len(fan_ins) * len(samples) * len(seeds)
    rows, done = [], 0
    for name, arm in banks.items():
        for fan_in in fan_ins:
            for sample in samples:
                recs = []
                for seed in seeds:
                    recs.append(bank_redundancy(ws, arm, width, n, seed, fan_in, train_size, sample))
                    done += 1
                    if progress:
                        progress(done, total)
                row = {"bank": name, "fan_in": fan_in, "sample": sample, "m": width, "n": n, "seeds": list(seeds)}
                for field in ("mean_abs_corr", "participation_ratio"):
                    values = [r[field] for r in recs if r is not None]
                    row[field] = {"values": values, "mean": float(np.mean(values)) if values else None,
                                  "std": float(np.std(values, ddof=1)) if len(values) > 1 else 0.0}
                rows.append(row)
    return rows


def ladder_records(result, arm: str) -> list[dict]:
    """The run records behind ``arm``'s ladder cells: the chosen rate, the plan's widths and seeds."""
    summary = next(a for a in result.arms if a.arm == arm)
    widths, seeds = set(result.plan["widths"]), set(result.plan["seeds"])
    return [r for r in result.runs
            if r["config"]["arm"] == arm and r["config"]["lr"] == summary.lr
            and r["config"]["width"] in widths and r["config"]["seed"] in seeds]


def analyse_ladder(ws: Workspace, result, arms: tuple[Arm, ...], climb_widths: tuple[int, ...] | None = None,
                   min_gain: float = an.DEFAULT_MIN_GAIN, redundancy_width: int = REDUNDANCY_WIDTH,
                   redundancy_images: int = REDUNDANCY_IMAGES, redundancy: bool = True,
                   redundancy_sample: str = "first-n") -> dict:
    """Every SPEC section 6 measurement for one ladder, as a JSON-ready dict.

    Args:
      ws: the workspace (memo; data only if a redundancy must be computed).
      result: the ``LadderResult``.
      arms: the plan's ``Arm`` objects (pairing needs unit and init).
      climb_widths: fit every arm's ladder law on these widths instead of
        its climbing region.
      min_gain: the climbing-region rule's threshold (accuracy points).
      redundancy_width, redundancy_images: the bank width and image count of
        the redundancy measurement (SPEC: 256 and 4,000).
      redundancy: measure it at all.
      redundancy_sample: which images (``sample_images``): ``first-n``, ``held-out``, ``with-seeds``.
    Returns: ``{"ladder_law": {arm: fit}, "movement": {arm: {width: stats}},
      "movement_law": {arm: fit}, "gap": {"<trained> - <frozen>": gap},
      "redundancy": {bank: dict}, "scalars": {arm: {name: {width: ...}}},
      "exchange": {"rows": [...], "sentence": str} (``exchange_table``),
      "warnings": [str] (``ladder_warnings``), "settings": {...}}``. Fits that
      cannot be made carry ``"skipped"``.
    """
    by_name = {a.name: a for a in arms}
    widths = result.plan["widths"]
    out: dict = {
        "settings": {"min_gain": min_gain, "climb_widths": list(climb_widths) if climb_widths else None,
                     "accuracy": "best_acc mean over seeds (%)", "redundancy_width": redundancy_width,
                     "redundancy_images": redundancy_images, "redundancy_seed": REDUNDANCY_SEED,
                     "redundancy_sample": redundancy_sample},
        "ladder_law": {}, "movement": {}, "movement_law": {}, "gap": {}, "redundancy": {}, "scalars": {},
    }
    for a in result.arms:
        means = [a.cells[w]["mean"] if w in a.cells else None for w in widths]
        out["ladder_law"][a.arm] = an.ladder_law(widths, means, region=climb_widths, min_gain=min_gain)
        records = ladder_records(result, a.arm)
        move = an.per_width_stats(records, "movement.w_move_rel")
        arm = by_name.get(a.arm)
        if arm is not None and arm.trained:
            out["movement"][a.arm] = {str(w): s for w, s in move.items()}
            try:
                out["movement_law"][a.arm] = an.movement_law(list(move), [s["mean"] for s in move.values()])
            except ValueError as exc:
                out["movement_law"][a.arm] = {"skipped": str(exc), "widths": list(move)}
        scal = an.scalar_trajectory(records)
        if scal:
            out["scalars"][a.arm] = {name: {str(w): v for w, v in per.items()} for name, per in scal.items()}
    cells = {a.arm: a.cells for a in result.arms}
    for frozen, trained in an.pair_arms([by_name[a.arm] for a in result.arms if a.arm in by_name]):
        g = an.gap(cells[frozen], cells[trained])
        out["gap"][f"{trained} - {frozen}"] = {
            "frozen": frozen, "trained": trained,
            "per_width": {str(w): v for w, v in g["per_width"].items()},
            "se": {str(w): v for w, v in g["se"].items()},
            "largest_at": g["largest_at"], "smallest_at": g["smallest_at"],
        }
    out["exchange"] = exchange_table(result, [by_name[a.arm] for a in result.arms if a.arm in by_name],
                                     out["ladder_law"])
    out["warnings"] = ladder_warnings(result)
    if redundancy:
        seen = set()
        for arm in arms:
            name = bank_name(arm)
            if name in seen:
                continue
            seen.add(name)
            # A ladder on fewer training images measures on all of them (n is in the output).
            n = min(redundancy_images, result.plan["train_size"])
            try:
                rec = bank_redundancy(ws, arm, redundancy_width, n, REDUNDANCY_SEED,
                                      result.plan["fan_in"], result.plan["train_size"], redundancy_sample)
            except LazylabError as exc:  # e.g. a bank constant over degenerate images: the rest still stands
                ws.memo.problems.append(f"redundancy of the {name} bank not measured: {exc}")
                continue
            if rec is not None:
                out["redundancy"][name] = {k: v for k, v in rec.items() if k not in ("config",)}
    return out


def exchange_table(result, arms: list[Arm], laws: dict) -> dict:
    """The exchange rate of every trained arm at every width (``lazylab.exchange.exchange_rate``), and its sentence.

    Pairs: ``analysis.pair_arms`` (same unit and init: yat-trained with yat-frozen, yat-data-trained with
    yat-data-frozen, ...). For each trained width with a finite mean, the frozen arm of the pair is read
    through its mean ``best_acc`` per ladder width and its fitted ladder law (``laws[frozen]``).

    Returns: ``{"rows": [{"trained", "frozen", "width", "trained_acc", "frozen_width", "method",
      "floor_acc", "text", ("between" | "why")}], "sentence": str}``; rows empty without a pair.
    """
    widths = list(result.plan["widths"])
    cells = {a.arm: a.cells for a in result.arms}
    rows = []
    for frozen, trained in an.pair_arms(arms):
        f_means = [(cells[frozen].get(w) or {}).get("mean") for w in widths]
        for w in widths:
            acc = (cells[trained].get(w) or {}).get("mean")
            row = {"trained": trained, "frozen": frozen, "width": int(w), "trained_acc": acc}
            if acc is None:
                row.update(frozen_width=None, method="none", floor_acc=None, text="none (no trained accuracy)",
                           why=f"{trained} has no accuracy at m = {w} (every seed diverged or is missing)")
            else:
                row.update(exchange_rate(widths, f_means, laws.get(frozen), acc))
            rows.append(row)
    measured = [r for r in rows if r["trained_acc"] is not None]
    if rows and not measured:
        sentence = (f"{rows[0]['trained']} has no accuracy at any width (every seed diverged or is missing): "
                    "no exchange rate.")
    else:
        sentence = exchange_sentence(measured, widths)
    return {"rows": rows, "sentence": sentence}


def ladder_warnings(result) -> list[str]:
    """One line per arm with unstable ladder runs, and one per arm whose rate bracket ends at an edge.

    Unstable: ``analysis.unstable_reason`` on the records of the arm's ladder cells (chosen rate, the
    plan's widths and seeds); the line names the arm, the widths with how many seeds each, the rate and
    the reason of the first flagged run. Edge: ``lazylab.bracket.Bracket.edge``'s reason when the best or the
    chosen rate is an end of the rates tried. No lines for a fixed ``--lr`` (no bracket) beyond the unstable ones.

    Returns: the lines, each starting with the arm's name.
    """
    from lazylab.bracket import BRACKET_WIDTH

    lines = []
    for a in result.arms:
        if a.failed or a.lr is None:
            continue
        recs = sorted(ladder_records(result, a.arm), key=lambda r: (r["config"]["width"], r["config"]["seed"]))
        flagged = [(r, an.unstable_reason(r)) for r in recs]
        flagged = [(r, why) for r, why in flagged if why]
        if flagged:
            per: dict[int, list] = {}
            for r in recs:
                per.setdefault(r["config"]["width"], []).append(r)
            counts = {w: (sum(1 for r, _ in flagged if r["config"]["width"] == w), len(per[w]))
                      for w in sorted({r["config"]["width"] for r, _ in flagged})}
            if len(counts) > 1 and len(set(counts.values())) == 1:  # the same count at every width: say it once
                k, n = next(iter(counts.values()))
                where = f"{', '.join(map(str, counts))} ({k} of {_count_seeds(n)} each)"
            else:
                where = ", ".join(f"{w} ({k} of {_count_seeds(n)})" for w, (k, n) in counts.items())
            rate = f"lr {a.lr:g} (fixed)" if not a.bracket else f"lr {a.lr:g} (bracketed at m = {BRACKET_WIDTH})"
            r0, why0 = flagged[0]
            first = "" if len(flagged) == 1 else f"first m = {r0['config']['width']} seed {r0['config']['seed']}, "
            if len(flagged) == len(recs) and len(per) > 1:  # nothing of this arm is a measurement: one sentence
                lines.append(f"{a.arm}: every run is unstable (all {len(recs)}, every width, with {rate}), so its "
                             f"curve measures the optimiser's spikes, not the unit: {_instability(a.arm) or why0}")
            else:
                lines.append(f"{a.arm}: unstable at m = {where} with {rate}: {first}{why0}")
        sel = a.selection or {}
        if sel.get("edge"):
            lines.append(f"{a.arm}: the rate bracket ({_bracket_words(sel)}) chose lr {a.lr:g}: {sel['edge']}")
    return lines


# Why a built-in arm is unstable at every width, measured (docs/ladder.md, "Unstable runs").
KNOWN_INSTABILITY = {
    ("yat", "data"): "each data-seeded Yat unit spikes at its own seed image, where ||w - x||^2 = 0 and the "
                     "feature is (w.x + b)^2 / eps, a median 800 times its value on other images (seed 0, m = 256), "
                     "so the readout's loss on those training images jumps",
}


def _instability(arm_name: str) -> str | None:
    from lazylab.arms import get_arm

    try:
        arm = get_arm(arm_name)
    except LazylabError:  # an arm of a plugin not installed here (a ladder read from a file)
        return None
    return KNOWN_INSTABILITY.get((arm.unit.name, arm.init))


def _bracket_words(sel: dict) -> str:
    seeds = sel.get("seeds") or []
    return (f"{sel.get('rule')} rule, m = {sel.get('width')}, "
            f"seed{'s' * (len(seeds) != 1)} {', '.join(map(str, seeds))}")


def _count_seeds(n: int) -> str:
    return f"{n} seed" if n == 1 else f"{n} seeds"


CSV_FIELDS = (
    "key", "arm", "plugin", "width", "seed", "lr", "epochs", "batch", "train_size", "weight_decay", "fan_in",
    "data", "in_ladder", "best_acc", "final_acc", "best_epoch", "diverged", "unstable", "w_move_rel", "unit_median",
    "unit_max", "seconds", "curve", "train_loss",
)


def runs_table(result) -> tuple[list[str], list[list]]:
    """Every run of a ladder as CSV rows: ``(header, rows)``.

    Columns: the run config, ``in_ladder`` (1 if the run is one of an arm's
    ladder cells at its chosen rate, 0 for a bracket-only run), accuracies
    (%), movement (relative norms), each learned scalar as
    ``<name>_start``/``<name>_end``, seconds, and the per-epoch test accuracy
    curve and training loss joined by ``;``. ``diverged`` is empty or
    ``epoch:step``; ``unstable`` is empty or the reason (``analysis.unstable_reason``).
    """
    ladder_keys = {r["key"] for a in result.arms for r in ladder_records(result, a.arm)}
    names = sorted({k for r in result.runs for k in ((r.get("scalars") or {}).get("start") or {})})
    header = list(CSV_FIELDS) + [f"{n}_{when}" for n in names for when in ("start", "end")]
    rows = []
    for r in result.runs:
        c, mv = r["config"], r.get("movement") or {}
        div = r.get("diverged")
        sc = r.get("scalars") or {}
        row = [r["key"], c["arm"], c.get("plugin"), c["width"], c["seed"], c["lr"], c.get("epochs"), c.get("batch"),
               c.get("train_size"), c.get("weight_decay"), c.get("fan_in"), c.get("data"), int(r["key"] in ladder_keys),
               r.get("best_acc"), r.get("final_acc"), r.get("best_epoch"),
               "" if div is None else f"{div.get('epoch')}:{div.get('step')}", an.unstable_reason(r),
               mv.get("w_move_rel"), mv.get("unit_median"), mv.get("unit_max"), r.get("seconds"),
               ";".join(f"{v:.4f}" for v in r.get("curve") or []),
               ";".join(f"{v:.6g}" for v in r.get("train_loss") or [])]
        for n in names:
            row += [(sc.get("start") or {}).get(n), (sc.get("end") or {}).get(n)]
        rows.append(["" if v is None else v for v in row])
    return header, rows


def missing_message(ws: Workspace, plan, result) -> str:
    """One line for ``--report`` when the memo lacks something: how many runs (and redundancy measurements).

    An arm whose whole rate bracket is missing has no chosen rate, so its
    ladder cells were never looked up: they are counted as missing too.
    """
    from lazylab.bracket import BRACKET_WIDTH, bracket_seeds

    runs = {k for k in ws.missing if k.startswith("run-")}
    n_missing = len(runs)
    overlap = len(set(bracket_seeds(plan.bracket)) & set(plan.seeds)) if BRACKET_WIDTH in plan.widths else 0
    for summary in result.arms:
        if plan.lr is None and summary.lr is None and summary.bracket and all(v is None for v in summary.bracket.values()):
            bracket_keys = [r["key"] for r in result.runs if r["config"]["arm"] == summary.arm]
            if all(k in runs for k in bracket_keys):
                n_missing += len(plan.widths) * len(plan.seeds) - overlap
    n_red = len([k for k in ws.missing if k.startswith("redundancy-")])
    total = plan.n_runs()
    present = sum(1 for r in result.runs if not r.get("missing"))
    again = "run the same command without --report to compute it"
    if present == 0:
        return (f"nothing has been computed yet for this ladder: none of its {total} runs is in the memo at "
                f"{ws.memo.directory}; {again}")
    lacks = [f"{n_missing} of this ladder's {total} runs"] if n_missing else []
    if n_red:
        lacks.append(f"{n_red} redundancy measurement{'s' if n_red > 1 else ''}")
    return f"--report: the memo at {ws.memo.directory} lacks {' and '.join(lacks)}; {again}"
