#!/usr/bin/env python
"""Write the tables of docs/results.md and docs/convex.md from the shipped reference (lazylab/reference/paper.json).

    .venv/bin/python scripts/results_tables.py            # rewrite every generated table in those pages
    .venv/bin/python scripts/results_tables.py --check    # exit 1 if a table differs from the reference's

Each table sits between ``<!-- table: NAME -->`` and ``<!-- /table -->`` in a page; the prose around them
is written by hand. tests/test_reference.py runs ``--check``, so a table cannot go stale: a new reference
means running this script. Exit 2 with one line on any error.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = (ROOT / "docs" / "results.md", ROOT / "docs" / "convex.md")
BLOCK = re.compile(r"(<!-- table: ([a-z-]+) -->\n)(.*?)(<!-- /table -->)", re.S)
NAMES = {"fair": "fair: both sides at their held-out optimum",
         "test_selected": "trained optimum chosen on the test set",
         "trained_protocol": "trained side read by the protocol (12 epochs, best on test), frozen at its optimum",
         "protocol": "protocol: both sides 12-epoch AdamW, best epoch on test"}


def _num(v, fmt: str = ".2f") -> str:
    return "-" if v is None else format(v, fmt)


def _md(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows]) + "\n"


def fair_table(payload: dict) -> str:
    """Every trained width of every trained arm at its held-out optimum, matched by each frozen arm."""
    from lazylab.exchange import per_unit_words

    fair = payload["analysis"]["fair"]
    frozen = list(fair["answers"]["fair"][0]["matches"]) if fair["answers"]["fair"] else []
    rows = []
    for r in fair["answers"]["fair"]:
        cells = []
        for f in frozen:
            hit = r["matches"].get(f)
            per = hit and per_unit_words(hit)
            cells.append("-" if hit is None else hit["text"] + (f" ({per} per unit)" if per else ""))
        rows.append([r["trained"], str(r["width"]), f"{r['trained_acc']:.2f}", *cells])
    return _md(["trained arm", "m", "test % (optimum)", *frozen], rows)


def three_answers_table(payload: dict) -> str:
    """The readings side by side (``NAMES``) for every trained arm and width where one of them finds a match inside
    the sweep (elsewhere every reading says ``> widest``)."""
    fair = payload["analysis"]["fair"]
    rows = []
    for r in fair["answers"]["fair"]:
        readings = [(name, next((x for x in fair["answers"][name]
                                 if (x["trained"], x["width"]) == (r["trained"], r["width"])), None)) for name in NAMES]
        readings = [(name, row) for name, row in readings if row is not None]
        if all(m["width"] == "beyond" for _, row in readings for m in row["matches"].values()):
            continue
        for name, row in readings:
            texts = [row["matches"][f]["text"] if f in row["matches"] else "-" for f in r["matches"]]
            rows.append([r["trained"], str(r["width"]), NAMES[name], f"{row['trained_acc']:.2f}", *texts])
    return _md(["trained arm", "m", "answer", "trained %", *r["matches"]] if fair["answers"]["fair"] else [], rows)


def optimum_table(payload: dict) -> str:
    """Per trained arm and width: the protocol's best/final accuracy, the held-out choice, the refits' test accuracy."""
    optimum = payload["optimum"]
    proto = {(a["arm"], int(w)): c for a in payload["arms"] for w, c in a["cells"].items()}
    rows = []
    for arm, a in optimum["arms"].items():
        for w, c in sorted(a["cells"].items(), key=lambda kv: int(kv[0])):
            if not c["n"]:
                continue
            p = proto.get((arm, int(w)), {})
            rows.append([arm, w, f"{_num(p.get('mean'))} / {_num(p.get('final_mean'))}", f"{c['lr']:g}",
                         ", ".join(str(e) for e in c["epochs"]), _num(c["held_out"]),
                         f"{_num(c['test_acc'])} ± {_num(c['std'])}", _num(c["test_selected"].get("test_acc"))])
    return _md(["trained arm", "m", "protocol best / final %", "rate", "epochs (seeds 0,1,2)", "held-out %",
                "test % (refit)", "best test % (chosen on test)"], rows)


def convex_table(payload: dict) -> str:
    """Per frozen arm and width: the convex optimum's test accuracy (mean ± std) at the refined lambda."""
    convex = payload["convex"]
    widths = convex.get("partial", {}).get("widths") or payload["plan"]["widths"]
    rows = []
    for arm, a in convex["arms"].items():
        cells = []
        for w in widths:
            c = a["cells"].get(str(w)) or {}
            lam = a["lambdas"].get(str(w))
            capped = "*" if c and not c.get("converged") and any(
                r["stop"] == "max_iter" for r in convex["runs"] if r["config"]["arm"] == arm and r["config"]["width"] == w) else ""
            cells.append(f"{_num(c.get('mean'))} ± {_num(c.get('std'))}{capped} ({lam:g})" if c.get("mean") is not None
                         else "-")
        rows.append([arm, *cells])
    return _md(["arm", *[f"m={w}" for w in widths]], rows)


def refinement_table(payload: dict) -> str:
    """Per frozen arm and width: the walk's lambda and held-out accuracy, the refined one's, and the best tried."""
    convex = payload["convex"]
    walks = {(c["config"]["arm"], c["config"]["width"]): c for c in convex["choices"]}
    rows = []
    for r in sorted(convex.get("refinements", []), key=lambda r: (r["config"]["arm"], r["config"]["width"])):
        key = (r["config"]["arm"], r["config"]["width"])
        walk = walks[key]
        chosen = {**walk["selection"], **r["selection"]}[repr(r["lambda"])]
        rows.append([key[0], str(key[1]), f"{walk['lambda']:g}: {walk['selection'][repr(walk['lambda'])]:.2f}",
                     ", ".join(f"{float(k):g}: {v:.2f}" for k, v in sorted(r["selection"].items(), key=lambda kv: -float(kv[0]))),
                     f"{r['lambda']:g}: {chosen:.2f}", f"{r['best'] - chosen:.2f}"])
    header = ["arm", "m", "walk's lambda: held-out %", "refined penalties (half-decade rungs)", "chosen", "best - chosen"]
    return _md(header, rows)


def cost_table(payload: dict) -> str:
    """What the fair matches cost: trained weights against the frozen bank's fixed weights plus its head, and
    the forward pass's FLOPs per image, for every trained width's cheapest match inside the sweep."""
    fair = payload["analysis"]["fair"]
    rows = []
    for r in fair["answers"]["fair"]:
        found = [(m["width"], f, m) for f, m in r["matches"].items() if isinstance(m["width"], float) and m.get("params")]
        if not found:
            continue
        width, f, m = min(found)
        p, fl = m["params"], m["flops"]
        rows.append([f"{r['trained']} m={r['width']}", f"{f} m={width:,.0f}", f"{p['trained']:,.0f}",
                     f"{p['frozen_fixed']:,.0f} + {p['frozen_trained']:,.0f}", f"{fl['trained'] / 1e6:.2f}",
                     f"{fl['frozen'] / 1e6:.2f}"])
    return _md(["trained", "cheapest frozen match", "trained weights", "frozen: fixed + trained head",
                "trained MFLOPs/image", "frozen MFLOPs/image"], rows)


def _widths(payload: dict) -> list[int]:
    return list(payload["plan"]["widths"])


def protocol_table(payload: dict) -> str:
    """The protocol ladder: best_acc mean ± std over seeds per arm and width at the bracketed rate, ``(ku)``: k
    seeds flagged unstable (docs/ladder.md)."""
    rows = []
    for a in payload["arms"]:
        cells = []
        for w in _widths(payload):
            c = a["cells"].get(str(w)) or {}
            mark = f" ({c['unstable']}u)" if c.get("unstable") else ""
            cells.append(f"{_num(c.get('mean'))} ± {_num(c.get('std'))}{mark}" if c.get("mean") is not None else "-")
        rows.append([a["arm"], f"{a['lr']:g}", *cells])
    return _md(["arm", "lr", *[f"m={w}" for w in _widths(payload)]], rows)


def bracket_table(payload: dict) -> str:
    """Each arm's rate bracket at m = 256 (the 1se rule over seeds 0, 1, 2; ``+``: a rate beyond the grid)."""
    rows = []
    for a in payload["arms"]:
        sel = a.get("selection") or {}
        grid = set(sel.get("grid") or [])
        rates = ", ".join(f"{'' if r['lr'] in grid else '+'}{r['lr']:g}: {_num(r['mean'])} ± {_num(r['std'])}"
                          + (f" ({r['unstable']}u)" if r.get("unstable") else "") for r in sel.get("rates", []))
        rows.append([a["arm"], rates, f"{sel.get('best', 0):g}", f"{sel.get('chosen', 0):g}"])
    return _md(["arm", "rates at m = 256: mean best_acc % ± seed std", "best", "chosen"], rows)


def published_table(payload: dict) -> str:
    """The protocol ladder against the published points (``lazylab.published.compare``)."""
    from lazylab.published import compare

    rows = [[r["what"].replace("|", "\\|"), r["published"], r["ours"], _num(r["difference"], "+.2f"), r["verdict"],
             r["why"] or "-"] for r in compare(payload)]
    return _md(["published point", "published", "ours", "difference", "verdict", "why"], rows)


def law_table(payload: dict) -> str:
    """The ladder law ``err = floor + c m^-alpha`` of each arm's protocol curve on its climbing region."""
    rows = []
    for arm, f in payload["analysis"]["ladder_law"].items():
        if "floor" not in f:
            rows.append([arm, "-", "-", "-", "-", f.get("skipped", "-")])
            continue
        rows.append([arm, ",".join(map(str, f["widths"])), f"{f['floor']:.2f}", f"{f['c']:.4g}", f"{f['alpha']:.3f}",
                     f"{f['r2']:.4f}"])
    return _md(["arm", "widths fitted", "floor (%)", "c", "alpha", "R^2"], rows)


def movement_table(payload: dict) -> str:
    """``w_move_rel`` per trained arm and width (mean over seeds) and its law, the slope of log on log m."""
    analysis = payload["analysis"]
    rows = []
    for arm, law in analysis["movement_law"].items():
        per = analysis["movement"].get(arm, {})
        rows.append([arm, f"{law['slope']:+.3f}", f"{law['r2']:.4f}",
                     *[_num((per.get(str(w)) or {}).get("mean"), ".3f") for w in _widths(payload)]])
    return _md(["arm", "slope", "R^2", *[f"m={w}" for w in _widths(payload)]], rows)


def gap_table(payload: dict) -> str:
    """Trained minus frozen best_acc (points) per pair of arms sharing unit and init."""
    rows = []
    for pair, g in payload["analysis"]["gap"].items():
        rows.append([pair, *[_num(g["per_width"].get(str(w)), "+.2f") for w in _widths(payload)],
                     str(g.get("largest_at", "-")), str(g.get("smallest_at", "-"))])
    return _md(["pair", *[f"m={w}" for w in _widths(payload)], "largest at", "smallest at"], rows)


def redundancy_table(payload: dict) -> str:
    """The redundancy grid of the initial Yat banks (m = 256, 4,000 images, seeds 0, 1, 2)."""
    rows = [[r["bank"], r["fan_in"], r["sample"], f"{r['mean_abs_corr']['mean']:.3f} ± {r['mean_abs_corr']['std']:.3f}",
             f"{r['participation_ratio']['mean']:.1f} ± {r['participation_ratio']['std']:.1f}"]
            for r in payload["analysis"].get("redundancy_grid") or []]
    return _md(["bank", "fan-in", "sample", "mean abs corr off-diagonal", "participation ratio"], rows)


STEPS = (("protocol", "trained_protocol", "the frozen readout: 12 AdamW epochs -> the convex optimum"),
         ("trained_protocol", "test_selected", "the trained side: 12 constant-rate epochs -> its annealed optimum "
                                               "(chosen on the test set)"),
         ("test_selected", "fair", "the trained side's choice: on the test set -> on held-out training images, "
                                   "refitted on all of them"))


def moves_table(payload: dict) -> str:
    """How each choice moves the headline (the first trained arm at its smallest width): the matching width of each
    frozen arm before and after each step from the protocol's answer to the fair one, and the factor."""
    from lazylab.exchange import unit_words

    answers = payload["analysis"]["fair"]["answers"]
    head = answers["fair"][0]

    def width(name, arm):
        row = next(r for r in answers[name] if (r["trained"], r["width"]) == (head["trained"], head["width"]))
        return row["matches"][arm]["width"], row["matches"][arm]["text"]

    sweep = payload["analysis"]["fair"]["sweep"]
    rows = []
    for before, after, what in STEPS:
        cells = []
        for arm in head["matches"]:
            (a, ta), (b, tb) = width(before, arm), width(after, arm)
            factor = f" (x{b / a:.2g})" if isinstance(a, float) and isinstance(b, float) else ""
            short = lambda t: t.split(" (")[0] if not t.startswith(">") else f"> {max(sweep):,}"
            cells.append(f"{short(ta)} -> {short(tb)}{factor}")
        rows.append([what, *cells])
    return _md([f"step ({head['width']} trained {unit_words(head['trained'])} units)", *head["matches"]], rows)


def lambda_table(payload: dict) -> str:
    """Per frozen arm, the penalty its cells use at each width (the refined choice, runs of equal ones merged)."""
    convex = payload["convex"]
    unrefined = {tuple(x) for x in convex.get("unrefined", [])}
    rows = []
    for arm, a in convex["arms"].items():
        runs: list[list] = []
        for w in sorted(int(k) for k in a["lambdas"]):
            lam = a["lambdas"][str(w)]
            text = f"{lam:g}" + (" (walk)" if (arm, w) in unrefined else "")
            if runs and runs[-1][0] == text:
                runs[-1][2] = w
            else:
                runs.append([text, w, w])
        rows.append([arm, ", ".join(f"{t} ({a}{'' if a == b else f'-{b}'})" for t, a, b in runs)])
    walk = "; (walk): refinement not computed yet" if unrefined else ""
    return _md(["arm", f"lambda per width (seed 0's bank, held-out images{walk})"], rows)


def sentence(payload: dict) -> str:
    """The fair answer in plain words (``experiments.optimum.fair_sentence``), as a quotation."""
    return "> " + payload["analysis"]["fair"]["sentence"] + "\n"


TABLES = {"sentence": sentence, "fair-answer": fair_table, "moves": moves_table, "protocol": protocol_table, "brackets": bracket_table,
          "published": published_table, "ladder-law": law_table, "movement": movement_table, "gap": gap_table,
          "redundancy": redundancy_table, "lambdas": lambda_table, "three-answers": three_answers_table, "trained-optimum": optimum_table,
          "convex-optimum": convex_table, "refinement": refinement_table, "cost": cost_table}


def render(page: str, payload: dict) -> str:
    """``page`` with every generated block replaced by its table. Raises: KeyError for an unknown table name."""
    return BLOCK.sub(lambda m: m.group(1) + TABLES[m.group(2)](payload) + m.group(4), page)


def main(argv=None) -> int:
    from lazylab.errors import LazylabError
    from lazylab.reference import load_reference, reference_path

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if docs/results.md differs from the reference's tables")
    ap.add_argument("--page", type=Path, action="append", default=None, help="a page [default: docs/results.md, "
                    "docs/convex.md]")
    ap.add_argument("--reference", type=Path, default=None, help=f"[default: {reference_path()}]")
    args = ap.parse_args(argv)
    stale_pages = 0
    try:
        payload = load_reference(args.reference or reference_path())["payload"]
        for path in args.page or PAGES:
            page = path.read_text()
            names = [m.group(2) for m in BLOCK.finditer(page)]
            unknown = [n for n in names if n not in TABLES]
            if unknown:
                raise LazylabError(f"{path}: unknown table {unknown[0]!r}; tables: {', '.join(TABLES)}")
            new = render(page, payload)
            if args.check:
                stale = [n for n, a, b in zip(names, BLOCK.findall(page), BLOCK.findall(new)) if a != b]
                if stale:
                    print(f"{path}: stale tables: {', '.join(stale)} (run scripts/results_tables.py)", file=sys.stderr)
                    stale_pages += 1
                else:
                    print(f"{path}: {len(names)} tables match the reference")
            else:
                path.write_text(new)
                print(f"wrote {len(names)} tables into {path}")
    except (LazylabError, OSError, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 1 if stale_pages else 0


if __name__ == "__main__":
    raise SystemExit(main())
