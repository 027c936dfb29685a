"""Text is data, not terminal commands (issue 51): strings from outside are printed with their control characters
escaped (``lazylab.text.printable``), whatever their source."""

from __future__ import annotations

import dataclasses
import json
import os

import pytest

from cli_helpers import lines, pinned, run, write_dist
from lazylab import calibration
from lazylab.cache import Memo
from lazylab.config import code_identity
from lazylab.memo_disk import _seal
from lazylab.text import CONTROLS, printable

# An escape sequence that clears the screen, the 8-bit CSI, and a right-to-left override (Trojan Source).
EVIL = "\x1b[2J\x9b\u202e"
RAW = ("\x1b", "\x9b", "\u202e")


def assert_no_raw_control(*texts: str) -> None:
    for text in texts:
        for c in RAW:
            assert c not in text, (c, text)


def test_printable_escapes_every_control_and_keeps_the_rest():
    import re

    assert printable("a\x1b[2Jb\x9bc\u202ed\ne\tf") == "a\\x1b[2Jb\\x9bc\\u202ed\\ne\\tf"
    assert printable("one\x1b\ntwo", keep_newlines=True) == "one\\x1b\ntwo"
    assert printable("yat-frozen m=8: 85.2 % · é 漢") == "yat-frozen m=8: 85.2 % · é 漢"
    every = "".join(chr(c) for c in range(0x3000))
    shown = printable(every)
    assert not re.search(f"[{CONTROLS}]", shown)
    assert len(shown) == len(every) + sum(len(c.encode("unicode_escape")) - 1 for c in every
                                          if re.fullmatch(f"[{CONTROLS}]", c))


def test_a_record_string_and_a_diskcache_tag_are_printed_escaped(tmp_path, capsys, monkeypatch):
    """``runs --any-code`` shows records' strings and the tags, ``cache info`` the tags (one of them forging a
    second line); a record whose schema refuses its string (a trajectory's arm) is one corrupt line."""
    from lazylab.reference import load_reference

    monkeypatch.setenv("COLUMNS", "400")  # wide enough that runs keeps its code column (the escaped tag)
    memo = Memo(tmp_path / "memo")
    convex = dict(load_reference()["payload"]["convex"]["runs"][0])
    convex["config"] = {**convex["config"], "arm": "yat" + EVIL, "plugin": "p" + EVIL}
    convex["key"] = key = "convex-" + "1" * 32
    memo._cache.set(key, _seal(json.dumps(convex).encode(), key), tag=code_identity())
    traj = "traj-" + "2" * 32
    memo._cache.set(traj, _seal(json.dumps({"key": traj, "config": {"arm": EVIL}}).encode(), traj), tag=EVIL)
    other = "convex-" + "3" * 32
    memo._cache.set(other, _seal(json.dumps({**convex, "key": other}).encode(), other),
                    tag="lazylab 9" + EVIL + "\nforged: second line")
    memo.close()
    code, out, err = run(capsys, "runs", "--cache-dir", tmp_path / "memo", "--any-code", "--all")
    assert code == 0, err
    assert "\\x1b[2J" in out and "second line" in out, out
    assert [line for line in lines(err) if line.startswith(f"memo entry {traj} is corrupt")], err
    assert_no_raw_control(out, err)
    code, out, err = run(capsys, "cache", "info", "--cache-dir", tmp_path / "memo")
    assert code == 0 and "forged: second line" in out and "\\nforged: second line" in out, out
    assert not any(line.startswith("forged") for line in out.splitlines())
    assert_no_raw_control(out, err)
    note = Memo(tmp_path / "memo").stale_note()
    assert "\\nforged" in note and "\n" not in note
    assert_no_raw_control(note)


def test_a_file_name_is_printed_escaped_in_an_error_and_in_a_wrote_line(tmp_path, capsys):
    folder = tmp_path / ("data" + EVIL)
    code, out, err = run(capsys, "data", "info", "--data-dir", folder)
    assert code == 2 and "data\\x1b[2J\\x9b\\u202e" in err, err
    assert_no_raw_control(out, err)
    written = tmp_path / ("info" + EVIL + ".json")
    code, out, err = run(capsys, "cache", "info", "--cache-dir", tmp_path / "memo", "--json", written)
    assert code == 0 and written.is_file() and "info\\x1b[2J" in out, (out, err)
    assert_no_raw_control(out, err)


def test_calibration_text_is_refused_by_its_schema_and_its_note_escaped(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home"))
    measured = dataclasses.replace(calibration.REFERENCE, code=code_identity(), cores=os.cpu_count() or 1)
    monkeypatch.setattr(calibration, "measure", lambda: measured)
    for text in ("C1 \x9b", "bidi \u202e", "escape \x1b[2J"):
        path = calibration.save(dataclasses.replace(measured, measured_at=text))
        code, out, err = run(capsys, "ladder", "--arms", "yat-frozen", "--widths", "8", "--seeds", "0", "--epochs",
                             "1", "--train-size", "2048", "--lr", "0.1", "--cache-dir", tmp_path / "memo",
                             "--dry-run", "--json", "-")
        assert code == 0, err
        notes = [line for line in lines(err) if line.startswith("note: calibration file")]
        assert len(notes) == 1 and "measured_at" in notes[0] and "set aside" in notes[0], err
        assert_no_raw_control(out, err)
        assert json.loads(path.with_name(path.name + ".bad").read_text())["measured_at"] == text
        assert calibration.read(path).measured_at != text  # measured again


BROKEN = f'''
from lazylab.arms import Unit


def bank(W, x_ref=None):
    raise RuntimeError({EVIL!r} + "boom")


UNIT = Unit(name="evil", bank=bank)
'''


@pytest.mark.slow  # the plugin's bank is built for real, after its conformance suite
def test_a_plugin_error_is_printed_escaped(tmp_path, monkeypatch, capsys, memo_dir):
    from lazylab import vetting
    from lazylab.arms import reset_registry

    root = write_dist(tmp_path / "site", "lazylab-evil", "0.1", {"evil": "lazylab_evil:UNIT"},
                      {"lazylab_evil.py": BROKEN})
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setenv("LAZYLAB_ARMS", pinned("lazylab-evil:evil"))
    reset_registry()
    vetting._known.clear()
    try:
        code, out, err = run(capsys, "redundancy", "--arms", "evil-frozen", "--width", "8", "--images", "64",
                             "--train-size", "512", "--seeds", "0")
    finally:
        reset_registry()
        vetting._known.clear()
    assert code == 2 and "\\x1b[2J\\x9b\\u202eboom" in err, err
    assert_no_raw_control(out, err)


def test_a_plugin_that_fails_to_import_is_listed_and_warned_escaped(tmp_path, monkeypatch, capsys):
    from lazylab.arms import reset_registry

    root = write_dist(tmp_path / "site", "lazylab-evil-import", "0.1", {"evilimport": "lazylab_evil_import:UNIT"},
                      {"lazylab_evil_import.py": f"raise RuntimeError({EVIL!r} + 'no import')\n"})
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setenv("LAZYLAB_ARMS", pinned("lazylab-evil-import:evilimport"))
    reset_registry()
    try:
        code, out, err = run(capsys, "arms")
        assert "no import" in out + err, (out, err)
        assert_no_raw_control(out, err)
        code, out, err = run(capsys, "ladder", "--arms", "evilimport-frozen", "--widths", "8", "--dry-run")
        assert code == 2 and "no import" in err, err
        assert_no_raw_control(out, err)
    finally:
        reset_registry()
