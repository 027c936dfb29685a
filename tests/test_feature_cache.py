"""The memo's feature store: a capped, least-recently-used store beside run records that it never evicts."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import lazylab.cache
from lazylab.cache import DEFAULT_CACHE_LIMIT, Memo, parse_size, worth_storing
from cli_helpers import assert_one_line_error, run

ENTRY = 40_000  # float32 values: 160 kB per entry


def block(i: int) -> dict[str, np.ndarray]:
    return {"train": np.full((ENTRY // 4, 4), i, np.float32), "test": np.arange(8, dtype=np.float32) + i}


def entry_bytes(memo: Memo) -> int:
    """Bytes one ``block`` entry takes in the feature store (payload plus checksum and header lines)."""
    memo.put_features("probe", block(0))
    size = memo._features._sql("SELECT size FROM Cache WHERE key = 'probe'").fetchone()[0]
    memo._features.delete("probe")
    return size


def feature_files(memo: Memo) -> list:
    return sorted(memo.feature_dir.rglob("*.val"))


def test_cap_evicts_least_recently_used_features_and_never_a_run_record(tmp_path):
    memo = Memo(tmp_path / "m", feature_limit=10**9)
    size = entry_bytes(memo)
    memo.close()
    memo = Memo(tmp_path / "m", feature_limit=3 * size + 64 * 1024)  # three entries and the sqlite file
    for i in range(5):
        memo.put_record(f"run-{i}", {"best_acc": float(i)})
    for i in range(3):
        assert memo.put_features(f"f{i}", block(i))
    assert memo.get_features("f0") is not None  # f0 is now the most recently used
    for i in range(3, 6):
        assert memo.put_features(f"f{i}", block(i))
        memo.put_record(f"run-x{i}", {"best_acc": 1.0})
    entries, volume = memo.feature_stats()
    assert volume <= memo.feature_limit
    assert entries == 3 and len(feature_files(memo)) == 3  # evicted entries leave no file behind
    present = [i for i in range(6) if memo.get_features(f"f{i}") is not None]
    assert present == [3, 4, 5]
    assert all(memo.get_record(f"run-{i}") == {"best_acc": float(i)} for i in range(5))
    assert all(memo.get_record(f"run-x{i}") is not None for i in range(3, 6))
    assert len(memo) == 8 and memo.problems == []


def test_recently_read_entry_survives_eviction(tmp_path):
    probe = Memo(tmp_path / "p", feature_limit=10**9)
    size = entry_bytes(probe)
    memo = Memo(tmp_path / "m", feature_limit=2 * size + 64 * 1024)
    memo.put_features("a", block(1))
    memo.put_features("b", block(2))
    assert memo.get_features("a") is not None  # "b" becomes the least recently used
    memo.put_features("c", block(3))
    assert memo.get_features("b") is None
    assert memo.get_features("a") is not None and memo.get_features("c") is not None


def test_entry_larger_than_the_cap_is_not_stored_and_evicts_nothing(tmp_path):
    memo = Memo(tmp_path / "m", feature_limit=300_000)
    assert memo.put_features("small", {"x": np.zeros(10, np.float32)})
    assert not memo.put_features("big", {"x": np.zeros(100_000, np.float32)})  # 400 kB > 300 kB
    assert memo.get_features("big") is None and memo.get_features("small") is not None


def test_cap_zero_stores_and_reads_nothing(tmp_path):
    memo = Memo(tmp_path / "m", feature_limit=0)
    assert not memo.put_features("k", block(0))
    assert memo.get_features("k") is None
    assert not memo.feature_dir.exists()
    assert memo.feature_stats() == (0, 0)
    with pytest.raises(ValueError):
        Memo(tmp_path / "n", feature_limit=-1)


def test_feature_matrices_round_trip_bit_for_bit(tmp_path):
    rng = np.random.default_rng(0)
    odd = np.array([np.nan, -np.nan, -0.0, np.inf, -np.inf, np.float32(1e-45), 3.4e38], np.float32)
    odd_bits = odd.view(np.uint32).copy()
    odd_bits[0] |= 0x1234  # a NaN with a payload
    arrays = {
        "train": rng.standard_normal((257, 33)).astype(np.float32),
        "test": odd_bits.view(np.float32),
        "labels": rng.integers(0, 10, 17).astype(np.uint8),
        "wide": rng.standard_normal((3, 5)),  # float64
        "scalar": np.array(2.5, ">f8"),
        "empty": np.zeros((0, 7), np.float32),
        "strided": rng.standard_normal((6, 8)).astype(np.float32)[:, ::2],
    }
    Memo(tmp_path / "m").put_features("k", arrays)
    got = Memo(tmp_path / "m").get_features("k")  # a fresh handle, as a later process reads it
    assert list(got) == list(arrays)
    for name, a in arrays.items():
        assert got[name].dtype == a.dtype and got[name].shape == a.shape, name
        assert got[name].tobytes() == np.ascontiguousarray(a).tobytes(), name


def test_corrupt_feature_entry_reads_as_missing_and_is_removed(tmp_path):
    memo = Memo(tmp_path / "m")
    memo.put_features("k", block(1))
    (path,) = feature_files(memo)
    blob = bytearray(path.read_bytes())
    blob[-5] ^= 0xFF
    path.write_bytes(bytes(blob))
    assert memo.get_features("k") is None
    assert len(memo.problems) == 1 and "feature entry k is corrupt" in memo.problems[0]
    assert memo.feature_stats()[0] == 0
    memo.put_features("k", block(1))
    np.testing.assert_array_equal(memo.get_features("k")["train"], block(1)["train"])


@pytest.mark.parametrize("header", [
    b'{"arrays":[{"name":"x","dtype":"<f4","shape":[1000000000,1000000]}]}\n',  # claims far more than the file
    b'{"arrays":[{"name":"x","dtype":"|O","shape":[1]}]}\n',  # objects: never
    b'{"arrays":[{"name":"x","dtype":"V8","shape":[1]}]}\n',
    b'not json\n',
])
def test_planted_feature_header_is_refused_before_allocating(tmp_path, header):
    from lazylab.cache import _SealedReader

    memo = Memo(tmp_path / "m")
    memo.put_features("k", block(0))
    payload = header + b"\0" * 8
    memo._features.set("k", _SealedReader([memoryview(payload)], "k"), read=True)  # a valid checksum
    assert memo.get_features("k") is None
    assert "corrupt" in memo.problems[0]


def test_truncated_feature_file_is_detected(tmp_path):
    memo = Memo(tmp_path / "m")
    memo.put_features("k", block(2))
    (path,) = feature_files(memo)
    path.write_bytes(path.read_bytes()[:1000])
    assert memo.get_features("k") is None and "corrupt" in memo.problems[0]


def test_failed_feature_write_leaves_no_file_and_keeps_the_run(tmp_path, monkeypatch):
    memo = Memo(tmp_path / "m")
    memo.put_record("run-a", {"x": 1})
    memo.put_features("old", block(1))
    read = lazylab.cache._SealedReader.read
    calls = []

    def full_disk(self, n=-1):
        calls.append(n)
        if len(calls) > 2:
            raise OSError(28, "No space left on device")
        return read(self, n)

    monkeypatch.setattr(lazylab.cache._SealedReader, "read", full_disk)
    assert not memo.put_features("new", block(2))
    assert "cannot write to the feature store" in memo.problems[0] and "No space left" in memo.problems[0]
    assert len(feature_files(memo)) == 1  # only "old": the partial file is gone
    assert memo.get_features("new") is None and memo.get_features("old") is not None
    assert memo.get_record("run-a") == {"x": 1}


def test_clear_removes_features_too(tmp_path):
    memo = Memo(tmp_path / "m")
    memo.put_record("run-a", {"x": 1})
    memo.put_features("f", block(0))
    assert memo.clear() == 2
    assert len(memo) == 0 and memo.feature_stats()[0] == 0 and feature_files(memo) == []


def test_policy_stores_when_loading_beats_recomputing_and_it_fits():
    rate = lazylab.cache.FEATURE_LOAD_BYTES_PER_S
    nbytes = 10**9
    load_s = lazylab.cache.FEATURE_LOAD_OVERHEAD_S + nbytes / rate
    assert worth_storing(load_s * 1.1, nbytes, DEFAULT_CACHE_LIMIT)
    assert not worth_storing(load_s * 0.9, nbytes, DEFAULT_CACHE_LIMIT)
    assert not worth_storing(load_s * 10, nbytes, nbytes - 1)  # does not fit under the cap
    assert not worth_storing(load_s * 10, nbytes, 0)


@pytest.mark.parametrize("text, size", [
    ("0", 0), ("8GiB", 8 * 2**30), ("500MB", 500 * 10**6), ("1.5g", 1_500_000_000), ("12 KiB", 12 * 1024),
    ("4096", 4096), ("2TB", 2 * 10**12),
])
def test_parse_size(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["abc", "-1", "", "8 GiBs", "1e9", "nan", "2PiB", "99999999TiB"])
def test_parse_size_refuses(text):
    with pytest.raises(ValueError):
        parse_size(text)


def test_cli_default_is_the_library_default():
    from lazylab.cli.options import CACHE_LIMIT_DEFAULT

    assert parse_size(CACHE_LIMIT_DEFAULT) == DEFAULT_CACHE_LIMIT


@pytest.mark.parametrize("value", ["abc", "-5GB", "1PB2"])
def test_bad_cache_limit_is_one_line_exit_2(capsys, memo_dir, value):
    code, _, err = run(capsys, "ladder", "--arms", "yat-frozen", "--cache-limit", value)
    assert_one_line_error(code, err, "--cache-limit", value)
    code, _, err = run(capsys, "render", "figures", "--cache-limit", value)
    assert_one_line_error(code, err, "--cache-limit")


def test_cache_info_shows_the_feature_store(capsys, memo_dir):
    Memo(memo_dir).put_features("f", block(0))
    code, out, err = run(capsys, "cache", "info", "--cache-dir", memo_dir)
    assert code == 0, err
    assert "1 feature matrices" in out and "8GiB" in out


# ------------------------------------------------- Workspace.bank_features on real images
def small_cell(ws, width=8, real=True):
    """A yat-frozen cell on 512 training images; ``real=False``: a stand-in model with only ``feat.W``'s shape."""
    from types import SimpleNamespace

    from lazylab.arms import get_arm
    from lazylab.model import build_model

    arm = get_arm("yat-frozen")
    cfg = ws.config(arm, width, 0, 0.1, epochs=1, train_size=512)
    if real:
        return arm, cfg, build_model(arm, width, 0, ws.data.x_train[:512])
    return arm, cfg, SimpleNamespace(feat=SimpleNamespace(W=np.zeros((width, 784), np.float32)))


@pytest.mark.slow
def test_bank_features_are_stored_loaded_and_recomputed_when_corrupt(tmp_path, monkeypatch):
    import lazylab.model
    from lazylab.experiments import Workspace

    memo_dir = tmp_path / "memo"
    monkeypatch.setattr(lazylab.cache, "worth_storing", lambda *a, **k: True)  # whatever this machine's speed
    ws = Workspace(None, memo_dir)
    arm, cfg, model = small_cell(ws)
    computed = [np.asarray(f) for f in ws.bank_features(arm, cfg, model)]
    assert computed[0].shape == (512, 8) and computed[1].shape == (len(ws.data.y_test), 8)
    assert ws.memo.feature_stats()[0] == 1
    ws.memo.close()

    real_features = lazylab.model.features
    calls = []
    monkeypatch.setattr(lazylab.model, "features", lambda *a, **k: calls.append(1) or real_features(*a, **k))
    ws = Workspace(None, memo_dir)
    loaded = [np.asarray(f) for f in ws.bank_features(arm, cfg, model)]
    assert calls == [] and ws.memo.problems == []
    assert all(a.tobytes() == b.tobytes() for a, b in zip(loaded, computed))
    ws.memo.close()

    (path,) = feature_files(Memo(memo_dir))
    blob = bytearray(path.read_bytes())
    blob[len(blob) // 2] ^= 0x01
    path.write_bytes(bytes(blob))
    ws = Workspace(None, memo_dir)
    again = [np.asarray(f) for f in ws.bank_features(arm, cfg, model)]
    assert len(calls) == 2  # train and test recomputed
    assert any("corrupt" in p for p in ws.memo.problems)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(again, computed))


def fake_features(monkeypatch):
    """Store every bank, and make its "features" zeros of the right shape (these tests are about keys, not values)."""
    import jax.numpy as jnp

    import lazylab.model

    monkeypatch.setattr(lazylab.cache, "worth_storing", lambda *a, **k: True)
    monkeypatch.setattr(lazylab.model, "features", lambda feat, x: jnp.zeros((len(x), feat.W.shape[0]), jnp.float32))


def test_bank_features_key_separates_what_changes_the_features(tmp_path, monkeypatch):
    from lazylab.experiments import Workspace

    fake_features(monkeypatch)
    ws = Workspace(None, tmp_path / "memo")
    arm, cfg, model = small_cell(ws, real=False)
    ws.bank_features(arm, cfg, model)
    ws.bank_features(arm, dataclasses.replace(cfg, lr=0.3, epochs=5), model)  # same bank, another run
    assert ws.memo.feature_stats()[0] == 1
    arm, cfg16, model16 = small_cell(ws, width=16, real=False)
    ws.bank_features(arm, cfg16, model16)
    ws.bank_features(arm, dataclasses.replace(cfg16, seed=1), model16)
    ws.bank_features(arm, dataclasses.replace(cfg16, fan_in="d"), model16)
    ws.bank_features(arm, dataclasses.replace(cfg16, data="another fingerprint"), model16)
    assert ws.memo.feature_stats()[0] == 5
    assert ws.memo.problems == []


def test_cache_limit_zero_workspace_stores_no_features(tmp_path, monkeypatch):
    from lazylab.experiments import Workspace

    fake_features(monkeypatch)
    ws = Workspace(None, tmp_path / "memo", cache_limit=0)
    ws.bank_features(*small_cell(ws, real=False))
    assert not ws.memo.feature_dir.exists()
