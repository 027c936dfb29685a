"""How a memo row is written and read back: the diskcache ``Disk``, the SHA-256 seal and the payload checks.

``lazylab.cache`` holds the stores; this module holds what a single row is. Nothing is
unpickled: ``SafeDisk`` stores only bytes and str and refuses every row lazylab could not have
written (a pickle, an unknown mode, a file mode without its file name, a file outside the memo, a
FIFO in place of a value file). Every payload is sealed with its SHA-256 and the key it was computed
for (``_seal``), so a valid value moved or copied to another key is refused there; records are JSON,
arrays ``.npz`` loaded with ``allow_pickle=False``, feature entries a JSON header line then raw array
bytes (``_feature_parts``, ``_read_features``), each checked against the schema of its key's kind
(``lazylab.schemas.entries``). A row that fails any of this raises ``CorruptEntry``: the memo reports
it in one line, deletes it and recomputes it (docs/reliability.md).
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import re
import stat

import diskcache
import numpy as np

from lazylab.errors import LazylabError
from lazylab.locations import resolves_inside


class SafeDisk(diskcache.Disk):
    """A diskcache Disk that stores only bytes and str and never unpickles."""

    def store(self, value, read, key=diskcache.core.UNKNOWN):
        if read and isinstance(value, _SealedReader):
            return self._stream(value, key)
        if not isinstance(value, (bytes, str)) or read:
            raise TypeError("the lazylab memo stores only bytes and str")
        return super().store(value, read, key=key)

    def _stream(self, reader: _SealedReader, key) -> tuple:
        """Write a sealed feature entry to a new value file, chunk by chunk; diskcache's row fields."""
        filename, full_path = self.filename(key, reader)
        try:
            with _create(full_path) as out:
                size = 0
                while chunk := reader.read(_CHUNK):
                    size += out.write(chunk)
        except BaseException:
            # A full disk or an interrupt: leave no partial multi-GiB file behind (diskcache would).
            try:
                os.remove(full_path)
            except OSError:
                pass
            raise
        return size, diskcache.core.MODE_BINARY, filename, None

    def fetch(self, mode, filename, value, read):
        """A row's value, or CorruptEntry for any row lazylab could not have written.

        diskcache writes a short value inline (``MODE_RAW``: bytes or text in ``value``, no file
        name) and a long one in a value file (``MODE_BINARY``/``MODE_TEXT``: a file name of its own
        pattern below the memo, no inline value). Anything else (a pickle, an unknown mode, a file
        mode with no file name, a name outside the memo, a FIFO or folder in place of the file) is
        refused here, before diskcache's own fetch could unpickle, raise a TypeError or hang.
        A value file that is missing raises FileNotFoundError, which diskcache reads as an
        entry deleted meanwhile (absent).
        """
        if mode == diskcache.core.MODE_PICKLE:
            raise CorruptEntry("pickled value refused")
        if mode == diskcache.core.MODE_RAW:
            if not isinstance(value, (bytes, str)):
                raise CorruptEntry(f"an inline value of type {type(value).__name__}, not bytes")
            if filename is not None:
                raise CorruptEntry(f"an inline value that also names a file ({filename!r})")
            return value
        if mode not in (diskcache.core.MODE_BINARY, diskcache.core.MODE_TEXT):
            raise CorruptEntry(f"unknown value mode {mode!r}")
        if filename is not None and not _inside(self._directory, filename):
            raise CorruptEntry(f"value file {filename!r} lies outside the memo")
        if not isinstance(filename, str) or not _VALUE_FILE.fullmatch(filename):
            raise CorruptEntry(f"a row in file mode {mode} whose file name is {filename!r}, not a value file's")
        if value is not None:
            raise CorruptEntry(f"a row in file mode {mode} that also holds an inline {type(value).__name__} value")
        handle = _open_value(os.path.join(self._directory, filename))
        if read and mode == diskcache.core.MODE_BINARY:
            return handle
        with handle:
            data = handle.read()
        if mode == diskcache.core.MODE_BINARY:
            return data
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise CorruptEntry("text value file is not UTF-8") from None

    def remove(self, file_path):
        # A planted row may name any path; never delete outside the memo, nor anything but a value file.
        if _inside(self._directory, file_path) and _VALUE_FILE.fullmatch(file_path):
            super().remove(file_path)


_CREATE_TRIES = 10  # diskcache's own (``Disk._write``)


def _create(path: str):
    """``path`` opened for writing as a new file, its folder made first. Another process may remove the folder
    between the two (diskcache removes a value file's folders once empty): tried again, as diskcache does."""
    for attempt in range(1, _CREATE_TRIES + 1):
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            return open(path, "xb")
        except FileNotFoundError:
            if attempt == _CREATE_TRIES:
                raise


# diskcache's value files: two levels of two hex digits, then the rest of 32 (``Disk.filename``).
_VALUE_FILE = re.compile(r"[0-9a-f]{2}/[0-9a-f]{2}/[0-9a-f]{28}\.val")


def _open_value(path: str):
    """A value file opened for reading; CorruptEntry if it is not a regular file (a FIFO opened
    without O_NONBLOCK would wait for a writer forever). FileNotFoundError if it is missing."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise CorruptEntry("value file is not a regular file")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _inside(directory: str, filename) -> bool:
    """Whether a value-file name from the store resolves (``realpath``: symlinks followed) to a file below ``directory``.

    A planted row may name an absolute path, ``..``, or a path through a symlinked
    folder inside the memo; only the resolved path counts.
    """
    if not isinstance(filename, str) or not filename or os.path.isabs(filename) or "\0" in filename:
        return False
    return resolves_inside(directory, os.path.join(directory, filename))


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


class CorruptEntry(Exception):
    """A memo entry whose checksum, key, encoding or schema is wrong."""


_MAX_KEY = 256  # characters of a memo key in a seal line (lazylab's are under 60)


def _seal_line(digest: str, key: str) -> bytes:
    """The first line of a sealed value: the payload's SHA-256 (64 hex digits), a space, the memo key."""
    if not key or len(key) > _MAX_KEY or not key.isascii() or not key.isprintable() or " " in key:
        raise ValueError(f"a memo key is printable ASCII without spaces, at most {_MAX_KEY} characters: {key[:80]!r}")
    return f"{digest} {key}\n".encode()


def _seal(payload: bytes, key: str) -> bytes:
    """``payload`` as stored under memo key ``key``: ``_seal_line`` then the payload."""
    return _seal_line(hashlib.sha256(payload).hexdigest(), key) + payload


def _check_seal(line: bytes, key: str) -> tuple[bytes, bool]:
    """The digest (64 hex digits, bytes) of a seal line (without its newline) read under ``key``, and whether the
    line names ``key``: False for the seal of an older lazylab, which named no key (``_record`` says which
    such records are still served). Raises CorruptEntry for a line that is no seal or names another key."""
    digest, _, sealed_for = line.partition(b" ")
    if len(digest) != 64 or not re.fullmatch(rb"[0-9a-f]{64}", digest):
        raise CorruptEntry("no checksum line")
    if not sealed_for:
        return digest, False
    if sealed_for != key.encode():
        shown = sealed_for[:80].decode("ascii", "backslashreplace")
        raise CorruptEntry(f"sealed for the key {shown!r}: a value moved from another key")
    return digest, True


def _unseal(blob, key: str) -> tuple[bytes, bool]:
    """The payload of a value stored under ``key``, and whether its seal names ``key`` (``_check_seal``).

    Raises: CorruptEntry for a value that is not bytes, a bad or foreign seal, or a checksum mismatch.
    """
    if isinstance(blob, str):
        blob = blob.encode()
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise CorruptEntry(f"stored value is a {type(blob).__name__}, not bytes")
    line, sep, payload = bytes(blob).partition(b"\n")
    if not sep:
        raise CorruptEntry("no checksum line")
    digest, bound = _check_seal(line, key)
    if hashlib.sha256(payload).hexdigest().encode() != digest:
        raise CorruptEntry("checksum mismatch")
    return payload, bound


_ARRAY_KINDS = "biufc"  # bool, integers, floats, complex: plain numbers only
_MAX_HEADER = 1 << 16
_CHUNK = 1 << 24  # bytes per read or hash step: large enough to be fast, small enough to stay in cache


def _feature_parts(arrays: dict) -> list[memoryview]:
    """A feature entry's payload as buffers: a JSON header line, then each array's raw C-order bytes.

    Raw bytes rather than ``.npz``: they load with one read into the final array
    and no zip CRC, which matters for multi-GiB matrices (docs/performance.md).
    Raises: TypeError for an array that is not plain numbers.
    """
    header, parts = [], []
    for name, value in arrays.items():
        a = np.asarray(value)
        a = a if a.flags.c_contiguous else np.ascontiguousarray(a)  # (ascontiguousarray would make 0-d 1-d)
        if a.dtype.kind not in _ARRAY_KINDS or a.dtype.fields is not None:
            raise TypeError(f"feature array {name!r} has dtype {a.dtype}, not plain numbers")
        header.append({"name": str(name), "dtype": a.dtype.str, "shape": list(a.shape)})
        parts.append(memoryview(a.reshape(-1).view(np.uint8)))  # the raw bytes, any byte order
    line = json.dumps({"arrays": header}, separators=(",", ":")).encode() + b"\n"
    return [memoryview(line), *parts]


class _SealedReader:
    """A file-like reader of ``_seal(b"".join(parts), key)`` that streams the parts without joining them."""

    def __init__(self, parts: list[memoryview], key: str):
        digest = hashlib.sha256()
        for p in parts:
            for i in range(0, len(p), _CHUNK):
                digest.update(p[i : i + _CHUNK])
        self.parts = [memoryview(_seal_line(digest.hexdigest(), key)), *parts]

    def read(self, n: int = -1):
        while self.parts and not len(self.parts[0]):
            self.parts.pop(0)
        if not self.parts:
            return b""
        head = self.parts[0]
        n = len(head) if n is None or n < 0 else n
        self.parts[0] = head[n:]
        return head[:n]


def _aligned_empty(shape: tuple, dtype: np.dtype, align: int = 64) -> np.ndarray:
    """``np.empty(shape, dtype)`` starting on an ``align``-byte boundary.

    jax on CPU adopts a 64-byte-aligned numpy buffer without copying it
    (``jax.device_put(a, may_alias=True)``); numpy alone aligns to 16 bytes.
    """
    nbytes = math.prod(shape) * dtype.itemsize
    raw = np.empty(nbytes + align, np.uint8)
    start = -raw.ctypes.data % align
    return raw[start : start + nbytes].view(dtype).reshape(shape)


def _read_features(handle, key: str) -> dict[str, np.ndarray]:
    """Arrays from a feature entry stored under ``key`` (an open binary file), checked against its seal (SHA-256
    and key) and the schema of its key's kind (``lazylab.schemas.entries``).

    Raises: CorruptEntry for a bad or foreign seal line (or one naming no key), header, size, checksum or arrays.
    """
    try:
        total = os.fstat(handle.fileno()).st_size
    except (AttributeError, OSError, io.UnsupportedOperation):
        total = len(handle.getbuffer())
    seal = handle.readline(66 + _MAX_KEY)
    if not seal.endswith(b"\n"):
        raise CorruptEntry("no checksum line")
    digest, bound = _check_seal(seal[:-1], key)
    if not bound:
        raise CorruptEntry("sealed without its key, by an older lazylab")
    line = handle.readline(_MAX_HEADER)
    if not line.endswith(b"\n"):
        raise CorruptEntry("no header line")
    from lazylab.schemas import parse_json, validate
    from lazylab.schemas.caches import FeatureHeader

    try:
        specs = validate(FeatureHeader, parse_json(line, "header"), "header").arrays
        names = [a.name for a in specs]
        dtypes = [np.dtype(a.dtype) for a in specs]
        shapes = [tuple(a.shape) for a in specs]
    except (LazylabError, ValueError, TypeError) as exc:
        raise CorruptEntry(f"bad header ({_one_line(exc)})") from None
    if any(dt.kind not in _ARRAY_KINDS or dt.fields is not None for dt in dtypes) or \
            any(n < 0 for shape in shapes for n in shape) or len(set(names)) != len(names):
        raise CorruptEntry("bad header (dtype, shape or names)")
    sizes = [math.prod(shape) * dt.itemsize for dt, shape in zip(dtypes, shapes)]
    if len(seal) + len(line) + sum(sizes) != total:  # checked before allocating anything the header asks for
        raise CorruptEntry("size does not match the header")
    check = hashlib.sha256(line)
    arrays = {}
    for name, dt, shape, size in zip(names, dtypes, shapes, sizes):
        a = _aligned_empty(shape, dt)
        view = memoryview(a.reshape(-1).view(np.uint8))
        done = 0
        while done < size:  # read straight into the array, hashing each chunk while it is in cache
            got = handle.readinto(view[done : done + _CHUNK])
            if not got:
                raise CorruptEntry("truncated")
            check.update(view[done : done + got])
            done += got
        arrays[name] = a
    if check.hexdigest().encode() != digest:
        raise CorruptEntry("checksum mismatch")
    _check_arrays(key, arrays)
    return arrays


def _record(key: str, payload: bytes, bound: bool) -> dict:
    """The JSON record in ``payload`` stored under ``key``, checked against the schema of its key's kind
    (``lazylab.schemas.entries.record_model``) and bound to ``key``.

    ``bound`` says whether its seal named ``key`` (``_unseal``). A record sealed without its key (by an older
    lazylab) is served only if it names ``key`` itself in its ``key`` field, as run, convex, lambda-choice,
    redundancy and trajectory records always did; a record whose ``key`` field names another key is never
    served. The fields of its model it lacks get their defaults (a record by lazylab 0.1.0 lacks some).
    Raises: CorruptEntry (one line naming the field) if it is not JSON, fails the schema or is bound to another key.
    """
    from lazylab.schemas import parse_json, validate
    from lazylab.schemas.caches import RecordEnvelope
    from lazylab.schemas.entries import record_model

    try:
        model = record_model(key)
        doc = parse_json(payload, "record")
        validate(model, doc, "record")
    except (LazylabError, ValueError) as exc:  # record_model refuses a key whose kind holds arrays
        raise CorruptEntry(_one_line(exc)) from None
    named = doc.get("key")
    if named is not None and named != key:
        raise CorruptEntry(f"its record names the key {str(named)[:80]!r}: a value moved from another key")
    if not bound and named != key:
        raise CorruptEntry("sealed without its key, by an older lazylab")
    if model is not RecordEnvelope:
        for name, field in model.model_fields.items():
            if not field.is_required():
                doc.setdefault(field.alias or name, field.get_default(call_default_factory=True))
    return doc


def _check_arrays(key: str, arrays: dict[str, np.ndarray]) -> None:
    """Raise CorruptEntry (one line) unless ``arrays`` are of the kind stored under ``key`` (``array_spec``)."""
    from lazylab.schemas.entries import array_spec

    try:
        problem = array_spec(key).problem(arrays)
    except ValueError as exc:
        problem = str(exc)
    if problem:
        raise CorruptEntry(problem)


def _arrays(key: str, payload: bytes, bound: bool) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` payload stored under ``key``, loaded with ``allow_pickle=False`` (no object
    arrays), and checked against the kind of ``key`` (``_check_arrays``). ``bound``: whether the seal named
    ``key``; arrays sealed without it (by an older lazylab) are not served.

    Raises: CorruptEntry if it is not a readable npz, is sealed without its key, or fails its kind.
    """
    if not bound:
        raise CorruptEntry("sealed without its key, by an older lazylab")
    import zipfile
    import zlib

    try:
        z = np.load(io.BytesIO(payload), allow_pickle=False)
        if not isinstance(z, np.lib.npyio.NpzFile):
            raise CorruptEntry("a single array, not an npz")
        with z:
            arrays = {k: z[k] for k in z.files}
    except (ValueError, OSError, EOFError, KeyError, zipfile.BadZipFile, zlib.error, MemoryError) as exc:
        raise CorruptEntry(f"not an npz ({_one_line(exc)})") from None
    _check_arrays(key, arrays)
    return arrays


def _drop_row(store: diskcache.Cache, rowid: int, key, filename, stored) -> bool:
    """Delete one row of ``store`` (only if it is still the row that was read: same key and write time) and its
    value file, unless another row names that file too (a planted row may borrow a good entry's file).

    Returns whether the row was deleted.
    """
    with store._transact(retry=True) as (sql, cleanup):
        gone = sql("DELETE FROM Cache WHERE rowid = ? AND key IS ? AND store_time IS ?", (rowid, key, stored)).rowcount
        if gone and isinstance(filename, str) and \
                not sql("SELECT 1 FROM Cache WHERE filename = ? LIMIT 1", (filename,)).fetchall():
            cleanup(filename)  # removed after the commit, by SafeDisk.remove (value files below the memo only)
    return bool(gone)
