"""Progress on stderr (lazylab.cli.progress): live on a terminal, plain lines otherwise. Mechanics only."""

from __future__ import annotations

import io
import re
from types import SimpleNamespace

import pytest
from rich.console import Console

from lazylab.cli import progress


@pytest.fixture
def stderr(monkeypatch):
    """``progress.err`` on a buffer; ``terminal(True)`` makes it a terminal."""
    buf = io.StringIO()

    def terminal(is_tty: bool):
        monkeypatch.setattr(progress, "err", Console(file=buf, force_terminal=is_tty, width=120))
        return buf

    monkeypatch.setattr(progress, "verbosity", progress.NORMAL)
    return terminal


def test_a_finished_stage_leaves_the_live_display(stderr):
    stderr(True)
    with progress.Display() as display:
        assert display.rich is not None
        tick = progress.stage_ticker(display)
        tick("features m=512", 0, 1)
        tick("drawing", 0, 3)
        assert [t.description for t in display.rich.tasks] == ["features m=512", "drawing"]
        tick("features m=512", 1, 1)  # done: its bar (and its clock) goes
        assert [t.description for t in display.rich.tasks] == ["drawing"]


def test_plain_lines_one_per_finished_run_with_counts_and_eta(stderr, monkeypatch):
    buf = stderr(False)
    clock = iter(range(0, 1000))  # each call to the clock: 1 s later (under PLAIN_EVERY between events)
    monkeypatch.setattr(progress.time, "monotonic", lambda: float(next(clock)))
    with progress.Display() as display:
        reporter = progress.ProgressReporter(display, "ladder")
        reporter.plan(4)
        for width, cached in ((16, False), (64, True), (256, False)):
            cfg = SimpleNamespace(arm="yat-frozen", width=width, seed=0, lr=0.1, epochs=3)
            reporter.start(cfg)
            reporter.epoch(cfg, 1, 50.0)  # not a line without -v
            reporter.done(cfg, {"key": f"k{width}", "best_acc": 80.0 + width / 100, "seconds": 12.0}, cached)
    lines = buf.getvalue().splitlines()
    assert len(lines) == 3, lines
    assert re.match(r"^\[ *[\d.]+ s\] ladder 1/4, [\d.]+ s, eta [\d.]+ s: yat-frozen m=16 seed=0 lr=0.1: "
                    r"best 80.16 %, computed in 12 s$", lines[0]), lines[0]
    assert lines[1].endswith("m=64 seed=0 lr=0.1: best 80.64 %, from the memo")
    assert "ladder 3/4" in lines[2] and (reporter.computed, reporter.cached) == (2, 1)
    # eta = time spent / runs done x runs left, from the pace so far
    spent, eta = (float(v) for v in re.search(r"ladder 3/4, ([\d.]+) s, eta ([\d.]+) s", lines[2]).groups())
    assert eta == pytest.approx(spent / 3 * 1, abs=0.051)


def test_verbose_adds_epoch_lines_and_quiet_prints_nothing(stderr, monkeypatch):
    for level, expected in ((progress.VERBOSE, 2), (progress.QUIET, 0)):
        buf = stderr(False)
        buf.truncate(0)
        monkeypatch.setattr(progress, "verbosity", level)
        with progress.Display() as display:
            reporter = progress.ProgressReporter(display, "ladder")
            cfg = SimpleNamespace(arm="relu-frozen", width=8, seed=1, lr=0.3, epochs=1)
            reporter.epoch(cfg, 1, 42.0)
            reporter.done(cfg, {"key": "k", "best_acc": 42.0, "seconds": 1.0}, False)
        assert len([l for l in buf.getvalue().splitlines() if l]) == expected


@pytest.mark.parametrize("seconds, text", [(0.42, "0.4 s"), (42, "42 s"), (185, "3 min 05 s"), (4330, "1 h 12 min")])
def test_durations_read_as_people_say_them(seconds, text):
    assert progress.duration(seconds) == text


def test_the_time_left_follows_the_plan_scaled_by_the_pace(stderr, monkeypatch):
    """Two cheap runs first, one planned at 10x their cost last: after the first, the time left is
    the plan's remaining seconds times (time spent / the plan's seconds so far), not the pace."""
    buf = stderr(False)
    now = [0.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: now[0])
    est = SimpleNamespace(runs=[
        {"phase": "ladder", "arm": "a", "width": 16, "seed": 0, "lr": 0.1, "in_memo": False, "seconds": 3.0},
        {"phase": "ladder", "arm": "a", "width": 64, "seed": 0, "lr": None, "in_memo": False, "seconds": 2.0},  # rate unknown before
        {"phase": "ladder", "arm": "a", "width": 4096, "seed": 0, "lr": None, "in_memo": False, "seconds": 20.0},
    ])
    with progress.Display() as display:
        reporter = progress.ProgressReporter(display, "ladder", est)
        reporter.plan(3)
        now[0] = 6.0  # twice the plan's 3 s: the machine runs at half the planned speed
        reporter.done(SimpleNamespace(arm="a", width=16, seed=0, lr=0.1, epochs=1), {"key": "k1", "best_acc": 50.0}, False)
    line = buf.getvalue().splitlines()[0]
    assert "ladder 1/3" in line and "eta 44 s" in line, line  # (2 + 20) planned s x 2, where the pace would say 12 s


def test_a_compile_bound_first_run_does_not_set_the_pace(stderr, monkeypatch):
    """The first run of a long plan (under a tenth of its estimated seconds) took 30x its estimate (it
    compiled): the time left is the plan's own, not 30x it."""
    buf = stderr(False)
    now = [0.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: now[0])
    est = SimpleNamespace(runs=[{"phase": "ladder", "arm": "a", "width": w, "seed": 0, "lr": 0.1, "in_memo": False, "seconds": s}
                                for w, s in ((16, 1.0), (64, 40.0), (256, 60.0))])
    with progress.Display() as display:
        reporter = progress.ProgressReporter(display, "ladder", est)
        reporter.plan(3)
        now[0] = 30.0
        reporter.done(SimpleNamespace(arm="a", width=16, seed=0, lr=0.1, epochs=1), {"key": "k1", "best_acc": 50.0}, False)
        now[0] = 100.0  # 41 planned s done in 100 s: past a tenth of the plan, the pace (2.4x) counts
        reporter.done(SimpleNamespace(arm="a", width=64, seed=0, lr=0.1, epochs=1), {"key": "k2", "best_acc": 60.0}, False)
    first, second = buf.getvalue().splitlines()[:2]
    assert "eta 1 min 40 s" in first, first  # 40 + 60 planned s, where the first run's pace would say 50 min
    assert "eta 2 min 26 s" in second, second  # 60 x 100 / 41


def test_convex_readouts_time_left_follows_their_own_rows_not_the_memo_hits(stderr, monkeypatch):
    """The convex stage's time left comes from the plan's convex rows. A lambda choice and the seed-0
    readout share arm, width and seed, so each must pop its own row. The stored readouts that pass in
    0.1 s must not set the pace either: they did, and 8 readouts of 10 min each read as 3 min left."""
    from lazylab.experiments.convex import ConvexConfig, LambdaConfig

    bank = {"arm": "a", "plugin": "p", "train_size": 60000, "fan_in": "unit", "data": "d"}
    buf = stderr(False)
    now = [0.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: now[0])
    row = {"arm": "a", "width": 8192, "lr": None, "in_memo": False}
    est = SimpleNamespace(runs=[{**row, "phase": "ladder", "seed": 0, "lr": 0.1, "seconds": 99.0},  # another stage's
                                {**row, "phase": "convex-lambda", "seed": 0, "seconds": 30.0},
                                *({**row, "phase": "convex", "seed": s, "seconds": 10.0} for s in (0, 1, 2)),
                                {**row, "width": 16, "phase": "convex", "seed": 0, "in_memo": True, "seconds": 0.0}])
    with progress.Display() as display:
        reporter = progress.ProgressReporter(display, "convex readouts", est, convex=True)
        reporter.plan(5)
        reporter.done(ConvexConfig(**bank, width=16, seed=0), {"key": "k0"}, True)  # from the memo, at once
        now[0] = 60.0  # twice the choice's planned 30 s
        reporter.done(LambdaConfig(**bank, width=8192, seed=0), {"key": "k1"}, False)
    line = buf.getvalue().splitlines()[1]
    assert "convex readouts 2/5" in line and "eta 1 min 00 s" in line, line  # 3 readouts x 10 s x 2


def test_a_render_stage_counts_a_run_reported_twice_once():
    """A bracket run that is also a ladder cell is reported by the bracket and again by the cells, but
    planned once (``LadderPlan.n_runs``): the stage's count must not pass its plan (it read 70/70 for 66)."""
    from lazylab.experiments.render.results import _StageReporter

    ticks = []
    reporter = _StageReporter(lambda stage, done, total: ticks.append((done, total)), "ladder")
    reporter.plan(2)
    run = SimpleNamespace(arm="yat-frozen", width=256, seed=0, lr=1e-3, epochs=1)
    reporter.done(run, {"key": "a"}, cached=False)  # in the bracket
    reporter.done(run, {"key": "a"}, cached=True)  # the same run as a ladder cell
    reporter.done(run, {"key": "b"}, cached=True)
    assert ticks[-1] == (2, 2)
    assert (reporter.computed, reporter.cached) == (1, 1)


def test_a_render_stage_total_grows_with_a_bracket_extension_before_its_runs():
    """A bracket's grid extension announces its runs (``Reporter.more``) before they run: the stage's total is
    raised then, not stretched run by run at the end (it read 57/57 ... 66/66)."""
    from lazylab.experiments.render.results import _StageReporter

    ticks = []
    reporter = _StageReporter(lambda stage, done, total: ticks.append((done, total)), "ladder")
    reporter.plan(3)
    run = SimpleNamespace(arm="yat-frozen", width=256, seed=0, lr=1e-3, epochs=1)
    reporter.done(run, {"key": "a"}, cached=False)
    reporter.more(2)
    assert ticks[-1] == (1, 5)
    for key in "bcde":
        reporter.done(run, {"key": key}, cached=False)
    assert ticks[-1] == (5, 5) and all(total == 5 for _, total in ticks[2:])
