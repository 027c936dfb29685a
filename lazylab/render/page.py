"""The report page of ``lazylab render report``: one self-contained HTML file (inline CSS, no script, no external
request; images by relative links into the same folder) built from the manifest.

In order: the title and whose numbers these are (computed here, or the shipped reference results); the answer
box (``lazylab.render.answer``: the answer in plain words, one line per readout, the provenance folded away);
the paper ladder (``lazylab.render.ladder_sections``), your ladder, the Gram crystallization, the readout race,
the prototype trajectories, the NTK lab with its sweep, scalar model and audit; "Words used here"; the versions
and data behind the page.
"""

from __future__ import annotations

from datetime import datetime, timezone

from lazylab.render.answer import answer_box, answer_words, words_section
from lazylab.render.html_parts import CSS, _checks_table, _e, _f, _folded, _img, _provenance, _table
from lazylab.render.ladder_sections import _ladder_section, _paper_section, source_lines


_NTK_JOBS = ("ntk_lab", "ntk_lab_figure", "ntk_sweep", "ntk_scalar", "ntk_audit")
# The page's sections: anchor, navigation label, the jobs that fill it (none: always shown).
_SECTIONS = (("paper", "paper ladder", ()), ("ladder", "your ladder", ()), ("gram", "Gram", ("gram",)),
             ("readout", "readout", ("readout",)), ("trajectory", "trajectories", ("trajectory", "trajectory_finals")),
             ("ntk", "NTK", _NTK_JOBS), ("words", "words", ()), ("provenance", "versions", ()))


def _lead(J: dict) -> dict | None:
    """The ladder entry the answer box reads: the paper ladder when there is one (memo or shipped reference),
    else your ladder."""
    pap = J.get("paper")
    if pap and (pap.get("data") or {}).get("source") not in (None, "none"):
        return pap
    return J.get("ladder")


def _header(lead: dict | None, env: dict, data_info: dict, now: str) -> str:
    """The line under the title: whose numbers the answer and the paper ladder are (shipped or computed here),
    that the other sections were computed here, when and by what the page was written."""
    source = ((lead or {}).get("data") or {}).get("source")
    if source == "reference":
        whose = ("The answer and the paper ladder are shipped reference results, computed on another machine "
                 "(below the answer: where and when); every other section was computed here, from your memo.")
    elif lead is not None:
        whose = "Every number on this page was computed here, from your memo."
    else:
        whose = "Nothing here yet answers the question: no ladder."
    return (f"<p class=note>Fashion-MNIST. {whose} Written {_e(now)} by lazylab {_e(env.get('lazylab'))}; data "
            f"fingerprint <code>{_e(data_info.get('fingerprint', '-'))}</code>. Each picture's exact configuration, "
            "memo keys and versions are under it.</p>")


def report_html(manifest: dict, env: dict, plugin_rows: list[dict]) -> str:
    """The report page from a manifest (see ``Renderer.report``)."""
    J = manifest["jobs"]
    data_info = manifest.get("data", {})
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    lead = _lead(J)
    d = (lead or {}).get("data") or {}
    words = answer_words(d.get("analysis") or {}, d.get("plan") or {},
                         {a["arm"]: a.get("init") for a in d.get("arms") or []}) if lead else None
    source, provenance = source_lines(lead)
    parts = [f"<h1>lazylab: how many random neurons buy a trained one?</h1>",
             answer_box(words, source, provenance),
             _header(lead, env, data_info, now),
             "<nav>" + "".join(f'<a href="#{anchor}">{label}</a>' for anchor, label, jobs in _SECTIONS
                               if not jobs or any(j in J for j in jobs)) + "</nav>"]

    pplan = ((J.get("paper") or {}).get("data") or {}).get("plan") or {}
    shape = (f" ({len(pplan['arms'])} arms, {len(pplan['widths'])} widths, {len(pplan['seeds'])} seeds)"
             if pplan.get("arms") else "")
    parts.append(f'<section id="paper"><h2>The paper ladder{shape}</h2>'
                 + _paper_section(J.get("paper")) + "</section>")
    lad, pap = J.get("ladder"), J.get("paper")
    if lad and pap and lad["data"].get("name") == "paper" and pap["data"].get("source") == "memo":
        body = "<p class=note>Your ladder is the paper ladder, shown above from your memo.</p>"
    else:
        body = ("<p class=note>The ladder you asked for (<code>--preset</code>, <code>--arms</code>/<code>--widths</code>/"
                "<code>--seeds</code>/<code>--epochs</code> or <code>--from</code>; by default the quick preset), beside "
                "the paper ladder, never in its place.</p>" + _ladder_section(lad))
    parts.append('<section id="ladder"><h2>Your ladder</h2>' + body + "</section>")

    g = J.get("gram")
    if g:
        d = g["data"]
        fit = d["fit"]
        slope = (f"log-log slope {fit['slope']:.3f} over widths {fit['widths'][0]}..{fit['widths'][1]} "
                 f"(R² {fit['r2']:.3f}; Monte Carlo predicts −0.5)") if fit.get("slope") is not None else "slope not fitted"
        parts.append(
            '<section id="gram"><h2>Gram crystallization</h2>'
            + _img(g, "gram.gif", "normalised Gram matrix as the bank grows",
                   f"{_e(g['spec']['arm'])}: normalised Gram K = ΦΦᵀ/m of {d['images']} test images "
                   f"({_e(', '.join(d['classes']))}) as one bank grows from {d['widths'][0]} to {d['widths'][1]:,} units "
                   f"in {d['frames']} frames.")
            + f"<p>Distance to a {d['ref_units']:,}-unit reference: {d['distance'][0]:.4f} → {d['distance'][1]:.4f}; "
              f"{_e(slope)}. Block contrast (within − cross class) {d['contrast'][0]:.4f} → {d['contrast'][1]:.4f} "
              f"(reference {d['reference_contrast']:.4f}).</p>" + _provenance(g) + "</section>")

    r = J.get("readout")
    if r:
        d = r["data"]
        rows = [[str(c["width"]), _f(c["start"]), _f(c["final"]), f"{c['best']:.2f} (step {c['best_step']})"] for c in d["curves"]]
        parts.append(
            '<section id="readout"><h2>Readout race</h2>'
            + _img(r, "readout.gif", "readout race",
                   f"{_e(r['spec']['arm'])}: linear readouts on frozen banks by full-batch Adam (lr {d['lr']:g}, {d['steps']} "
                   f"steps, {d['train_size']:,} training images); garments framed green/orange by the m = {d['judge']} "
                   f"readout's live verdict.")
            + _table(["width m", "step 0 (%)", "final (%)", "best (%)"], rows, "readout-table")
            + f"<p>The m = {d['judge']} readout gets {d['right']}/{d['shown']} of the shown garments right at the end.</p>"
            + _provenance(r) + "</section>")

    t, tf = J.get("trajectory"), J.get("trajectory_finals")
    if t or tf:
        d = (t or tf)["data"]
        rows = []
        for a in d["arms"]:
            f = a["final"]
            src = {"fixed": "fixed (docs/trajectory.md)", "bracket (memo)": "bracketed (memo)"}.get(a["rate_source"], a["rate_source"])
            sc = ", ".join(f"{k} {a['scalars_start'].get(k, float('nan')):.3g}→{v:.3g}" for k, v in f["scalars"].items())
            rows.append([_e(a["arm"]), _e(a["init"]), f"{a['lr']:g} ({_e(src)})", _f(f["travel_median"], ".4f"),
                         _f(f["travel_max"], ".4f"), _f(f["accuracy"]), _f(f["best_acc"]), _e(sc or "-")])
        rates = {a["rate_source"] for a in d["arms"]}
        why = ""
        if "fixed" in rates:
            why = (" Rates marked fixed are 0.03, the rate the ladder's bracket (m = 256, seed 0, 12 epochs) chose for "
                   "all three default arms on the full training set (docs/trajectory.md); render does not re-run that "
                   "bracket (about 4 minutes on two cores). <code>lazylab trajectory</code> brackets it and, once the "
                   "bracket is in the memo, render uses the bracketed rates.")
        parts.append(
            f'<section id="trajectory"><h2>Prototype trajectories</h2><p>Trained arms at m = {d["width"]}, {d["epochs"]} '
            f'epochs on {d["train_size"]:,} training images, seed {d["seed"]}.{why}</p>'
            + _img(t, "trajectory_prototypes.gif", "prototypes epoch by epoch",
                   "The first prototypes of each arm as 28×28 images, epoch by epoch; random-init rows above data-init "
                   "rows; " + _e((t["data"].get("caption") if t else None) or "colour: see the picture") + ".")
            + _img(t, "trajectory_curves.gif", "travel and accuracy through training",
                   "Median per-unit relative travel ||w_t − w_0|| / ||w_0|| and test accuracy, drawn through training.")
            + _img(tf, "trajectory_finals.png", "first and last epoch",
                   "Start and end: epoch 0 and the last epoch of the same prototypes, and the full curves.")
            + _table(["arm", "init", "lr (source)", "median travel", "max travel", "final acc (%)", "best acc (%)",
                      "scalars start→end"], rows, "trajectory-table", left={0, 1, 2, 7})
            + "".join(f"<p class=note>note: {_e(n)}</p>" for n in d.get("notes", []))
            + _provenance(t or tf) + "</section>")

    ntk = any(J.get(j) for j in _NTK_JOBS)
    if ntk:
        parts.append('<section id="ntk"><h2>Lazy versus rich: the NTK</h2>')
    lab, labf = J.get("ntk_lab"), J.get("ntk_lab_figure")
    if lab or labf:
        s = (lab or labf)["data"]["summary"]
        c = s["config"]
        rows = [["network", _f(s["train_mse"], ".5f"), _f(s["test_mse"], ".5f"), _f(s["move_net"], ".4f")],
                ["linearization", _f(s["train_mse_lin"], ".5f"), _f(s["test_mse_lin"], ".5f"), _f(s["move_lin"], ".4f")]]
        parts.append(
            f"<h3>1-D lab</h3><p>f(x) = m<sup>−1/2</sup> Σ a<sub>j</sub> tanh(w<sub>j</sub> x + b<sub>j</sub>), m = {c['width']}, "
            f"full-batch GD lr {c['lr']:g} for {c['steps']} steps, bump {c['bump']:g}, noise {c['noise']:g}, seed {c['seed']}; "
            f"the network and its linearization from one init. NTK drift {s['drift']:.4f}; RMS disagreement "
            f"{s['disagreement']:.4f}.</p>"
            + _img(lab, "ntk_lab.gif", "network vs linearization through training",
                   "Function space, losses and kernel drift through training (log-spaced steps).")
            + _folded("The lab at the last step (figure)", _img(labf, "ntk_lab.png", "1-D lab at the last step",
                                                                  "The lab at the last step."), "ntk-lab-last")
            + _table(["model", "train MSE", "test MSE", "relative movement"], rows, "lab-table")
            + _provenance(lab or labf))
    sw = J.get("ntk_sweep")
    if sw:
        d = sw["data"]
        rows = [[str(r["width"]), f"{r['drift']:.4f} ± {r['drift_std']:.4f}",
                 f"{r['disagreement']:.4f} ± {r['disagreement_std']:.4f}", _f(r["move_net"], ".4f")] for r in d["rows"]]
        sl = d["slopes"]
        parts.append(
            "<h3>Width sweep</h3>"
            + _img(sw, "ntk_sweep.png", "drift and disagreement vs width",
                   f"NTK drift (slope {sl['drift']['slope']:.2f}) and network-vs-linearization disagreement (slope "
                   f"{sl['disagreement']['slope']:.2f}) shrink with width; mean ± std over seeds.")
            + _folded(f"The sweep's table ({len(rows)} widths)",
                      _table(["m", "NTK drift", "disagreement (RMS)", "movement"], rows, "sweep-table"), "ntk-sweep")
            + _provenance(sw))
    sc = J.get("ntk_scalar")
    if sc:
        d = sc["data"]
        parts.append(
            "<h3>Scalar factorized model (exact)</h3>"
            + _img(sc, "ntk_scalar.png", "scalar model", "f = a b x: closed forms (lines) against RK4 integration (markers), "
                   "the two negative controls and the two-mode residual decay.")
            + _folded(f"Its {len(d['checks'])} checks ({sum(1 for c in d['checks'] if c['passed'] == c['expect'])} as "
                      "required)", _checks_table(d["checks"], "scalar-checks"), "ntk-scalar-checks")
            + f"<p>Two-mode decay at t = {d['t_end']:g}: {d['mode1_end']:.3e} and {d['mode2_end']:.4f}. Table: "
              f'<a href="ntk_scalar.csv">ntk_scalar.csv</a>.</p>' + _provenance(sc))
    au = J.get("ntk_audit")
    if au:
        checks = au["data"]["checks"]
        ok = sum(1 for c in checks if c["ok"])
        parts.append(f"<h3>Audit of the 1-D lab</h3>"
                     + _folded(f"{ok}/{len(checks)} checks behave as required", _checks_table(checks, "audit-table"),
                               "ntk-audit") + _provenance(au))
    if ntk:
        parts.append("</section>")

    parts.append(words_section())
    vrows = [[_e(k), _e(v)] for k, v in env.items()]
    prow = [[_e(p["unit"]), _e(p["distribution"]), _e(p["version"]), _e(p["status"])] for p in plugin_rows]
    parts.append(
        '<section id="provenance"><h2>Versions and data</h2>'
        "<p>This page was written with the versions below. Each artifact above lists the versions that drew it; the "
        "memo keys its results by configuration (arm, plugin distribution and version, width, seed, rate, epochs, "
        "batch, data fingerprint, cache schema), not by library version.</p>"
        + _folded(f"Packages ({len(vrows)})", _table(["package", "version"], vrows, "versions-table", left=2), "versions")
        + _folded(f"Units (plugins: {len(prow)})", _table(["unit", "distribution", "version", "status"], prow,
                                                          "plugins-table", left=4), "units")
        + f"<p>Data: <code>{_e(data_info.get('directory', '-'))}</code>, fingerprint "
          f"<code>{_e(data_info.get('fingerprint', '-'))}</code> (SHA-256 over the four IDX files; "
          f"<code>lazylab data info</code>).</p></section>")
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            "<link rel=\"icon\" href=\"data:,\"><title>lazylab report</title>"
            f"<style>{CSS}</style></head><body><main>\n" + "\n".join(parts) + "\n</main></body></html>\n")
