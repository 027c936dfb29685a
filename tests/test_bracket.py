"""The rate bracket's rules (lazylab.bracket): the one-standard-error rule, unstable rates, grid extension."""

from __future__ import annotations

import math

import pytest

from lazylab.bracket import MAX_EXTEND, Bracket, RateScore, next_rate


def _record(lr, seed, acc, loss=0.5):
    """A bracket run record as the memo holds it (only the fields the rule reads)."""
    return {"config": {"lr": lr, "seed": seed, "width": 256}, "best_acc": acc, "final_acc": acc,
            "best_epoch": 3, "train_loss": [1.0, 0.7, loss], "diverged": None if acc is not None else "nan"}


def _bracket(rule, accs: dict, grid=None, unstable=()):
    b = Bracket(rule=rule, grid=list(grid or accs))
    for lr, per_seed in accs.items():
        recs = [_record(lr, s, a, loss=50.0 if (lr, s) in unstable else 0.5) for s, a in enumerate(per_seed)]
        b.scores[float(lr)] = RateScore.of(lr, recs)
    return b


def test_next_rate_walks_the_half_decade_ladder_and_else_the_grid_step():
    frozen, trained = [0.03, 0.1, 0.3, 1.0], [0.003, 0.01, 0.03]
    assert (next_rate(frozen, True), next_rate(frozen, False)) == (3.0, 0.01)
    assert (next_rate(trained, True), next_rate(trained, False)) == (0.1, 0.001)
    assert next_rate([0.001, 0.002, 0.004], True) == 0.008  # off the ladder: the grid's own ratio
    assert next_rate([0.5, 0.25], False) == 0.125


def test_one_standard_error_rule_takes_the_smallest_rate_within_one_se_of_the_best():
    # best 0.1: mean 80.0, std 1.0 over 3 seeds, se 0.577; 0.03 at 79.6 is within it, 0.01 at 79.0 is not
    b = _bracket("1se", {0.01: [79.0, 79.0, 79.0], 0.03: [79.6, 79.6, 79.6], 0.1: [79.0, 80.0, 81.0],
                         0.3: [78.0, 78.0, 78.0]})
    assert b.best().lr == 0.1 and math.isclose(b.best().se, 1 / math.sqrt(3))
    assert b.chosen() == 0.03
    sel = b.to_json()
    assert sel["runner_up"] == 0.03 and math.isclose(sel["margin"], 0.4) and math.isclose(sel["spread"], 1.0)
    assert sel["edge"] is None and "within one standard error" in sel["why"]


def test_argmax_keeps_the_published_rule_on_seed_zero():
    b = _bracket("argmax", {0.03: [79.6], 0.1: [80.0], 0.3: [78.0]})
    assert b.chosen() == 0.1
    assert _bracket("argmax", {0.03: [80.0], 0.1: [80.0]}).chosen() == 0.03  # ties go to the first (smaller)
    assert _bracket("argmax", {0.03: [None], 0.1: [70.0]}).chosen() == 0.1  # a diverged run never wins


def test_a_rate_with_an_unstable_seed_never_wins_the_1se_rule():
    b = _bracket("1se", {0.03: [80.0, 80.1, 80.2], 0.1: [85.0, 85.0, 85.0], 0.3: [70.0, 70.0, 70.0]},
                 unstable={(0.1, 2)})
    assert not b.scores[0.1].eligible and b.best().lr == 0.03 and b.chosen() == 0.03
    # no stable rate: the grid extends down, then the smallest rate tried is used whatever the means say
    b = _bracket("1se", {0.03: [80.0, 80.0, 80.0], 0.1: [81.0, 81.0, 81.0]},
                 unstable={(0.03, 0), (0.1, 1)})
    assert b.wants_extension() is False and b.chosen() == 0.03 and b.to_json()["why"].startswith("no stable rate")
    assert "no rate tried is stable" in b.edge()


def test_a_best_rate_at_the_end_of_the_grid_asks_for_a_step_beyond_until_the_bound():
    b = _bracket("1se", {0.03: [70.0, 70.0, 70.0], 0.1: [75.0, 75.0, 75.0], 0.3: [80.0, 80.0, 80.0]})
    assert b.wants_extension() is True  # best at the top
    b.scores[1.0] = RateScore.of(1.0, [_record(1.0, s, 60.0, loss=50.0) for s in range(3)])  # unstable above
    assert b.wants_extension() is None and b.edge() is None and b.extended == [1.0]
    low = _bracket("1se", {0.03: [80.0, 80.0, 80.0], 0.1: [75.0, 75.0, 75.0]})
    assert low.wants_extension() is False
    for k, lr in enumerate((0.01, 0.003)):
        low.scores[lr] = RateScore.of(lr, [_record(lr, s, 81.0 + k, 0.5) for s in range(3)])
    assert len(low.extended) == MAX_EXTEND and low.wants_extension() is None
    assert "still the smallest after extending the grid by 2 steps" in low.edge()
    assert _bracket("argmax", {0.03: [70.0], 0.1: [75.0]}).wants_extension() is None


def test_the_chosen_rate_at_the_low_end_says_why():
    b = _bracket("1se", {0.03: [79.9, 79.9, 79.9], 0.1: [79.0, 80.0, 81.0], 0.3: [70.0, 70.0, 70.0]})
    assert b.chosen() == 0.03 and "the smallest rate tried, is within one standard error" in b.edge()


@pytest.mark.parametrize("rule", ["1se", "argmax"])
def test_a_real_ladder_records_its_bracket_rule_and_runs(rule, tmp_path):
    """Real images, tiny runs: the bracket runs every grid rate on the rule's seeds, extends, and records why."""
    from lazylab.arms import get_arm
    from lazylab.bracket import bracket_seeds
    from lazylab.experiments import Workspace
    from lazylab.experiments.ladder import LadderPlan, run_ladder

    ws = Workspace(None, tmp_path / "m", cache_limit=0)
    arm = get_arm("yat-frozen")
    plan = LadderPlan(arms=(arm,), widths=(16,), seeds=(0,), epochs=1, train_size=1024, bracket=rule)
    result = run_ladder(ws, plan)
    [summary] = result.arms
    sel = summary.selection
    assert result.plan["bracket"] == {"rule": rule, "width": 256, "seeds": list(bracket_seeds(rule))}
    assert sel["grid"] == [0.03, 0.1, 0.3, 1.0] and sel["chosen"] == summary.lr
    brackets = [r for r in result.runs if r["config"]["width"] == 256]
    assert len(brackets) == len(bracket_seeds(rule)) * (4 + len(sel["extended"]))
    assert {r["config"]["lr"] for r in brackets} == {s["lr"] for s in sel["rates"]}
    for s in sel["rates"]:  # the recorded means are the runs' means
        accs = [r["best_acc"] for r in brackets if r["config"]["lr"] == s["lr"]]
        assert s["accs"] == accs and math.isclose(s["mean"], sum(accs) / len(accs))
    if rule == "argmax":
        assert sel["extended"] == [] and summary.lr == max(sel["rates"], key=lambda s: s["mean"])["lr"]
