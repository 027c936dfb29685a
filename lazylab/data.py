"""Fashion-MNIST: locate, verify, parse, cache and fetch the four IDX files.

Dataset: H. Xiao, K. Rasul, R. Vollgraf, "Fashion-MNIST: a Novel Image Dataset
for Benchmarking Machine Learning Algorithms", 2017, arXiv:1708.07747.
60,000 training and 10,000 test images, 28x28 grey levels 0..255, 10 classes.

File format: IDX, as described on Y. LeCun's MNIST page
(http://yann.lecun.com/exdb/mnist/): a big-endian header (int32 magic number
0x00000803 = 2051 for images / 0x00000801 = 2049 for labels, then one int32 per
dimension) followed by the raw unsigned bytes, row-major.

Only numpy and the standard library are used, so importing this is cheap.
Every problem with the data is raised as a one-line ``DataError``.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import struct
import tempfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from lazylab.errors import DataError
from lazylab.limits import CLASS_NAMES  # noqa: F401 (re-exported: Fashion-MNIST's class names, by index)
from lazylab.locations import resolves_inside

DEBIAN_DIR = Path("/usr/share/datasets/fashion-mnist")

FILES = {
    "train_images": "train-images-idx3-ubyte.gz",
    "train_labels": "train-labels-idx1-ubyte.gz",
    "test_images": "t10k-images-idx3-ubyte.gz",
    "test_labels": "t10k-labels-idx1-ubyte.gz",
}

# Official digests of the files on the dataset's public mirror.
SHA256 = {
    "train-images-idx3-ubyte.gz": "b0564c3eedabfbf835052cff8503ea422014ce006caf5b757f851416ee8300c7",
    "train-labels-idx1-ubyte.gz": "0ae29f65d86684f32d1b9c85147786c547b9c6aebcaf235f0400a0cce308b056",
    "t10k-images-idx3-ubyte.gz": "cc1d090a38ace84dfa1aa66e3ada7c336ef481a96936906477e6dd344da56eaa",
    "t10k-labels-idx1-ubyte.gz": "8d3605d196f4be44669e46906da9733c8131fef761fdbfec72c424d5222f1a05",
}

MIRROR = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"

IMAGES_MAGIC = 2051  # 0x0803: unsigned bytes, 3 dimensions
LABELS_MAGIC = 2049  # 0x0801: unsigned bytes, 1 dimension
IMAGE_SHAPE = (28, 28)

_INSTALL_HINT = "install dataset-fashion-mnist or set LAZYLAB_DATA"
_COPY_DIGESTS = "sha256.json"  # digests of a parsed copy's arrays, next to them


# --------------------------------------------------------------------------- locate


def locate(data_dir: str | os.PathLike | None = None) -> Path:
    """Return the directory holding the four Fashion-MNIST ``.gz`` files.

    Precedence: the ``data_dir`` argument, then the ``LAZYLAB_DATA`` environment
    variable, then ``DEBIAN_DIR`` (package ``dataset-fashion-mnist``).

    Returns an absolute ``Path`` (symlinks are not resolved).

    Raises ``DataError`` (one line) if the chosen directory does not exist or
    lacks any of the four files in ``FILES`` (the message names the directory
    and the missing file, and says so when it holds that file gunzipped).
    Files: Xiao, Rasul & Vollgraf 2017, arXiv:1708.07747.
    """
    if data_dir is not None:
        return _check_dir(Path(data_dir), "data directory")
    env = os.environ.get("LAZYLAB_DATA")
    if env:
        return _check_dir(Path(env), "LAZYLAB_DATA")
    if not DEBIAN_DIR.is_dir():
        raise DataError(
            f"Fashion-MNIST not found at {DEBIAN_DIR}: run `apt-get install dataset-fashion-mnist`, "
            "set LAZYLAB_DATA to a directory holding the four .gz files, or run `lazylab data fetch`"
        )
    return _check_dir(DEBIAN_DIR, "data directory")


def _check_dir(directory: Path, what: str) -> Path:
    directory = directory.expanduser().absolute()
    if not directory.is_dir():
        raise DataError(f"{what} {directory} does not exist or is not a directory")
    for name in FILES.values():
        if not (directory / name).is_file():
            raw = directory / name.removesuffix(".gz")
            if raw.is_file():  # found, but gunzipped: the fingerprint and the digests are those of the .gz files
                raise DataError(f"{what} {directory} holds {raw.name} uncompressed, not {name}: lazylab reads the "
                                "official gzipped files (their SHA-256 are checked); compress the four with "
                                "`gzip -k`, or run `lazylab data fetch`")
            raise DataError(f"{what} {directory} lacks {name} ({_INSTALL_HINT}, or run `lazylab data fetch`)")
    return directory


# --------------------------------------------------------------------------- digests


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
    except OSError as e:
        raise DataError(f"{path}: cannot read ({e.strerror or e})") from None
    return h.hexdigest()


def file_digests(directory: Path) -> dict[str, str]:
    """SHA-256 (lower-case hex, 64 chars) of each of the four files in ``directory``.

    Returns ``{filename: digest}`` in ``FILES`` order. Always hashes the bytes
    (no memo); compare against ``SHA256`` (official mirror digests of the
    Xiao, Rasul & Vollgraf 2017 release, arXiv:1708.07747).

    Raises ``DataError`` if a file is missing or unreadable.
    """
    directory = Path(directory)
    return {name: _sha256_file(directory / name) for name in FILES.values()}


def _fingerprint_of(digests: dict[str, str]) -> str:
    joined = "\n".join(digests[name] for name in FILES.values())
    return hashlib.sha256(joined.encode()).hexdigest()[:16]


def fingerprint(directory: Path) -> str:
    """A 16-hex-char id of the data content in ``directory``.

    It is the SHA-256 of the four file digests (``FILES`` order, newline-joined),
    truncated to 16 hex chars: equal content gives an equal fingerprint wherever
    the files live. The files' bytes are hashed every time (~31 MB, about 0.1 s):
    a file edited in place with its size and mtime kept still changes it.

    Raises ``DataError`` if a file is missing or unreadable.
    """
    return _fingerprint_of(file_digests(Path(directory)))


# --------------------------------------------------------------------------- parsing


def read_idx(path: Path, expected_magic: int) -> np.ndarray:
    """Parse one IDX file, gzipped or raw (format from LeCun's MNIST page).

    ``expected_magic`` is 2051 for images (header: magic, count, rows, cols) or
    2049 for labels (header: magic, count); all header fields are big-endian
    int32 and the payload is unsigned bytes.

    Returns a read-only ``uint8`` array of shape (count, rows, cols) or (count,).

    Raises ``DataError`` naming ``path`` if the file is unreadable, the gzip is
    truncated or corrupt, the magic number differs from ``expected_magic``, or
    the payload length differs from the product of the header's dimensions.
    """
    path = Path(path)
    try:
        with open(path, "rb") as f:  # gzipped or raw, whatever the name says: told by the gzip magic
            gzipped = f.read(2) == b"\x1f\x8b"
        with (gzip.open if gzipped else open)(path, "rb") as f:
            raw = f.read()
    except (EOFError, zlib.error, gzip.BadGzipFile) as e:
        raise DataError(f"{path}: truncated or corrupt gzip ({_one_line(e)})") from None
    except OSError as e:
        raise DataError(f"{path}: cannot read ({e.strerror or _one_line(e)})") from None

    if len(raw) < 4:
        raise DataError(f"{path}: too short for an IDX header ({len(raw)} bytes)")
    (magic,) = struct.unpack(">i", raw[:4])
    if magic != expected_magic:
        raise DataError(f"{path}: wrong IDX magic number {magic} (expected {expected_magic})")
    ndim = magic & 0xFF  # low byte of the magic is the number of dimensions
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise DataError(f"{path}: too short for an IDX header ({len(raw)} bytes, need {header})")
    dims = struct.unpack(f">{ndim}i", raw[4:header])
    expected = int(np.prod(dims, dtype=np.int64))
    if len(raw) - header != expected:
        raise DataError(
            f"{path}: payload is {len(raw) - header} bytes but header {list(dims)} says {expected}"
        )
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(dims)


# --------------------------------------------------------------------------- dataset


def _frozen(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)  # the dataclass is frozen; keep its arrays so too
    return a


@dataclass(frozen=True, eq=False)
class FashionMNIST:
    """Fashion-MNIST (Xiao, Rasul & Vollgraf 2017, arXiv:1708.07747) in memory.

    x_train: float32 (n_train, 784), pixel / 255 in [0, 1], each 28x28 image
             flattened row-major.
    y_train: int32 (n_train,), class index 0..9 (see ``CLASS_NAMES``).
    x_test:  float32 (n_test, 784), as ``x_train``.
    y_test:  int32 (n_test,).
    source:  directory the files were read from.
    fingerprint: 16 hex chars identifying this exact content (see
             ``fingerprint``; subsets and pooled variants get a derived one).

    Arrays are read-only. Equality is identity (comparing arrays is ambiguous).
    """

    x_train: np.ndarray = field(repr=False)
    y_train: np.ndarray = field(repr=False)
    x_test: np.ndarray = field(repr=False)
    y_test: np.ndarray = field(repr=False)
    source: Path
    fingerprint: str

    @property
    def image_side(self) -> int:
        """Side length in pixels of the square images (28, or 14 after ``pooled14``)."""
        return int(round(self.x_train.shape[1] ** 0.5))

    def subset(self, train_size: int | None = None, test_size: int | None = None) -> FashionMNIST:
        """The first ``train_size`` training and first ``test_size`` test examples.

        ``None`` keeps a split whole. Arrays are views (no copy). The fingerprint
        is derived from the parent's and the sizes, so it still identifies the
        content; taking the whole of both splits returns ``self``.

        Raises ``DataError`` if a size is < 1 or larger than the split (the message names the command line's
        ``--train-size``, which sets ``train_size`` everywhere, and the folder the data came from).
        """
        n_tr = _check_size("train_size (--train-size)", train_size, len(self.y_train), "training", self.source)
        n_te = _check_size("test_size", test_size, len(self.y_test), "test", self.source)
        if n_tr == len(self.y_train) and n_te == len(self.y_test):
            return self
        return FashionMNIST(
            x_train=self.x_train[:n_tr], y_train=self.y_train[:n_tr],
            x_test=self.x_test[:n_te], y_test=self.y_test[:n_te],
            source=self.source,
            fingerprint=_derive(self.fingerprint, f"subset:{n_tr}:{n_te}"),
        )

    def pooled14(self) -> FashionMNIST:
        """A 14x14 variant: 2x2 average pooling of each 28x28 image.

        Returns a new ``FashionMNIST`` with float32 x of shape (n, 196) in
        [0, 1] (flattened row-major), the same labels and a derived fingerprint.
        Raises ``DataError`` if the images are not 28x28.
        """
        if self.image_side != 28 or self.x_train.shape[1] != 784:
            raise DataError(f"pooled14 needs 28x28 images, have {self.x_train.shape[1]} features")

        def pool(x: np.ndarray) -> np.ndarray:
            p = x.reshape(len(x), 14, 2, 14, 2).mean(axis=(2, 4), dtype=np.float32)
            return _frozen(np.ascontiguousarray(p.reshape(len(x), 196), dtype=np.float32))

        return FashionMNIST(
            x_train=pool(self.x_train), y_train=self.y_train,
            x_test=pool(self.x_test), y_test=self.y_test,
            source=self.source, fingerprint=_derive(self.fingerprint, "pooled14"),
        )


def _check_size(name: str, n: int | None, available: int, split: str, source: Path) -> int:
    """``n`` (None: ``available``), refused unless an integer in 1..``available`` (the ``split`` images in ``source``)."""
    if n is None:
        return available
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise DataError(f"{name} must be an integer, got {n!r}")
    if not 1 <= n <= available:
        raise DataError(f"{name} {n} is out of range: the data in {source} holds {available} {split} images, "
                        f"so it must be between 1 and {available}")
    return int(n)


def _derive(fp: str, tag: str) -> str:
    return hashlib.sha256(f"{fp}:{tag}".encode()).hexdigest()[:16]


def _validate(directory: Path, arrays: dict[str, np.ndarray]) -> None:
    """Cross-file checks: counts match per split, 28x28 images, labels 0..9."""
    for key, a in arrays.items():
        if a.dtype != np.uint8:
            raise DataError(f"{directory / FILES[key]}: parsed as {a.dtype}, expected uint8")
    for split in ("train", "test"):
        images, labels = arrays[f"{split}_images"], arrays[f"{split}_labels"]
        img_file, lab_file = FILES[f"{split}_images"], FILES[f"{split}_labels"]
        if images.ndim != 3 or images.shape[1:] != IMAGE_SHAPE:
            raise DataError(f"{directory / img_file}: images are {list(images.shape[1:])}, expected 28x28")
        if labels.ndim != 1:
            raise DataError(f"{directory / lab_file}: labels have shape {list(labels.shape)}, expected 1-D")
        if len(images) == 0:
            raise DataError(f"{directory / img_file}: the header says 0 images")
        if len(images) != len(labels):
            raise DataError(
                f"{directory}: {img_file} has {len(images)} images but {lab_file} has {len(labels)} labels"
            )
        if len(labels) and int(labels.max()) > 9:
            raise DataError(f"{directory / lab_file}: label {int(labels.max())} out of range 0..9")


def _array_digest(a: np.ndarray) -> str:
    """SHA-256 of an array's dtype, shape and C-order bytes."""
    h = hashlib.sha256(f"{a.dtype.str}{list(a.shape)}".encode())
    h.update(np.ascontiguousarray(a).data)
    return h.hexdigest()


def _load_parsed_copy(where: Path, problems: list | None) -> dict[str, np.ndarray] | None:
    """The parsed arrays in ``where``, each checked against the digest stored with it; None if absent or damaged.

    A damaged copy (a file that is not a regular file, resolves outside ``where`` or cannot be read,
    digests that are not ``lazylab.schemas.caches.DataCopyDigests``, or an array whose digest differs)
    is reported as one line in ``problems`` and reads as absent, so the ``.gz`` files are parsed again
    (and written anew: ``_atomic_write`` replaces a link, never writes through it).
    """
    from lazylab.errors import LazylabError
    from lazylab.schemas import read_bytes, read_json, validate
    from lazylab.schemas.caches import DataCopyDigests

    if not os.path.lexists(where / _COPY_DIGESTS):
        return None  # no copy yet (or one from before digests were kept)
    outside = [name for name in (_COPY_DIGESTS, *(f"{key}.npy" for key in FILES))
               if not resolves_inside(where, where / name)]
    if outside:
        return _damaged(where, problems, f"{outside[0]} resolves outside the memo")
    try:
        # read_bytes: a FIFO in place of a file is refused at once instead of waiting for a writer.
        digests = validate(DataCopyDigests, read_json(where / _COPY_DIGESTS, "digests"), "digests").model_dump()
        arrays = {key: np.load(io.BytesIO(read_bytes(where / f"{key}.npy", "array")), allow_pickle=False)
                  for key in FILES}
    except LazylabError as e:
        return _damaged(where, problems, str(e))
    except (OSError, ValueError, EOFError) as e:
        return _damaged(where, problems, _one_line(e))
    if not all(isinstance(a, np.ndarray) for a in arrays.values()):
        return _damaged(where, problems, "a .npy file holds an archive, not an array")
    bad = [key for key, a in arrays.items() if digests[key] != _array_digest(a)]
    if bad:
        return _damaged(where, problems, f"{', '.join(k + '.npy' for k in bad)} do not match their SHA-256")
    return arrays


def _damaged(where: Path, problems: list | None, why: str) -> None:
    if problems is not None:
        problems.append(f"parsed data copy {where} is damaged ({why}); parsing the .gz files again")
    return None


def _save_parsed_copy(where: Path, arrays: dict[str, np.ndarray]) -> None:
    # The digests go last: a copy cut short has none that match, and is parsed again.
    (where / _COPY_DIGESTS).unlink(missing_ok=True)
    for key, a in arrays.items():
        _atomic_write(where / f"{key}.npy", a, npy=True)
    digests = {key: _array_digest(a) for key, a in arrays.items()}
    _atomic_write(where / _COPY_DIGESTS, json.dumps(digests, indent=1).encode())


def load(data_dir: str | os.PathLike | None = None, *, cache_dir: Path | None = None,
         problems: list | None = None) -> FashionMNIST:
    """Load Fashion-MNIST (Xiao, Rasul & Vollgraf 2017, arXiv:1708.07747).

    Finds the files with ``locate(data_dir)``, parses the four IDX files
    (``read_idx``), and checks that image and label counts match per split,
    that images are 28x28 and labels lie in 0..9.

    With ``cache_dir``, the parsed uint8 arrays are kept as ``.npy`` files in
    ``cache_dir/data/<fingerprint>/`` (written atomically, with their SHA-256 in
    ``sha256.json``) and a later load of the same content reads those instead of
    decompressing the gzip files, after checking each against its digest. A
    damaged copy adds one line to ``problems`` (a list, if given) and the gzip
    files are parsed again.

    Returns ``FashionMNIST`` with x float32 (n, 784) = pixels / 255 in [0, 1]
    and y int32 (n,); n = 60000 train / 10000 test for the official files.

    Raises ``DataError`` (one line, naming the file) for any missing,
    truncated or malformed file or inconsistent counts.
    """
    directory = locate(data_dir)
    return _load(directory, fingerprint(directory), cache_dir, problems)


def _load(directory: Path, fp: str, cache_dir: Path | None, problems: list | None) -> FashionMNIST:
    """``load`` of the files in ``directory``, whose content has the fingerprint ``fp``."""
    copy_dir = Path(cache_dir) / "data" / fp if cache_dir is not None else None
    if copy_dir is not None and not resolves_inside(cache_dir, copy_dir):
        # A planted symlink would have the copy read from, and written to, somewhere else.
        if problems is not None:
            problems.append(f"parsed data copy {copy_dir} resolves outside the memo; not used")
        copy_dir = None

    arrays = _load_parsed_copy(copy_dir, problems) if copy_dir is not None else None
    if arrays is not None:
        try:
            _validate(directory, arrays)
        except DataError as e:
            arrays = _damaged(copy_dir, problems, str(e))  # a damaged copy is not the user's data problem: re-parse
    if arrays is None:
        arrays = {
            key: read_idx(directory / name, IMAGES_MAGIC if key.endswith("images") else LABELS_MAGIC)
            for key, name in FILES.items()
        }
        _validate(directory, arrays)
        if copy_dir is not None:
            _best_effort(lambda: _save_parsed_copy(copy_dir, arrays))

    def images(a: np.ndarray) -> np.ndarray:
        x = a.reshape(len(a), -1).astype(np.float32)
        x /= 255.0
        return _frozen(x)

    return FashionMNIST(
        x_train=images(arrays["train_images"]),
        y_train=_frozen(arrays["train_labels"].astype(np.int32)),
        x_test=images(arrays["test_images"]),
        y_test=_frozen(arrays["test_labels"].astype(np.int32)),
        source=directory,
        fingerprint=fp,
    )


def info(data_dir: str | os.PathLike | None = None, *, cache_dir: Path | None = None) -> dict:
    """Describe the dataset found by ``locate(data_dir)`` as a JSON-ready dict.

    Returns ``{"directory": str, "files": {filename: {"sha256": hex, "bytes":
    int, "verified": bool}}, "train": int, "test": int, "image_shape": [28, 28],
    "fingerprint": str}``; ``verified`` is True when the digest equals the
    official one in ``SHA256`` (Xiao, Rasul & Vollgraf 2017 release).

    Raises ``DataError`` as ``load`` does (the files are fully parsed).
    """
    directory = locate(data_dir)
    digests = file_digests(directory)  # the bytes themselves, every time: never a remembered digest
    ds = _load(directory, _fingerprint_of(digests), cache_dir, None)
    return {
        "directory": str(directory),
        "files": {
            name: {
                "sha256": digests[name],
                "bytes": (directory / name).stat().st_size,
                "verified": digests[name] == SHA256[name],
            }
            for name in FILES.values()
        },
        "train": int(len(ds.y_train)),
        "test": int(len(ds.y_test)),
        "image_shape": list(IMAGE_SHAPE),
        "fingerprint": ds.fingerprint,
    }


# --------------------------------------------------------------------------- fetch

def _reason(e: BaseException) -> str:
    import urllib.error

    if isinstance(e, urllib.error.HTTPError):
        return f"HTTP {e.code} {e.reason}"
    if isinstance(e, urllib.error.URLError):
        return _one_line(e.reason)
    if isinstance(e, TimeoutError):
        return "timed out"
    return _one_line(e)


def fetch(dest: Path, *, base_url: str = MIRROR, timeout: float = 30.0) -> list[Path]:
    """Download the four Fashion-MNIST ``.gz`` files into ``dest`` (created).

    Files come from ``base_url`` (default: the dataset's public mirror,
    Xiao, Rasul & Vollgraf 2017, arXiv:1708.07747). A file already in ``dest``
    with the official digest is skipped. Each download is streamed to a temp
    file in ``dest``, its SHA-256 checked against ``SHA256``, then renamed into
    place, so no partial or unverified file is ever left behind. ``timeout`` is
    the socket timeout in seconds.

    Returns the paths that were downloaded (empty if all were present).

    Raises ``DataError`` (one line, no traceback) if ``dest`` cannot be
    created or written, on any network error (offline, refused, HTTP error,
    timeout) or on a digest mismatch.
    """
    # Imported here: http.client/urllib cost ~40 ms and only fetch needs them.
    import http.client
    import urllib.error
    import urllib.request

    # Everything a download can raise for network reasons; URLError covers
    # HTTPError, refused connections and DNS failures, ValueError a malformed URL.
    net_errors = (urllib.error.URLError, http.client.HTTPException, ConnectionError, TimeoutError, ValueError)

    dest = Path(dest).expanduser()
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DataError(f"cannot create {dest}: {e.strerror or _one_line(e)}") from None

    fetched = []
    for name in FILES.values():
        target = dest / name
        if target.is_file() and _sha256_file(target) == SHA256[name]:
            continue
        url = base_url.rstrip("/") + "/" + name
        try:
            fd, tmp_name = tempfile.mkstemp(dir=dest, prefix=f".{name}.", suffix=".part")
        except OSError as e:
            raise DataError(f"cannot write to {dest}: {e.strerror or _one_line(e)}") from None
        tmp = Path(tmp_name)
        try:
            h = hashlib.sha256()
            try:
                with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as resp:
                    while chunk := resp.read(1 << 20):
                        h.update(chunk)
                        out.write(chunk)
            except net_errors as e:
                raise DataError(
                    f"cannot download {name} from {url}: {_reason(e)} (offline? {_INSTALL_HINT})"
                ) from None
            except OSError as e:
                raise DataError(f"cannot write {target}: {e.strerror or _one_line(e)}") from None
            if h.hexdigest() != SHA256[name]:
                raise DataError(
                    f"downloaded {name} from {url} has sha256 {h.hexdigest()}, expected {SHA256[name]}; "
                    "file removed"
                )
            os.chmod(tmp, 0o644)  # mkstemp makes 0600; a dataset file should be world-readable
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)  # on any failure (or ^C) leave no partial file
        fetched.append(target)
    return fetched


# --------------------------------------------------------------------------- helpers


def _one_line(e: object) -> str:
    return " ".join(str(e).split()) or type(e).__name__


def _atomic_write(target: Path, payload: bytes | np.ndarray, npy: bool = False) -> None:
    """Write via a temp file in the same directory + os.replace: readers see all or nothing."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            if npy:
                np.save(f, payload, allow_pickle=False)
            else:
                f.write(payload)
        os.replace(tmp, target)
    finally:
        Path(tmp).unlink(missing_ok=True)


def _best_effort(write) -> None:
    # Caches only save time; a read-only or full cache dir must not stop a run.
    try:
        write()
    except OSError:
        pass
