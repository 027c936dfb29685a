"""What a newcomer reads states the present (issue 49): the README's size and answer, and every run count the
README and ``--help`` give, checked against the code's own plan. Nothing trained."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from cli_helpers import run

from lazylab import estimate as E
from lazylab.arms import get_arm
from lazylab.calibration import REFERENCE
from lazylab.experiments import Workspace
from lazylab.experiments.ladder import PRESETS, LadderPlan

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def preset_runs(name: str, memo: Path) -> tuple[int, int]:
    """(runs before grid extensions, most runs with them) of a preset from an empty memo: the plan's own count."""
    p = PRESETS[name]
    plan = LadderPlan(arms=tuple(get_arm(a) for a in p["arms"]), widths=tuple(p["widths"]), seeds=tuple(p["seeds"]),
                      epochs=p["epochs"], train_size=p["train_size"])
    est = E.ladder_estimate(Workspace(None, memo), plan, cal=REFERENCE, warm=False)
    assert est.runs_total == plan.n_runs()
    return est.runs_total, est.runs_high


def verify_counts() -> tuple[int, int]:
    """How many runs and convex readouts ``lazylab verify`` reruns by default from the shipped reference
    (``verify.choose``, ``verify.choose_convex``)."""
    from lazylab import verify as V
    from lazylab.reference import load_reference

    doc = load_reference(None)
    sample = V.choose(doc, doc["provenance"]["data"])
    assert not sample.skipped, sample.skipped
    return len(sample.cells()), len(V.choose_convex(doc, sample.arms))


def test_the_readme_is_a_front_door():
    lines = README.splitlines()
    assert len(lines) < 120, len(lines)
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", README)  # no dated timing: history is CHANGELOG.md's
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert "Keep a Changelog" in changelog and "## [Unreleased]" in changelog
    for page in ("docs/README.md", "docs/tutorial.md", "docs/performance.md", "CHANGELOG.md"):
        assert f"`{page}`" in README and (ROOT / page).is_file(), page


def test_the_readme_states_the_shipped_answer():
    """The README's answer is the report's answer box for the shipped reference, word for word, with its numbers."""
    from lazylab.render.answer import answer_words

    payload = json.loads((ROOT / "lazylab" / "reference" / "paper.json").read_text())["payload"]
    words = answer_words(payload["analysis"], payload["plan"], {a["arm"]: a.get("init") for a in payload["arms"]})
    from lazylab.exchange import round2

    assert f"**{words.headline}**" in README
    row = payload["analysis"]["fair"]["answers"]["fair"][0]  # the fair answer's first row: what the headline reads
    for arm in ("gaussian-frozen", "yat-frozen"):
        assert f"about {round2(row['matches'][arm]['width'])} frozen" in README, arm
    assert f"{row['width']} trained" in README and f"{row['trained_acc']:.1f} %" in README
    flat = " ".join(README.split())
    assert words.notes and all(note in flat for note in words.notes)  # where the price outgrows the sweep


@pytest.mark.parametrize("preset", ["quick", "paper"])
def test_readme_and_help_give_the_plans_run_counts(preset, tmp_path, capsys):
    low, high = preset_runs(preset, tmp_path / "memo")
    row = next(line for line in README.splitlines() if line.startswith(f"| `lazylab ladder --preset {preset}`"))
    assert f"| {low} (up to {high} with grid extensions) |" in row, row
    code, out, _ = run(capsys, "ladder", "--help")
    assert code == 0
    line = next(line for line in out.splitlines() if line.strip().startswith(preset + " "))
    assert line.split()[-1] == f"{low}-{high}", line


def test_readme_and_help_give_verifys_run_count(capsys):
    n, readouts = verify_counts()
    row = next(line for line in README.splitlines() if line.startswith("| `lazylab verify`"))
    assert row == f"| `lazylab verify` | {n} (and {readouts} frozen readouts at the optimum) |", row
    code, out, _ = run(capsys, "verify", "--help")
    assert code == 0 and f"({n} runs of the shipped reference" in " ".join(out.split())
    assert f"({readouts} of the shipped reference)" in " ".join(out.split())
    found = {int(k) for k in re.findall(r"(\d+) runs of the shipped reference", " ".join(out.split()))}
    assert found == {n}


def test_docs_count_the_shipped_lambda_choices_not_yet_refined():
    """docs/convex.md's count of the choices marked (walk) is the shipped reference's ``convex.unrefined``; with
    none left, no choice is marked and the page says every one is refined."""
    payload = json.loads((ROOT / "lazylab" / "reference" / "paper.json").read_text())["payload"]
    n = len(payload["convex"]["unrefined"])
    text = " ".join((ROOT / "docs" / "convex.md").read_text().split())
    if n:
        assert f"The {n} choice{'s' * (n != 1)} marked (walk)" in text
    else:
        assert "(walk)" not in text and "Every shipped lambda choice is refined" in text
