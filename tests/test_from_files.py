"""``render --from FILE`` (issue 32): a file is checked like the options that wrote it.

The files are written by the real commands (``gram``, ``readout``, ``trajectory``, ``ntk scalar``) on
tiny configurations of the real Fashion-MNIST, then mutated (wrong types, non-finite and huge numbers,
missing and extra fields, nesting, truncation) and given to ``lazylab render gifs --dry-run --from``,
in this process through ``lazylab.cli.main``. The dry run reads the file and plans every picture from
it exactly as the drawing would (the same memo keys), without computing. Each case must end in exit 0
with the plan of a configuration the command line itself accepts (the same memo keys as that command's
own ``--dry-run``), or in exit 2 with one ``error:`` line; never exit 1 (a bug), never a hang (each
case under an alarm), and nothing stored in the memo.
"""

from __future__ import annotations

import copy
import json
import math
import os
import stat
from unittest import mock

import click
import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from cli_helpers import fuzz, no_hang
from lazylab import data
from lazylab.cli import cli, main
from lazylab.cli import plan as cli_plan
from lazylab.cli.options import IntList, MAX_LR, MAX_SEED, MAX_WIDTH
from lazylab.experiments import render as xr
from lazylab.schemas import results as R

pytestmark = pytest.mark.skipif(
    not all((data.DEBIAN_DIR / n).is_file() for n in data.FILES.values()),
    reason="Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)",
)

CASE_S = 300  # seconds a case may take before it counts as a hang: far above one on a loaded 2-core machine
# The tiny configurations the valid files are written with (seconds each on two cores).
COMMANDS = {
    "gram": ["gram", "--max-units", "8", "--frames", "3", "--ref-units", "32", "--per-class", "2"],
    "readout": ["readout", "--widths", "4,8", "--train-size", "256", "--steps", "2", "--eval-every", "1"],
    "trajectory": ["trajectory", "--arms", "yat-trained", "--width", "4", "--epochs", "1", "--snapshots", "2",
                   "--train-size", "256", "--lr", "0.03"],
    "ntk": ["ntk", "scalar", "--times", "0,1"],
}
# The fields with_json reads, as paths into each kind's file: mutated more often than the rest.
READ = {
    "gram": [("experiment",), ("config",)] + [("config", f) for f in (
        "arm", "max_units", "frames", "classes", "per_class", "seed", "ref_units", "fit_min", "repeats")]
    + [("config", "classes", 0)],
    "readout": [("experiment",), ("curves",), ("curves", 0), ("curves", 1, "config", "width")]
    + [("curves", 0, "config", f) for f in ("arm", "width", "train_size", "steps", "lr", "eval_every", "seed")],
    "trajectory": [("plan",), ("plan", "arms", 0)] + [("plan", f) for f in (
        "arms", "width", "epochs", "snapshots", "seed", "lr", "train_size", "fan_in")],
    "ntk": [("w0",), ("dt",), ("table",), ("table", "t"), ("checks",), ("checks", 0), ("checks", 0, "value")],
}


def invoke(capsys, argv) -> tuple[int, str, str, list]:
    """``lazylab argv`` in this process under the alarm: (exit status, stdout, stderr, the plans a --dry-run made)."""
    plans = []
    show = cli_plan.show_plan

    def keep(est, json_path=None):
        plans.append(est)
        return show(est, json_path)

    capsys.readouterr()
    with no_hang(CASE_S), mock.patch.object(cli_plan, "show_plan", keep), pytest.raises(SystemExit) as exc:
        main([str(a) for a in argv])
    captured = capsys.readouterr()
    return exc.value.code, captured.out, captured.err, plans


def assert_clean(code, err, what) -> None:
    """Exit 0, or exit 2 with exactly one ``error:`` line; never a traceback or exit 1."""
    assert "Traceback" not in err, (what, err)
    assert code in (0, 2), (what, code, err)
    if code == 2:
        found = [line for line in err.splitlines() if line.strip()]
        assert len(found) == 1 and found[0].startswith("error: "), (what, err)


def memo_keys(memo) -> list[str]:
    from lazylab.cache import Memo

    if not memo.exists():
        return []
    m = Memo(memo)
    try:
        return [k for k, _, _ in m.entries()]
    finally:
        m.close()


def assert_configs_in_range(memo) -> int:
    """Every run record's config holds values the command line can give (seed, width, rate); how many were read."""
    from lazylab.cache import Memo

    m, n = Memo(memo), 0
    try:
        for key, _, _ in m.entries():
            # JSON records with a config: runs and trajectories (the others hold arrays; reading one as a record
            # would count it as damaged)
            is_record = key.startswith("run-") or (key.startswith("traj-") and not key.endswith("-snapshots"))
            record = m.get_record(key) if is_record else None
            c = record.get("config") if isinstance(record, dict) else None
            c = c.get("run", c) if isinstance(c, dict) else None  # a trajectory's config holds its run's
            if not isinstance(c, dict):
                continue
            assert isinstance(c.get("seed", 0), int) and 0 <= c.get("seed", 0) <= MAX_SEED, (key, c)
            assert isinstance(c.get("width", 1), int) and 1 <= c.get("width", 1) <= MAX_WIDTH, (key, c)
            lr = c.get("lr", 1.0)
            assert isinstance(lr, float) and 0 < lr <= MAX_LR, (key, c)
            n += 1
    finally:
        m.close()
    return n


@pytest.fixture(scope="module")
def place(tmp_path_factory):
    """A memo holding the tiny runs, and the valid ``--json`` file each command wrote from them."""
    root = tmp_path_factory.mktemp("fromfiles")
    memo = root / "memo"
    files = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LAZYLAB_OUT", str(root / "out"))
        mp.setenv("LAZYLAB_CACHE", str(memo))
        for kind, argv in COMMANDS.items():
            files[kind] = root / f"{kind}.json"
            try:
                main([*argv, "--json", str(files[kind]), *(["--cache-dir", str(memo)] if kind != "ntk" else [])])
            except SystemExit as exc:
                assert exc.code == 0, (kind, exc.code)
        assert assert_configs_in_range(memo) >= 1  # the trajectory's run
        yield {"root": root, "memo": memo, "files": files, "docs": {k: json.loads(p.read_text()) for k, p in files.items()}}


def render_dry_run(capsys, place, path):
    return invoke(capsys, ["render", "gifs", "--dry-run", "--from", path, "--cache-dir", place["memo"],
                           "--out", place["root"] / "render"])


# ------------------------------------------------------------------------------------------- regressions
def test_a_readout_file_with_a_seed_past_32_bits_is_refused_and_nothing_is_stored(place, capsys, tmp_path):
    """Issue 32: seed 4294967296 in a `readout --json` file was drawn bit-identical to seed 0 under a new memo key."""
    doc = copy.deepcopy(place["docs"]["readout"])
    for c in doc["curves"]:
        c["config"]["seed"] = MAX_SEED + 1
    path = tmp_path / "readout.json"
    path.write_text(json.dumps(doc))
    before = memo_keys(place["memo"])
    for dry_run in (["--dry-run"], []):  # the plan first (it showed seed 4294967296), then the drawing
        code, out, err, _ = invoke(capsys, ["render", "gifs", *dry_run, "--from", path, "--cache-dir", place["memo"],
                                            "--out", tmp_path / "o"])
        assert_clean(code, err, "seed")
        assert code == 2, out
        line = err.strip()
        assert str(path) in line and "curves[0].config.seed" in line and str(MAX_SEED) in line, line
        assert memo_keys(place["memo"]) == before
        assert not (tmp_path / "o").exists()
    # the largest seed the command line takes is read as written
    for c in doc["curves"]:
        c["config"]["seed"] = MAX_SEED
    path.write_text(json.dumps(doc))
    assert xr.with_json(xr.DEFAULT_SETTINGS, path).readout.seed == MAX_SEED


def test_two_files_for_one_picture_are_refused_not_silently_dropped(place, capsys, tmp_path):
    """Two gram files used to leave the first one out without a word; a gram and a readout file go together."""
    doc = copy.deepcopy(place["docs"]["gram"])
    doc["config"]["seed"] += 1
    second = tmp_path / "gram2.json"
    second.write_text(json.dumps(doc))
    code, out, err, _ = invoke(capsys, ["render", "gifs", "--dry-run", "--from", place["files"]["gram"],
                                        "--from", second, "--cache-dir", place["memo"], "--out", tmp_path / "o"])
    assert_clean(code, err, "two gram files")
    assert code == 2 and "names two gram files" in err and str(second) in err, err
    code, out, err, _ = invoke(capsys, ["render", "gifs", "--dry-run", "--from", place["files"]["gram"],
                                        "--from", place["files"]["readout"], "--cache-dir", place["memo"],
                                        "--out", tmp_path / "o"])
    assert code == 0, err


@pytest.mark.parametrize("mutate, field", [
    (lambda d: d["config"].update(max_units=8.5), "config.max_units"),
    (lambda d: d["config"].update(max_units="8"), "config.max_units"),
    (lambda d: d["config"].update(classes=[0, "Sweater"]), "config.classes[1]"),
    (lambda d: d["config"].update(seed=1_000_001), "config.seed"),  # gram's own bound (the reference seeds)
    (lambda d: d["config"].update(ref_units=8), "config.ref_units"),  # under 4 x max_units
    (lambda d: d["config"].update(arm="yat-trained"), "config.arm"),
])
def test_a_bad_gram_field_is_one_line_naming_it(place, capsys, tmp_path, mutate, field):
    doc = copy.deepcopy(place["docs"]["gram"])
    mutate(doc)
    path = tmp_path / "gram.json"
    path.write_text(json.dumps(doc))
    code, _, err, _ = render_dry_run(capsys, place, path)
    assert_clean(code, err, field)
    assert code == 2 and f"field {field}:" in err and str(path) in err, err


def test_class_names_of_the_dataset_read_as_their_indices(place):
    doc = copy.deepcopy(place["docs"]["gram"])
    doc["config"]["classes"] = ["T-shirt/top", "Trouser", 7]
    path = place["root"] / "named.json"
    path.write_text(json.dumps(doc))
    assert xr.with_json(xr.DEFAULT_SETTINGS, path).gram.classes == (0, 1, 7)


@pytest.mark.parametrize("what", ["fifo", "device", "folder", "huge"])
def test_from_refuses_what_is_not_a_regular_file_in_one_line(place, capsys, tmp_path, what):
    """A FIFO with no writer hung the reader; a device is no file (/dev/zero would never end); a file past the size cap."""
    path = {"fifo": tmp_path / "fifo", "device": "/dev/null", "folder": tmp_path, "huge": tmp_path / "huge.json"}[what]
    if what == "fifo":
        os.mkfifo(path)
    if what == "huge":
        with open(path, "wb") as fh:  # sparse: no disk is used
            fh.truncate(xr.settings.FROM_MAX_BYTES + 1)
    code, _, err, _ = render_dry_run(capsys, place, path)
    assert_clean(code, err, what)
    assert code == 2 and str(path) in err, err
    assert {"fifo": "FIFO", "device": "device", "folder": "directory", "huge": "bytes"}[what] in err, err
    if what == "fifo":
        assert stat.S_ISFIFO(os.stat(path).st_mode)


def test_deep_nesting_is_one_line(place, capsys, tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('{"experiment": "readout", "curves": ' + "[" * 200_000 + "]" * 200_000 + "}")
    code, _, err, _ = render_dry_run(capsys, place, path)
    assert_clean(code, err, "deep")
    assert code == 2 and str(path) in err


# ------------------------------------------------- the schemas' ranges are the options' (no drift)
def _param(command: tuple, name: str) -> click.Parameter:
    cmd = cli
    for part in command:
        cmd = cmd.commands[part]
    return next(p for p in cmd.params if p.name == name)


BASES = {  # a valid instance of each model, varied one field at a time below
    R.GramConfigDoc: {"arm": "yat-frozen", "max_units": 8, "frames": 3, "classes": [0, 1], "per_class": 2, "seed": 0,
                      "ref_units": None, "fit_min": 10, "repeats": 1},
    R.ReadoutConfigDoc: {"arm": "yat-frozen", "width": 8, "train_size": 256, "steps": 2, "lr": 0.3, "eval_every": 1,
                         "seed": 0},
    R.TrajectoryPlanDoc: {"arms": ["yat-trained"], "width": MAX_WIDTH, "epochs": 1, "snapshots": 1, "seed": 0,
                          "lr": None, "train_size": 256, "fan_in": "unit"},
    R.NtkScalarFile: {"w0": 0.01, "dt": 1e-3, "table": {"t": [0.0, 1.0]}, "checks": []},
}


def _accepts(model, field: str, value) -> bool:
    from pydantic import ValidationError

    try:
        model.model_validate({**BASES[model], field: value})
        return True
    except ValidationError:
        return False


@pytest.mark.parametrize("command, option, model, field", [
    (("gram",), "max_units", R.GramConfigDoc, "max_units"), (("gram",), "frames", R.GramConfigDoc, "frames"),
    (("gram",), "per_class", R.GramConfigDoc, "per_class"), (("gram",), "seed", R.GramConfigDoc, "seed"),
    (("gram",), "ref_units", R.GramConfigDoc, "ref_units"), (("gram",), "fit_min", R.GramConfigDoc, "fit_min"),
    (("gram",), "repeats", R.GramConfigDoc, "repeats"),
    (("readout",), "widths", R.ReadoutConfigDoc, "width"), (("readout",), "train_size", R.ReadoutConfigDoc, "train_size"),
    (("readout",), "steps", R.ReadoutConfigDoc, "steps"), (("readout",), "lr", R.ReadoutConfigDoc, "lr"),
    (("readout",), "eval_every", R.ReadoutConfigDoc, "eval_every"), (("readout",), "seed", R.ReadoutConfigDoc, "seed"),
    (("trajectory",), "width", R.TrajectoryPlanDoc, "width"), (("trajectory",), "epochs", R.TrajectoryPlanDoc, "epochs"),
    (("trajectory",), "snapshots", R.TrajectoryPlanDoc, "snapshots"), (("trajectory",), "seed", R.TrajectoryPlanDoc, "seed"),
    (("trajectory",), "lr", R.TrajectoryPlanDoc, "lr"),
    (("trajectory",), "train_size", R.TrajectoryPlanDoc, "train_size"),
    (("ntk", "scalar"), "w0", R.NtkScalarFile, "w0"), (("ntk", "scalar"), "dt", R.NtkScalarFile, "dt"),
])
def test_each_schema_range_is_its_options(command, option, model, field):
    """The file's field takes exactly what the option takes: its bounds in, one step past them out."""
    t = _param(command, option).type
    lo, hi, lo_open = (t.minimum, t.maximum, False) if isinstance(t, IntList) else (t.min, t.max, t.min_open)
    integer = isinstance(t, (IntList, click.IntRange))
    below = lo - 1 if integer else (lo if lo_open else math.nextafter(lo, -math.inf))
    assert not _accepts(model, field, below), (command, option, below)
    assert _accepts(model, field, lo + 1 if integer and lo_open else math.nextafter(lo, math.inf) if lo_open else lo)
    if hi is None:  # no bound on the command line: none in the file (--snapshots is bounded by --width)
        assert _accepts(model, field, MAX_WIDTH if field == "snapshots" else 10**30)
    else:
        assert _accepts(model, field, hi)
        assert not _accepts(model, field, hi + 1 if integer else math.nextafter(hi, math.inf)), (command, option)


def test_fan_in_and_classes_are_the_options_choices():
    assert set(_param(("trajectory",), "fan_in").type.choices) == {"unit", "d"}
    assert R.TrajectoryPlanDoc.model_fields["fan_in"].annotation.__args__ == ("unit", "d")
    assert not _accepts(R.TrajectoryPlanDoc, "fan_in", "D") and _accepts(R.TrajectoryPlanDoc, "fan_in", "d")
    assert _accepts(R.GramConfigDoc, "classes", [9, 0]) and not _accepts(R.GramConfigDoc, "classes", [10, 0])
    assert not _accepts(R.GramConfigDoc, "classes", [1, 1]) and not _accepts(R.GramConfigDoc, "classes", [True, 0])


# ---------------------------------------------------------------------------------- property tests
HOSTILE = [None, True, False, 0, -1, 1, 2, 3, 255, 256, 2**31, MAX_SEED, MAX_SEED + 1, 2**63, 2**64, -(2**63), 10**30,
           10**400, 0.5, 1.5, 8.0, -0.0, 1e-320, 1e308, -1e308, math.nan, math.inf, -math.inf, MAX_LR, MAX_LR * 2,
           MAX_WIDTH, MAX_WIDTH + 1, "", "0", "8", "4294967296", "NaN", "yat-frozen", "yat-trained", "relu-frozen",
           "yat-data-frozen", "yat-data-trained", "T-shirt/top", "Ankle boot", "nope", "d", "unit", "readout", "gram",
           [], {}, [0], [0, 0], [0, 1, 7], ["yat-trained", "yat-trained"], {"a": 1}, [[[[]]]]]


def _near(value):
    """Values next to ``value``: the bounds a checker is most likely to get wrong."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return st.sampled_from(HOSTILE)
    v = value
    out = [v - 1, v + 1, -v, v * 1000, v / 2, float(v), str(v), [v]]
    if isinstance(v, float):
        out += [math.nextafter(v, math.inf), math.nextafter(v, -math.inf), 0.0] + ([int(v)] if math.isfinite(v) else [])
    return st.sampled_from(out)


def _paths(doc, prefix=()):
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _paths(v, (*prefix, i))


def _get(doc, path):
    for p in path:
        doc = doc[p]
    return doc


DEEP = "__deep__"


@st.composite
def mutated(draw, valid: dict, kind: str) -> str:
    """The text of a mutated copy of ``valid``: one to three edits, then perhaps a truncation."""
    doc = copy.deepcopy(valid)
    every = [p for p in _paths(valid) if p]
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.one_of(st.sampled_from(READ[kind]), st.sampled_from(every)))
        try:
            parent, here = _get(doc, path[:-1]), _get(doc, path)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier edit removed it
        if not isinstance(parent, (dict, list)):
            continue  # an earlier edit turned its container into a string
        op = draw(st.sampled_from(["set", "near", "delete", "extra", "nest", "deep"]))
        key = path[-1]
        if op == "set":
            # copies: a later edit must not change HOSTILE's lists and dicts (hypothesis replays draws)
            parent[key] = copy.deepcopy(draw(st.one_of(st.sampled_from(HOSTILE), st.integers(), st.floats(),
                                                       st.text(max_size=12))))
        elif op == "near":
            parent[key] = copy.deepcopy(draw(_near(here)))
        elif op == "delete":
            del parent[key]
        elif op == "extra" and isinstance(here, dict):
            here[draw(st.sampled_from(["extra", "seed", "plan", "curves", "checks", "experiment", "x" * 300]))] = \
                copy.deepcopy(draw(st.sampled_from(HOSTILE)))
        elif op == "nest":
            for _ in range(draw(st.integers(1, 40))):
                here = [here]
            parent[key] = here
        elif op == "deep":
            parent[key] = DEEP
    text = json.dumps(doc, allow_nan=True)  # NaN and Infinity as Python's json writes them
    text = text.replace(json.dumps(DEEP), "[" * 100_000 + "]" * 100_000)
    if draw(st.integers(0, 5)) == 0:
        text = text[: draw(st.integers(0, max(len(text) - 1, 0)))]
    return text


def _equivalent_command(kind: str, doc: dict) -> list:
    """The command line that writes ``doc``'s configuration (the fields with_json read from it)."""
    if kind == "gram":
        c = doc["config"]
        return ["gram", f"--arm={c['arm']}", "--max-units", c["max_units"], "--frames", c["frames"],
                "--images", ",".join(map(str, c["classes"])), "--per-class", c["per_class"], "--seed", c["seed"],
                *(["--ref-units", c["ref_units"]] if c["ref_units"] is not None else []),
                "--fit-min", c["fit_min"], "--repeats", c["repeats"]]
    if kind == "readout":
        c = doc["curves"][0]["config"]
        return ["readout", f"--arm={c['arm']}", "--widths", ",".join(str(x["config"]["width"]) for x in doc["curves"]),
                "--train-size", c["train_size"], "--steps", c["steps"], f"--lr={c['lr']!r}",
                "--eval-every", c["eval_every"], "--seed", c["seed"]]
    p = doc["plan"]
    lr = xr.FIXED_TRAJECTORY_LR if p["lr"] is None else p["lr"]  # render's rate when no bracket is in the memo
    return ["trajectory", f"--arms={','.join(p['arms'])}", "--width", p["width"], "--epochs", p["epochs"],
            "--snapshots", p["snapshots"], "--seed", p["seed"], "--train-size", p["train_size"],
            "--fan-in", p["fan_in"], f"--lr={lr!r}"]


def check_case(place, capsys, kind: str, text: str) -> None:
    path = place["root"] / f"case-{kind}.json"
    path.write_text(text)
    before = memo_keys(place["memo"])
    code, out, err, plans = render_dry_run(capsys, place, path)
    event(f"exit {code}")
    assert_clean(code, err, text[:2000])
    assert memo_keys(place["memo"]) == before, "a dry run stored something"
    if code == 2:
        return
    # Exit 0: the file is one the command line could have written, and the plan is of that configuration.
    doc = json.loads(text)
    picked = xr.json_kind(doc)
    assert picked in ("gram", "readout", "trajectory"), (picked, text[:2000])
    argv = [*_equivalent_command(picked, doc), "--dry-run", "--cache-dir", place["memo"]]
    code2, _, err2, own = invoke(capsys, argv)
    assert code2 == 0, ("render took a file whose configuration the command line refuses", argv, err2)
    mine = [r["key"] for r in plans[0].runs if r["phase"] == picked]
    assert mine and mine == [r["key"] for r in own[0].runs if r["phase"] == picked], (argv, plans[0].runs, own[0].runs)
    assert memo_keys(place["memo"]) == before


def test_the_valid_files_plan_their_own_memo_entries(place, capsys):
    """The unmutated files: exit 0, and each picture's runs are the ones its command stored."""
    stored, docs, rows = memo_keys(place["memo"]), place["docs"], {}
    for kind in ("gram", "readout", "trajectory"):
        code, _, err, plans = render_dry_run(capsys, place, place["files"][kind])
        assert code == 0, err
        rows[kind] = [r for r in plans[0].runs if r["phase"] == kind]
    assert [r["key"] for r in rows["gram"]] == [docs["gram"]["key"]]
    assert any(k.startswith(docs["gram"]["key"]) for k in stored)  # its summary record (arrays in the feature store)
    assert [r["key"] for r in rows["readout"]] == [c["key"] for c in docs["readout"]["curves"]]
    assert all(r["in_memo"] for r in rows["readout"] + rows["trajectory"]), rows
    assert [r["width"] for r in rows["trajectory"]] == [docs["trajectory"]["plan"]["width"]]
    code, _, err, _ = render_dry_run(capsys, place, place["files"]["ntk"])
    assert code == 2 and "lazylab ntk" in err


@pytest.mark.parametrize("kind", ["gram", "readout", "trajectory", "ntk"])
@fuzz(50)
@given(data_=st.data())
def test_a_mutated_file_is_planned_as_the_command_line_would_or_refused_in_one_line(place, capsys, kind, data_):
    check_case(place, capsys, kind, data_.draw(mutated(place["docs"][kind], kind)))
