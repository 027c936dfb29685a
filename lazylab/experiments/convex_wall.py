"""What a ladder's convex readouts say beside the protocol's: the ``--readout convex`` file, the wall table (the
protocol's readout against the optimum per arm and width) and the answer at both readouts.

Reads ``lazylab.experiments.convex.run_convex_ladder``'s result; computes nothing. Why the split: the convex
module fits; this one compares (docs/convex.md, "The wall").
"""

from __future__ import annotations

from lazylab.experiments.convex import mean_of

def convex_file(plan, convex: dict, climb_widths=None, min_gain: float | None = None) -> dict:
    """What ``lazylab ladder --readout convex --json`` writes (and ``lazylab.api.load`` reads back):
    ``{"plan": {arms, widths, seeds, "readout": "convex", protocol}, "convex": convex, "analysis":
    {"convex_law": {arm: fit}}}``, the ladder law (``analysis.ladder_law``) fitted to each arm's mean
    convex test accuracy per width. Args: ``plan`` a ``LadderPlan``; ``convex`` from ``run_convex_ladder``;
    ``climb_widths``, ``min_gain`` as for the protocol's law."""
    from lazylab import analysis as an

    widths = list(plan.widths)
    min_gain = an.DEFAULT_MIN_GAIN if min_gain is None else min_gain
    laws = {arm: an.ladder_law(widths, [a["cells"][str(w)]["mean"] for w in widths], region=climb_widths,
                               min_gain=min_gain) for arm, a in convex["arms"].items()}
    return {"plan": {"arms": [a.name for a in plan.arms], "widths": widths, "seeds": list(plan.seeds),
                     "readout": "convex", **plan.protocol()},
            "convex": convex, "analysis": {"convex_law": laws}}


def with_convex(payload: dict, result, convex: dict, arms, climb_widths=None, min_gain: float | None = None) -> dict:
    """A ladder payload (``LadderResult.to_json()`` plus ``"analysis"``) with its convex readouts, as
    ``lazylab ladder --readout both --json`` writes it: ``convex`` (``run_convex_ladder``), and in the analysis
    the ``wall`` table and the study's ``answer``. Args: ``result`` the ``LadderResult``; ``arms`` the arms
    analysed (``Arm``); ``climb_widths``, ``min_gain`` as for the protocol's law. Returns: ``payload``, filled."""
    payload["convex"] = convex
    payload["analysis"]["wall"] = wall(result, convex, climb_widths, min_gain)
    payload["analysis"]["answer"] = answer(result, convex, arms, payload["analysis"].get("exchange"))
    return payload


def lambda_at_edge(convex: dict) -> list[int]:
    """``[readouts whose lambda is not bracketed, readouts]`` of ``run_convex_ladder``'s result. A lambda is
    bracketed when, among the penalties searched at its arm and width (the walk's and the refinement's, which goes
    up to ``REFINE_BEYOND`` half-decades past an end of the path), some larger and some smaller one score lower on
    the held-out images; otherwise the best penalty may lie beyond (``--lambdas`` extends the path). A choice the
    refinement carried past an end of the path and saw fall again is bracketed; one on a plateau (ties at chance
    under penalties far too strong) is not."""
    searched: dict = {}
    for rec in (*convex["choices"], *convex["refinements"]):
        if not rec.get("missing"):
            key = (rec["config"]["arm"], rec["config"]["width"])
            searched.setdefault(key, {}).update({float(lam): acc for lam, acc in rec["selection"].items()})

    def bracketed(lam: float, held_out: dict) -> bool:
        if lam not in held_out:
            return False
        lower = [other for other, acc in held_out.items() if acc < held_out[lam]]
        return any(other > lam for other in lower) and any(other < lam for other in lower)

    chosen = [r for r in convex["runs"] if not r.get("missing")]
    open_ended = [not bracketed(r["lambda"], searched.get((r["config"]["arm"], r["config"]["width"]), {}))
                  for r in chosen]
    return [sum(open_ended), len(chosen)]


def wall(result, convex: dict, climb_widths=None, min_gain: float | None = None) -> dict:
    """The wall table: each frozen arm's protocol readout against its convex optimum, per width.

    Per arm and width (means over the seeds both have): ``best_acc`` and ``final_acc`` of the
    protocol (%), ``convex_acc`` (%), ``gap`` = convex minus protocol ``best_acc`` (points) and
    ``loss_gap`` = the protocol's last-epoch mean training loss minus the convex optimum's
    training loss (nats; the protocol's is averaged over the last epoch's batches as it trains,
    the optimum's over every training image at the end; positive: the optimiser stopped short).
    Also the ladder law (``analysis.ladder_law``) fitted to both curves.

    Args: ``result`` a ``LadderResult``; ``convex`` from ``run_convex_ladder``; ``climb_widths``,
      ``min_gain`` as for the protocol's law.
    Returns: ``{"arms": {arm: {str(width): row}}, "law": {arm: {"protocol": fit, "convex": fit}},
      "lambda_at_edge": [readouts whose chosen lambda is not bracketed, readouts]}``.
    """
    from lazylab import analysis as an
    from lazylab.experiments.laws import ladder_records

    min_gain = an.DEFAULT_MIN_GAIN if min_gain is None else min_gain
    out: dict = {"arms": {}, "law": {}, "lambda_at_edge": lambda_at_edge(convex)}
    widths = result.plan["widths"]
    conv = {(r["config"]["arm"], r["config"]["width"], r["config"]["seed"]): r
            for r in convex["runs"] if not r.get("missing")}
    for summary in result.arms:
        if summary.arm not in convex["arms"]:
            continue
        proto = {(r["config"]["width"], r["config"]["seed"]): r for r in ladder_records(result, summary.arm)}
        rows = {}
        for w in widths:
            pairs = [(p, conv[(summary.arm, w, s)]) for (pw, s), p in proto.items()
                     if pw == w and (summary.arm, w, s) in conv and p.get("best_acc") is not None]
            if not pairs:
                continue
            rows[str(w)] = {
                "seeds": len(pairs),
                "best_acc": mean_of(p["best_acc"] for p, _ in pairs),
                "final_acc": mean_of(p["final_acc"] for p, _ in pairs),
                "convex_acc": mean_of(c["test_acc"] for _, c in pairs),
                "gap": mean_of(c["test_acc"] - p["best_acc"] for p, c in pairs),
                "loss_gap": mean_of(p["train_loss"][-1] - c["train_loss"] for p, c in pairs),
                "protocol_loss": mean_of(p["train_loss"][-1] for p, _ in pairs),
                "convex_loss": mean_of(c["train_loss"] for _, c in pairs),
                "grad_norm": max(c["grad_norm"] for _, c in pairs),
                "converged": all(c["converged"] for _, c in pairs),
            }
        out["arms"][summary.arm] = rows
        used = [w for w in widths if str(w) in rows]
        out["law"][summary.arm] = {
            curve: an.ladder_law(used, [rows[str(w)][col] for w in used], region=climb_widths, min_gain=min_gain)
            for curve, col in (("protocol", "best_acc"), ("convex", "convex_acc"))
        }
    return out


def answer(result, convex: dict, arms, exchange: dict | None = None) -> dict:
    """The study's answer at both readouts (``lazylab.exchange.answer_rows``): per trained arm and width, the
    frozen width of the same unit and the cheapest frozen bank of any unit read out at the optimum, with
    seed intervals, beside the protocol's exchange rate (``exchange``, ``experiments.laws.exchange_table``).

    Args: ``result`` a ``LadderResult``; ``convex`` from ``run_convex_ladder``; ``arms`` the ladder's arms
      (``Arm``); ``exchange`` the protocol's exchange table or None.
    Returns: ``{"rows": [answer row + "protocol": exchange row | None], "sentence": str}``; the sentence is
      the first trained arm's at its smallest width, or a note when nothing is trained.
    """
    from lazylab import analysis as an
    from lazylab.exchange import answer_rows, answer_sentence
    from lazylab.experiments.laws import ladder_records

    # A partial frontier (``experiments.render.ladders``) covers a prefix of the widths: beyond it is unmeasured.
    widths = list((convex.get("partial") or {}).get("widths") or result.plan["widths"])
    trained: dict = {}
    for a in (a for a in arms if a.trained):
        per: dict = {}
        for r in ladder_records(result, a.name):
            if r.get("best_acc") is not None and not r.get("missing"):
                per.setdefault(r["config"]["width"], []).append(r["best_acc"])
        if per:
            trained[a.name] = per
    frozen: dict = {}
    for r in convex["runs"]:
        if not r.get("missing") and r.get("test_acc") is not None:
            frozen.setdefault(r["config"]["arm"], {}).setdefault(r["config"]["width"], []).append(r["test_acc"])
    pairs = {t: f for f, t in an.pair_arms(arms)}
    protocol = {(r["trained"], r["width"]): r for r in (exchange or {}).get("rows", [])}
    rows = [{**row, "protocol": protocol.get((row["trained"], row["width"]))}
            for row in answer_rows(trained, frozen, pairs, widths)]
    sentence = answer_sentence(rows[0], rows[0]["protocol"], widths, result.plan.get("epochs"),
                               result.plan["widths"]) if rows else \
        "No trained arm in this ladder: no exchange rate."
    return {"rows": rows, "sentence": sentence}
