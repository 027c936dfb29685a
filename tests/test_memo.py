"""The memo: keys, round trips, and refusal of anything but checked JSON and npz."""

from __future__ import annotations

import dataclasses
import os
import stat

import numpy as np
import pytest

import lazylab
import lazylab.errors

from lazylab.cache import Memo
from lazylab.config import RunConfig

BASE = RunConfig(arm="yat-frozen", plugin="lazylab 0.1.0", width=64, seed=0, lr=0.1, data="abc")


def test_key_changes_with_every_field():
    changes = dict(arm="relu-frozen", plugin="lazylab 0.2.0", width=65, seed=1, lr=0.3, epochs=3, batch=128,
                   train_size=1000, weight_decay=0.0, fan_in="d", data="abd", schema=99,
                   code="lazylab 0.1.0 numerics 0")
    keys = {BASE.key()}
    for field, value in changes.items():
        keys.add(dataclasses.replace(BASE, **{field: value}).key())
    assert len(keys) == len(changes) + 1
    assert BASE.key() == RunConfig(**dataclasses.asdict(BASE)).key()


def test_records_and_arrays_round_trip(tmp_path):
    memo = Memo(tmp_path / "m")
    assert stat.S_IMODE((tmp_path / "m").stat().st_mode) == 0o700
    memo.put_record("r", {"best_acc": 85.25, "curve": [1.0, 2.0]})
    memo.put_arrays("a", {"W": np.arange(6, dtype=np.float32).reshape(2, 3)})
    assert memo.get_record("r") == {"best_acc": 85.25, "curve": [1.0, 2.0]}
    np.testing.assert_array_equal(memo.get_arrays("a")["W"], np.arange(6, dtype=np.float32).reshape(2, 3))
    assert memo.get_record("missing") is None


def test_corrupt_entry_is_reported_and_treated_as_missing(tmp_path):
    memo = Memo(tmp_path / "m")
    memo.put_record("r", {"best_acc": 85.25})
    memo._cache.set("r", b"0" * 64 + b'\n{"best_acc": 99}')  # payload without its checksum
    assert memo.get_record("r") is None
    assert any("corrupt" in p for p in memo.problems)


def test_pickled_value_is_never_unpickled(tmp_path):
    import diskcache

    class Boom:
        def __reduce__(self):
            return (exec, ("open(%r, 'w').write('pwned')" % str(tmp_path / "pwned"),))

    plain = diskcache.Cache(str(tmp_path / "m"))  # a writer that pickles, as an attacker would
    plain.set("r", Boom())
    plain.close()
    memo = Memo(tmp_path / "m")
    assert memo.get_record("r") is None
    assert not (tmp_path / "pwned").exists()


def test_memo_never_evicts_finished_runs(tmp_path):
    # diskcache's default policy culls the oldest entries past its size limit (1 GiB).
    memo = Memo(tmp_path / "m")
    memo._cache.reset("size_limit", 1000)
    for i in range(20):
        memo.put_arrays(f"a{i}", {"W": np.zeros(1000, np.float32)})
    assert all(memo.get_arrays(f"a{i}") is not None for i in range(20))


# The tiny reference runs: yat-trained and yat-frozen, m = 8, seed 0, lr 0.1, one epoch (batch 256)
# on the first 1,024 real training images, tested on the 10,000 test images.
REFERENCE_ARMS = ("yat-trained", "yat-frozen")

# Their bits, per NUMERICS_VERSION. A change that alters them must bump lazylab.config.NUMERICS_VERSION
# (so that older records are never served) and add its digest here.
PINNED_NUMERICS = {
    1: "42fccf2492ca48c4776af3e2bf4549d08703ec83de89e0e29e9a93809435a6a3",
}
# Where the digests hold. XLA compiles its CPU code for the CPU it runs on, so the bits depend on the
# CPU model as well as on jaxlib and the architecture: on the AMD EPYC below, capping XLA at AVX
# (XLA_FLAGS=--xla_cpu_max_isa=AVX) already changes them, while AVX2 and AVX-512 give the same.
# Digest 1 was taken on the 2-core development machine, whose CPU model was not recorded; it was
# reproduced bit for bit on this "AMD EPYC" (2 cores, jaxlib 0.10.2), which is the CPU pinned here.
# A virtual machine's model name can be as bare as "AMD EPYC" on several microarchitectures (issue 30's
# "AMD EPYC" computed other bits), so the key also holds xla_cache.cpu_tag(): the architecture and a hash
# of the CPU's instruction-set flags, which is what XLA compiles for.
PINNED_ON = {"jaxlib": "0.10.2", "machine": "x86_64", "cpu": "AMD EPYC", "isa": "x86_64-2e7fd049e1f1"}

# The same runs' numbers, for the tolerance check that runs on any machine. Taken on the AMD EPYC
# above with jaxlib 0.10.2; they are the development machine's as well (the same digest).
PINNED_VALUES = {
    "yat-trained": {"best_acc": 25.75, "final_acc": 25.75, "best_epoch": 1, "curve": [25.75],
                    "train_loss": [2.4358596801757812],
                    "movement": {"unit_max": 0.5431245522416307, "unit_median": 0.42979391302673686,
                                 "w_move_rel": 0.4425291616268497},
                    "scalars_end": {"b": 0.5116026401519775, "eps": 0.6314607262611389}},
    "yat-frozen": {"best_acc": 18.29, "final_acc": 18.29, "best_epoch": 1, "curve": [18.29],
                   "train_loss": [2.289846181869507],
                   "movement": {"unit_max": 0.0, "unit_median": 0.0, "w_move_rel": 0.0},
                   "scalars_end": {"b": 0.4999999701976776, "eps": 0.4999999701976776}},
}
# How far another machine's numbers may be from PINNED_VALUES. Measured on the AMD EPYC by making XLA
# compile as for other CPUs (--xla_cpu_max_isa=SSE4_2 or AVX; --xla_cpu_enable_fast_math=true; one
# core): accuracies and losses came out identical, movement within 3.2e-8 and the unit's trained
# scalars within 1.2e-7 (relative; one or two float32 ulps). A real numerics change moves them far
# more: the learning rate 0.1 -> 0.1001 (0.1 %) moves the trained run's loss by 5e-4 and its movement
# by 5e-4 to 1e-3 (relative), the frozen run's loss by 6.6e-6; 0.1 -> 0.101 (1 %) moves the test
# accuracies by 0.33 and 0.07 points.
TOLERANCES = {
    # absolute, in points of test accuracy: 5 of the 10,000 test images may change class (none did);
    # a logit rounding difference of 1e-7 flips an image only at a near tie, while 1 % of learning
    # rate moves 7 and 33 images.
    "acc": 0.05,
    # relative: ~100 times the ulp-level differences measured, so another CPU's summation order or
    # math library cannot trip it, yet 50 times below what a 0.1 % learning-rate change does (the
    # frozen run's loss, nearly insensitive to the readout's rate, still fails at 1 %: 6.5e-5). Being
    # relative, it keeps a frozen bank's movement at exactly 0.
    "train_loss": 1e-5,
    "movement": 1e-5,
    "scalars_end": 1e-5,
}


def _within_tolerance(records: list[dict], pinned: dict) -> list[str]:
    """Compare run records with pinned values (``PINNED_VALUES``'s shape) within ``TOLERANCES``.

    Returns: one line per problem (an arm missing or unexpected, a number outside its tolerance);
    empty when every record is within tolerance of its pinned values.
    """
    problems = []
    got = {r["config"]["arm"]: r for r in records}
    if sorted(got) != sorted(pinned):
        problems.append(f"runs of arms {sorted(got)}, pinned values for {sorted(pinned)}")
    for arm in sorted(set(got) & set(pinned)):
        r, p = got[arm], pinned[arm]

        def check(what, value, ref, tol, relative):
            allowed = tol * abs(ref) if relative else tol
            if value is None or not abs(value - ref) <= allowed:
                problems.append(f"{arm} {what}: {value!r}, pinned {ref!r} (tolerance {tol:g}"
                                f"{' relative' if relative else ' points'})")

        if r.get("best_epoch") != p["best_epoch"]:
            problems.append(f"{arm} best_epoch: {r.get('best_epoch')!r}, pinned {p['best_epoch']!r}")
        for field in ("best_acc", "final_acc"):
            check(field, r.get(field), p[field], TOLERANCES["acc"], False)
        for field, tol_key, relative in (("curve", "acc", False), ("train_loss", "train_loss", True)):
            values = r.get(field) or []
            if len(values) != len(p[field]):
                problems.append(f"{arm} {field}: {len(values)} epochs, pinned {len(p[field])}")
            for i, (v, ref) in enumerate(zip(values, p[field])):
                check(f"{field}[{i}]", v, ref, TOLERANCES[tol_key], relative)
        for field, values in (("movement", r.get("movement") or {}),
                              ("scalars_end", (r.get("scalars") or {}).get("end") or {})):
            for k, ref in p[field].items():
                check(f"{field}.{k}", values.get(k), ref, TOLERANCES[field], True)
    return problems


@pytest.fixture(scope="module")
def reference_records(tmp_path_factory) -> list[dict]:
    """The reference runs' records (REFERENCE_ARMS), computed once for this module's tests."""
    from lazylab.arms import get_arm
    from lazylab.experiments import Workspace, train_runs

    ws = Workspace(None, tmp_path_factory.mktemp("reference-runs") / "m", cache_limit=0)
    records = []
    for name in REFERENCE_ARMS:
        arm = get_arm(name)
        records += train_runs(ws, arm, [ws.config(arm, 8, 0, 0.1, epochs=1, batch=256, train_size=1024)])
    return records


def _numbers_digest(records: list[dict]) -> str:
    """SHA-256 of the records' numbers: everything but the wall time, the key and the config (which hold the version)."""
    import hashlib
    import json

    numbers = [{k: v for k, v in r.items() if k not in ("seconds", "key", "config")} for r in records]
    return hashlib.sha256(json.dumps(numbers, sort_keys=True).encode()).hexdigest()


def test_numerics_version_pins_the_bits_of_a_reference_run(request):
    import platform

    import jax
    import jaxlib

    from lazylab.config import NUMERICS_VERSION
    from lazylab.reference import cpu_model

    from lazylab.xla_cache import cpu_tag

    here = {"jaxlib": jaxlib.__version__, "machine": platform.machine(), "cpu": cpu_model(), "isa": cpu_tag()}
    if jax.default_backend() != "cpu" or here != PINNED_ON:
        def where(d):
            return f"the CPU {d['cpu']!r} (flags {d['isa']}, jaxlib {d['jaxlib']}, {d['machine']})"

        pytest.skip(f"the bits are pinned on {where(PINNED_ON)}; this is {jax.default_backend()} on {where(here)} "
                    "(test_reference_runs_are_within_tolerance checks the same runs within tolerances)")
    records = request.getfixturevalue("reference_records")
    assert all(r["best_acc"] is not None and 15 < r["best_acc"] < 100 for r in records)  # above chance (10 %)
    assert _numbers_digest(records) == PINNED_NUMERICS[NUMERICS_VERSION], (
        "the training numerics changed: bump lazylab.config.NUMERICS_VERSION and pin the new digest "
        f"(if no code changed, this machine's XLA computes other bits than the pinning one, {PINNED_ON})")


def test_reference_runs_are_within_tolerance(reference_records):
    import jax

    from lazylab.reference import cpu_model

    problems = _within_tolerance(reference_records, PINNED_VALUES)
    assert not problems, (f"the reference runs on {jax.default_backend()} ({cpu_model()}) are outside the "
                          f"tolerances of the values pinned on {PINNED_ON}:\n" + "\n".join(problems))


def test_the_tolerance_check_fails_a_number_moved_beyond_it():
    import copy

    def records(values):
        return [{"config": {"arm": arm}, **{k: copy.deepcopy(v) for k, v in p.items() if k != "scalars_end"},
                 "scalars": {"end": copy.deepcopy(p["scalars_end"])}} for arm, p in values.items()]

    assert _within_tolerance(records(PINNED_VALUES), PINNED_VALUES) == []
    moved = copy.deepcopy(PINNED_VALUES)
    moved["yat-trained"]["train_loss"][0] *= 1 + 3 * TOLERANCES["train_loss"]
    assert _within_tolerance(records(moved), PINNED_VALUES) == [
        f"yat-trained train_loss[0]: {moved['yat-trained']['train_loss'][0]!r}, pinned 2.4358596801757812 "
        "(tolerance 1e-05 relative)"]
    moved = copy.deepcopy(PINNED_VALUES)
    moved["yat-frozen"]["best_acc"] += 2 * TOLERANCES["acc"]
    moved["yat-frozen"]["movement"]["w_move_rel"] = 1e-6  # a frozen bank that moved
    assert [p.split(":")[0] for p in _within_tolerance(records(moved), PINNED_VALUES)] == [
        "yat-frozen best_acc", "yat-frozen movement.w_move_rel"]
    # Just inside the tolerance passes.
    inside = copy.deepcopy(PINNED_VALUES)
    inside["yat-frozen"]["best_acc"] += TOLERANCES["acc"] / 2
    assert _within_tolerance(records(inside), PINNED_VALUES) == []


def test_every_memo_key_holds_the_code_identity(monkeypatch):
    from lazylab import config

    assert BASE.code == config.CODE == f"lazylab {lazylab.__version__} numerics {config.NUMERICS_VERSION}"
    before = (BASE.key(), config.memo_key("gram", {"width": 8}))
    monkeypatch.setattr(config, "CODE", "lazylab 0.1.0 numerics 0")
    older = RunConfig(**{**dataclasses.asdict(BASE), "code": config.code_identity()})
    assert older.code == "lazylab 0.1.0 numerics 0"
    assert older.key() != before[0] and config.memo_key("gram", {"width": 8}) != before[1]


def test_entries_are_counted_per_code_identity_and_pruned(tmp_path, monkeypatch):
    from lazylab import config

    memo = Memo(tmp_path / "m")
    memo.put_record("new", {"x": 1})
    memo.put_features("feat", {"train": np.ones((4, 2), np.float32)})
    monkeypatch.setattr(config, "CODE", "lazylab 0.1.0 numerics 0")
    memo.put_record("old", {"x": 0})
    monkeypatch.undo()
    memo._cache.set("legacy", b"x")  # written before entries carried a code identity (no tag)
    assert memo.code_counts() == {config.CODE: 2, "lazylab 0.1.0 numerics 0": 1, None: 1}
    assert memo.stale_note() == ("note: the memo holds 2 entries computed by other code (1 by lazylab 0.1.0 numerics 0, "
                                 f"1 by lazylab 0.1.0 (no code identity)); they are never reused, so those results are "
                                 f"recomputed by {config.CODE} (`lazylab cache prune` removes them)")
    assert memo.prune() == 2
    assert memo.code_counts() == {config.CODE: 2} and memo.stale_note() is None
    assert memo.get_record("new") == {"x": 1} and "old" not in memo


@pytest.mark.parametrize("target", ["an empty file", "a dangling link", "a journal"])
def test_a_cache_db_linked_outside_the_memo_is_refused_in_one_line_and_the_outside_left_alone(tmp_path, target, capsys):
    """sqlite would turn an empty outside file into a database, or create a dangling link's target, and write there."""
    from cli_helpers import assert_one_line_error, run

    memo, outside = tmp_path / "memo", tmp_path / "elsewhere" / "db"
    memo.mkdir()
    outside.parent.mkdir()
    name = "cache.db-wal" if target == "a journal" else "cache.db"
    if target != "a dangling link":
        outside.write_bytes(b"")
    (memo / name).symlink_to(outside)
    code, out, err = run(capsys, "cache", "info", "--cache-dir", memo)
    assert_one_line_error(code, err, f"the memo location {memo} holds a {name} that resolves outside it, to {outside}")
    assert code == 2 and out == ""
    assert (outside.read_bytes() == b"") if target != "a dangling link" else not os.path.lexists(outside)
    assert sorted(p.name for p in memo.iterdir()) == [name]  # nothing created beside it
    with pytest.raises(lazylab.errors.LazylabError, match="resolves outside it"):
        Memo(memo)


def test_a_feature_store_index_linked_outside_the_memo_is_not_used(tmp_path):
    memo = Memo(tmp_path / "m")
    outside = tmp_path / "outside.db"
    outside.write_bytes(b"")
    (tmp_path / "m" / "features").mkdir()
    (tmp_path / "m" / "features" / "cache.db").symlink_to(outside)
    assert memo.put_features("f", {"train": np.ones((4, 2), np.float32)}) is False
    assert memo.problems == [f"the feature store {tmp_path / 'm' / 'features' / 'cache.db'} resolves outside the "
                             "memo; features are recomputed"]
    assert outside.read_bytes() == b""


def test_a_feature_store_resolving_outside_the_memo_is_not_used(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "features").symlink_to(outside, target_is_directory=True)
    memo = Memo(tmp_path / "m")
    assert memo.put_features("f", {"train": np.ones((4, 2), np.float32)}) is False
    assert memo.get_features("f") is None
    assert memo.problems == [f"the feature store {tmp_path / 'm' / 'features'} resolves outside the memo; "
                             "features are recomputed"]
    assert list(outside.iterdir()) == []
