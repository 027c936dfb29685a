"""The command line: one-line errors with exit 2, the memo, and a real (tiny) ladder."""

from __future__ import annotations

import json
import shutil

import pytest

from lazylab import data
from cli_helpers import assert_one_line_error, lines, run

TINY = ["--train-size", "2048", "--epochs", "2", "--lr", "0.1", "--seeds", "0"]




def test_unknown_arm_names_the_available_ones(capsys, memo_dir):
    code, _, err = run(capsys, "ladder", "--arms", "yat-frozn")
    assert_one_line_error(code, err, "yat-frozn", "yat-frozen", "relu-trained")


@pytest.mark.parametrize("widths", ["0", "-3", "abc", "16,,", ""])
def test_bad_width(capsys, memo_dir, widths):
    code, _, err = run(capsys, "ladder", "--arms", "yat-frozen", "--widths", widths)
    assert_one_line_error(code, err, "--widths")


@pytest.mark.parametrize("arms", ["", ",", " "])
def test_empty_arms(capsys, memo_dir, arms):
    code, _, err = run(capsys, "ladder", "--arms", arms)
    assert_one_line_error(code, err, "--arms")


def test_missing_data_dir(capsys, memo_dir, tmp_path):
    code, _, err = run(capsys, "ladder", "--arms", "yat-frozen", "--data-dir", str(tmp_path / "nowhere"))
    assert_one_line_error(code, err, "nowhere")


def test_truncated_data_file(capsys, memo_dir, tmp_path):
    bad = tmp_path / "fm"
    bad.mkdir()
    for name in data.FILES.values():
        shutil.copy(data.DEBIAN_DIR / name, bad / name)
    blob = (bad / "train-labels-idx1-ubyte.gz").read_bytes()
    (bad / "train-labels-idx1-ubyte.gz").write_bytes(blob[: len(blob) // 2])
    code, _, err = run(capsys, "ladder", "--arms", "yat-frozen", "--widths", "8", *TINY, "--data-dir", str(bad))
    assert_one_line_error(code, err, "train-labels-idx1-ubyte.gz")


def test_ladder_runs_on_real_data_and_second_run_computes_nothing(capsys, memo_dir, tmp_path):
    out_json = tmp_path / "ladder.json"
    argv = ["ladder", "--arms", "yat-frozen,relu-frozen", "--widths", "8,64", *TINY, "--json", str(out_json)]
    code, out, err = run(capsys, *argv)
    assert code == 0
    assert "4 computed, 0 from the memo" in out
    # stderr is not a terminal here: plain progress lines, one per finished run, each with its result
    finished = [line for line in err.splitlines() if ": best " in line]
    assert len(finished) == 4 and lines(err) == [], err
    assert finished[-1].split("] ")[1].startswith("ladder 4/4") and "computed in" in finished[-1]
    assert "2 epochs on 2048 training images" in out and "(4 runs)" in out
    first = json.loads(out_json.read_text())
    cells = {a["arm"]: a["cells"] for a in first["arms"]}
    # each arm's unit and init are recorded, so the file draws right where its plugin is not installed
    assert [(a["arm"], a["unit"], a["init"]) for a in first["arms"]] == [("yat-frozen", "yat", "random"),
                                                                        ("relu-frozen", "relu", "random")]
    # Wider banks read out better even after one epoch on 512 images.
    assert cells["yat-frozen"]["64"]["mean"] > cells["yat-frozen"]["8"]["mean"]
    assert cells["relu-frozen"]["64"]["mean"] > 60.0
    code, out2, err2 = run(capsys, "-q", *argv)
    assert code == 0 and err2 == ""  # -q: no progress at all
    assert "0 computed, 4 from the memo" in out2
    second = json.loads(out_json.read_text())
    assert [r["best_acc"] for r in second["runs"]] == [r["best_acc"] for r in first["runs"]]
    assert out2.split("runs:")[0] == out.split("runs:")[0]  # the same table


def test_bracketing_picks_the_best_rate(capsys, memo_dir, tmp_path):
    out_json = tmp_path / "b.json"
    code, _, _ = run(capsys, "ladder", "--arms", "yat-frozen", "--widths", "32", "--seeds", "0",
                     "--epochs", "1", "--train-size", "1024", "--json", str(out_json))
    assert code == 0
    arm = json.loads(out_json.read_text())["arms"][0]
    assert set(arm["bracket"]) == {"0.03", "0.1", "0.3", "1.0"}
    best = max(arm["bracket"], key=lambda k: arm["bracket"][k])
    assert arm["lr"] == float(best)


def test_arms_lists_builtins_with_their_plugin(capsys):
    code, out, _ = run(capsys, "arms", "--json", "-")
    assert code == 0
    listing = {a["arm"]: a for a in json.loads(out)["arms"]}
    assert {"yat-frozen", "yat-data-frozen", "relu-frozen", "gaussian-frozen", "yat-trained",
            "yat-data-trained", "gaussian-trained", "relu-trained"} <= set(listing)
    assert listing["gaussian-frozen"]["init"] == "data"
    assert listing["yat-frozen"]["distribution"] == "lazylab"


def test_data_info_reports_real_counts_and_digests(capsys):
    code, out, _ = run(capsys, "data", "info", "--json", "-")
    assert code == 0
    info = json.loads(out)
    assert (info["train"], info["test"]) == (60000, 10000)
    assert all(f["verified"] for f in info["files"].values())


@pytest.mark.parametrize("option, value", [("--widths", "16,16"), ("--seeds", "0,1,0")])
def test_repeated_width_or_seed_is_refused(capsys, memo_dir, option, value):
    code, _, err = run(capsys, "ladder", "--arms", "yat-frozen", option, value)
    assert_one_line_error(code, err, option, "more than once")


def test_repeated_arm_is_refused(capsys, memo_dir):
    code, _, err = run(capsys, "ladder", "--arms", "yat-frozen,relu-frozen,yat-frozen")
    assert_one_line_error(code, err, "--arms", "yat-frozen is given more than once")


def test_data_seeded_width_beyond_the_training_images_is_refused_before_training(capsys, memo_dir):
    code, out, err = run(capsys, "ladder", "--arms", "relu-frozen,yat-data-frozen", "--widths", "16,600",
                         "--seeds", "0", "--epochs", "1", "--train-size", "512")
    assert_one_line_error(code, err, "yat-data-frozen: width 600 exceeds the 512 training images")
    assert "computed" not in out + err  # nothing was trained first


@pytest.mark.parametrize("argv", [
    ["ladder", "--arms", "yat-frozen", "--widths", "8", *TINY, "--json", "/proc/lazylab/x.json"],
    ["ladder", "--arms", "yat-frozen", "--widths", "8", *TINY, "--csv", "/proc/lazylab/x.csv"],
    ["ladder", "--arms", "yat-frozen", "--widths", "8", *TINY, "--out", "/proc/lazylab"],
    ["gram", "--max-units", "8", "--frames", "3", "--out", "/proc/lazylab"],
    ["readout", "--widths", "8", "--steps", "2", "--out", "/proc/lazylab"],
])
def test_unwritable_output_fails_before_any_work(capsys, memo_dir, argv):
    code, _, err = run(capsys, *argv)
    assert_one_line_error(code, err, "/proc/lazylab")
    if memo_dir.exists():  # nothing was computed or stored
        from lazylab.cache import Memo

        assert len(Memo(memo_dir)) == 0


def test_huge_rate_is_refused_and_a_bad_run_still_writes_strict_json(capsys, memo_dir, tmp_path):
    code, _, err = run(capsys, "ladder", "--arms", "yat-trained", "--lr", "1e308")
    assert_one_line_error(code, err, "--lr")
    out_json = tmp_path / "d.json"
    code, _, _ = run(capsys, "ladder", "--arms", "yat-trained", "--widths", "8", "--seeds", "0", "--epochs", "1",
                     "--train-size", "512", "--lr", "1e6", "--json", str(out_json))
    assert code == 0
    text = out_json.read_text()
    assert "NaN" not in text and "Infinity" not in text  # strict JSON


def test_unknown_arm_under_lazylab_arms_says_why(capsys, memo_dir, monkeypatch):
    from lazylab.arms import reset_registry

    monkeypatch.setenv("LAZYLAB_ARMS", "relu")
    reset_registry()
    try:
        code, _, err = run(capsys, "ladder", "--arms", "yat-frozen")
    finally:
        monkeypatch.undo()  # the pinned units again (conftest)
        reset_registry()
    assert_one_line_error(code, err, "yat-frozen", "LAZYLAB_ARMS=relu", "relu-frozen")


def test_json_dash_prints_the_results_alone_on_stdout_and_writes_no_file_named_dash(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "ladder", "--arms", "yat-frozen", "--widths", "8,16", "--seeds", "0", "--epochs", "1",
                         "--lr", "0.1", "--train-size", "256", "--json", "-", "--no-figures", "--cache-dir", tmp_path / "m")
    assert code == 0, err
    payload = json.loads(out)  # stdout is the JSON and nothing else
    assert [r["config"]["width"] for r in payload["runs"]] == [8, 16]
    # no table anywhere: stderr holds progress lines and the ladder's warnings (kept, since stdout is JSON)
    assert "best_acc (%)" not in err and all(line.startswith("warning: ") for line in lines(err)), err
    assert not (tmp_path / "-").exists() and not (tmp_path / "-.csv").exists()

def _commands(group, prefix=()):
    """Every (path, command) under ``group``, groups included."""
    import click

    for name, command in sorted(group.commands.items()):
        yield (*prefix, name), command
        if isinstance(command, click.Group):
            yield from _commands(command, (*prefix, name))


def test_every_option_has_help_and_every_command_ends_its_help_with_examples():
    import click

    from lazylab.cli import cli

    found = list(_commands(cli))
    assert {"ladder", "gram", "readout", "trajectory", "ntk", "render", "arms", "runs"} <= {p[0] for p, _ in found}
    for path, command in found:
        for param in command.params:
            if isinstance(param, click.Option):
                assert param.help and len(param.help) > 8, (path, param.name)
        if isinstance(command, click.Group):
            continue  # its commands carry the examples
        text = command.get_help(click.Context(command, info_name=" ".join(path)))
        assert "Examples:" in text and text.count("lazylab ") >= 2, path


def test_ladder_help_shows_each_presets_values_as_the_presets_hold_them():
    from lazylab.experiments.ladder import PRESETS, LadderPlan
    from lazylab.arms import get_arm

    code_text = __import__("lazylab.cli.ladder", fromlist=["ladder"]).ladder.help
    rows = {line.split()[0]: line for line in code_text.splitlines() if line.split() and line.split()[0] in PRESETS}
    for name, p in PRESETS.items():
        row = rows[name]
        widths = p["widths"]
        shown = f"{widths[0]},{widths[1]},...,{widths[-1]}" if len(widths) > 4 else ",".join(map(str, widths))
        runs = LadderPlan(arms=tuple(get_arm(a) for a in p["arms"]), widths=widths, seeds=p["seeds"]).n_runs()
        # runs: "low-high" with the brackets' grid extensions (the whole range is checked in test_docs.py)
        assert row.split()[-4:-1] == [shown, ",".join(map(str, p["seeds"])), str(p["epochs"])], row
        assert row.split()[-1].split("-")[0] == str(runs), row


@pytest.mark.parametrize("text, expected", [
    ("8,16,32", (8, 16, 32)), ("8,16,...,128", (8, 16, 32, 64, 128)), ("10,15,...,30", (10, 15, 20, 25, 30)),
    ("2,6,...,54", (2, 6, 18, 54)),
    ("0-2", (0, 1, 2)), ("0-2,5", (0, 1, 2, 5)), ("16,32,...,8192", (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)),
])
def test_one_list_syntax_expands_progressions_and_ranges(text, expected):
    from lazylab.cli.options import parse_int_list

    assert parse_int_list(text) == expected


@pytest.mark.parametrize("text, needle", [
    ("8,16,...,100", "not on the progression"), ("10,20,...,50", "not on the progression"), ("5-2", "backwards"), ("8,...,16", "a,b,...,z"),
    ("0-200000", "more than"), ("a,b", "expected integers"),
])
def test_a_bad_list_is_one_line_naming_the_problem(text, needle, capsys):
    code, _, err = run(capsys, "readout", "--widths", text)
    assert_one_line_error(code, err, "--widths", needle)


def test_json_never_replaces_a_device_a_fifo_or_a_symbolic_link(capsys, tmp_path):
    import os

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    code, _, err = run(capsys, "arms", "--json", fifo)
    assert_one_line_error(code, err, "--json", "not a regular file")
    assert fifo.is_fifo()
    code, _, err = run(capsys, "data", "info", "--json", "/dev/null")
    assert_one_line_error(code, err, "--json", "/dev/null", "not a regular file")
    target, link = tmp_path / "arms.json", tmp_path / "link.json"
    target.write_text("{}")
    link.symlink_to(target)
    code, _, err = run(capsys, "arms", "--json", link)
    assert code == 0, err
    assert link.is_symlink() and "yat-frozen" in target.read_text()  # written through the link
