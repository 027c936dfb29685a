"""Where lazylab reads and writes (issue 32, points 5-7): stdout holds the JSON alone even when a
plugin prints while loading; a memo location that is not a memo is refused by every command alike;
an output path that is a symbolic-link loop is one line; an interrupt counts the runs of every stage.

Every command goes through ``lazylab.cli.main`` in this process, as the console script does.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from types import SimpleNamespace

import pytest

from lazylab import data
from lazylab.arms import reset_registry
from lazylab.cli import progress
from cli_helpers import assert_one_line_error, lines, pinned, run, write_dist

needs_data = pytest.mark.skipif(
    not all((data.DEBIAN_DIR / n).is_file() for n in data.FILES.values()),
    reason="Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)",
)

# ------------------------------------------------------------ 5. stdout belongs to the JSON
CHATTY = '''
import sys

print("hello from lazylab-chatty")  # at import, as careless plugins do
sys.stdout.write("and a second line\\n")

from lazylab.arms import Unit
from lazylab.arms.relu import ReluBank

UNIT = Unit(name="chatty", bank=ReluBank)
'''


@pytest.fixture
def chatty_plugin(tmp_path, monkeypatch):
    """An installed distribution whose unit prints two lines on stdout when imported."""
    monkeypatch.setenv("LAZYLAB_ARMS", pinned("lazylab-chatty:chatty"))
    monkeypatch.delenv("LAZYLAB_STRICT_PLUGINS", raising=False)
    root = write_dist(tmp_path / "site", "lazylab-chatty", "0.1", {"chatty": "lazylab_chatty:UNIT"},
                      {"lazylab_chatty.py": CHATTY})
    monkeypatch.syspath_prepend(str(root))
    fresh()
    yield
    fresh()


def fresh() -> None:
    """The registry read again, and the plugin imported again (so it prints again)."""
    sys.modules.pop("lazylab_chatty", None)
    reset_registry()


def test_a_plugin_that_prints_on_import_leaves_stdout_to_the_json(chatty_plugin, capsys, memo_dir):
    code, out, err = run(capsys, "arms", "--json", "-")
    assert code == 0, err
    listing = json.loads(out)  # the whole of stdout: nothing before or after the JSON
    assert {"chatty-frozen", "chatty-trained"} <= {a["arm"] for a in listing["arms"]}
    assert listing["errors"] == []
    assert "hello from lazylab-chatty" in err and "and a second line" in err


@needs_data
def test_a_printing_plugin_under_runs_and_a_dry_run_json(chatty_plugin, capsys, memo_dir):
    for argv in (["runs", "--arm", "chatty-frozen", "--json", "-"],
                 ["ladder", "--arms", "chatty-frozen", "--widths", "8", "--seeds", "0", "--epochs", "1",
                  "--train-size", "256", "--lr", "0.1", "--dry-run", "--json", "-"]):
        fresh()
        code, out, err = run(capsys, *argv)
        assert code == 0, err
        doc = json.loads(out)
        assert isinstance(doc, dict) and doc, argv
        assert "hello from lazylab-chatty" in err, argv


# ------------------------------------------------------------ 6. the memo location is checked
def _bad_location(kind: str, root):
    """A memo location of ``kind`` under ``root``: (path, a phrase the error line must hold)."""
    if kind == "regular file":
        (root / "a-file").write_text("not a memo")
        return root / "a-file", "is a regular file"
    if kind == "device":
        return "/dev/null", "is a device"
    if kind == "FIFO":
        os.mkfifo(root / "fifo")
        return root / "fifo", "is a FIFO"
    if kind == "foreign folder":
        (root / "mine").mkdir()
        (root / "mine" / "thesis.tex").write_text("\\documentclass{article}")
        (root / "mine" / "data").mkdir()  # a name a memo holds too does not make it one
        return root / "mine", "not a lazylab memo"
    if kind == "link loop":
        (root / "a").symlink_to(root / "b")
        (root / "b").symlink_to(root / "a")
        return root / "a", "symbolic links"
    if kind == "below a file":
        (root / "a-file").write_text("not a folder")
        return root / "a-file" / "memo", "Not a directory"
    if kind == "cache.db a folder":  # `runs` called this memo empty while the others failed in sqlite
        (root / "memo" / "cache.db").mkdir(parents=True)
        return root / "memo", "cache.db that is not a regular file"
    if kind == "cache.db a FIFO":
        (root / "memo").mkdir()
        os.mkfifo(root / "memo" / "cache.db")
        return root / "memo", "cache.db that is not a regular file"
    raise AssertionError(kind)


BAD_KINDS = ["regular file", "device", "FIFO", "foreign folder", "link loop", "below a file", "cache.db a folder",
             "cache.db a FIFO"]
COMMANDS = {"runs": ["runs"], "cache info": ["cache", "info"],
            "ladder --dry-run": ["ladder", "--preset", "quick", "--dry-run"],
            "data info": ["data", "info"]}  # the parsed data copy lives in the memo


@needs_data
@pytest.mark.parametrize("kind", BAD_KINDS)
def test_a_memo_location_that_is_not_a_memo_is_refused_alike(kind, tmp_path, monkeypatch, capsys):
    path, phrase = _bad_location(kind, tmp_path)
    before = sorted(os.listdir(path)) if kind == "foreign folder" else None
    for how in ("LAZYLAB_CACHE", "--cache-dir"):
        if how == "--cache-dir" and kind in ("regular file", "device", "FIFO", "link loop"):
            continue  # click's own Path checks (or CheckedPath's loop check) refuse these first, also in one line
        said = set()
        for name, argv in COMMANDS.items():
            if how == "LAZYLAB_CACHE":
                monkeypatch.setenv("LAZYLAB_CACHE", str(path))
                code, out, err = run(capsys, *argv)
            else:
                monkeypatch.setenv("LAZYLAB_CACHE", str(tmp_path / "unused"))
                code, out, err = run(capsys, *argv, "--cache-dir", path)
            line = assert_one_line_error(code, err, str(path), phrase)
            assert "memo is empty" not in line and out == "", (name, out)  # runs used to call it an empty memo
            said.add(line)
        assert len(said) == 1, said  # every command says the same line
    if before is not None:
        assert sorted(os.listdir(path)) == before  # nothing created there (no cache.db)


@needs_data
def test_the_option_refuses_what_the_variable_refuses(tmp_path, capsys):
    """Through --cache-dir a file or a loop is refused by the option's own check: one line too."""
    path, _ = _bad_location("regular file", tmp_path)
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    for where in (path, "/dev/null", tmp_path / "a"):
        for argv in COMMANDS.values():
            code, _, err = run(capsys, *argv, "--cache-dir", where)
            assert_one_line_error(code, err, "--cache-dir", str(where))


@needs_data
def test_an_empty_or_missing_folder_becomes_a_memo_and_a_memo_stays_one(tmp_path, monkeypatch, capsys):
    empty, missing = tmp_path / "empty", tmp_path / "missing" / "memo"
    empty.mkdir()
    (tmp_path / "link").symlink_to(empty)
    for path in (empty, missing, tmp_path / "link"):
        monkeypatch.setenv("LAZYLAB_CACHE", str(path))
        code, out, err = run(capsys, "runs")
        assert code == 0 and "is empty" in out, err
        code, out, err = run(capsys, "cache", "info")
        assert code == 0 and "0 entries" in out, err
        code, out, err = run(capsys, "ladder", "--preset", "quick", "--dry-run")
        assert code == 0, err
    code, out, err = run(capsys, "data", "info", "--cache-dir", empty)  # its parsed copy goes to the memo's data/
    assert code == 0 and "fingerprint" in out, err
    assert (empty / "data").is_dir()
    assert (empty / "cache.db").is_file() and (missing / "cache.db").is_file()
    # A memo is one by its cache.db, whatever else a user put beside it.
    (empty / "NOTES").write_text("my memo for the paper")
    monkeypatch.setenv("LAZYLAB_CACHE", str(empty))
    code, out, err = run(capsys, "cache", "info")
    assert code == 0 and "0 entries" in out, err
    # A memo whose index was lost but whose own folders remain is still one (reopened, not refused).
    lost = tmp_path / "lost"
    (lost / "features").mkdir(parents=True)
    (lost / "data").mkdir()
    (lost / "3f" / "a0").mkdir(parents=True)
    monkeypatch.setenv("LAZYLAB_CACHE", str(lost))
    code, out, err = run(capsys, "cache", "info")
    assert code == 0, err


def test_the_location_check_as_a_function(tmp_path):
    from lazylab.errors import LazylabError
    from lazylab.locations import check_memo_dir

    assert check_memo_dir(tmp_path / "new") == tmp_path / "new"
    assert not (tmp_path / "new").exists()  # checking creates nothing
    for kind in BAD_KINDS:
        root = tmp_path / kind.replace(" ", "-")
        root.mkdir()
        path, phrase = _bad_location(kind, root)
        with pytest.raises(LazylabError, match=phrase) as exc:
            check_memo_dir(path)
        assert "\n" not in str(exc.value)


# ------------------------------------------------------------ output paths
@needs_data
def test_an_output_path_in_a_symbolic_link_loop_is_one_line(tmp_path, capsys, memo_dir):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    for argv in (["runs", "--json", tmp_path / "a"], ["runs", "--csv", tmp_path / "a" / "runs.csv"],
                 ["ladder", "--preset", "quick", "--dry-run", "--json", tmp_path / "a"],
                 ["ladder", "--preset", "quick", "--dry-run", "--out", tmp_path / "b"]):
        code, out, err = run(capsys, *argv)
        assert_one_line_error(code, err, "symbolic-link loop", str(argv[-1]))


def test_writing_through_a_link_loop_is_one_line_from_the_api(tmp_path):
    from lazylab.errors import LazylabError
    from lazylab.paths import writable_file, write_text_atomically

    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    for attempt in (lambda: writable_file(tmp_path / "a", "--json"),
                    lambda: writable_file(tmp_path / "a" / "x.json", "--json"),
                    lambda: write_text_atomically(tmp_path / "a", "{}", "--json"),
                    lambda: write_text_atomically(tmp_path / "a" / "x.json", "{}", "--json")):
        with pytest.raises(LazylabError, match="^--json: ") as exc:
            attempt()
        assert "\n" not in str(exc.value)
    assert sorted(os.listdir(tmp_path)) == ["a", "b"]  # no temporary file left


# ------------------------------------------------------------ 7. the interrupt counts every stage
def _stage(display, name: str, runs: list[tuple[str, bool]]):
    reporter = progress.ProgressReporter(display, name)
    for key, cached in runs:
        cfg = SimpleNamespace(arm="relu-frozen", width=8, seed=0, lr=0.1, epochs=1)
        reporter.done(cfg, {"key": key, "best_acc": 50.0, "seconds": 1.0}, cached)
    return reporter


def test_the_interrupt_message_counts_the_runs_of_every_stage(capsys, monkeypatch):
    """A ladder stage (12 runs: 9 computed, 3 from the memo) then a convex stage interrupted after 4:
    16 kept, not the 4 of the stage that was running. A run met again by a later stage counts once."""
    from lazylab import cli

    monkeypatch.setattr(progress, "interrupted", False)  # restored afterwards: later tests see no interrupt
    monkeypatch.setattr(progress.ProgressReporter, "latest", None)

    def two_stages(*args, **kwargs):
        with progress.Display() as display:
            ladder = _stage(display, "ladder", [(f"run-{i}", i < 3) for i in range(12)])
            convex = _stage(display, "convex readouts", [(f"convex-{i}", False) for i in range(4)] + [("run-5", True)])
        assert (ladder.computed, ladder.cached, convex.computed, convex.cached) == (9, 3, 4, 1)
        progress.on_sigint(signal.SIGINT, None)  # raises KeyboardInterrupt, as the real handler does

    monkeypatch.setattr(cli.cli, "main", two_stages)
    code, _, err = run(capsys, "-q", "arms")
    assert code == 130
    assert lines(err) == ["interrupted: 16 runs kept in the memo (13 computed now, 3 already there); "
                          "run the same command to resume"], err
    # The next command starts its count afresh.
    monkeypatch.setattr(cli.cli, "main", lambda *a, **k: progress.on_sigint(signal.SIGINT, None))
    code, _, err = run(capsys, "arms")
    assert code == 130 and lines(err) == [
        "interrupted: every finished run is kept in the memo; run the same command to resume"], err
