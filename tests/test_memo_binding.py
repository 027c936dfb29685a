"""Every memo entry is bound to its key and checked against its kind (issue 51).

A valid, sealed value moved to another key (an entry of the same kind computed for another
configuration, as a hand-copied or swapped memo would hold it) is never served there: every command
that reads it says so in one corrupt line, recomputes it, exits 0 and stores what a clean run stores,
and ``cache check`` finds it. The commands run at tiny sizes on real images; each case copies a memo
filled once per command and moves one entry.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cli_helpers import fuzz, lines, mutated, no_hang, run
from lazylab.cache import Memo
from lazylab.config import code_identity
from lazylab.schemas.entries import KEY

CASE_S = 600  # bound on one case: far above any on a loaded 2-core machine; a hang never ends

GRAM = ["gram", "--arm", "yat-frozen", "--max-units", "16", "--frames", "4", "--ref-units", "64", "--per-class", "2",
        "--fit-min", "2"]
READOUT = ["readout", "--arm", "yat-frozen", "--widths", "8", "--steps", "10", "--eval-every", "5", "--train-size", "512"]
TRAJECTORY = ["trajectory", "--arms", "yat-trained", "--width", "4", "--epochs", "1", "--snapshots", "2",
              "--train-size", "256", "--lr", "0.01"]
NTK_ARM = ["ntk", "arm", "--arm", "yat-trained", "--width", "4", "--probe", "4", "--epochs", "1", "--train-size", "256"]
LADDER = ["ladder", "--arms", "yat-frozen,yat-trained", "--epochs", "1", "--train-size", "2048", "--lr", "0.1",
          "--widths", "8,16", "--seeds", "0,1", "--readout", "both", "--no-figures"]


def lab(seed: int, **kw):
    from lazylab.ntk.lab import LabConfig

    return LabConfig(**{"width": 4, "steps": 10, "n_train": 8, "n_test": 16, "frames": 3, "seed": seed, **kw})


def render_ntk(ws, seed: int) -> None:
    """What ``lazylab render`` reads and stores of the NTK studies (``lazylab.experiments.render``), small."""
    import lazylab.experiments.render as xr
    from lazylab.experiments.render.settings import NtkSettings

    xr.lab_result(ws, lab(seed))
    xr.sweep_result(ws, lab(seed, frames=2, lr=0.05), (4, 8), (seed,))
    xr.scalar_result(ws, NtkSettings(w0=0.01 * (1 + seed), times=(0.0, 1.0, 2.0)))
    xr.audit_result(ws, lab(seed))


# Per command, the invocations that fill one memo: two configurations of each kind of entry it stores. An
# invocation is a command line, or a function of a Workspace (the NTK studies are memoized by ``render`` alone).
COMMANDS = {
    "gram": [[*GRAM, "--seed", "0"], [*GRAM, "--seed", "1"]],
    "readout": [[*READOUT, "--seed", "0"], [*READOUT, "--seed", "1"]],
    "trajectory": [[*TRAJECTORY, "--seed", "0"], [*TRAJECTORY, "--seed", "1"]],
    "ntk arm": [[*NTK_ARM, "--seed", "0"], [*NTK_ARM, "--seed", "1"]],
    "ntk render": [lambda ws: render_ntk(ws, 0), lambda ws: render_ntk(ws, 1)],
    "redundancy": [["redundancy", "--arms", "yat-frozen", "--width", "8", "--images", "64", "--train-size", "512",
                    "--seeds", s] for s in ("0", "1")],
    # runs, convex readouts, lambda choices and refinements, trained-optimum selections and refits, features (two
    # banks of each width)
    "ladder": [LADDER],
}
FEATURES = "feature"
# Every kind of entry (``lazylab.schemas.entries.ENTRY_KINDS``) and the command whose memo holds two of it: one
# property case each, so that no kind is left to chance.
KINDS = {
    "gram": [("gram", None), ("gram", "summary"), ("gramfeat", None), ("gramref", None)],
    "readout": [("readfeat", None), ("readout", None)],
    "trajectory": [("traj", None), ("traj", "snapshots")],
    "ntk arm": [("ntkarm", None), ("ntkarm", "k"), ("ntkarm-train", None), ("ntkarm-train", "p")],
    "ntk render": [("ntklab", None), ("ntklab", "summary"), ("ntksweep", None), ("ntkscalar", None),
                   ("ntkscalar", "checks"), ("ntkaudit", None)],
    "redundancy": [("redundancy", None)],
    "ladder": [("run", None), ("convex", None), ("convex-lambda", None), ("convex-refine", None), ("convex-step", None),
               ("optimum-run", None), ("optimum-fit", None), ("bankfeat", None)],
}
# Entries read only when the result they feed is missing: (kind) -> the kinds to delete so that a command reads it.
READ_AFTER = {("gramfeat", None): [("gram", None)], ("gramref", None): [("gram", None)],
              ("readfeat", None): [("readout", None)], ("ntkarm-train", None): [("ntkarm", None)],
              ("ntkarm-train", "p"): [("ntkarm", None)], ("bankfeat", None): [("run", None), ("convex", None)],
              ("convex-step", None): [("convex-refine", None)]}


def out_option(argv: list[str], folder: Path) -> list[str]:
    """``--out folder`` for the commands that write pictures (all but ``redundancy``)."""
    return [] if argv[0] == "redundancy" else ["--out", str(folder)]


def kind_of(key: str) -> tuple[str, str | None]:
    m = KEY.fullmatch(key)
    return m["prefix"], m["part"]


def stores(memo: Memo):
    """``(name, diskcache store)`` of the memo's main store and, where it exists, its feature store."""
    yield "memo", memo._cache
    features = memo._feature_store(create=False)
    if features is not None:
        yield FEATURES, features


def without_seconds(doc):
    """A record without its wall times (``seconds``) and memo flag (``cached``): what a recomputation repeats."""
    if isinstance(doc, dict):
        return {k: without_seconds(v) for k, v in doc.items() if k not in ("seconds", "cached")}
    return [without_seconds(v) for v in doc] if isinstance(doc, list) else doc


def contents(memo_dir: Path) -> dict[tuple[str, str], str]:
    """Every entry of both stores, read back through its checks: ``{(store, key): canonical text or digest}``."""
    memo = Memo(memo_dir)
    out = {}
    for name, store in stores(memo):
        for (key,) in store._sql("SELECT key FROM Cache").fetchall():
            arrays = memo.get_features(key) if name == FEATURES else \
                memo.get_arrays(key) if KEY.fullmatch(key) and _holds_arrays(key) else None
            if arrays is not None:
                h = hashlib.sha256()
                for k in sorted(arrays):
                    h.update(k.encode() + arrays[k].dtype.str.encode() + str(arrays[k].shape).encode())
                    h.update(np.ascontiguousarray(arrays[k]).tobytes())
                out[(name, key)] = h.hexdigest()
            else:
                out[(name, key)] = json.dumps(without_seconds(memo.get_record(key)), sort_keys=True)
    assert memo.problems == [], memo.problems
    memo.close()
    return out


def _holds_arrays(key: str) -> bool:
    from lazylab.schemas.entries import ArraySpec, entry_kind

    return isinstance(entry_kind(key), ArraySpec)


def delete_kinds(memo_dir: Path, kinds) -> None:
    memo = Memo(memo_dir)
    for key, _, _ in memo.entries():
        if KEY.fullmatch(key) and kind_of(key) in kinds:
            memo._cache.delete(key)
    memo.close()


def invoke(step, memo_dir: Path, out_dir: Path, capsys=None) -> tuple[int, str]:
    """Run one invocation of ``COMMANDS`` on ``memo_dir``: ``(exit status, stderr)``; a function's stderr is the
    memo's one-line problems."""
    if callable(step):
        from lazylab.experiments import Workspace

        ws = Workspace(None, memo_dir)
        step(ws)
        ws.memo.close()
        return 0, "\n".join(ws.memo.problems)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("LAZYLAB_CACHE", str(memo_dir))
        argv = [*step, *out_option(step, out_dir), "-q"]
        if capsys is not None:
            code, _, err = run(capsys, *argv)
            return code, err
        from lazylab.cli import main

        with pytest.raises(SystemExit) as exc:
            main(argv)
        return exc.value.code, ""


@pytest.fixture(scope="module", autouse=True)
def features_always_kept():
    """Every bank's features stored (that fit the cap): the store's policy keeps them when computing took longer
    than loading would (``lazylab.cache.worth_storing``), on a busy machine a coin toss at these sizes, and a
    rerun that drops a bank the clean run kept is no difference of binding."""
    from lazylab import cache

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cache, "worth_storing", lambda compute_s, nbytes, limit, *a, **kw: 0 < nbytes <= limit)
        yield


@pytest.fixture(scope="module")
def memo_of(tmp_path_factory):
    """``memo_of(command)``: ``(memo folder, its entries as read back)`` after every invocation of ``command``
    (``COMMANDS``), computed once per module."""
    done = {}

    def fill(command: str):
        if command not in done:
            root = tmp_path_factory.mktemp(command.replace(" ", "-"))
            for step in COMMANDS[command]:
                assert invoke(step, root / "memo", root / "out")[0] == 0, step
            done[command] = root / "memo", contents(root / "memo")
        return done[command]

    return fill


def moved_copy(clean_memo: Path, dest: Path, moves: list[tuple[str, str, str]]) -> Path:
    """A copy of ``clean_memo`` at ``dest`` with each ``(store, src, dst)`` move done at once (a swap is two)."""
    shutil.copytree(clean_memo, dest)
    memo = Memo(dest)
    blobs = []
    for store_name, src, dst in moves:
        store = dict(stores(memo))[store_name]
        blob = store.get(src, read=store_name == FEATURES)
        blobs.append(blob.read() if hasattr(blob, "read") else blob)
    for (store_name, _, dst), blob in zip(moves, blobs):
        dict(stores(memo))[store_name].set(dst, blob, tag=code_identity())
    memo.close()
    return dest


def rerun(command: str, memo_dir: Path, out_dir: Path, capsys) -> list[str]:
    """Every invocation of ``command`` again on ``memo_dir``, each exiting 0: the corrupt lines they print."""
    said = []
    for step in COMMANDS[command]:
        with no_hang(CASE_S):
            code, err = invoke(step, memo_dir, out_dir, capsys)
        assert code == 0 and "Traceback" not in err, (step, err)
        said += [line for line in lines(err) if "corrupt" in line]
    return said


def store_of(kind: tuple[str, str | None]) -> str:
    return FEATURES if kind == ("bankfeat", None) else "memo"


def test_every_kind_of_entry_has_its_property_case():
    from lazylab.schemas.entries import ENTRY_KINDS

    covered = [kind for kinds in KINDS.values() for kind in kinds]
    assert sorted(covered, key=str) == sorted(ENTRY_KINDS, key=str)


@pytest.mark.slow  # every command computes at tiny sizes, then again after each move
@pytest.mark.parametrize("command, kind", [(c, k) for c, kinds in KINDS.items() for k in kinds],
                         ids=lambda v: "-".join(p for p in v if p) if isinstance(v, tuple) else v)
@given(case=st.data())
@fuzz(1)
def test_property_a_value_moved_to_another_key_is_one_corrupt_line_recomputed_and_found_by_check(
        case, command, kind, memo_of, case_folder, capsys):
    clean_memo, clean = memo_of(command)
    capsys.readouterr()  # what filling the memo printed
    store_name = store_of(kind)
    keys = sorted(key for name, key in clean if name == store_name and kind_of(key) == kind)
    assert len(keys) >= 2, (command, kind, keys)  # the command's memo holds two entries of the kind
    src, dst = case.draw(st.permutations(keys))[:2]
    root = case_folder("moved")

    checked = moved_copy(clean_memo, root / "checked", [(store_name, src, dst)])
    with no_hang(CASE_S):
        code, out, err = run(capsys, "cache", "check", "--cache-dir", checked, "--json", "-")
    assert code == 0 and out.startswith("{"), (out, err)
    assert json.loads(out)["removed"] == 1 and dst in json.loads(out)["problems"][0], out

    moved = moved_copy(clean_memo, root / "rerun", [(store_name, src, dst)])
    delete_kinds(moved, READ_AFTER.get(kind, []))
    said = rerun(command, moved, root / "out", capsys)
    assert len(said) == 1 and dst in said[0] and f"sealed for the key {src!r}" in said[0], (kind, src, dst, said)
    assert contents(moved) == clean, (kind, src, dst)


@pytest.mark.slow  # the ladder's memo (shared with the test above)
def test_swapped_feature_banks_are_two_corrupt_lines_and_the_runs_train_on_their_own_features(
        memo_of, tmp_path, capsys):
    """The field case: two frozen banks' features swapped in the feature store made a ladder train on the wrong
    features and store the results as valid. Each is refused; every run equals the clean one."""
    clean_memo, clean = memo_of("ladder")
    capsys.readouterr()
    banks = sorted(key for store_name, key in clean if store_name == FEATURES)
    assert len(banks) == 4  # two seeds at each of two widths
    same_width = banks[:2] if Memo(clean_memo).get_features(banks[0])["train"].shape == \
        Memo(clean_memo).get_features(banks[1])["train"].shape else [banks[0], banks[2]]
    moved = moved_copy(clean_memo, tmp_path / "memo", [(FEATURES, same_width[0], same_width[1]),
                                                       (FEATURES, same_width[1], same_width[0])])
    delete_kinds(moved, READ_AFTER[("bankfeat", None)])  # the runs and readouts that read them
    said = rerun("ladder", moved, tmp_path / "out", capsys)
    assert sorted(said) == sorted(f"feature entry {b} is corrupt (sealed for the key {a!r}: a value moved from another "
                                  "key); recomputing" for a, b in (same_width, same_width[::-1])), said
    assert contents(moved) == clean


@pytest.mark.slow  # each case runs the command again
@pytest.mark.parametrize("command, part", [("gram", "summary"), ("trajectory", None)])
@given(case=st.data())
@fuzz(4)
def test_property_a_damaged_resealed_gram_or_trajectory_record_exits_0_or_2_never_1(
        case, command, part, memo_of, case_folder, capsys):
    """The field case: a damaged record sealed again under its own key (as a hand-edited memo holds it) made
    ``gram`` and ``trajectory`` exit 1 on every run. Now it is read if its kind's schema accepts it, else one
    corrupt line and recomputed; never an internal error."""
    from lazylab.schemas.entries import record_model

    clean_memo, clean = memo_of(command)
    capsys.readouterr()
    keys = sorted(key for _, key in clean if KEY.fullmatch(key) and kind_of(key) == (command[:4], part))
    key = case.draw(st.sampled_from(keys))
    memo_dir = case_folder("damaged") / "memo"
    shutil.copytree(clean_memo, memo_dir)
    memo = Memo(memo_dir)
    how, raw = case.draw(mutated(memo.get_record(key)))
    memo._put(key, raw)
    memo.close()
    try:
        record_model(key).model_validate(json.loads(raw))
        sound = True
    except (ValueError, RecursionError):
        sound = False
    for step in COMMANDS[command]:
        with no_hang(CASE_S):
            code, err = invoke(step, memo_dir, memo_dir.parent / "out", capsys)
        assert code in (0, 2) and "Traceback" not in err and "internal error" not in err, (how, err)
    if not sound:
        assert contents(memo_dir) == clean, how  # refused, recomputed: what a clean run stores


def test_a_value_sealed_for_one_key_is_refused_under_another_and_served_under_its_own(tmp_path):
    """Mechanics (synthetic arrays, keys of no known kind): the seal names the key."""
    memo = Memo(tmp_path / "m")
    arrays = {"W": np.arange(6, dtype=np.float32).reshape(2, 3)}
    memo.put_arrays("k-one", arrays)
    memo._cache.set("k-two", memo._cache.get("k-one"))  # k-one's sealed value, moved under k-two
    assert memo.check() == (1, ["memo entry 'k-two': sealed for the key 'k-one': a value moved from another key; "
                                "removed"])
    memo._cache.set("k-two", memo._cache.get("k-one"))
    assert memo.get_arrays("k-two") is None and "k-two" not in memo
    assert memo.problems == ["memo entry k-two is corrupt (sealed for the key 'k-one': a value moved from another "
                             "key); recomputing"]
    np.testing.assert_array_equal(memo.get_arrays("k-one")["W"], arrays["W"])


def test_every_kind_refuses_a_value_of_another_form(tmp_path):
    """A JSON record where a kind holds arrays, and arrays where it holds a record, each sealed for the key: one
    corrupt line, never served."""
    from lazylab.schemas.entries import ENTRY_KINDS, ArraySpec

    memo = Memo(tmp_path / "m")
    for (prefix, part), kind in ENTRY_KINDS.items():
        if prefix == "bankfeat":
            continue  # the feature store's kind: its entries are never records
        key = f"{prefix}-{'0' * 32}" + (f"-{part}" if part else "")
        if isinstance(kind, ArraySpec):
            memo.put_record(key, {"x": 1})
            assert memo.get_arrays(key) is None, key
        else:
            memo.put_arrays(key, {"x": np.zeros(2)})
            assert memo.get_record(key) is None, key
        assert memo.problems[-1].startswith(f"memo entry {key} is corrupt ("), memo.problems[-1]
    assert len(memo.problems) == len(ENTRY_KINDS) - 1


def test_an_entry_sealed_before_keys_were_sealed_is_served_only_if_it_names_its_key(tmp_path):
    """Memos written before the seal named the key hold run, convex and lambda-choice records that name their key
    themselves: still served (the shipped reference and long computations stay valid); any other entry is not."""
    import hashlib

    def old_seal(payload: bytes) -> bytes:
        return hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload

    memo = Memo(tmp_path / "m")
    run_key, other = "run-" + "1" * 32, "run-" + "2" * 32
    config = {"arm": "yat-frozen", "width": 8, "seed": 0, "lr": 0.1}
    record = {"key": run_key, "config": config, "best_acc": 80.0}
    memo._cache.set(run_key, old_seal(json.dumps(record).encode()))
    memo._cache.set(other, old_seal(json.dumps(record).encode()))  # names another key: moved
    memo._cache.set("k", old_seal(json.dumps({"x": 1}).encode()))  # names none
    assert memo.get_record(run_key)["best_acc"] == 80.0
    assert memo.get_record(other) is None and memo.get_record("k") is None
    assert memo.problems == [
        f"memo entry {other} is corrupt (its record names the key {run_key!r}: a value moved from another key); "
        "recomputing",
        "memo entry k is corrupt (sealed without its key, by an older lazylab); recomputing"]
