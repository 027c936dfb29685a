"""Tests for lazylab.data against the real Fashion-MNIST files (no mocks).

Bad-file cases are built from the real files (truncated copies, re-headed
payloads); downloads go through a real HTTP server on 127.0.0.1.
"""

from __future__ import annotations

import functools
import gzip
import http.server
import json
import os
import shutil
import socket
import struct
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lazylab import data
from lazylab.errors import DataError

REAL = data.DEBIAN_DIR
NAMES = list(data.FILES.values())
TRAIN_IMAGES, TRAIN_LABELS, TEST_IMAGES, TEST_LABELS = NAMES

pytestmark = pytest.mark.skipif(
    not all((REAL / n).is_file() for n in NAMES),
    reason=f"Fashion-MNIST not installed at {REAL} (apt-get install dataset-fashion-mnist)",
)


# --------------------------------------------------------------------------- helpers


def make_dir(path: Path, *, skip=(), replace=None) -> Path:
    """A data dir of symlinks to the real files, minus ``skip``, with ``replace`` = {name: bytes}."""
    replace = replace or {}
    path.mkdir(parents=True, exist_ok=True)
    for name in NAMES:
        if name in skip:
            continue
        if name in replace:
            (path / name).write_bytes(replace[name])
        else:
            (path / name).symlink_to(REAL / name)
    return path


def idx_bytes(array: np.ndarray, magic: int | None = None) -> bytes:
    """Gzipped IDX encoding of a uint8 array (magic from its ndim unless given)."""
    array = np.asarray(array, dtype=np.uint8)
    magic = 0x0800 | array.ndim if magic is None else magic
    header = struct.pack(f">i{array.ndim}i", magic, *array.shape)
    return gzip.compress(header + array.tobytes(), compresslevel=1)


def real_test_labels() -> np.ndarray:
    return data.read_idx(REAL / TEST_LABELS, data.LABELS_MAGIC)


def assert_one_line_naming(err: pytest.ExceptionInfo, *needles: str) -> str:
    msg = str(err.value)
    assert "\n" not in msg, msg
    for needle in needles:
        assert needle in msg, f"{needle!r} not in {msg!r}"
    return msg


@pytest.fixture(scope="module")
def cached(tmp_path_factory):
    """The real data loaded once through a cache dir: (dataset, cache_dir)."""
    cache = tmp_path_factory.mktemp("cache")
    return data.load(REAL, cache_dir=cache), cache


@pytest.fixture
def serve():
    """serve(directory) -> (base_url, requested paths); servers stop after the test."""
    servers = []

    def start(directory: Path):
        requests: list[str] = []

        class Handler(http.server.SimpleHTTPRequestHandler):
            def do_GET(self):
                requests.append(self.path)
                super().do_GET()

            def log_message(self, *args):  # keep pytest output clean
                pass

        server = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0), functools.partial(Handler, directory=str(directory))
        )
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}/", requests

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


# --------------------------------------------------------------------------- locate


def test_locate_precedence_arg_env_debian(tmp_path, monkeypatch):
    a, b, c = (make_dir(tmp_path / n) for n in "abc")
    monkeypatch.setattr(data, "DEBIAN_DIR", c)
    monkeypatch.setenv("LAZYLAB_DATA", str(b))
    assert data.locate(a) == a
    assert data.locate(str(a)) == a
    assert data.locate() == b
    monkeypatch.delenv("LAZYLAB_DATA")
    assert data.locate() == c


def test_locate_default_is_debian_dir(monkeypatch):
    monkeypatch.delenv("LAZYLAB_DATA", raising=False)
    assert data.locate() == REAL


@pytest.mark.parametrize("via", ["arg", "env"])
def test_locate_nonexistent_dir(tmp_path, monkeypatch, via):
    missing = tmp_path / "no-such-dir"
    with pytest.raises(DataError) as err:
        if via == "arg":
            data.locate(missing)
        else:
            monkeypatch.setenv("LAZYLAB_DATA", str(missing))
            data.locate()
    assert_one_line_naming(err, str(missing))


def test_locate_without_debian_dir_says_how_to_get_data(tmp_path, monkeypatch):
    monkeypatch.delenv("LAZYLAB_DATA", raising=False)
    monkeypatch.setattr(data, "DEBIAN_DIR", tmp_path / "absent")
    with pytest.raises(DataError) as err:
        data.locate()
    assert_one_line_naming(err, "apt-get install dataset-fashion-mnist", "LAZYLAB_DATA", "lazylab data fetch")


def test_missing_file(tmp_path):
    d = make_dir(tmp_path / "d", skip=[TEST_LABELS])
    for call in (data.locate, data.load, data.info):
        with pytest.raises(DataError) as err:
            call(d)
        assert_one_line_naming(err, str(d), TEST_LABELS)


# --------------------------------------------------------------------------- load


def test_load_real_data(cached):
    ds, _ = cached
    assert ds.x_train.shape == (60000, 784) and ds.x_test.shape == (10000, 784)
    assert ds.y_train.shape == (60000,) and ds.y_test.shape == (10000,)
    assert ds.x_train.dtype == np.float32 and ds.x_test.dtype == np.float32
    assert ds.y_train.dtype == np.int32 and ds.y_test.dtype == np.int32
    for x in (ds.x_train, ds.x_test):
        assert x.min() == 0.0 and x.max() == 1.0
        assert np.array_equal(x * 255, np.round(x * 255))  # exactly pixel / 255
    assert np.bincount(ds.y_train).tolist() == [6000] * 10
    assert np.bincount(ds.y_test).tolist() == [1000] * 10
    assert ds.source == REAL
    # Flattening is row-major: pixel (r, c) of image i is column 28 * r + c.
    raw = data.read_idx(REAL / TEST_IMAGES, data.IMAGES_MAGIC)
    assert raw.shape == (10000, 28, 28)
    assert np.array_equal(ds.x_test[7].reshape(28, 28), raw[7] / np.float32(255))
    assert not ds.x_train.flags.writeable


def test_fingerprint_is_stable_and_content_based(cached, tmp_path):
    ds, cache = cached
    fp = data.fingerprint(REAL)
    assert len(fp) == 16 and int(fp, 16) >= 0
    assert ds.fingerprint == fp == data.fingerprint(REAL)
    assert data.fingerprint(make_dir(tmp_path / "links")) == fp  # same bytes elsewhere


def test_file_digests_and_info_match_official(cached):
    _, cache = cached
    assert data.file_digests(REAL) == data.SHA256
    inf = data.info(REAL, cache_dir=cache)
    assert inf["directory"] == str(REAL)
    assert inf["train"] == 60000 and inf["test"] == 10000
    assert inf["image_shape"] == [28, 28]
    assert inf["fingerprint"] == data.fingerprint(REAL)
    for name in NAMES:
        assert inf["files"][name] == {
            "sha256": data.SHA256[name],
            "bytes": (REAL / name).stat().st_size,
            "verified": True,
        }
    json.dumps(inf)  # JSON-ready


def test_info_flags_unofficial_file(tmp_path):
    labels = real_test_labels()
    d = make_dir(tmp_path / "d", replace={TEST_LABELS: idx_bytes(labels)})  # same content, new gzip bytes
    inf = data.info(d)
    assert inf["files"][TEST_LABELS]["verified"] is False
    assert inf["files"][TRAIN_LABELS]["verified"] is True
    assert inf["fingerprint"] != data.fingerprint(REAL)


def test_parsed_copy_is_written_checked_and_used(cached, tmp_path):
    ds, cache = cached
    copy_dir = cache / "data" / ds.fingerprint
    assert sorted(p.name for p in copy_dir.iterdir()) == sorted([f"{k}.npy" for k in data.FILES] + ["sha256.json"])
    assert np.load(copy_dir / "train_images.npy").shape == (60000, 28, 28)

    problems = []
    again = data.load(REAL, cache_dir=cache, problems=problems)
    for field in ("x_train", "y_train", "x_test", "y_test"):
        assert np.array_equal(getattr(again, field), getattr(ds, field))
    assert again.fingerprint == ds.fingerprint and problems == []

    # Prove the copy (not the .gz) is read: a copy whose digests are rewritten to match is believed.
    mine = tmp_path / "cache"
    shutil.copytree(cache, mine)
    planted = np.roll(ds.y_test, 1).astype(np.uint8)
    np.save(mine / "data" / ds.fingerprint / "test_labels.npy", planted)
    digests = json.loads((mine / "data" / ds.fingerprint / "sha256.json").read_text())
    forged = {**digests, "test_labels": data._array_digest(planted)}
    (mine / "data" / ds.fingerprint / "sha256.json").write_text(json.dumps(forged))
    assert np.array_equal(data.load(REAL, cache_dir=mine).y_test, planted)

    # Shifted labels or one flipped pixel byte without a matching digest: one line, re-parsed, rewritten.
    (mine / "data" / ds.fingerprint / "sha256.json").write_text(json.dumps(digests))
    target = mine / "data" / ds.fingerprint / "train_images.npy"
    raw = bytearray(target.read_bytes())
    raw[-1] ^= 0x01
    target.write_bytes(bytes(raw))
    problems = []
    loaded = data.load(REAL, cache_dir=mine, problems=problems)
    assert np.array_equal(loaded.y_test, ds.y_test) and np.array_equal(loaded.x_train, ds.x_train)
    assert len(problems) == 1, problems
    assert "(train_images.npy, test_labels.npy do not match their SHA-256)" in problems[0]
    assert np.array_equal(np.load(target), np.load(copy_dir / "train_images.npy"))  # rewritten whole

    # A truncated copy: the same.
    target.write_bytes(target.read_bytes()[:50])
    problems = []
    assert np.array_equal(data.load(REAL, cache_dir=mine, problems=problems).x_train, ds.x_train)
    assert len(problems) == 1 and "damaged" in problems[0], problems
    assert not [p for p in (mine / "data").rglob("*") if p.name.startswith(".")]  # no temp files left


def test_fingerprint_and_info_follow_content_not_size_and_mtime(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    for name in NAMES:
        shutil.copy(REAL / name, d / name)
    cache = tmp_path / "cache"
    fp = data.fingerprint(d)
    assert data.info(d, cache_dir=cache)["files"][TEST_LABELS]["verified"] is True

    # One byte of the gzip flipped in place, size and mtime restored: seen at once.
    path = d / TEST_LABELS
    st = path.stat()
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns
    assert data.fingerprint(d) != fp
    assert data.file_digests(d)[TEST_LABELS] != data.SHA256[TEST_LABELS]
    with pytest.raises(DataError) as err:  # info parses the files too: the flipped byte breaks the gzip
        data.info(d, cache_dir=cache)
    assert_one_line_naming(err, TEST_LABELS)


def test_zero_images_in_the_header_is_one_line(tmp_path):
    empty = np.zeros((0, 28, 28), np.uint8)
    d = make_dir(tmp_path / "d", replace={TEST_IMAGES: idx_bytes(empty), TEST_LABELS: idx_bytes(np.zeros(0, np.uint8))})
    with pytest.raises(DataError) as err:
        data.load(d)
    assert_one_line_naming(err, TEST_IMAGES, "0 images")


# --------------------------------------------------------------------------- bad files


def test_truncated_gzip(tmp_path):
    whole = (REAL / TRAIN_LABELS).read_bytes()
    d = make_dir(tmp_path / "d", replace={TRAIN_LABELS: whole[: len(whole) // 2]})
    with pytest.raises(DataError) as err:
        data.read_idx(d / TRAIN_LABELS, data.LABELS_MAGIC)
    assert_one_line_naming(err, str(d / TRAIN_LABELS), "truncated or corrupt gzip")
    with pytest.raises(DataError) as err:
        data.load(d)
    assert_one_line_naming(err, TRAIN_LABELS, "truncated or corrupt gzip")


def test_not_a_gzip(tmp_path):
    path = tmp_path / TEST_LABELS
    path.write_bytes(b"definitely not gzip data")
    with pytest.raises(DataError) as err:
        data.read_idx(path, data.LABELS_MAGIC)
    assert_one_line_naming(err, str(path), "gzip")


def test_wrong_magic(tmp_path):
    labels = real_test_labels()
    d = make_dir(tmp_path / "d", replace={TEST_LABELS: idx_bytes(labels, magic=2051)})
    with pytest.raises(DataError) as err:
        data.read_idx(d / TEST_LABELS, data.LABELS_MAGIC)
    assert_one_line_naming(err, str(d / TEST_LABELS), "magic", "2051", "2049")
    with pytest.raises(DataError) as err:
        data.load(d)
    assert_one_line_naming(err, TEST_LABELS, "magic")


def test_payload_shorter_than_header_says(tmp_path):
    labels = real_test_labels()
    path = tmp_path / TEST_LABELS
    path.write_bytes(gzip.compress(struct.pack(">ii", 2049, 10000) + labels[:9999].tobytes()))
    with pytest.raises(DataError) as err:
        data.read_idx(path, data.LABELS_MAGIC)
    assert_one_line_naming(err, str(path), "9999", "10000")


def test_mismatched_image_label_counts(tmp_path):
    labels = real_test_labels()
    d = make_dir(tmp_path / "d", replace={TEST_LABELS: idx_bytes(labels[:9999])})
    assert data.read_idx(d / TEST_LABELS, data.LABELS_MAGIC).shape == (9999,)  # file itself is fine
    with pytest.raises(DataError) as err:
        data.load(d)
    assert_one_line_naming(err, TEST_IMAGES, TEST_LABELS, "10000", "9999")


def test_label_out_of_range(tmp_path):
    labels = real_test_labels().copy()
    labels[123] = 10
    d = make_dir(tmp_path / "d", replace={TEST_LABELS: idx_bytes(labels)})
    with pytest.raises(DataError) as err:
        data.load(d)
    assert_one_line_naming(err, TEST_LABELS, "10")


@settings(max_examples=25, deadline=None)
@given(
    shape=st.one_of(
        st.tuples(st.integers(0, 50)),
        st.tuples(st.integers(0, 5), st.integers(1, 6), st.integers(1, 6)),
    ),
    seed=st.integers(0, 2**32 - 1),
)
def test_read_idx_round_trip(tmp_path_factory, shape, seed):
    array = np.random.default_rng(seed).integers(0, 256, size=shape, dtype=np.uint8)
    path = tmp_path_factory.mktemp("idx") / "x.gz"
    path.write_bytes(idx_bytes(array))
    got = data.read_idx(path, 0x0800 | len(shape))
    assert got.dtype == np.uint8 and np.array_equal(got, array)


# --------------------------------------------------------------------------- fetch


def test_fetch_real_files(tmp_path, serve, cached):
    _, cache = cached
    base_url, requests = serve(REAL)
    dest = tmp_path / "new" / "dl"
    got = data.fetch(dest, base_url=base_url, timeout=10)
    assert got == [dest / n for n in NAMES]
    assert sorted(os.listdir(dest)) == sorted(NAMES)  # no temp files left
    assert data.file_digests(dest) == data.SHA256
    assert data.load(dest, cache_dir=cache).y_test.shape == (10000,)

    # Present and correct -> skipped without a request; a wrong one is replaced.
    n = len(requests)
    assert data.fetch(dest, base_url=base_url.rstrip("/")) == []
    assert len(requests) == n
    (dest / TEST_LABELS).write_bytes(b"junk")
    assert data.fetch(dest, base_url=base_url) == [dest / TEST_LABELS]
    assert requests[n:] == ["/" + TEST_LABELS]
    assert data.file_digests(dest) == data.SHA256


def test_fetch_corrupted_download_is_rejected(tmp_path, serve):
    served = make_dir(tmp_path / "served", replace={TRAIN_IMAGES: (REAL / TEST_LABELS).read_bytes()})
    base_url, _ = serve(served)
    dest = tmp_path / "dl"
    with pytest.raises(DataError) as err:
        data.fetch(dest, base_url=base_url, timeout=10)
    assert_one_line_naming(err, TRAIN_IMAGES, "sha256", data.SHA256[TRAIN_IMAGES])
    assert os.listdir(dest) == []


def test_fetch_http_error(tmp_path, serve):
    empty = tmp_path / "empty"
    empty.mkdir()
    base_url, _ = serve(empty)
    dest = tmp_path / "dl"
    with pytest.raises(DataError) as err:
        data.fetch(dest, base_url=base_url, timeout=10)
    assert_one_line_naming(err, f"cannot download {TRAIN_IMAGES} from {base_url}{TRAIN_IMAGES}", "404")
    assert os.listdir(dest) == []


def test_fetch_closed_port(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base_url = f"http://127.0.0.1:{port}/"
    dest = tmp_path / "dl"
    with pytest.raises(DataError) as err:
        data.fetch(dest, base_url=base_url, timeout=5)
    msg = assert_one_line_naming(err, f"cannot download {TRAIN_IMAGES} from {base_url}{TRAIN_IMAGES}", "offline?")
    assert "Traceback" not in msg
    assert os.listdir(dest) == []


# --------------------------------------------------------------------------- subset / pooled14


def test_subset(cached):
    ds, _ = cached
    sub = ds.subset(100, 10)
    assert sub.x_train.shape == (100, 784) and sub.y_train.shape == (100,)
    assert sub.x_test.shape == (10, 784) and sub.y_test.shape == (10,)
    assert np.array_equal(sub.x_train, ds.x_train[:100]) and np.array_equal(sub.y_test, ds.y_test[:10])
    assert sub.fingerprint != ds.fingerprint and len(sub.fingerprint) == 16
    assert sub.fingerprint == ds.subset(100, 10).fingerprint != ds.subset(100, 11).fingerprint
    assert ds.subset(train_size=5).x_test.shape == (10000, 784)
    assert ds.subset() is ds and ds.subset(60000, 10000) is ds
    for bad in ({"train_size": 0}, {"train_size": 60001}, {"test_size": 10001}, {"test_size": -1}):
        with pytest.raises(DataError) as err:
            ds.subset(**bad)
        assert_one_line_naming(err, next(iter(bad)))


def test_pooled14(cached):
    ds, _ = cached
    p = ds.pooled14()
    assert p.x_train.shape == (60000, 196) and p.x_test.shape == (10000, 196)
    assert p.x_train.dtype == np.float32
    assert np.array_equal(p.y_train, ds.y_train)
    assert 0.0 <= p.x_test.min() and p.x_test.max() <= 1.0
    assert p.fingerprint != ds.fingerprint

    img = ds.x_test[42].reshape(28, 28).astype(np.float64)
    manual = np.array([[img[2 * i : 2 * i + 2, 2 * j : 2 * j + 2].mean() for j in range(14)] for i in range(14)])
    assert np.allclose(p.x_test[42].reshape(14, 14), manual, atol=1e-6)

    small = ds.subset(50, 5).pooled14()
    assert small.x_train.shape == (50, 196) and np.array_equal(small.x_train, p.x_train[:50])
    with pytest.raises(DataError):
        p.pooled14()


def test_a_parsed_copy_file_linked_outside_the_memo_is_reparsed_and_the_outside_file_left_alone(cached, tmp_path):
    ds, cache = cached
    memo = tmp_path / "memo"
    shutil.copytree(cache / "data", memo / "data")
    copy = memo / "data" / ds.fingerprint
    outside = tmp_path / "outside.npy"
    outside.write_bytes((copy / "test_labels.npy").read_bytes())  # the right bytes, in the wrong place
    (copy / "test_labels.npy").unlink()
    (copy / "test_labels.npy").symlink_to(outside)
    problems = []
    loaded = data.load(REAL, cache_dir=memo, problems=problems)
    assert np.array_equal(loaded.y_test, ds.y_test)
    assert problems == [f"parsed data copy {copy} is damaged (test_labels.npy resolves outside the memo); "
                        "parsing the .gz files again"]
    assert not (copy / "test_labels.npy").is_symlink()  # written again inside, replacing the link
    assert outside.read_bytes() == (copy / "test_labels.npy").read_bytes()
    assert data.load(REAL, cache_dir=memo, problems=problems) and len(problems) == 1  # the new copy is read


def test_a_parsed_copy_outside_the_memo_is_neither_read_nor_written(cached, tmp_path):
    ds, cache = cached
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(cache / "data", elsewhere)  # a whole, matching copy: only where it lies is wrong
    memo = tmp_path / "memo"
    memo.mkdir()
    (memo / "data").symlink_to(elsewhere, target_is_directory=True)
    before = sorted(p.name for p in elsewhere.rglob("*"))
    problems = []
    loaded = data.load(REAL, cache_dir=memo, problems=problems)
    assert np.array_equal(loaded.y_train, ds.y_train)
    assert problems == [f"parsed data copy {memo / 'data' / ds.fingerprint} resolves outside the memo; not used"]
    assert sorted(p.name for p in elsewhere.rglob("*")) == before
