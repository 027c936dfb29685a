"""The report page a teacher reads (issue 49, points 3 and 4), built from the shipped reference's own payload:
the answer in plain words first, whose numbers they are folded under it, long tables folded and in numeric
order, the unstable marks said to belong to the protocol's readout. Nothing computed or drawn."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from lazylab.exchange import round_ratio
from lazylab.render.answer import WORDS, answer_words
from lazylab.render.page import report_html
from lazylab.render.report import _payload_data

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def reference_page():
    doc = json.loads((ROOT / "lazylab" / "reference" / "paper.json").read_text())
    data = {**_payload_data(doc["payload"]), "source": "reference", "provenance": doc["provenance"], "name": "paper",
            "note": "the shipped reference results are shown"}
    entry = {"name": "paper", "key": "k", "spec": {"command": "lazylab ladder --preset paper"}, "files": {},
             "data": data, "versions": {}, "drawn_at": "now"}
    page = report_html({"jobs": {"paper": entry}, "data": {"fingerprint": "f", "directory": "d"}},
                       {"lazylab": "0.2.0"}, [])
    return doc["payload"], page


def test_the_answer_in_plain_words_is_first_under_the_title(reference_page):
    payload, page = reference_page
    words = answer_words(payload["analysis"], payload["plan"], {a["arm"]: a.get("init") for a in payload["arms"]})
    body = page.split("<main>", 1)[1]
    assert re.match(r"\s*<h1>[^<]*</h1>\s*<section id=\"answer\"", body), body[:300]
    box = body.split('<section id="answer"', 1)[1].split("</section>", 1)[0]
    assert f'id="answer-headline">{words.headline}</p>' in box
    # the fair answer leads: both sides at their held-out optimum, the cheapest frozen bank matching first
    row = payload["analysis"]["fair"]["answers"]["fair"][0]
    cheapest = min((m for m in row["matches"].values() if isinstance(m["width"], (int, float))),
                   key=lambda m: m["width"])
    assert words.headline.startswith(f"In a layer of {row['width']}, one trained Yat unit is worth about "
                                     f"{round_ratio(cheapest['width'] / row['width'])} ")
    lo, hi = (v / row["width"] for v in cheapest["interval"])
    assert words.interval.startswith(f"Across seeds: {round_ratio(lo)} to {round_ratio(hi)} Gaussian units")
    assert len(words.headline.split()) <= 28  # read in ten seconds
    # one line per reading, each with its numbers; the jargon linked to "Words used here"
    assert [label.split(" (")[0] for label, _ in words.readouts] == [
        "both at their held-out optimum", "trained side by the protocol, frozen at the optimum", "both by the protocol"]
    assert cheapest["text"] in box and row["matches"]["yat-frozen"]["text"] in box
    for anchor in ("fair", "optimum", "protocol", "interval"):
        assert f'href="#w-{anchor}"' in box and f'id="w-{anchor}"' in page
    assert {a for a, _, _ in WORDS} <= set(re.findall(r'<dt id="w-([a-z]+)">', page))
    # whose numbers: one line, folded, with where and when inside
    source = box.split('<details class="source" id="paper-source">', 1)[1]
    assert source.startswith("<summary><b>Shipped reference results</b>, not computed on this machine")
    assert payload and json.loads((ROOT / "lazylab" / "reference" / "paper.json").read_text())["provenance"]["where"] \
        .split(",")[0] in source
    assert "shipped reference results, computed on another machine" in body.split("<nav>", 1)[0]


def test_long_tables_fold_and_sort_by_width(reference_page):
    _, page = reference_page
    for ident, table in (("paper-unstable", "paper-unstable-table"), ("paper-wall", "paper-wall-table"),
                         ("paper-exchange", "paper-exchange-grid")):
        fold = page.split(f'<details class="fold" id="{ident}">', 1)
        assert len(fold) == 2 and f'id="{table}"' in fold[1].split("</details>", 1)[0], ident
    wall = page.split('id="paper-wall-table"', 1)[1].split("</table>", 1)[0]
    cells = re.findall(r"<tr><td class=l>([a-z-]+)</td><td>(\d+)</td>", wall)
    assert len(cells) == 40
    for arm in dict.fromkeys(a for a, _ in cells):
        widths = [int(w) for a, w in cells if a == arm]
        assert widths == sorted(widths) and widths[:3] == [16, 32, 64], (arm, widths)


def test_marks_of_one_readout_say_so_where_the_other_is_used(reference_page):
    payload, page = reference_page
    marked = [a["arm"] for a in payload["arms"] if a["arm"] in payload["convex"]["arms"]
              and any((c or {}).get("unstable") for c in a["cells"].values())]
    assert "yat-data-frozen" in marked
    note = page.split('<p class=note id=marks-note>', 1)[1].split("</p>", 1)[0]
    assert all(arm in note for arm in marked) and "protocol (AdamW) runs" in note
    assert page.index("marks-note") < page.index('id="paper-ladder-table"')  # said before the marks appear
