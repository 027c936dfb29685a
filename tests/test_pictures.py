"""Pictures show what they claim: per-image prototype scales, one colour per unit, the unstable marker,
no file for an empty selection. Mechanics only, so synthetic arrays and payloads (seconds)."""

from __future__ import annotations

import numpy as np
import pytest

from lazylab.experiments.trajectory import ArmTrajectory, TrajectoryResult
from lazylab.render import figures as F
from lazylab.render import style
from lazylab.render.canvas import grab
from lazylab.render.trajectory import prototype_figure, render_trajectory

WIDTHS = [16, 64, 256, 1024]


# ---------------------------------------------------------------- helpers
def _arm(name: str, init: str, snaps: np.ndarray) -> ArmTrajectory:
    e = snaps.shape[0] - 1
    record = {"epochs": list(range(e + 1)), "travel_median": [0.1 * t for t in range(e + 1)],
              "accuracy": [10.0] + [80.0 + t for t in range(e)]}
    return ArmTrajectory(name, "lazylab test", init, 0.03, "given", {}, record, snaps.astype(np.float32), True, False)


def _two_magnitudes() -> TrajectoryResult:
    """The same 8 patterns at two magnitudes: 0.01 x (random-init row) and 10 x (data row)."""
    rng = np.random.default_rng(0)
    pattern = rng.normal(size=(2, 8, 784))
    return TrajectoryResult({"width": 16, "epochs": 1},
                            [_arm("yat-trained", "random", 0.01 * pattern), _arm("yat-data-trained", "data", 10 * pattern)])


def _cell(fig, frame: np.ndarray, ax) -> np.ndarray:
    """The frame's pixels inside ``ax`` (float RGB in [0, 1]), one pixel trimmed at each edge."""
    b = ax.get_window_extent()
    h = frame.shape[0]
    y0, y1 = int(round(h - b.y1)) + 1, int(round(h - b.y0)) - 1
    x0, x1 = int(round(b.x0)) + 1, int(round(b.x1)) - 1
    return frame[y0:y1, x0:x1].astype(np.float64) / 255.0


def _payload(arms: list[str], unstable: dict | None = None, with_field: bool = True) -> dict:
    """A ladder payload: every arm climbs with width; ``unstable`` = {arm: {width: seeds}}."""
    unstable = unstable or {}
    out = {"plan": {"widths": WIDTHS, "seeds": [0, 1, 2], "epochs": 3},
           "arms": [], "runs": [], "analysis": {"movement": {}, "movement_law": {}, "wall": {"arms": {}}}}
    for k, arm in enumerate(arms):
        cells = {}
        for w in WIDTHS:
            cells[str(w)] = {"n": 3, "mean": 80.0 + k + np.log2(w) / 2, "std": 0.2}
            if with_field:
                cells[str(w)]["unstable"] = unstable.get(arm, {}).get(w, 0)
        out["arms"].append({"arm": arm, "lr": 0.1, "cells": cells})
        if arm.endswith("-trained"):
            out["analysis"]["movement"][arm] = {str(w): {"mean": 0.1 * w ** 0.5, "std": 0.01, "n": 3} for w in WIDTHS}
            out["analysis"]["movement_law"][arm] = {"slope": 0.5, "intercept": np.log(0.1), "r2": 1.0}
        else:
            out["analysis"]["wall"]["arms"][arm] = {str(w): {"best_acc": 80.0 + k, "convex_acc": 81.0 + k} for w in WIDTHS}
    return out


def _line_colours(fig) -> dict[str, tuple]:
    """Label -> RGBA of every labelled data line of every axes in ``fig``."""
    from matplotlib.colors import to_rgba

    out = {}
    for ax in fig.axes:
        for ln in ax.get_lines():
            if not ln.get_label().startswith("_"):
                out[ln.get_label()] = to_rgba(ln.get_color())
        for c in ax.containers:  # errorbar: the label is the container's, the colour its data line's
            out[c.get_label()] = to_rgba(c.lines[0].get_color())
    return out


# ------------------------------------------------------- prototype scales
def test_per_image_scale_shows_small_prototypes_that_the_shared_scale_washes_out():
    res = _two_magnitudes()
    pixels = {}
    for scale in ("per-image", "shared"):
        fig, update, info = prototype_figure(res, scale)
        update(0)
        frame = grab(fig)
        small, big = info["axes"][0][0], info["axes"][1][0]  # random-init row (0.01 x) first, data row (10 x) second
        pixels[scale] = (_cell(fig, frame, small), _cell(fig, frame, big))
        caption = " ".join(t.get_text() for t in fig.texts)
        assert ("own scale" in caption) == (scale == "per-image")
        assert ("one scale for every image" in caption) == (scale == "shared")
    # Contrast: the pixels' spread around their mean colour (0 for a uniform cell).
    contrast = {k: tuple(float(np.sqrt(((c - c.mean(axis=(0, 1))) ** 2).sum(-1).mean())) for c in v)
                for k, v in pixels.items()}
    # Shared: the 0.01 x prototype is a flat near-white square, the 10 x one full of contrast.
    assert contrast["shared"][0] < 0.01 < 0.3 < contrast["shared"][1]
    # Per image: the same pattern at 1000 x the magnitude draws the same picture.
    small, big = pixels["per-image"]
    assert np.abs(small - big).max() < 0.05
    assert contrast["per-image"][0] > 30 * contrast["shared"][0]


@pytest.mark.slow
def test_render_trajectory_reports_its_scale_and_refuses_an_unknown_one(tmp_path):
    from lazylab.errors import LazylabError

    res = _two_magnitudes()
    per = render_trajectory(res, tmp_path / "p")
    assert per["prototype_scale"] == "per-image" and per["colour_scale"] is None
    lo, hi = per["image_scales"]
    assert hi / lo > 500  # the 10 x and 0.01 x prototypes' own half-widths, max |w|
    shared = render_trajectory(res, tmp_path / "s", prototype_scale="shared")
    assert shared["colour_scale"] > 0 and shared["image_scales"] is None and "one scale" in shared["caption"]
    with pytest.raises(LazylabError, match="per-image, shared"):
        render_trajectory(res, tmp_path / "x", prototype_scale="log")


# ----------------------------------------------------------------- colours
def test_a_unit_has_one_colour_in_every_figure_and_every_payload():
    arms = ["yat-frozen", "yat-trained", "relu-frozen", "gaussian-trained", "rff-frozen"]
    acc = _line_colours(F.accuracy_plot(_payload(arms)))
    acc_other = _line_colours(F.accuracy_plot(_payload(list(reversed(arms[1:])))))  # another run: order and set differ
    move = _line_colours(F.movement_plot(_payload(arms)))
    wall = F.wall_plot(_payload(arms))
    from matplotlib.colors import to_rgba

    wall_colours = {ax.get_title(): to_rgba(ax.get_lines()[0].get_color()) for ax in wall.axes if ax.get_title()}
    for arm in arms:
        want = to_rgba(style.unit_colour(style.parse_arm(arm)[0]))
        assert acc[arm] == want
        if arm in acc_other:
            assert acc_other[arm] == want
        if arm.endswith("-trained"):
            assert move[arm] == want
        else:
            assert wall_colours[arm] == want
    assert acc["yat-frozen"] == acc["yat-trained"] != acc["relu-frozen"]
    # A frozen/trained pair differs by line style; random and data init by marker.
    assert style.arm_style("yat-frozen").linestyle != style.arm_style("yat-trained").linestyle
    assert style.arm_style("yat-trained").marker != style.arm_style("yat-data-trained").marker


def test_plugin_colours_are_stable_and_never_the_warning_colour():
    from matplotlib.colors import to_rgb

    for unit in ("rff", "nanunit", "my-unit", "x"):
        c = style.unit_colour(unit)
        assert c == style.unit_colour(unit) and c != style.WARNING_COLOUR
    assert len({style.unit_colour(u) for u in ("yat", "relu", "gaussian", "rff")}) == 4
    assert style.parse_arm("foo-data-trained") == ("foo", "data", "trained")
    # No spare colour is a grey (the reference lines'); the warning red is far from every unit colour.
    for c in style.SPARE_COLOURS + tuple(style.UNIT_COLOURS.values()):
        r, g, b = to_rgb(c)
        assert max(r, g, b) - min(r, g, b) > 0.1 or max(r, g, b) < 0.15, c  # a hue, or black
        assert sum((x - y) ** 2 for x, y in zip(to_rgb(c), to_rgb(style.WARNING_COLOUR))) > 0.15, c


def test_a_units_second_init_is_a_darker_shade_and_a_unit_may_name_its_colour(monkeypatch):
    from dataclasses import replace

    from lazylab import arms
    from lazylab.arms import ContractError, _check_contract
    from lazylab.arms.relu import UNIT as RELU

    yat, yat_data = style.arm_style("yat-frozen"), style.arm_style("yat-data-frozen")
    assert yat.colour == style.UNIT_COLOURS["yat"] and yat_data.colour != yat.colour and yat_data.marker != yat.marker
    assert style.arm_style("gaussian-frozen").colour == style.UNIT_COLOURS["gaussian"]  # its default init is data
    # A plugin unit's own colour, checked with the contract.
    teal = replace(RELU, name="teal", colour="#117733")
    assert _check_contract(teal, "teal") is teal
    for bad, why in (("#777777", "grey"), ("#E31A1C", "warning red"), ("teal", "#RRGGBB"), ("#FFFFFF", "too light"),
                     ("#F0E442", "too light"), ("#e69f00", "built-in unit 'relu'")):
        with pytest.raises(ContractError, match=why):
            _check_contract(replace(RELU, name="teal", colour=bad), "teal")
    reg = arms.Registry(units={"teal": (teal, "lazylab-teal", "0.1")})
    monkeypatch.setattr(arms.loading, "_REGISTRY", reg)
    style._registry_colour.cache_clear()
    try:
        assert style.unit_colour("teal") == "#117733"
    finally:
        style._registry_colour.cache_clear()


def test_an_arm_whose_plugin_is_not_installed_is_drawn_with_the_init_its_file_records():
    """A data-seeded plugin arm named without '-data' (its default init): the name alone says random."""

    def marker(payload) -> str:
        fig = F.accuracy_plot(payload)
        (bars,) = [c for ax in fig.axes for c in ax.containers if c.get_label() == "scs-frozen"]
        return bars.lines[0].get_marker()

    payload = _payload(["scs-frozen", "relu-frozen"])
    assert style.parse_arm("scs-frozen")[1] == "random" and marker(payload) == style.INIT_MARKERS["random"]
    payload["arms"][0].update(unit="scs", init="data")
    assert marker(payload) == style.INIT_MARKERS["data"]


# ---------------------------------------------------------------- unstable
def _unstable_lines(fig):
    return [ln for ax in fig.axes for ln in ax.get_lines() if ln.get_gid() == "unstable"]


def test_unstable_cell_gets_a_marker_and_a_legend_entry():
    payload = _payload(["yat-frozen", "gaussian-frozen"], unstable={"gaussian-frozen": {1024: 1}})
    fig = F.accuracy_plot(payload)
    (marker,) = _unstable_lines(fig)
    mean = payload["arms"][1]["cells"]["1024"]["mean"]
    assert list(marker.get_xdata()) == [1024] and list(marker.get_ydata()) == [pytest.approx(mean)]
    legend_texts = [t.get_text() for lg in fig.legends for t in lg.get_texts()]
    assert style.UNSTABLE_LABEL in legend_texts
    assert any(t.get_text() == "1/3" for ax in fig.axes for t in ax.texts)


def test_unstable_from_run_records_and_absent_field_tolerated():
    plain = _payload(["yat-frozen", "gaussian-frozen"], with_field=False)
    fig = F.accuracy_plot(plain)
    assert _unstable_lines(fig) == []
    assert style.UNSTABLE_LABEL not in [t.get_text() for lg in fig.legends for t in lg.get_texts()]
    plain["runs"] = [{"config": {"arm": "gaussian-frozen", "width": 256, "lr": 0.1, "seed": s},
                      "unstable": "train loss 7.2 at best epoch > ln 10 = 2.303" if s == 2 else None} for s in range(3)]
    (marker,) = _unstable_lines(F.accuracy_plot(plain))
    assert list(marker.get_xdata()) == [256]
    assert F.unstable_cells(plain) == {"gaussian-frozen": {256: 1}}


# ------------------------------------------------------------------- empty
def test_no_figure_file_for_an_empty_selection(tmp_path):
    empty = _payload([])
    (tmp_path / "accuracy.png").write_bytes(b"an older ladder's figure")
    assert F.accuracy_figure(empty, tmp_path) == []
    assert F.movement_figure(_payload(["yat-frozen"]), tmp_path) == []  # no trained arm: nothing moves
    assert F.wall_figure(_payload(["yat-trained"]), tmp_path) == []  # no frozen arm: no wall row
    assert F.ladder_figures(empty, tmp_path) == []
    assert list(tmp_path.iterdir()) == []  # nothing written, the stale one removed
    written = F.ladder_figures(_payload(["yat-frozen", "yat-trained"]), tmp_path)
    assert sorted(p.name for p in written) == ["accuracy.png", "accuracy.svg", "movement.png", "movement.svg",
                                               "wall.png", "wall.svg"]


def test_the_exchange_curve_labels_a_point_as_the_tables_word_it():
    """A match whose interval is open (at least ...) is drawn open and labelled with the bound, not a point;
    a closed one is filled and labelled with its point. A synthetic fair answer: two trained widths, one bank."""
    from lazylab.exchange import per_unit_words

    def hit(width, low, high):
        return {"width": width, "interval": [low, high], "text": "",
                "per_unit": [width / 16, low / 16, high if isinstance(high, str) else high / 16]}

    rows = [{"trained": "yat-trained", "width": 16, "trained_acc": 86.0,
             "matches": {"gaussian-frozen": hit(490.0, 390.0, 690.0)}},
            {"trained": "yat-trained", "width": 32, "trained_acc": 88.0,
             "matches": {"gaussian-frozen": {**hit(5400.0, 2800.0, "beyond"),
                                             "per_unit": [5400.0 / 32, 2800.0 / 32, "beyond"]}}}]
    payload = {"analysis": {"fair": {"sweep": [16, 8192], "answers": {"fair": rows}}}, "arms": []}
    fig = F.exchange_curve_plot(payload)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.texts if t.get_text()]  # the open end's arrow has none
    assert labels == ["31", "at least 88"] == [per_unit_words(r["matches"]["gaussian-frozen"]) for r in rows]
    open_points = [ln for ln in ax.lines if ln.get_markerfacecolor() == "white" and len(ln.get_xdata()) == 1]
    assert [float(ln.get_ydata()[0]) for ln in open_points] == [5400.0 / 32]
