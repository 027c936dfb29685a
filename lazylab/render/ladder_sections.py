"""The ladder sections of the report page: the paper ladder that leads it, and one block per ladder (its exchange
rate and warnings, the accuracy table with its ladder-law fits, figures, unstable runs, movement law, gap,
the wall and redundancy).

Each takes a job's manifest entry (``lazylab.render.report.Renderer``: ``entry["data"]`` is the ladder
payload without its run records, ``entry["files"]`` the pictures drawn) and returns HTML.
"""

from __future__ import annotations

from lazylab.analysis import movement_law_or_why
from lazylab.render.figures import fair_rows, over_seeds
from lazylab.render.html_parts import _e, _f, _folded, _img, _provenance, _table


def _accuracy_caption(plan: dict) -> str:
    """The accuracy figure's caption, saying what its points and bars are for the plan's seeds, and its lines in
    the figures' one line-style language (``lazylab.render.style.LINE_STYLES``)."""
    seeds = plan.get("seeds") or []
    bars = " with their std as error bars" if len(seeds) > 1 else ""
    return (f"Test accuracy (best epoch, %) vs width m (log x), {over_seeds(seeds)}{bars}; frozen banks solid "
            "(the protocol's AdamW readout), trained networks dashed; reference rungs grey dash-dot (outside values, "
            "not run here); ⚠ marks: unstable protocol runs.")


def _unstable_mark(cell: dict) -> str:
    """`` <span class=unstable>`` naming how many seeds of a cell are unstable (contract: ``cell["unstable"]``), or ``""``."""
    k = cell.get("unstable") or 0
    if not k:
        return ""
    return (f' <span class="unstable" title="{k} of {cell.get("n", "?")} seeds unstable: training loss above ln 10 at '
            f'the best epoch, or rising far above its minimum">⚠ {k} unstable</span>')


def _unstable_table(d: dict, pid: str) -> str:
    """The unstable runs (``_payload_data``'s ``unstable_runs``) with their one-line reasons; ``""`` if none."""
    runs = d.get("unstable_runs") or []
    if not runs:
        return ""
    order = {a: i for i, a in enumerate(dict.fromkeys(r["arm"] for r in runs))}
    runs = sorted(runs, key=lambda r: (order[r["arm"]], int(r["width"]), float(r["lr"]), int(r["seed"])))
    rows = [[_e(r["arm"]), _e(r["width"]), _e(r["seed"]), _f(r["lr"], "g"), _f(r.get("best_acc")),
             '<span class="unstable">⚠ unstable</span> ' + _e(r["unstable"])] for r in runs]
    return _folded(f"Unstable runs of the protocol readout ({len(rows)})",
                   "<p class=note>Protocol (AdamW) runs whose training loss at the best epoch is above chance (ln 10), "
                   "or rising far above its minimum. Kept in every table and fit (the protocol's bracket rule is "
                   "unchanged, SPEC section 5) and marked ⚠; bracket runs at other rates (m = 256) are listed too, "
                   "with their lr. The convex optimum's readouts are not protocol runs: these marks are not theirs.</p>"
                   + _table(["arm", "m", "seed", "lr", "best_acc (%)", "why"], rows, f"{pid}unstable-table", left={0, 5}),
                   f"{pid}unstable")


def _exchange_block(d: dict, pid: str, after_sentence: str = "", sentence: bool = True) -> list[str]:
    """The study's answer for one ladder, then ``after_sentence`` (HTML), then its tables and warnings.

    With convex readouts (``analysis["answer"]``, ``experiments.convex_wall.answer``) the answer at the optimum leads,
    with the protocol's beside it, and its table shows each trained arm at its smallest width; otherwise the
    protocol's exchange rate (``analysis["exchange"]``) leads. The protocol's full grid (every trained width)
    is folded away in a ``<details>``; ``text`` cells are shown verbatim. ``sentence`` False leaves the answer's
    sentence out (the report's answer box already says it in words, ``lazylab.render.answer``)."""
    from lazylab.exchange import at_smallest_width, protocol_words

    a = d["analysis"]
    ex, ans = a.get("exchange"), a.get("answer")
    widths = [int(w) for w in (d.get("plan") or {}).get("widths") or [1]]
    out = []
    if fair_rows(a):  # the fair answer leads; the answer at both readouts folds under it
        out += _fair_block(a["fair"], pid, after_sentence)
        after_sentence = ""
        if ans and ans.get("sentence"):
            out.append(_folded("The frozen side at its optimum against the trained side read by the protocol "
                               "(the answer before the trained side had an optimum)",
                               "".join(_exchange_block({**d, "analysis": {**a, "fair": None, "exchange": None,
                                                                          "warnings": None}}, pid + "previous-")),
                               f"{pid}previous"))
            ans = None
    if ans and ans.get("sentence"):
        if sentence:
            out.append(f'<p class="answer" id="{pid}answer">{_e(ans["sentence"])}</p>')
        partial = (d.get("convex") or {}).get("partial")
        if partial:
            out.append(f"<p class=note>Convex readouts at m = {_e(', '.join(map(str, partial['widths'])))} only "
                       f"(the frontier's wider banks are not computed yet): '&gt; {partial['widths'][-1]}' lies beyond "
                       "them.</p>")
        out.append(after_sentence)
        rows = [[_e(r["trained"]), _e(r["width"]), _f(r.get("trained_acc")),
                 _e(f"{r['same']['text']} ({r['same']['frozen']})") if r.get("same") else "-",
                 _e(f"{r['cheapest']['text']} ({r['cheapest']['frozen']})") if r.get("cheapest") else "none in the sweep",
                 _e(protocol_words(r["protocol"], widths, short=True)) if r.get("protocol") else "-"]
                for r in at_smallest_width(ans.get("rows") or [])]
        out.append(_table(["trained arm", "m", "trained acc (%)", "same unit, optimum", "cheapest, optimum",
                           "same unit, protocol"], rows, f"{pid}answer-table", left={0, 3, 4, 5}, cards=True))
        out.append("<p class=note>Optimum: the convex readout (docs/convex.md), measured crossings only, linear in "
                   "log m between swept widths; 95 % percentile-bootstrap interval over seeds in brackets. Protocol: "
                   "the frozen bank's AdamW readout, which may read its ladder law beyond the sweep.</p>")
        out += unstable_note(d)
    elif not ex:
        out += ["<p class=note>No exchange rate in these results: they were written by a lazylab without it; "
                "<code>lazylab ladder ... --json</code> with this version adds it.</p>", after_sentence]
    if ex:
        if not ans and ex.get("sentence"):
            if sentence:
                out.append(f'<p class="answer">{_e(ex["sentence"])}</p>')
            out.append(after_sentence)
        every = ex.get("rows") or []

        def table(rows, ident):
            return _table(["trained arm", "m", "trained acc (%)", "frozen bank", "frozen width that matches it",
                           "frozen law's limit (acc %)"],
                          [[_e(r.get("trained")), _e(r.get("width")), _f(r.get("trained_acc")), _e(r.get("frozen")),
                            _e(r.get("text")), _f(r.get("floor_acc"))] for r in rows], ident, left={0, 3, 4})

        if every and not ans:  # without rows the sentence already says there is no pair
            out.append(table(at_smallest_width(every), f"{pid}exchange-table"))
        if every and (ans or len(at_smallest_width(every)) < len(every)):
            said = f"<p class=note>{_e(ex['sentence'])}</p>" if ans and ex.get("sentence") else ""
            out.append(_folded(f"The protocol readout's exchange rate at every trained width ({len(every)} rows)",
                               said + table(every, f"{pid}exchange-grid"), f"{pid}exchange"))
    warnings = a.get("warnings") or []
    if warnings:
        out.append(f'<ul class="warnings" id="{pid}warnings">' + "".join(f"<li>⚠ {_e(w)}</li>" for w in warnings) + "</ul>")
    return out


FAIR_NAMES = {"fair": "both at their held-out optimum", "test_selected": "trained optimum chosen on the test set",
              "trained_protocol": "trained side by the protocol, frozen at the optimum",
              "protocol": "both by the protocol (12 epochs of AdamW)"}


def _fair_block(fair: dict, pid: str, figures: str) -> list[str]:
    """The fair answer (``experiments.optimum.fair_answer``): one row per trained width of its first trained arm
    with each frozen bank's match and frozen units per trained unit, ``figures`` (HTML), the readings side by side
    for the smallest width (folded), and the method in one paragraph."""
    from lazylab.exchange import per_unit_words

    rows_all = fair["answers"]["fair"]
    first = rows_all[0]
    mine = [r for r in rows_all if r["trained"] == first["trained"]]
    frozen = list(first["matches"])
    rows = [[_e(r["width"]), _f(r["trained_acc"]),
             *[_e(r["matches"][f]["text"]) + (f" <small>({_e(per)} per unit)</small>"
                                            if (per := per_unit_words(r["matches"][f])) else "")
               for f in frozen]] for r in mine]
    out = [_table([f"trained {first['trained']} m", "test acc (%)", *frozen], rows, f"{pid}fair-table",
                  left={2, 3, 4, 5}, cards=True), figures]
    readings = []
    for name, label in FAIR_NAMES.items():
        r = next((x for x in fair["answers"].get(name, []) if (x["trained"], x["width"]) == (first["trained"],
                                                                                          first["width"])), None)
        if r is not None:
            # a reading may lack a bank the fair row has (a hand-edited file): "-" there, never a KeyError
            readings.append([_e(label), _f(r["trained_acc"]),
                             *[_e((r["matches"].get(f) or {}).get("text", "-")) for f in frozen]])
    out.append(_folded(f"How each reading moves the answer ({first['width']} trained units)",
                       _table(["reading", "trained (%)", *frozen], readings, f"{pid}readings", left={0, 2, 3, 4, 5}),
                       f"{pid}readings-fold"))
    others = [r for r in rows_all if r["trained"] != first["trained"]]
    if others:
        grid = [[_e(r["trained"]), _e(r["width"]), _f(r["trained_acc"]),
                 *[_e(r["matches"][f]["text"]) if f in r["matches"] else "-" for f in frozen]] for r in others]
        out.append(_folded(f"The other trained arms at their optimum ({len(others)} rows)",
                           _table(["trained arm", "m", "test acc (%)", *frozen], grid, f"{pid}fair-grid",
                                  left={0, 3, 4, 5, 6}), f"{pid}fair-others"))
    out.append(f"<p class=note>{_e(fair['method'])}</p>")
    return out


def unstable_note(d: dict) -> list[str]:
    """A note naming the frozen arms with ⚠ marks (unstable protocol runs, in the ladder table and the accuracy
    figure) whose banks are also read out at the optimum (``d["convex"]``): the marks belong to the protocol
    readout, not to the optimum's numbers the answer uses. ``[]`` when no such arm."""
    convex = set(((d.get("convex") or {}).get("arms") or {}))
    marked = [a["arm"] for a in d.get("arms") or []
              if a["arm"] in convex and any((c or {}).get("unstable") for c in (a.get("cells") or {}).values())]
    if not marked:
        return []
    return [f"<p class=note id=marks-note>⚠ The unstable marks on {_e(', '.join(marked))} (ladder table, accuracy "
            f"figure) belong to {'its' if len(marked) == 1 else 'their'} protocol (AdamW) runs. Read out at the "
            "optimum, as in the answer, the same banks have no such runs.</p>"]


def source_lines(e: dict | None) -> tuple[str, str]:
    """Whose numbers a ladder entry shows: ``(one line of HTML, the details HTML)``. The shipped reference
    results say where and when they were computed, and that they were not computed here; a memo's ladder says
    it was computed here; ``e`` None or a paper ladder with no source: no ladder to answer."""
    if not e or (e.get("data") or {}).get("source") == "none":
        return "No ladder here yet", _e((e or {}).get("data", {}).get("note", "no ladder"))
    d = e["data"]
    prov = d.get("provenance") or {}
    if d.get("source") == "reference":
        line = (f"<b>Shipped reference results</b>, not computed on this machine: {_e(prov.get('runs'))} runs, "
                f"{_e(prov.get('when'))}")
        detail = (f"<p>Computed {_e(prov.get('when'))} (UTC) on {_e(prov.get('where'))} by lazylab "
                  f"{_e(prov.get('lazylab'))} (<code>{_e(prov.get('code'))}</code>), <code>{_e(prov.get('command'))}"
                  f"</code>; data fingerprint <code>{_e(prov.get('data'))}</code>. Once every run of the paper preset "
                  "is in your memo, the report shows yours instead (<code>lazylab verify</code> checks that this "
                  "machine computes the same runs).</p>")
        return line, detail
    if d.get("source") == "memo":
        return ("<b>Computed here</b>: the paper preset from your memo",
                f"<p>The paper preset (<code>lazylab ladder</code>); {_e(d.get('note'))}.</p>")
    return (f"<b>Computed here</b>: your ladder ({_e(d.get('name'))})", f"<p>{_e(d.get('note') or '')}</p>")


def _paper_section(e: dict | None) -> str:
    """The paper ladder (from the memo or the shipped reference results; whose, the report's answer box says):
    its answer table with the answer and accuracy figures, the published numbers, then its tables. (Your
    ladder's figures are in its own section, never here too.)"""
    if not e or e["data"].get("source") in (None, "none"):
        note = (e or {}).get("data", {}).get("note", "no paper ladder")
        return (f"<p class=note>No paper ladder to show: {_e(note)}. <code>lazylab ladder</code> computes it (hours on "
                "two cores); a release ships it as <code>lazylab/reference/paper.json</code>.</p>")
    d = e["data"]
    figures = _img(e, "paper_accuracy.png", "paper ladder: accuracy vs width", "<b>The paper ladder.</b> " + _accuracy_caption(d["plan"]))
    fair = bool(fair_rows(d.get("analysis") or {}))
    if "paper_answer.png" in e.get("files", {}):
        figures = _img(e, "paper_answer.png", "the answer at the optimum",
                       f"<b>The answer.</b> Each frozen bank read out at the optimum (convex readout, dotted, "
                       f"{over_seeds(d['plan'].get('seeds') or [])}) against the trained units' accuracy (dashed"
                       + (", at their held-out optimum" if fair else "") + "); each crossing is the frozen width that "
                       "matches it, its 95 % seed interval the shaded bar.",
                       narrow="paper_answer_narrow.png") + figures
    if "paper_exchange.png" in e.get("files", {}):
        figures = _img(e, "paper_exchange.png", "frozen units per trained unit",
                       "<b>The exchange curve.</b> Frozen units per trained unit against the trained width, both "
                       "sides at their held-out optimum: a filled marker where a frozen bank of the sweep matches, "
                       "with its 95 % interval (open where only the interval is worth reading); an open triangle "
                       "where none does (a lower bound, widest bank / m: it falls with m only because the sweep "
                       "ends there).",
                       narrow="paper_exchange_narrow.png") + figures
    return "\n".join([*_exchange_block(d, "paper-", f'<div class="figrow">{figures}</div>', sentence=False),
                      _published_block(d), _ladder_section(e, "paper-", "paper", lead=True)])


def _published_block(d: dict) -> str:
    """The published study's numbers against this ladder's (``lazylab.published.compare``), with the why of each
    difference."""
    from lazylab.published import AGREE_POINTS, compare

    rows = [[_e(r["what"]), _e(r["published"]), _e(r["ours"]),
             _f(r["difference"], "+.2f"), f'<span class="{"pass" if r["verdict"] == "agrees" else "fail"}">'
             f'{_e(r["verdict"])}</span>', _e(r["why"] or "-")] for r in compare(d)]
    if not rows:
        return ""
    agree = sum(r[4].count(">agrees<") for r in rows)
    return _folded(f"Against the published numbers ({agree} of {len(rows)} points agree)",
                   f"<p class=note>Agrees: within {AGREE_POINTS:g} point (accuracy, floor), or for redundancy within "
                   "0.05 in mean |corr| and a factor 1.5 in participation ratio. Where ours differs, the last column "
                   "says what this project measured about it (docs/results.md).</p>"
                   + _table(["published point", "published", "ours", "difference (pts)", "verdict", "why"], rows,
                            "published-table", left={0, 5}), "published")


def _rate_words(plan: dict) -> str:
    """How the ladder's rates were chosen, for the sentence above its table."""
    if plan.get("lr") is not None:
        return f"every rate fixed at {plan['lr']:g}. "
    b = plan.get("bracket") or {"rule": "argmax", "seeds": [0]}  # a file written before the rule was recorded
    if b["rule"] == "argmax":
        return "each arm's rate bracketed at m = 256, seed 0 over its grid (argmax, SPEC section 5 as published). "
    return ("each arm's rate bracketed at m = 256 over seeds " + ", ".join(map(str, b["seeds"])) +
            ": the smallest rate within one standard error of the best stable rate (the 1se rule, docs/ladder.md). ")


def _bracket_block(d: dict, pid: str) -> list[str]:
    """The rate brackets (``lazylab.bracket.bracket_rows``): every rate's mean and spread, the margin, the choice."""
    from lazylab.bracket import BRACKET_HEADER, bracket_rows

    rows = bracket_rows(d["arms"])
    if not rows:
        return []
    notes = [f"{_e(r[0])}: {_e(r[-1])}" for r in rows if r[-1]]
    return [_folded(f"Rate brackets ({len(rows)} arms)",
                    _table(list(BRACKET_HEADER[:-1]), [[_e(c) for c in r[:-1]] for r in rows], f"{pid}bracket-table",
                           left={0, 1, 2})
                    + (f'<p class=note id="{pid}bracket-notes">' + "<br>".join(notes) + "</p>" if notes else ""),
                    f"{pid}brackets")]


def _ladder_section(e: dict | None, pid: str = "", stem: str = "ladder", lead: bool = False) -> str:
    """One ladder's block: (unless ``lead``, which puts them in ``_paper_section``) the exchange rate and warnings,
    then its table, figures, unstable runs, movement law, gap, wall and redundancy. ``pid`` prefixes every
    table id; ``stem`` the figure files (``<stem>_accuracy.png``).
    """
    if not e:
        return "<p class=note>No ladder.</p>"
    d = e["data"]
    plan = d["plan"]
    widths = [int(w) for w in plan["widths"]]
    law = d["analysis"]["ladder_law"]
    rows, not_fitted, unit_notes = [], [], []
    for a in d["arms"]:
        cells = []
        for w in widths:
            c = a["cells"].get(str(w))
            if (c is None and a.get("failed")) or (c is not None and c.get("failed")):
                cells.append('<span class="fail">failed</span>')
            elif c is None or c.get("mean") is None:
                cells.append("diverged" if c else "-")
            else:
                cells.append(f"{c['mean']:.2f}" + (f" ± {c['std']:.2f}" if c["n"] > 1 else "") + _unstable_mark(c))
        f = law.get(a["arm"], {})
        if "skipped" in f or not f:
            fit = ["-", "-", "-", "-", _e(",".join(map(str, f.get("widths", []))) or "-")]
            not_fitted.append(f"{_e(a['arm'])}: {_e(f.get('skipped', 'no data'))}")
        else:
            fit = [_f(f["floor"]), _f(f["c"], ".3g"), _f(f["alpha"], ".3f") + (" (at bound)" if f.get("at_bound") else ""),
                   _f(f["r2"], ".4f"), _e(",".join(map(str, f.get("widths", []))))]
        name = _e(a["arm"])
        if a.get("checks_failed"):
            name += ' <span class="fail" title="its unit failed lazylab\'s conformance checks">✗ checks</span>'
            unit_notes.append(f"{_e(a['arm'])}: its unit failed its conformance checks, so its results may not be "
                              f"reproducible: {_e('; '.join(a['checks_failed']))}")
        if a.get("failed"):
            unit_notes.append(f"{_e(a['arm'])}: {_e(a['failed'])}; its later runs were skipped (cells marked failed)")
        lr = _f(a["lr"], "g") if a.get("lr") is not None else "failed" if a.get("failed") else "diverged"
        rows.append([name, lr, *cells, *fit])
    header = ["arm", "lr", *[f"m={w}" for w in widths], "floor (%)", "c", "alpha", "R²", "widths fitted"]
    out = [] if lead else _exchange_block(d, pid)
    out += [f"<p>Ladder: <b>{_e(d['name'])}</b> ({_e(d.get('note') or '')}). best_acc (%) on the test set, "
           f"{_e(over_seeds(plan['seeds']))}; {plan['epochs']} epoch{'s' if plan['epochs'] != 1 else ''} on {plan['train_size']:,} "
           f"training images; " + _rate_words(plan) + f"Ladder law: err = 100 − acc = floor + c·m<sup>−alpha</sup> on each arm's "
           f"climbing region. {len(d.get('run_keys', []))} runs behind it.</p>",
           _table(header, rows, f"{pid}ladder-table", left={0, -1})]
    if unit_notes:  # why a unit's cells failed or are marked, below the table
        out.append(f'<p class=note id="{pid}unit-notes">' + "<br>".join(unit_notes) + "</p>")
    if not_fitted:  # the reason below the table, not in a column
        out.append(f'<p class=note id="{pid}law-notes">Ladder law not fitted: ' + "; ".join(not_fitted) + ".</p>")
    out += _bracket_block(d, pid)
    if not lead:
        out.append(_img(e, f"{stem}_accuracy.png", "accuracy vs width", _accuracy_caption(plan)))
    out.append(_unstable_table(d, pid))
    movement = [_img(e, f"{stem}_movement.png", "movement vs width", "Relative prototype movement ||W_end − W0||_F / "
                     "||W0||_F vs width (log-log) with each trained arm's fitted law (dashed, a trained network's line) "
                     "and a square-root reference (grey dash-dot).")]
    mv, ml = d["analysis"].get("movement") or {}, d["analysis"].get("movement_law") or {}
    if mv:
        mw = sorted({int(w) for per in mv.values() for w in per})
        laws = {arm: movement_law_or_why(ml.get(arm)) for arm in mv}
        rows = [[_e(arm), *[_f(per.get(str(w), {}).get("mean"), ".4g") for w in mw],
                 _f(laws[arm].get("slope"), ".3f"), _f(laws[arm].get("r2"), ".4f")] for arm, per in mv.items()]
        movement.append(_table(["arm", *[f"m={w}" for w in mw], "slope", "R²"], rows, f"{pid}movement-table"))
        skipped = [f"{_e(arm)}: {_e(law['skipped'])}" for arm, law in laws.items() if "skipped" in law]
        if skipped:  # the reason below the table, not in a column
            movement.append(f'<p class=note id="{pid}movement-notes">Not fitted: ' + "; ".join(skipped) + ".</p>")
    if mv or f"{stem}_movement.png" in e.get("files", {}):
        out.append(_folded("Movement law: how far trained prototypes travel", "".join(movement), f"{pid}movement"))
    gap = d["analysis"].get("gap") or {}
    if gap:
        gw = sorted({int(w) for g in gap.values() for w in g["per_width"]})
        rows = [[_e(n), *[_f(g["per_width"].get(str(w)), "+.2f") for w in gw], _e(g.get("largest_at")), _e(g.get("smallest_at"))]
                for n, g in gap.items()]
        out += ["<h3>Gap: trained − frozen accuracy (points)</h3>",
                _table(["pair", *[f"m={w}" for w in gw], "largest at", "smallest at"], rows, f"{pid}gap-table")]
    else:
        out.append("<p class=note>No frozen/trained pair sharing unit and init in this ladder: no gap.</p>")
    out += _wall_section(e, pid, stem)
    red = d["analysis"].get("redundancy") or {}
    if red:
        rows = [[_e(b), _f(r.get("mean_abs_corr"), ".4f"), _f(r.get("participation_ratio"), ".1f"), _e(r.get("n", ""))]
                for b, r in red.items()]
        s = d["analysis"]["settings"]
        out += [f"<h3>Redundancy of each frozen bank (m = {s['redundancy_width']})</h3>",
                _table(["bank", "mean |off-diagonal corr|", "participation ratio", "images"], rows, f"{pid}redundancy-table")]
    out.append(_provenance(e))
    return "\n".join(o for o in out if o)


def _wall_section(e: dict, pid: str = "", stem: str = "ladder") -> list[str]:
    """The wall (protocol readout against the convex optimum) and the redundancy grid, when the memo has them."""
    d = e["data"]
    w = d["analysis"].get("wall")
    out = ["<h3>The wall: protocol readout against the convex optimum</h3>"]
    plan = d["plan"]
    if not w:
        frozen = [a["arm"] for a in d["arms"] if not a["arm"].endswith("-trained")]
        if d.get("name") in ("quick", "paper"):
            command = f"lazylab ladder --preset {d['name']} --readout both"
        else:
            command = (f"lazylab ladder --arms {','.join(frozen)} --widths {','.join(map(str, plan['widths']))} "
                       f"--seeds {','.join(map(str, plan['seeds']))} --epochs {plan['epochs']} "
                       f"--train-size {plan['train_size']}" + (f" --lr {plan['lr']:g}" if plan.get("lr") else "")
                       + " --readout both")
        out.append("<p class=note>" + ("Not in the memo for this ladder: <code>" + _e(command) + "</code> adds it "
                                       "(docs/convex.md).</p>" if frozen else "This ladder has no frozen arm.</p>"))
    else:
        rows = [[_e(arm), _e(width), _f(r["best_acc"]), _f(r["final_acc"]), _f(r["convex_acc"]), _f(r["gap"], "+.2f"),
                 _f(r["loss_gap"], "+.4f"), f"{r['grad_norm']:.1e}" + ("" if r["converged"] else " *")]
                for arm, per in w["arms"].items() for width, r in sorted(per.items(), key=lambda kv: int(kv[0]))]
        epochs = plan["epochs"]
        out += [f"<p>Each frozen bank's head, read out by the protocol ({epochs} AdamW epoch{'s' * (epochs != 1)}, best "
                "epoch) and fitted to the optimum of cross-entropy + L2 (L-BFGS, lambda chosen at each width on held-out "
                "training images). Where the shaded gap is wide, the protocol's optimiser, not the bank, sets the frozen curve. "
                "* : the solve ended on the objective-change rule or the iteration cap, not the gradient rule.</p>",
                _img(e, f"{stem}_wall.png", "protocol and convex readouts vs width",
                     "Per frozen arm: protocol best_acc (solid) and the convex optimum's test accuracy (dotted) vs width, "
                     "the gap shaded."),
                _folded(f"The wall table ({len(rows)} rows)",
                        _table(["arm", "m", "best_acc", "final_acc", "convex", "gap (pts)", "train-loss gap (nats)",
                                "grad norm"], rows, f"{pid}wall-table"), f"{pid}wall")]
    grid = d["analysis"].get("redundancy_grid")
    if grid:
        rows = [[_e(r["bank"]), _e(r["fan_in"]), _e(r["sample"]),
                 f"{r['mean_abs_corr']['mean']:.3f} ± {r['mean_abs_corr']['std']:.3f}",
                 f"{r['participation_ratio']['mean']:.1f} ± {r['participation_ratio']['std']:.1f}"] for r in grid]
        g = grid[0]
        out.append(_folded(f"Redundancy, reconciled (m = {g['m']}, n = {g['n']}, seeds {','.join(map(str, g['seeds']))})",
                           "<p>The published 0.42 / about 5 directions for the random Yat bank is the fan-in-d init; the "
                           "published 0.01 / about 230 for the data-seeded bank appears only when the sample holds every "
                           "seed image. On images that seed no unit the data bank is the more redundant one "
                           "(docs/results.md).</p>"
                           + _table(["bank", "fan-in", "sample", "mean |corr|", "participation ratio"], rows,
                                    f"{pid}redundancy-grid", left={0, 1, 2}), f"{pid}redundancy"))
    else:
        out.append("<p class=note>Redundancy for each fan-in and image sample: not in the memo; <code>lazylab "
                   "redundancy</code> adds it (docs/results.md, \"Redundancy, reconciled\").</p>")
    return out
