"""The report's answer box: the study's answer in plain words, whichever answer a ladder provides.

``answer_words`` is the one place that turns a ladder's answer data into words; ``answer_box`` lays them out
as the first thing under the report's title. Sources, the first a ladder holds wins:

1. ``analysis["fair"]`` (``lazylab.experiments.optimum.fair_answer``): both sides at their held-out optimum,
   beside the readings that move it (the trained side read by the protocol; the protocol on both sides);
2. ``analysis["answer"]`` (``lazylab.experiments.convex_wall.answer``): each frozen bank read out at the optimum
   (the convex readout) and by the protocol (AdamW), per trained arm and width, with seed intervals;
3. ``analysis["exchange"]`` (``lazylab.experiments.laws.exchange_table``): the protocol's exchange rate alone.

A new kind of answer is one more branch at the top of ``answer_words`` returning the same ``AnswerWords``.
Words a teacher may not know link to the report's "Words used here" (``WORDS``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lazylab.exchange import bank_words, round_ratio, unit_name
from lazylab.render.html_parts import _e

# The glossary at the end of the report: anchor, word, meaning (plain words, one or two sentences).
WORDS = (
    ("unit", "unit", "one artificial neuron: a simple function of the image (Yat, ReLU or Gaussian) set by a "
                     "prototype of 784 numbers."),
    ("width", "width m", "how many units side by side in one layer (a bank)."),
    ("frozen", "frozen", "the units keep the random values they started with; only the readout learns."),
    ("trained", "trained", "the units and the readout learn together, end to end."),
    ("readout", "readout", "the linear layer that turns the units' outputs into 10 class scores."),
    ("fair", "held-out optimum", "both sides at their best, every choice made on training images held out "
                                 "from the fit, the test images read once: the trained units' rate and epochs, the "
                                 "frozen readout's penalty."),
    ("optimum", "at the optimum", "the frozen bank's readout fitted to the best it can do (the convex "
                                  "readout: L-BFGS on cross-entropy plus a penalty chosen on held-out training images)."),
    ("protocol", "by the protocol", "the frozen bank's readout trained like everything else here: 12 epochs of "
                                    "AdamW, keeping the best epoch (SPEC section 5)."),
    ("interval", "seed interval", "the range of widths the answer could take across random seeds (95 %, seeds 0, 1, "
                                  "2 a side: where the two sides' mean accuracies do not differ by Welch's t test)."),
    ("crossing", "crossing", "the frozen width whose accuracy equals the trained units' accuracy, read between "
                             "the two measured widths around it."),
    ("unstable", "unstable run", "a protocol run whose training loss ended above chance (ln 10) or rose far "
                                 "above its minimum; kept in every table, marked ⚠."),
)


@dataclass
class AnswerWords:
    """An answer in words. ``headline``: one plain sentence; ``interval``: its seed interval in words, or "";
    ``readouts``: ``(how it was read out, what it says)`` per readout, each one line with its numbers;
    ``notes``: lines under them (what a mark or a number belongs to)."""

    headline: str
    interval: str = ""
    readouts: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _numeric(match: dict | None) -> bool:
    return bool(match) and isinstance(match.get("width"), (int, float))


def _per_unit(match: dict, trained_width: int) -> tuple[str, str]:
    """``(about N, "A to B" or "")``: a match's frozen width per trained unit, and its interval's."""
    per = round_ratio(match["width"] / trained_width)
    lo, hi = (match.get("interval") or [None, None])[:2]
    if isinstance(lo, (int, float)) and isinstance(hi, (int, float)):
        return per, f"{round_ratio(lo / trained_width)} to {round_ratio(hi / trained_width)}"
    words = {"below": "fewer than the smallest bank measured", "beyond": "more than the widest bank measured"}
    ends = [round_ratio(v / trained_width) if isinstance(v, (int, float)) else words.get(v, str(v)) for v in (lo, hi)]
    return per, (f"{ends[0]} to {ends[1]}" if lo is not None else "")


def answer_words(analysis: dict, plan: dict, inits: dict | None = None) -> AnswerWords | None:
    """The answer a ladder's analysis holds, in words (see the module docstring for the sources); None when it
    holds none.

    Args: analysis: a ladder payload's ``"analysis"``; plan: its ``"plan"`` (``widths``, ``epochs``); inits:
      ``{arm: init}`` of its arms (a data-seeded bank is named as such).
    """
    from lazylab.exchange import protocol_words

    inits = inits or {}
    widths = [int(w) for w in plan.get("widths") or []]
    epochs = plan.get("epochs")
    fair = analysis.get("fair") or {}
    if (fair.get("answers") or {}).get("fair"):
        return _fair_words(fair, epochs, inits)
    ans = analysis.get("answer") or {}
    if ans.get("rows"):
        row = ans["rows"][0]
        w, unit = int(row["width"]), unit_name(row["trained"])
        best, same = row.get("cheapest"), row.get("same")
        trained = f"{w} trained {unit} units ({row['trained_acc']:.1f} %)"
        if _numeric(best):
            shown = [best] + ([same] if _numeric(same) and same["frozen"] != best["frozen"] else [])
            pers = [_per_unit(m, w) for m in shown]
            headline = (f"One trained {unit} unit is worth about "
                        + ", or about ".join(f"{per} {bank_words(m['frozen'], inits.get(m['frozen']))}"
                                             for m, (per, _) in zip(shown, pers)) + ".")
            spreads = [f"{spread} {unit_name(m['frozen'])} units" for m, (_, spread) in zip(shown, pers) if spread]
            interval = f"Across seeds: {', '.join(spreads)}" if spreads else ""
        elif best is not None:  # the smallest bank already matches
            headline = f"Even the smallest frozen bank measured (m = {min(widths)}) matches {trained}."
            interval = ""
        else:
            headline = (f"No frozen bank up to {max(widths):,} units matches {trained}, even read out at the "
                        "optimum.")
            interval = ""
        matches = [m for m in (best, same) if m is not None]
        matches = [m for i, m in enumerate(matches) if m["frozen"] not in [x["frozen"] for x in matches[:i]]]
        optimum = (f"{trained} = " + " or ".join(f"{m['text']} {bank_words(m['frozen'], inits.get(m['frozen']))}"
                                                for m in matches)
                   if matches else f"{trained}: no frozen bank in the sweep matches them")
        readouts = [("at the optimum", optimum + ".")]
        if row.get("protocol"):
            readouts.append((f"by the protocol ({epochs} epochs of AdamW)",
                             f"frozen {unit} units matching {trained}: {protocol_words(row['protocol'], widths)}."))
        return AnswerWords(headline, interval, readouts)
    ex = analysis.get("exchange") or {}
    rows = ex.get("rows") or []
    if rows:
        row = rows[0]
        w, unit = int(row["width"]), unit_name(row["trained"])
        label = f"by the protocol ({epochs} epochs of AdamW)"
        if row.get("method") == "interpolated":
            headline = (f"One trained {unit} unit is worth about {round_ratio(row['frozen_width'] / w)} "
                        f"{bank_words(row['frozen'], inits.get(row['frozen']))}.")
        else:
            headline = ex.get("sentence") or ""
        return AnswerWords(headline, "", [(label, ex.get("sentence") or "")])
    return None


FAIR_READINGS = (("fair", "both at their held-out optimum"),
                 ("trained_protocol", "trained side by the protocol, frozen at the optimum"),
                 ("protocol", "both by the protocol"))


def _fair_words(fair: dict, epochs, inits: dict) -> AnswerWords:
    """``answer_words`` of a fair answer: the headline from its first trained arm at its smallest width (the
    cheapest frozen bank matching inside the sweep, and the same unit's), the interval per trained unit, one line
    per reading (``FAIR_READINGS``), and a note on its widest trained width."""
    answers = fair["answers"]
    row = answers["fair"][0]
    w, unit = int(row["width"]), unit_name(row["trained"])
    same_arm = row["trained"].removesuffix("-trained") + "-frozen"

    def shown(r):  # the cheapest numeric match, and the same unit's when it is another numeric one
        numeric = sorted((m["width"], f) for f, m in r["matches"].items() if _numeric(m))
        picked = [numeric[0][1]] if numeric else []
        if same_arm in r["matches"] and _numeric(r["matches"][same_arm]) and same_arm not in picked:
            picked.append(same_arm)
        return picked

    def line(r) -> str:
        who = f"{r['width']} trained {unit} units ({r['trained_acc']:.1f} %)"
        picked = shown(r) or list(r["matches"])[:1]
        picked += [same_arm] if same_arm in r["matches"] and same_arm not in picked else []
        return f"{who} = " + " or ".join(f"{r['matches'][f]['text']} {bank_words(f, inits.get(f))}" for f in picked)

    picked = shown(row)
    if picked:
        pers = [_per_unit(row["matches"][f], w) for f in picked]
        headline = (f"In a layer of {w}, one trained {unit} unit is worth about "
                    + ", or about ".join(f"{per} {bank_words(f, inits.get(f))}" for f, (per, _) in zip(picked, pers))
                    + ".")
        spreads = [f"{spread} {unit_name(f)} units" for f, (_, spread) in zip(picked, pers) if spread]
        interval = f"Across seeds: {', '.join(spreads)}" if spreads else ""
    else:
        headline = (f"No frozen bank up to {max(fair['sweep']):,} units matches {w} trained {unit} units "
                    f"({row['trained_acc']:.1f} %), even at its held-out optimum.")
        interval = ""
    readouts = []
    for name, label in FAIR_READINGS:
        match = next((r for r in answers.get(name, []) if (r["trained"], r["width"]) == (row["trained"], w)), None)
        if match is not None:
            readouts.append((label.replace("the protocol", f"the protocol ({epochs} epochs of AdamW)", 1)
                             if name == "protocol" else label, line(match) + "."))
    notes = []
    mine = [r for r in answers["fair"] if r["trained"] == row["trained"]]
    # the narrowest trained width from which no frozen bank matches any wider one: the price has outgrown the sweep
    gone = next((r for i, r in enumerate(mine) if i and not any(shown(x) for x in mine[i:])), None)
    if gone is not None:
        top, wider = max(fair["sweep"]), "" if gone is mine[-1] else " and every wider layer measured"
        notes.append(f"{gone['width']} trained {unit} units ({gone['trained_acc']:.1f} %){wider}: no frozen bank up "
                     f"to {top:,} units matches them, more than {top // gone['width']:,} frozen units per trained "
                     "unit.")
    return AnswerWords(headline, interval, readouts, notes)


def answer_box(words: AnswerWords | None, source: str, provenance: str) -> str:
    """The report's first block: the headline, its interval, one line per readout, then ``source`` (one line:
    whose numbers these are) folding ``provenance`` (HTML) away. ``words`` None: a note that no ladder here
    answers yet, and how to get one."""
    if words is None:
        body = ("<p class=answer>No answer yet: no ladder here pairs a frozen bank with a trained one. "
                "<code>lazylab ladder --preset quick</code> computes one in minutes.</p>")
    else:
        body = f'<p class="answer" id="answer-headline">{_e(words.headline)}</p>'
        if words.interval:
            body += f'<p class="interval">{_e(words.interval)} (95 % <a href="#w-interval">seed interval</a>).</p>'
        if words.readouts:
            body += "<ul class=readouts>" + "".join(
                f"<li><b>{_link_words(_e(label))}</b>: {_e(text)}</li>" for label, text in words.readouts) + "</ul>"
        body += "".join(f"<p class=note>{_e(n)}</p>" for n in words.notes)
    return (f'<section id="answer" class="answerbox">{body}'
            f'<details class="source" id="paper-source"><summary>{source}</summary>{provenance}</details></section>')


def _link_words(text: str) -> str:
    """``text`` with the glossary's readout words linked to "Words used here" (first occurrence of each)."""
    for anchor, word in (("fair", "held-out optimum"), ("optimum", "at the optimum"), ("protocol", "by the protocol")):
        text = text.replace(word, f'<a href="#w-{anchor}">{word}</a>', 1)
    return text


def words_section() -> str:
    """The report's "Words used here": one definition per entry of ``WORDS``, each with its anchor."""
    items = "".join(f'<dt id="w-{a}">{_e(word)}</dt><dd>{_e(meaning)}</dd>' for a, word, meaning in WORDS)
    return f'<section id="words"><h2>Words used here</h2><dl class=words>{items}</dl></section>'
