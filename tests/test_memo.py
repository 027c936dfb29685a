"""The memo: keys, round trips, and refusal of anything but checked JSON and npz."""

from __future__ import annotations

import dataclasses
import stat

import numpy as np

from lazylab.cache import Memo
from lazylab.config import RunConfig

BASE = RunConfig(arm="yat-frozen", plugin="lazylab 0.1.0", width=64, seed=0, lr=0.1, data="abc")


def test_key_changes_with_every_field():
    changes = dict(arm="relu-frozen", plugin="lazylab 0.2.0", width=65, seed=1, lr=0.3, epochs=3, batch=128,
                   train_size=1000, weight_decay=0.0, fan_in="d", data="abd", schema=99)
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
