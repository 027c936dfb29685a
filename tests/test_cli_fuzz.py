"""Property-based CLI tests (issue 10, point 8): no option value ever ends in a traceback.

Every run goes through ``lazylab.cli.main`` in this process, exactly as the
console script does, and must end cleanly: status 0, or status 2 with one
line ``error: ...`` on stderr. Status 1 is what ``main`` gives an unexpected
exception ("internal error"), so a bug fails these tests instead of hiding.

Two kinds of test:
* every leaf command found in the click tree (new commands are picked up
  automatically) gets generated option sets holding at least one invalid
  value, so nothing is computed and the error must be one line;
* the commands users type most (ladder, gram, readout, arms, data, cache) also
  get valid values, kept tiny (a few units, 256 images, one epoch) and backed
  by one memo per test, so a valid draw trains seconds at most.
"""

from __future__ import annotations

import socket

import click
import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from cli_helpers import fuzz
from lazylab import data
from lazylab.cli import cli, main
from lazylab.cli.options import MAX_SEED, IntList

pytestmark = pytest.mark.skipif(
    not all((data.DEBIAN_DIR / n).is_file() for n in data.FILES.values()),
    reason="Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)",
)

@pytest.fixture(scope="module")
def place(tmp_path_factory):
    """Shared paths: a memo, an output root, a bad data dir, a plain file and a closed local port."""
    root = tmp_path_factory.mktemp("fuzz")
    bad = root / "bad-data"
    bad.mkdir()
    for name in list(data.FILES.values())[:3]:  # the test labels are missing
        (bad / name).symlink_to(data.DEBIAN_DIR / name)
    (root / "a-file").write_text("not a directory")
    with socket.socket() as s:  # a port nobody listens on once this socket is closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LAZYLAB_OUT", str(root / "out"))
        mp.setenv("LAZYLAB_CACHE", str(root / "memo"))
        mp.delenv("LAZYLAB_DATA", raising=False)
        yield {"root": root, "memo": root / "memo", "bad": bad, "file": root / "a-file", "port": port}


def invoke(capsys, argv: list[str]):
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in argv])
    captured = capsys.readouterr()
    return exc.value.code, captured.out, captured.err


def assert_clean(code, out, err, argv, drawn: bool = True) -> None:
    """Success, or status 2 with exactly one ``error:`` line; never a traceback (``drawn``: inside a hypothesis test)."""
    if drawn:
        event(f"exit {code}")  # the mix of outcomes shows under --hypothesis-show-statistics
    assert "Traceback" not in err + out, (argv, err)
    assert code in (0, 2), (argv, code, err)
    if code == 2:
        found = [line for line in err.splitlines() if line.strip()]
        assert len(found) == 1 and found[0].startswith("error: "), (argv, err)


def args_from(options: dict) -> list[str]:
    """``{"--x": "1", "--flag": True, "--skip": None}`` -> ``["--x", "1", "--flag"]``."""
    argv = []
    for opt, value in options.items():
        if value is True:
            argv.append(opt)
        elif value is not None and value is not False:
            argv += [opt, value]
    return argv


def options(valid: dict, invalid: dict, always: dict | None = None):
    """Option sets: all valid, one field bad, or every field a free mix, in about equal parts.

    ``valid`` and ``invalid`` map each option to token lists; ``None`` stands for "not given".
    """
    fields = list(valid)

    @st.composite
    def draw(draw_):
        mode = draw_(st.sampled_from(["valid", "one-bad", "mixed"]))
        bad = draw_(st.sampled_from([f for f in fields if invalid.get(f)])) if mode == "one-bad" else None
        chosen = {}
        for f in fields:
            if mode == "valid":
                pool = valid[f]
            elif mode == "one-bad":
                pool = invalid[f] if f == bad else valid[f]
            else:
                pool = valid[f] + invalid.get(f, [])
            chosen[f] = draw_(st.sampled_from(pool))
        for f, pool in (always or {}).items():
            chosen[f] = draw_(st.sampled_from(pool))
        return chosen

    return draw()


# --------------------------------------------------------------------------- every command, invalid values


def leaf_commands(group=cli, path=()):
    for name in sorted(group.commands):
        cmd = group.commands[name]
        if isinstance(cmd, click.Group):
            yield from leaf_commands(cmd, (*path, name))
        else:
            yield (*path, name), cmd


def invalid_tokens(param: click.Parameter) -> list[str]:
    """Values click must refuse for this option's type (empty if the type accepts anything)."""
    t = param.type
    if isinstance(t, (click.IntRange, click.FloatRange)):
        step = 1 if isinstance(t, click.IntRange) else 1.0
        bounds = []
        if not t.clamp and t.min is not None:
            bounds.append(str(t.min if t.min_open else t.min - step))
        if not t.clamp and t.max is not None:
            bounds.append(str(t.max if t.max_open else t.max + step))
        return bounds + ["not-a-number"] + special_tokens(param)
    if isinstance(t, (click.types.IntParamType, click.types.FloatParamType, IntList)):
        return ["not-a-number", ""] + special_tokens(param)
    if isinstance(t, click.Choice):
        return ["not-a-choice"]
    return special_tokens(param)


LONG_NAME = "x" * 300  # one path component over the 255 bytes file systems allow


def special_tokens(param: click.Parameter) -> list[str]:
    """The values issue 24 found getting through: huge seeds, non-finite floats, empty and over-long paths."""
    t = param.type
    if "seed" in param.name and isinstance(t, (click.IntRange, IntList)):
        return [str(MAX_SEED + 1), "99999999999999999999999"]
    if isinstance(t, click.types.FloatParamType):  # FloatRange included
        return ["nan", "inf", "-inf"]
    if isinstance(t, click.Path):
        return ["", f"/tmp/{LONG_NAME}/x", LONG_NAME]
    return []


LEAVES = list(leaf_commands())


def test_every_command_is_driven():
    names = {" ".join(p) for p, _ in LEAVES}
    assert {"arms", "data info", "data fetch", "cache info", "cache clear", "ladder"} <= names


@fuzz(60)
@given(st.data())
def test_any_command_with_an_invalid_value_is_one_line(capsys, place, drawn):
    path, cmd = drawn.draw(st.sampled_from(LEAVES), label="command")
    opts = [p for p in cmd.params if isinstance(p, click.Option) and not p.is_flag and not p.hidden]
    bad_able = [p for p in opts if invalid_tokens(p)]
    argv = list(path)
    if bad_able:
        for p in drawn.draw(st.lists(st.sampled_from(bad_able), min_size=1, max_size=3, unique_by=lambda p: p.name)):
            argv += [p.opts[0], drawn.draw(st.sampled_from(invalid_tokens(p)))]
    else:  # nothing to get wrong in a value: an option that does not exist
        argv.append(drawn.draw(st.sampled_from(["--no-such-option", "--jsn", "-z"])))
    flags = [p.opts[0] for p in cmd.params if isinstance(p, click.Option) and p.is_flag and "--help" not in p.opts]
    argv += drawn.draw(st.lists(st.sampled_from(flags), unique=True, max_size=2)) if flags else []
    code, out, err = invoke(capsys, argv)
    assert_clean(code, out, err, argv)
    assert code == 2, (argv, out)


def test_every_seed_has_the_ladders_range():
    """One range for every seed: 0 to 2**32 - 1 (jax keys hold 32 bits), or within it (gram's reference seeds)."""
    seeds = [(path, p) for path, cmd in LEAVES for p in cmd.params if "seed" in p.name and p.name != "sweep_seeds"]
    assert len(seeds) >= 6
    for path, p in seeds:
        assert p.type.min == 0 if isinstance(p.type, click.IntRange) else p.type.minimum == 0, (path, p.name)
        top = p.type.max if isinstance(p.type, click.IntRange) else p.type.maximum
        assert top is not None and top <= MAX_SEED, (path, p.name)


@pytest.mark.parametrize("path, cmd", LEAVES, ids=[" ".join(p) for p, _ in LEAVES])
def test_huge_seeds_non_finite_floats_and_long_paths_are_one_line_everywhere(capsys, place, monkeypatch, path, cmd):
    """Every option of every command, alone, with each value of ``special_tokens``: exit 2 naming that option."""
    monkeypatch.setenv("LAZYLAB_DATA", str(place["bad"]))  # should a value get through, fail fast on the data
    tried = 0
    for p in cmd.params:
        if not isinstance(p, click.Option) or p.is_flag or p.hidden:
            continue
        for token in special_tokens(p):
            argv = [*path, p.opts[0], token]
            code, out, err = invoke(capsys, argv)
            assert_clean(code, out, err, argv, drawn=False)
            assert code == 2 and f"'{p.opts[0]}'" in err, (argv, err)
            tried += 1
    assert tried or not [p for p in cmd.params if isinstance(p, click.Option) and special_tokens(p)]


# --------------------------------------------------------------------------- ladder


def ladder_options(place):
    root = place["root"]
    valid = {
        "--arms": ["yat-frozen", "relu-frozen"],
        "--widths": ["8", "8,16"],
        "--seeds": ["0"],
        "--epochs": ["1"],
        "--train-size": ["256"],
        "--lr": ["0.1", "0.1", None],  # None: bracketing at m = 256 over the arm's grid
        "--fan-in": [None, "unit", "d"],
        "--preset": [None, "quick"],
        "--json": [None, str(root / "ladder.json")],
        "--no-figures": [True, True, False],
        "--climb-widths": [None, "8,16"],
        "--climb-gain": [None, "0.5"],
        "--data-dir": [None],
    }
    invalid = {
        "--arms": ["yat-frozn", "", ",", "yat-frozen,bogus", "YAT-FROZEN", "-frozen", "yat-frozen;rm -rf /"],
        "--widths": ["0", "-1", "abc", "", "8,,16", "65537", "1e3", "8;16", "99999999999999999999999"],
        "--seeds": ["-1", "x", "4294967296", "", "0.5"],
        "--epochs": ["0", "1001", "one", "-3", ""],
        "--train-size": ["255", "60001", "abc", "0"],
        "--lr": ["0", "-1", "nan", "inf", "-inf", "abc", ""],
        "--fan-in": ["bogus", "D", ""],
        "--preset": ["nope", ""],
        "--json": [str(root / "no-such-dir" / "x.json"), str(root), "", str(root / LONG_NAME / "x.json")],
        "--climb-widths": ["0", "x", ""],
        "--climb-gain": ["nan", "inf", "-1"],
        "--data-dir": [str(place["bad"]), str(root / "nowhere"), str(place["file"]), "", str(root / LONG_NAME)],
    }
    return options(valid, invalid, always={"--cache-dir": [str(place["memo"])]})


@pytest.mark.slow
@fuzz(25)
@given(st.data())
def test_ladder_never_shows_a_traceback(capsys, place, drawn):
    argv = ["ladder", *args_from(drawn.draw(ladder_options(place)))]
    assert_clean(*invoke(capsys, argv), argv)


# --------------------------------------------------------------------------- gram, readout


def _present(name: str) -> bool:
    return name in cli.commands


@pytest.mark.slow
@pytest.mark.skipif(not _present("gram"), reason="no gram command yet")
@fuzz(10)
@given(st.data())
def test_gram_never_shows_a_traceback(capsys, place, drawn):
    valid = {
        "--arm": ["yat-frozen", "relu-frozen"],
        "--max-units": ["8"],
        "--frames": ["2", "3"],
        "--per-class": ["2"],
        "--ref-units": ["32"],
        "--fit-min": ["1"],
        "--images": ["0,1,7", None],
        "--seed": ["0", None],
    }
    invalid = {
        "--arm": ["yat-trained", "bogus", ""],
        "--max-units": ["0", "x", "65537"],
        "--frames": ["0", "501", "x"],
        "--per-class": ["1", "201", "x"],
        "--ref-units": ["0", "16", "x"],
        "--fit-min": ["0", "x"],
        "--images": ["bogus", "99", "", ",", "0,0,0"],
        "--seed": ["-1", "x"],
    }
    argv = ["gram", *args_from(drawn.draw(options(valid, invalid, always={
        "--cache-dir": [str(place["memo"])], "--out": [str(place["root"] / "gram"), str(place["file"])]})))]
    assert_clean(*invoke(capsys, argv), argv)


@pytest.mark.slow
@pytest.mark.skipif(not _present("readout"), reason="no readout command yet")
@fuzz(10)
@given(st.data())
def test_readout_never_shows_a_traceback(capsys, place, drawn):
    valid = {
        "--arm": ["yat-frozen"],
        "--widths": ["8,16", "8"],
        "--train-size": ["256"],
        "--steps": ["2"],
        "--eval-every": ["1", "2"],
        "--lr": ["0.3", None],
        "--seed": ["0", None],
    }
    invalid = {
        "--arm": ["relu-trained", "bogus", ""],
        "--widths": ["0", "8,8", "x", ""],
        "--train-size": ["0", "60001", "x"],
        "--steps": ["0", "x"],
        "--eval-every": ["0", "x"],
        "--lr": ["0", "nan", "inf", "x"],
        "--seed": ["-1", "4294967296"],
    }
    argv = ["readout", *args_from(drawn.draw(options(valid, invalid, always={
        "--cache-dir": [str(place["memo"])], "--out": [str(place["root"] / "readout")]})))]
    assert_clean(*invoke(capsys, argv), argv)


# --------------------------------------------------------------------------- arms, data, cache


@pytest.mark.slow
@fuzz(6)
@given(st.sampled_from([[], ["--json", "-"], ["--check"], ["--json", "-", "--check"]]))
def test_arms_never_shows_a_traceback(capsys, place, flags):
    argv = ["arms", *flags]
    code, out, err = invoke(capsys, argv)
    assert_clean(code, out, err, argv)
    assert code == 0


@fuzz(10)
@given(st.data())
def test_data_info_never_shows_a_traceback(capsys, place, drawn):
    root = place["root"]
    argv = ["data", "info", *args_from({
        "--data-dir": drawn.draw(st.sampled_from([None, str(place["bad"]), str(root / "nowhere"), str(place["file"]),
                                                  str(data.DEBIAN_DIR)])),
        "--cache-dir": drawn.draw(st.sampled_from([None, str(place["memo"]), str(place["file"])])),
        "--json": drawn.draw(st.sampled_from([None, "-", str(place["root"] / "info.json")])),
    })]
    assert_clean(*invoke(capsys, argv), argv)


@fuzz(15)
@given(st.data())
def test_data_fetch_never_shows_a_traceback(capsys, place, drawn):
    """Downloads only from a closed local port, malformed URLs, or the local Debian copy (file://)."""
    root, port = place["root"], place["port"]
    argv = ["data", "fetch", *args_from({
        "--out": drawn.draw(st.sampled_from([str(root / "fetched"), str(place["file"]), str(place["file"] / "sub")])),
        "--base-url": drawn.draw(st.sampled_from([
            f"http://127.0.0.1:{port}", f"http://127.0.0.1:{port}/mirror/", f"ftp://127.0.0.1:{port}/",
            "not a url", "http://[::1", "file:///nonexistent/", data.DEBIAN_DIR.as_uri() + "/"])),
        "--timeout": drawn.draw(st.sampled_from([None, "0.5", "0", "-1", "abc", "nan", "inf", "1e308"])),
    })]
    assert_clean(*invoke(capsys, argv), argv)


@fuzz(15)
@given(st.data())
def test_cache_commands_never_show_a_traceback(capsys, place, drawn):
    root = place["root"]
    garbage = root / "garbage-memo"
    if not garbage.exists():
        garbage.mkdir(mode=0o700)
        (garbage / "cache.db").write_bytes(b"\x00garbage" * 512)
    command = drawn.draw(st.sampled_from([["cache", "info"], ["cache", "clear", "--yes"], ["cache", "prune"]]))
    cache_dir = drawn.draw(st.sampled_from([None, str(root / "scratch-memo"), str(place["file"]), str(garbage),
                                            str(place["file"] / "sub")]))
    argv = [*command, *args_from({"--cache-dir": cache_dir})]
    assert_clean(*invoke(capsys, argv), argv)
