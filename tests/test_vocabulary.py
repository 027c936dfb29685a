"""Issue 31, point 5: one vocabulary, safe defaults.

Both spellings of --arm(s), --width(s) and --seed(s) where users type either (help shows the
canonical one); -q/-v after the subcommand too; `cache info --json`; "did you mean" for a
mistyped arm; a computing command estimated over 10 minutes asks on a terminal (--yes skips;
no terminal: the one-line estimate, and it goes on). Everything in process, nothing trained.
"""

from __future__ import annotations

import io
import json
import types

import click
import pytest
from cli_helpers import assert_one_line_error, lines, run

from lazylab.cli import cli, plan, progress
from lazylab.cli.options import AliasedOption, did_you_mean


def leaf_commands(group=cli, path=()):
    for name, cmd in sorted(group.commands.items()):
        if isinstance(cmd, click.Group):
            yield from leaf_commands(cmd, (*path, name))
        else:
            yield (*path, name), cmd


LEAVES = list(leaf_commands())


def options_of(cmd) -> dict[str, click.Option]:
    return {opt: p for p in cmd.params if isinstance(p, click.Option) for opt in p.opts}


# --------------------------------------------------------------------------- both spellings


@pytest.mark.parametrize("spelling", [
    ["--arm", "yat-frozen", "--width", "16"],
    ["--arms", "yat-frozen", "--widths", "16"],
    ["--arm", "yat-frozen", "--widths", "16", "--seed", "0"],
    ["--arms", "yat-frozen", "--width", "16", "--seeds", "0"],
])
def test_runs_takes_either_spelling(capsys, memo_dir, spelling):
    code, out, err = run(capsys, "runs", *spelling, "--json", "-")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["filters"]["arm"] == ["yat-frozen"] and doc["filters"]["width"] == [16]


def test_runs_filters_are_lists_in_either_spelling(capsys, memo_dir):
    code, out, err = run(capsys, "runs", "--arm", "yat-frozen,relu-frozen", "--width", "16,32", "--seeds", "0-2",
                         "--kind", "run", "--json", "-")
    assert code == 0, err
    assert json.loads(out)["filters"] == {"arm": ["yat-frozen", "relu-frozen"], "width": [16, 32], "seed": [0, 1, 2],
                                          "kind": ["run"]}
    code, out, err = run(capsys, "runs", "--seed", "0", "--seeds", "0")  # one option, whatever its spelling
    assert_one_line_error(code, err, "0 is given more than once")


def _dry_run(capsys, *argv):
    code, out, err = run(capsys, *argv, "--dry-run", "--json", "-")
    assert code == 0, err
    return json.loads(out)


@pytest.mark.parametrize("command, singular, plural", [
    (["ladder", "--epochs", "1", "--lr", "0.1", "--train-size", "256"],
     ["--arm", "yat-frozen", "--width", "8", "--seed", "1"], ["--arms", "yat-frozen", "--widths", "8", "--seeds", "1"]),
    (["trajectory", "--epochs", "1", "--lr", "0.1", "--train-size", "256", "--snapshots", "1"],
     ["--arm", "yat-trained", "--width", "8", "--seed", "3"], ["--arms", "yat-trained", "--widths", "8", "--seeds", "3"]),
    (["readout", "--steps", "2", "--train-size", "256"],
     ["--arm", "relu-frozen", "--width", "8", "--seed", "2"], ["--arms", "relu-frozen", "--widths", "8", "--seeds", "2"]),
    (["gram", "--max-units", "8", "--frames", "2"], ["--arm", "relu-frozen", "--seed", "2"],
     ["--arms", "relu-frozen", "--seeds", "2"]),
    (["redundancy", "--images", "64", "--fan-in", "unit", "--sample", "first-n"],
     ["--arm", "yat-frozen", "--width", "8", "--seed", "1"], ["--arms", "yat-frozen", "--widths", "8", "--seeds", "1"]),
])
def test_singular_and_plural_spellings_plan_the_same_work(capsys, memo_dir, command, singular, plural):
    assert _dry_run(capsys, *command, *singular)["runs"] == _dry_run(capsys, *command, *plural)["runs"]


def test_the_vocabulary_is_the_same_in_every_command():
    """Wherever a command takes arms, widths or seeds, both spellings name one option, except ntk lab,
    whose --widths (a sweep) and --seed/--sweep-seeds are other options than --width and --seed."""
    pairs = (("--arm", "--arms"), ("--width", "--widths"), ("--seed", "--seeds"))
    checked = 0
    for path, cmd in LEAVES:
        opts = options_of(cmd)
        for one, many in pairs:
            if path in (("ntk", "lab"), ("verify",)) or not ({one, many} & set(opts)):
                continue
            assert opts.get(one) is not None and opts.get(one) is opts.get(many), (path, one, many)
            checked += 1
    assert checked >= 20
    lab = options_of(cli.commands["ntk"].commands["lab"])
    assert lab["--width"] is not lab["--widths"] and "--seeds" not in lab


def test_help_shows_the_canonical_spelling_only(capsys):
    code, out, _ = run(capsys, "runs", "--help")
    assert code == 0
    listed = {line.split()[0] for line in out.splitlines() if line.startswith("  --")}
    assert {"--arms", "--widths", "--seeds", "--kinds"} <= listed and not {"--arm", "--width", "--seed"} & listed
    code, out, _ = run(capsys, "gram", "--help")
    listed = {line.split()[0] for line in out.splitlines() if line.startswith("  --")}
    assert {"--arm", "--seed"} <= listed and not {"--arms", "--seeds"} & listed
    for path, cmd in LEAVES:  # and every aliased option's help record names its first spelling alone
        ctx = click.Context(cmd)
        for p in cmd.params:
            if isinstance(p, AliasedOption):
                names = p.get_help_record(ctx)[0].split()[0]
                assert names == p.opts[0], (path, names)


@pytest.mark.parametrize("argv, hint", [
    (["runs", "--seed", "0", "--seed", "0"], "Invalid value for '--seeds': 0 is given more than once"),
    (["trajectory", "--widths", "64,128", "--dry-run"], "Invalid value for '--width': '64,128' is not a valid integer"),
    (["ladder", "--width", "0", "--dry-run"], "Invalid value for '--widths': 0 is below the minimum 1"),
])
def test_errors_name_the_canonical_spelling(capsys, memo_dir, argv, hint):
    code, _, err = run(capsys, *argv)
    assert_one_line_error(code, err, hint)


# --------------------------------------------------------------------------- -q / -v anywhere


@pytest.mark.parametrize("argv, level", [
    (["-q", "ladder"], progress.QUIET), (["ladder", "-q"], progress.QUIET), (["ladder", "--quiet"], progress.QUIET),
    (["-v", "ladder"], progress.VERBOSE), (["ladder", "-v"], progress.VERBOSE), (["ladder"], progress.NORMAL),
    (["-q", "ladder", "-q"], progress.QUIET),
])
def test_quiet_and_verbose_before_or_after_the_subcommand(capsys, memo_dir, argv, level):
    progress.verbosity = progress.VERBOSE if level != progress.VERBOSE else progress.QUIET  # a stale value
    code, _, err = run(capsys, *argv, "--preset", "quick", "--dry-run")
    assert code == 0, err
    assert progress.verbosity == level


@pytest.mark.parametrize("argv", [["-q", "ladder", "-v"], ["ladder", "-v", "-q"], ["-q", "-v", "ladder"]])
def test_quiet_and_verbose_together_are_one_line(capsys, memo_dir, argv):
    code, _, err = run(capsys, *argv, "--preset", "quick", "--dry-run")
    assert_one_line_error(code, err, "-q and -v contradict each other")


def test_every_command_takes_quiet_and_verbose():
    for path, cmd in LEAVES:
        assert {"-q", "--quiet", "-v", "--verbose"} <= set(options_of(cmd)), path
    for group in (cli, *(c for c in cli.commands.values() if isinstance(c, click.Group))):
        assert {"-q", "-v"} <= set(options_of(group)), group.name


def test_quiet_after_the_subcommand_silences_the_estimate_line(capsys, memo_dir, monkeypatch):
    monkeypatch.setattr(plan, "stdin_is_terminal", lambda: False)
    _stop_before_training(monkeypatch)
    code, _, err = run(capsys, "ladder", "-q")
    assert_one_line_error(code, err, "stopped before training")


# --------------------------------------------------------------------------- cache info --json


def test_cache_info_json(capsys, memo_dir, tmp_path):
    code, out, err = run(capsys, "cache", "info", "--json", "-")
    assert code == 0, err
    doc = json.loads(out)  # stdout holds the JSON alone
    assert doc["memo"]["directory"] == str(memo_dir) and doc["memo"]["entries"] == 0
    assert set(doc) == {"memo", "features", "compiled_programs", "problems"}
    assert doc["features"]["entries"] == 0 and isinstance(doc["compiled_programs"]["programs"], int)
    path = tmp_path / "info.json"
    code, out, err = run(capsys, "cache", "info", "--json", path)
    assert code == 0 and json.loads(path.read_text()) == doc and str(memo_dir) in out
    code, _, err = run(capsys, "cache", "info", "--json", tmp_path)  # a folder
    assert_one_line_error(code, err, "'--json'")


# --------------------------------------------------------------------------- did you mean


@pytest.mark.parametrize("argv, typo, meant", [
    (["ladder", "--arms", "yat-frozn", "--dry-run"], "yat-frozn", "yat-frozen"),
    (["ladder", "--arms", "relu-frozen,gausian-frozen", "--dry-run"], "gausian-frozen", "gaussian-frozen"),
    (["trajectory", "--arms", "yat-trainde", "--dry-run"], "yat-trainde", "yat-trained"),
    (["redundancy", "--arm", "yat-data-frozn", "--dry-run"], "yat-data-frozn", "yat-data-frozen"),
    (["gram", "--arm", "relu-frozn", "--dry-run"], "relu-frozn", "relu-frozen"),
    (["readout", "--arm", "yat-frozn", "--dry-run"], "yat-frozn", "yat-frozen"),
    (["ntk", "arm", "--arm", "yat-traind", "--width", "8", "--dry-run"], "yat-traind", "yat-trained"),
    (["render", "figures", "--arms", "yat-frozn", "--dry-run"], "yat-frozn", "yat-frozen"),
    (["runs", "--arm", "yat-frozn"], "yat-frozn", "yat-frozen"),
])
def test_a_mistyped_arm_gets_did_you_mean(capsys, memo_dir, argv, typo, meant):
    code, _, err = run(capsys, *argv)
    line = assert_one_line_error(code, err, f"unknown arm '{typo}' (did you mean '{meant}'?)")
    assert line.startswith(f"error: unknown arm '{typo}' (did you mean")


def test_a_name_close_to_nothing_gets_no_suggestion(capsys, memo_dir):
    code, _, err = run(capsys, "ladder", "--arms", "zzzz", "--dry-run")
    line = assert_one_line_error(code, err, "unknown arm 'zzzz'")
    assert "did you mean" not in line


def test_did_you_mean_keeps_the_rest_of_the_message():
    msg = "unknown arm 'yat-frozn'; available: yat-frozen, relu-frozen"
    assert did_you_mean(msg, "yat-frozn", ["yat-frozen", "relu-frozen"]) == (
        "unknown arm 'yat-frozn' (did you mean 'yat-frozen'?); available: yat-frozen, relu-frozen")
    assert did_you_mean("something else", "yat-frozn", ["yat-frozen"]) == "something else"


# --------------------------------------------------------------------------- a long job asks first


class Stop(Exception):
    pass


def _stop_before_training(monkeypatch):
    """``ladder`` stops with one line where it would start training (nothing is trained in these tests)."""
    from lazylab.cli import ladder
    from lazylab.errors import LazylabError

    def sweep(*args, **kw):
        raise LazylabError("stopped before training")

    monkeypatch.setattr(ladder, "sweep", sweep)


def _terminal(monkeypatch, answer: str):
    monkeypatch.setattr(plan, "stdin_is_terminal", lambda: True)
    monkeypatch.setattr("sys.stdin", io.StringIO(answer))


def test_a_bare_ladder_asks_on_a_terminal_and_no_changes_nothing(capsys, memo_dir, monkeypatch):
    _terminal(monkeypatch, "n\n")
    _stop_before_training(monkeypatch)
    code, out, err = run(capsys, "ladder")
    assert code == 1, err
    assert "estimate: ladder: 300-348 runs" in err and "Start? (--yes does not ask)" in err
    assert err.endswith("[y/N]: aborted: nothing was changed\n")  # a terminal echoes the answer and its newline
    code, out, _ = run(capsys, "runs", "--json", "-")
    assert json.loads(out)["count"] == 0


def test_a_yes_answer_goes_on(capsys, memo_dir, monkeypatch):
    _terminal(monkeypatch, "y\n")
    _stop_before_training(monkeypatch)
    code, _, err = run(capsys, "ladder")
    assert "Start?" in err and "stopped before training" in err and code == 2


@pytest.mark.parametrize("argv", [["ladder", "--yes"], ["ladder", "--yes", "-q"]])
def test_yes_does_not_ask(capsys, memo_dir, monkeypatch, argv):
    _terminal(monkeypatch, "")  # a question would read end of file: aborted, exit 1
    _stop_before_training(monkeypatch)
    code, _, err = run(capsys, *argv)
    assert "Start?" not in err
    assert_one_line_error(code, "\n".join(line for line in err.splitlines() if not line.startswith("estimate: ")),
                          "stopped before training")
    assert ("estimate: ladder: 300-348 runs" in err) == ("-q" not in argv)


def test_no_terminal_proceeds_with_the_first_line_estimate(capsys, memo_dir, monkeypatch):
    monkeypatch.setattr(plan, "stdin_is_terminal", lambda: False)
    _stop_before_training(monkeypatch)
    code, _, err = run(capsys, "ladder")
    found = lines(err)
    assert code == 2 and len(found) == 2, err
    assert found[0].startswith("estimate: ladder: 300-348 runs") and found[1] == "error: stopped before training"


def test_a_short_job_never_asks(capsys, memo_dir, monkeypatch):
    _terminal(monkeypatch, "")
    _stop_before_training(monkeypatch)
    code, _, err = run(capsys, "ladder", "--preset", "quick")
    assert "Start?" not in err and "estimate:" not in err
    assert_one_line_error(code, err, "stopped before training")


def test_every_command_that_plans_takes_yes():
    """--yes wherever a command prints its plan first (--dry-run), except verify, which never asks."""
    planned = [path for path, cmd in LEAVES if "--dry-run" in options_of(cmd) and path != ("verify",)]
    assert len(planned) >= 10
    for path in planned:
        assert "--yes" in options_of(dict(LEAVES)[path]), path


@pytest.mark.parametrize("terminal, yes, quiet, asked, printed", [
    (True, False, False, True, False), (True, False, True, True, False), (True, True, False, False, True),
    (False, False, False, False, True), (False, False, True, False, False), (True, True, True, False, False),
])
def test_announce(monkeypatch, capsys, terminal, yes, quiet, asked, printed):
    monkeypatch.setattr(plan, "stdin_is_terminal", lambda: terminal)
    monkeypatch.setattr(plan, "summary", lambda est: "a long job")
    monkeypatch.setattr(progress, "verbosity", progress.QUIET if quiet else progress.NORMAL)
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    with click.Context(cli) as ctx:
        if yes:
            ctx.meta[plan.YES] = True
        plan.announce(types.SimpleNamespace(seconds=plan.ANNOUNCE_S + 1))
        plan.announce(types.SimpleNamespace(seconds=plan.ANNOUNCE_S))  # not over: nothing
    err = capsys.readouterr().err
    assert ("Start?" in err) == asked
    assert (err.strip() == "estimate: a long job; --dry-run shows the plan") == printed


def test_a_no_aborts(monkeypatch):
    monkeypatch.setattr(plan, "stdin_is_terminal", lambda: True)
    monkeypatch.setattr(plan, "summary", lambda est: "a long job")
    monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))
    with click.Context(cli), pytest.raises(click.exceptions.Abort):
        plan.announce(types.SimpleNamespace(seconds=plan.ANNOUNCE_S + 1))
