"""lazylab.published: our ladder against the published numbers (mechanics on hand-made payloads)."""

from lazylab.published import compare


def _payload(yat512=85.33, relu8192=84.0, floor=12.62, yat128=81.74):
    def arm(name, cells):
        return {"arm": name, "cells": {str(w): {"mean": m, "std": 0.2, "n": 3} for w, m in cells.items()}}
    return {"arms": [arm("yat-frozen", {128: yat128, 256: 84.09, 512: yat512}), arm("relu-frozen", {8192: relu8192})],
            "analysis": {"ladder_law": {"yat-frozen": {"floor": floor, "widths": [16, 32]}},
                         "redundancy": {"yat": {"mean_abs_corr": 0.178, "participation_ratio": 19.8},
                                        "yat-data": {"mean_abs_corr": 0.015, "participation_ratio": 225.1}}}}


def test_compare_verdicts_differences_and_reasons():
    rows = {r["what"]: r for r in compare(_payload())}
    assert rows["yat-frozen at m = 512"]["verdict"] == "agrees"
    assert abs(rows["yat-frozen at m = 512"]["difference"] - 0.03) < 1e-9
    relu = rows["relu-frozen at m = 8192"]
    assert relu["verdict"] == "differs" and abs(relu["difference"] + 2.9) < 1e-9 and "bracketed" in relu["why"]
    assert "yat-trained at m = 16" not in rows  # not in this ladder: left out
    assert rows["yat-frozen passes 79.0 % by m = 128"]["verdict"] == "agrees"
    assert rows["yat-frozen's fitted floor (error %)"]["verdict"] == "agrees"
    red = [r for r in compare(_payload()) if "corr" in r["what"]]
    assert [r["verdict"] for r in red] == ["differs", "agrees"]  # the ladder's yat init is not the published one
    assert "fan-in-d" in red[0]["why"] and red[1]["why"] == ""


def test_a_rung_missed_and_a_floor_off():
    rows = {r["what"]: r for r in compare(_payload(yat128=78.5, floor=14.0))}
    assert rows["yat-frozen passes 79.0 % by m = 128"]["verdict"] == "differs"
    assert "0.50 points short" in rows["yat-frozen passes 79.0 % by m = 128"]["why"]
    assert rows["yat-frozen's fitted floor (error %)"]["difference"] == 1.6
