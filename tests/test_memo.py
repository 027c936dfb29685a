"""The memo: keys, round trips, and refusal of anything but checked JSON and npz."""

from __future__ import annotations

import dataclasses
import stat

import numpy as np
import pytest

import lazylab

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


# The bits of a tiny reference run (yat-trained and yat-frozen, m = 8, one epoch on the first
# 1,024 real training images), per NUMERICS_VERSION. A change that alters them must bump
# lazylab.config.NUMERICS_VERSION (so that older records are never served) and add its digest here.
PINNED_NUMERICS = {
    1: "42fccf2492ca48c4776af3e2bf4549d08703ec83de89e0e29e9a93809435a6a3",
}
# Where the digests were taken: another jaxlib or architecture may compile other float sums.
PINNED_ON = {"jaxlib": "0.10.2", "machine": "x86_64"}


def _numbers_digest(records: list[dict]) -> str:
    """SHA-256 of the records' numbers: everything but the wall time, the key and the config (which hold the version)."""
    import hashlib
    import json

    numbers = [{k: v for k, v in r.items() if k not in ("seconds", "key", "config")} for r in records]
    return hashlib.sha256(json.dumps(numbers, sort_keys=True).encode()).hexdigest()


def test_numerics_version_pins_the_bits_of_a_reference_run(tmp_path):
    import jax

    from lazylab.arms import get_arm
    from lazylab.config import NUMERICS_VERSION
    from lazylab.experiments import Workspace, train_runs

    import platform

    import jaxlib

    here = {"jaxlib": jaxlib.__version__, "machine": platform.machine()}
    if jax.default_backend() != "cpu" or here != PINNED_ON:
        pytest.skip(f"the bits are pinned on the CPU with {PINNED_ON}; this is {jax.default_backend()} with {here}")
    ws = Workspace(None, tmp_path / "m", cache_limit=0)
    records = []
    for name in ("yat-trained", "yat-frozen"):
        arm = get_arm(name)
        records += train_runs(ws, arm, [ws.config(arm, 8, 0, 0.1, epochs=1, batch=256, train_size=1024)])
    assert all(r["best_acc"] is not None and 15 < r["best_acc"] < 100 for r in records)  # above chance (10 %)
    assert _numbers_digest(records) == PINNED_NUMERICS[NUMERICS_VERSION], (
        "the training numerics changed: bump lazylab.config.NUMERICS_VERSION and pin the new digest "
        f"(if no code changed, this machine's XLA computes other bits than the pinning one, {PINNED_ON})")


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
