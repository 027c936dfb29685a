"""The pieces of the report page: its style sheet, escaping and number formats, tables, figures with their
captions, the configuration and versions under each picture, and check tables.

Every function returns HTML text; cells passed to ``_table`` are already escaped.
The page is built by ``lazylab.render.page`` (and its ladder sections by
``lazylab.render.ladder_sections``).
"""

from __future__ import annotations

import html
import json

from lazylab.render.provenance import VERSION_PACKAGES


CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;margin:0;color:#1b1b1b;background:#fafafa;line-height:1.45}
main{max-width:1180px;margin:0 auto;padding:1.5rem 1.5rem 4rem}
h1{font-size:1.7rem;margin:.2rem 0 .4rem}h2{font-size:1.3rem;margin:2.4rem 0 .6rem;border-bottom:2px solid #ddd;padding-bottom:.2rem}
h3{font-size:1.05rem;margin:1.4rem 0 .4rem}
nav a{margin-right:1rem}a{color:#0b5cad}
figure{margin:1rem 0;background:#fff;border:1px solid #e2e2e2;padding:.6rem;border-radius:4px}
figure img{max-width:min(100%,820px);height:auto;display:block}
figcaption{font-size:.88rem;color:#444;margin-top:.4rem}
table{border-collapse:collapse;margin:.6rem 0;font-size:.86rem;background:#fff}
th,td{border:1px solid #ddd;padding:.25rem .5rem;text-align:right;vertical-align:top}
th{background:#f0f0f0}td.l,th.l{text-align:left}
.pass{color:#17703a;font-weight:600}.fail{color:#b3261e;font-weight:700}
details{margin:.5rem 0 1rem;font-size:.85rem}summary{cursor:pointer;color:#0b5cad}
pre{background:#f3f3f3;padding:.6rem;overflow-x:auto;font-size:.78rem;max-height:28rem}
.note{color:#555;font-size:.9rem}code{background:#f0f0f0;padding:0 .2rem}
p,li,figcaption,.source,summary{overflow-wrap:anywhere}
.scroll{overflow-x:auto;max-width:100%;-webkit-overflow-scrolling:touch}.scroll table{margin:0}.scroll{margin:.6rem 0}
.source{background:#fff8e1;border-left:4px solid #e0a800;padding:.5rem .8rem;margin:.6rem 0;font-size:.9rem}
.figrow figure{margin:1rem 0}.pic{overflow-x:auto;-webkit-overflow-scrolling:touch}
.answer{font-size:1.12rem;font-weight:600;background:#eef5ff;border-left:4px solid #0b5cad;padding:.5rem .8rem}
.answerbox{background:#eef5ff;border-left:4px solid #0b5cad;padding:.2rem .9rem .1rem;margin:.6rem 0 1rem}
.answerbox .answer{font-size:1.3rem;border:0;padding:.4rem 0 .2rem;margin:0;background:none}
.answerbox .interval{margin:.1rem 0 .4rem}.answerbox ul.readouts{margin:.3rem 0;padding-left:1.2rem}
.answerbox details.source{margin:.4rem 0 .6rem;background:#fff8e1}
details.fold{margin:.8rem 0}details.fold>summary{font-weight:600;font-size:1rem;color:#1b1b1b}
dl.words dt{font-weight:600;margin-top:.4rem}dl.words dd{margin:0 0 0 1.2rem}
@media (min-width:900px){dl.words{columns:2;column-gap:2.5rem}dl.words dt{break-after:avoid}
dl.words dd{break-before:avoid;break-inside:avoid}}
.unstable{color:#b3261e;font-weight:600;white-space:nowrap}td.l:first-child{white-space:nowrap}
ul.warnings{background:#fdecea;border-left:4px solid #b3261e;padding:.4rem .8rem .4rem 2rem;font-size:.9rem}
@media (max-width:600px){main{padding:1rem .6rem 3rem}nav a{display:inline-block;margin:.1rem .6rem .1rem 0}
figure{padding:.3rem}
table.cards thead{display:none}table.cards,table.cards tbody,table.cards tr,table.cards td{display:block;width:auto}
table.cards tr{border:1px solid #ddd;margin:0 0 .5rem}table.cards td{border:0;text-align:left;white-space:normal}
table.cards td::before{content:attr(data-label) ": ";font-weight:600}}
"""


def _e(x) -> str:
    return html.escape(str(x), quote=True)


def _f(v, fmt=".2f", none="-") -> str:
    if v is None:
        return none
    try:
        return format(v, fmt)
    except (TypeError, ValueError):
        return _e(v)


def _table(header: list[str], rows: list[list], table_id: str | None = None, left=1, cards: bool = False) -> str:
    """An HTML table of already-escaped cells; ``left``: how many leading columns are left-aligned,
    or a set of column indices (negative from the end); ``cards``: on a narrow screen each row is a
    card of ``header: cell`` lines instead (no sideways scroll: the answer table)."""
    n = len(header)
    lefts = set(range(left)) if isinstance(left, int) else {i % n for i in left}
    ident = f' id="{_e(table_id)}"' if table_id else ""
    ident += ' class="cards"' if cards else ""
    head = "".join(f'<th{" class=l" if i in lefts else ""}>{_e(h)}</th>' for i, h in enumerate(header))
    label = (lambda i: f' data-label="{_e(header[i])}"') if cards else (lambda i: "")
    body = "".join("<tr>" + "".join(f'<td{" class=l" if i in lefts else ""}{label(i)}>{c}</td>' for i, c in enumerate(r))
                   + "</tr>" for r in rows)
    # The wrapper scrolls sideways on a narrow screen instead of cutting columns.
    return f'<div class="scroll"><table{ident}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


NARROW_MEDIA = "(max-width: 600px)"  # a figure's narrow drawing (legend below, larger type) replaces it up to this width


def _folded(summary: str, body: str, ident: str) -> str:
    """``body`` (HTML: a long table, a secondary figure) under a summary line (plain text, escaped here) that opens
    it: closed until asked for, so the page stays short."""
    return f'<details class="fold" id="{_e(ident)}"><summary>{_e(summary)}</summary>{body}</details>'


def _img(entry: dict | None, fname: str, alt: str, caption: str, narrow: str | None = None) -> str:
    """A figure scaled to the column's width, with its caption and file facts; ``narrow``: the file name of a
    drawing for narrow screens (``NARROW_MEDIA``), used when the entry holds it, so its legend stays readable."""
    if not entry or fname not in entry.get("files", {}):
        return f'<p class="note">{_e(fname)} was not drawn.</p>'
    f = entry["files"][fname]
    w, h = f.get("size", [None, None])
    dims = f' width="{w}" height="{h}"' if w else ""
    extra = []
    if "frames" in f:
        extra.append(f"{f['frames']} frames, loops")
    if w:
        extra.append(f"{w}x{h} px")
    extra.append(f"{f['bytes'] / 2**20:.2f} MB" if f["bytes"] > 2**20 else f"{f['bytes'] / 1024:.0f} KB")
    svg = fname.rsplit(".", 1)[0] + ".svg"
    if fname.endswith(".png") and svg in entry.get("files", {}):
        extra.append(f'<a href="{_e(svg)}">SVG</a>')
    img = f'<img src="{_e(fname)}" alt="{_e(alt)}"{dims} loading="eager">'
    if narrow and narrow in entry.get("files", {}):
        img = f'<picture><source media="{NARROW_MEDIA}" srcset="{_e(narrow)}">{img}</picture>'
    return (f'<figure><div class="pic">{img}</div>'
            f'<figcaption>{caption} <span class="note">({_e(fname)}: {", ".join(extra)})</span></figcaption></figure>')


def _provenance(entry: dict | None, label: str = "configuration and versions") -> str:
    if not entry:
        return ""
    spec = entry["spec"]
    v = entry.get("versions", {})
    vline = ", ".join(f"{k} {v[k]}" for k in VERSION_PACKAGES if k in v)
    return (f"<details><summary>{_e(label)}: <code>{_e(spec.get('command', ''))}</code>, drawn {_e(entry.get('drawn_at'))}"
            f"</summary><p class=note>Drawn with {_e(vline)}; Python {_e(v.get('python'))} on {_e(v.get('platform'))}. "
            f"Spec SHA-256 {_e(entry['key'])}. Files: "
            + ", ".join(f"{_e(n)} (sha256 {_e(f['sha256'][:16])}…)" for n, f in entry.get("files", {}).items())
            + f"</p><pre>{_e(json.dumps(spec, indent=1, sort_keys=True))}</pre></details>")


def _checks_table(checks: list[dict], table_id: str) -> str:
    rows = []
    for c in checks:
        if c["expect"]:
            verdict = '<span class="pass">pass</span>' if c["passed"] else '<span class="fail">FAIL</span>'
        else:
            verdict = ('<span class="pass">fails, as it must</span>' if not c["passed"]
                       else '<span class="fail">PASSES (must fail)</span>')
        rows.append([_e(c["name"]), _f(c["value"], ".3g"), _e(c["note"]), verdict])
    return _table(["check", "measured", "criterion", "result"], rows, table_id, left={0, 2, 3})
