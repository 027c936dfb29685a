"""The on-disk memo (SPEC section 8): a diskcache store of JSON records and array blobs.

Nothing read from the store is unpickled: records are JSON text, arrays are
``.npz`` bytes loaded with ``allow_pickle=False``, and the diskcache ``Disk``
used here refuses pickled values outright. Every value carries a SHA-256 of
its payload, so a truncated or overwritten entry is detected on read and
treated as missing (the caller recomputes it). The directory is created
private (0700).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import sqlite3
from pathlib import Path

import diskcache
import numpy as np

from lazylab.errors import LazylabError

DEFAULT_DIR = "cache"


def default_dir() -> Path:
    """``$LAZYLAB_CACHE`` if set, else ``./cache``."""
    return Path(os.environ.get("LAZYLAB_CACHE") or DEFAULT_DIR)


class SafeDisk(diskcache.Disk):
    """A diskcache Disk that stores only bytes and str and never unpickles."""

    def store(self, value, read, key=diskcache.core.UNKNOWN):
        if not isinstance(value, (bytes, str)) or read:
            raise TypeError("the lazylab memo stores only bytes and str")
        return super().store(value, read, key=key)

    def fetch(self, mode, filename, value, read):
        if mode == diskcache.core.MODE_PICKLE:
            raise CorruptEntry("pickled value refused")
        if filename is not None and not _inside(filename):
            raise CorruptEntry(f"value file {filename!r} lies outside the memo")
        return super().fetch(mode, filename, value, read)

    def remove(self, file_path):
        # A planted row may name any path; never delete outside the memo.
        if _inside(file_path):
            super().remove(file_path)


def _inside(filename) -> bool:
    """Whether a value-file name from the store is a plain relative path below the memo."""
    if not isinstance(filename, str) or not filename or os.path.isabs(filename) or "\0" in filename:
        return False
    return ".." not in Path(filename).parts


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


class CorruptEntry(Exception):
    """A memo entry whose checksum or encoding is wrong."""


def _seal(payload: bytes) -> bytes:
    return hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload


def _unseal(blob) -> bytes:
    if isinstance(blob, str):
        blob = blob.encode()
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise CorruptEntry(f"stored value is a {type(blob).__name__}, not bytes")
    digest, sep, payload = bytes(blob).partition(b"\n")
    if not sep or hashlib.sha256(payload).hexdigest().encode() != digest:
        raise CorruptEntry("checksum mismatch")
    return payload


class Memo:
    """Memoized results keyed by a config hash.

    Args:
      directory: the store's folder (created 0700 if missing).
    Raises: LazylabError if the folder cannot be created or opened.
    """

    def __init__(self, directory: Path | str | None = None):
        self.directory = Path(directory) if directory else default_dir()
        self.problems: list[str] = []  # one line per corrupt entry met
        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            # eviction_policy='none': diskcache's default culls the oldest entries past 1 GiB,
            # which would silently drop finished runs.
            self._cache = diskcache.Cache(str(self.directory), disk=SafeDisk, eviction_policy="none")
        except (OSError, sqlite3.Error, diskcache.core.Timeout) as exc:
            raise LazylabError(f"cannot open the memo at {self.directory}: {_one_line(exc)}{self._hint()}") from None

    def _hint(self) -> str:
        """Why the store may be unusable, for the one-line error."""
        where = self.directory if self.directory.exists() else self.directory.parent
        if where.exists() and not os.access(where, os.W_OK):
            return f" ({where} is not writable; pass --cache-dir or set LAZYLAB_CACHE to a writable directory)"
        return " (pass --cache-dir or set LAZYLAB_CACHE to use another directory)"

    def close(self) -> None:
        self._cache.close()

    def _get(self, key: str) -> bytes | None:
        try:
            blob = self._cache.get(key)
            return None if blob is None else _unseal(blob)
        except (CorruptEntry, OSError, UnicodeDecodeError) as exc:
            self.problems.append(f"memo entry {key} is corrupt ({_one_line(exc)}); recomputing")
            try:
                self._cache.delete(key)
            except (OSError, sqlite3.Error, diskcache.core.Timeout):
                pass  # the recomputed value overwrites it, or the write reports the problem
            return None
        except (sqlite3.Error, diskcache.core.Timeout) as exc:
            raise LazylabError(f"cannot read the memo at {self.directory}: {_one_line(exc)}"
                               " (move the directory away to start a fresh memo)") from None

    def _put(self, key: str, payload: bytes) -> None:
        try:
            self._cache.set(key, _seal(payload))
        except (OSError, sqlite3.Error, diskcache.core.Timeout) as exc:
            # diskcache writes each entry in one sqlite transaction: a failed write leaves no partial entry.
            raise LazylabError(f"cannot write to the memo at {self.directory}: {_one_line(exc)}"
                               f" (disk full or read-only?); finished runs are kept{self._hint()}") from None

    def get_record(self, key: str) -> dict | None:
        """The JSON record stored under ``key``, or None if absent or corrupt."""
        payload = self._get(key)
        if payload is None:
            return None
        try:
            return json.loads(payload)
        except ValueError as exc:
            self.problems.append(f"memo entry {key} is not JSON ({exc}); recomputing")
            return None

    def put_record(self, key: str, record: dict) -> None:
        """Store ``record`` (JSON-serialisable) under ``key``."""
        self._put(key, json.dumps(record, sort_keys=True).encode())

    def get_arrays(self, key: str) -> dict[str, np.ndarray] | None:
        """The arrays stored under ``key`` (loaded with ``allow_pickle=False``), or None."""
        payload = self._get(key)
        if payload is None:
            return None
        try:
            with np.load(io.BytesIO(payload), allow_pickle=False) as z:
                return {k: z[k] for k in z.files}
        except ValueError as exc:
            self.problems.append(f"memo entry {key} is not an npz ({exc}); recomputing")
            return None

    def put_arrays(self, key: str, arrays: dict[str, np.ndarray]) -> None:
        """Store named numeric arrays under ``key`` as ``.npz`` bytes."""
        buf = io.BytesIO()
        np.savez(buf, **{k: np.asarray(v) for k, v in arrays.items()})
        self._put(key, buf.getvalue())

    def __contains__(self, key: str) -> bool:
        return key in self._cache

    def __len__(self) -> int:
        return len(self._cache)

    def clear(self) -> int:
        """Remove every entry; returns how many were removed."""
        return self._cache.clear()

    def volume(self) -> int:
        """Bytes used on disk."""
        return self._cache.volume()
