"""The on-disk memo (SPEC section 8): a diskcache store of JSON records and array blobs.

Nothing read from the store is unpickled: records are JSON text, arrays are
``.npz`` bytes loaded with ``allow_pickle=False``, and the diskcache ``Disk``
used here refuses pickled values outright. Every value carries a SHA-256 of
its payload and the key it was computed for (the hash of its configuration),
so a truncated or overwritten entry, or a valid one moved to another key, is
detected on read, and every entry is checked against the schema of its key's
kind (``lazylab.schemas.entries``); an entry that cannot be read
(``lazylab.memo_disk``: a row lazylab never writes, a bad or foreign seal, a
value that fails its kind's schema) is reported in one line, deleted and treated
as missing (the caller recomputes it); a reader that finds an entry disagreeing
with the configuration it looked up does the same (``Memo.reject``).
``Memo.check`` (``lazylab cache check``) removes every unreadable entry at once.
The directory is created private (0700), and every file the memo opens must
resolve inside it (``lazylab.locations.files_outside``).

Two stores share the memo directory:

* the main store (the directory itself) holds run records, prototypes,
  snapshots and every other result. It never evicts: a finished run is
  kept until ``lazylab cache clear``.
* the feature store (``<memo>/features/``) holds frozen banks' feature
  matrices, which can always be recomputed. It is capped (``--cache-limit``,
  default ``DEFAULT_CACHE_LIMIT``) and evicts least-recently-used entries to
  stay under the cap; a cap of 0 turns it off. What goes in is decided by
  ``worth_storing`` (the policy, measured in docs/performance.md). Its
  entries are a JSON header line then raw array bytes, under the same seal.
  With several processes writing at once the cap can be overshot briefly.
"""

from __future__ import annotations

import io
import json
import os
import re
import sqlite3
from pathlib import Path

import diskcache
import numpy as np

from lazylab.config import code_identity
from lazylab.errors import LazylabError
from lazylab.locations import check_memo_dir, default_dir, files_outside, legacy_note
from lazylab.schemas.entries import ArraySpec, entry_kind
from lazylab.text import printable

FEATURE_DIR = "features"  # the feature store, below the memo directory
DEFAULT_CACHE_LIMIT = 8 * 2**30  # bytes; the CLI's --cache-limit default ("8GiB")
# End-to-end rate of loading a feature entry back (read, SHA-256 check, hand-over to jax):
# bench/feature_cache.py measured 287-588 MB/s (median 516) on the 2-core development machine
# (docs/performance.md); rounded down below the slowest load so that the policy errs toward recomputing.
FEATURE_LOAD_BYTES_PER_S = 250e6
FEATURE_LOAD_OVERHEAD_S = 0.01  # opening the store and the entry's file
MAX_SIZE = 2**50  # 1 PiB: sqlite keeps sizes in 64-bit integers; anything near that is a typo


def parse_size(text) -> int:
    """Bytes in a size such as ``8GiB``, ``500MB``, ``1.5G`` or ``0``.

    Decimal units (``kB``, ``MB``, ``GB``, ``TB``, or just ``K``, ``M``, ``G``,
    ``T``) are powers of 1000, binary ones (``KiB`` ... ``TiB``) powers of 1024;
    a bare number is a whole number of bytes (``0.5`` would round to nothing, so it
    is refused: ``0.5GiB`` is half a GiB); case is ignored.
    Raises: ValueError (one line) for anything else or a size above 1 PiB.
    """
    if isinstance(text, int) and not isinstance(text, bool) and 0 <= text <= MAX_SIZE:
        return text
    match = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-z]*)\s*", str(text).lower())
    scale = _SIZE_UNITS.get(match.group(2)) if match else None
    if scale is None:
        raise ValueError(f"expected a size such as 8GiB, 500MB or 0, got {str(text)!r}")
    if scale == 1 and "." in match.group(1):
        raise ValueError(f"{str(text).strip()!r} is not a whole number of bytes: give a unit (0.5GiB, 500MB) or "
                         "an integer number of bytes")
    size = round(float(match.group(1)) * scale)
    if size == 0 and float(match.group(1)) > 0:
        raise ValueError(f"{str(text).strip()!r} is less than one byte; 0 turns the feature store off")
    if size > MAX_SIZE:
        raise ValueError(f"{text} is above the largest size accepted, 1 PiB")
    return size


_SIZE_UNITS = {"": 1, "b": 1,
               **{u: 1000**i for i, u in enumerate(("k", "m", "g", "t"), 1)},
               **{u + "b": 1000**i for i, u in enumerate(("k", "m", "g", "t"), 1)},
               **{u + "ib": 1024**i for i, u in enumerate(("k", "m", "g", "t"), 1)}}


def format_size(n: int) -> str:
    """``n`` bytes as a short binary size, e.g. ``8.0 GiB``."""
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def worth_storing(compute_s: float, nbytes: int, limit: int,
                  load_rate: float = FEATURE_LOAD_BYTES_PER_S) -> bool:
    """The feature-store policy: whether a bank's feature matrices are kept.

    A frozen bank's train and test features (``nbytes`` in all, float32) are
    stored when loading them back is predicted to be faster than the measured
    time ``compute_s`` (seconds) it took to compute them, and the entry fits
    under the feature store's cap ``limit`` (bytes; 0 stores nothing):
    ``nbytes <= limit`` and ``compute_s > FEATURE_LOAD_OVERHEAD_S + nbytes / load_rate``.
    ``load_rate`` (bytes per second) is the end-to-end load rate measured by
    ``bench/feature_cache.py``. Run records and other results are not subject to
    this policy: they are always stored.
    """
    return 0 < nbytes <= limit and compute_s > FEATURE_LOAD_OVERHEAD_S + nbytes / load_rate


from lazylab.memo_disk import (  # noqa: F401 (the row layer; tests use _SealedReader and SafeDisk from here)
    CorruptEntry,
    SafeDisk,
    _arrays,
    _drop_row,
    _feature_parts,
    _inside,
    _one_line,
    _read_features,
    _record,
    _SealedReader,
    _unseal,
    _seal,
)


class UniqueLines(list):
    """A list of one-line notes that keeps each distinct line once (an estimate and the run
    that follows it may meet the same bad entry), each with its control characters escaped
    (``lazylab.text.printable``: a note quotes keys, file names and record values)."""

    def append(self, line: str) -> None:
        line = printable(line)
        if line not in self:
            super().append(line)


class Memo:
    """Memoized results keyed by a config hash, plus a capped store of feature matrices.

    Args:
      directory: the store's folder (created 0700 if missing).
      feature_limit: cap in bytes on the feature store ``<directory>/features/``
        (None: ``DEFAULT_CACHE_LIMIT``; 0: no feature is read or stored).
    Raises: LazylabError if the folder cannot be created or opened; ValueError
    for a negative ``feature_limit``.
    """

    def __init__(self, directory: Path | str | None = None, feature_limit: int | None = None):
        self.directory = check_memo_dir(Path(directory) if directory else default_dir())
        self.problems: list[str] = UniqueLines()  # one line per corrupt entry met, however often it is read
        if not directory and not os.environ.get("LAZYLAB_CACHE"):
            note = legacy_note(self.directory)
            if note:
                self.problems.append(note)
        self.feature_limit = DEFAULT_CACHE_LIMIT if feature_limit is None else int(feature_limit)
        if self.feature_limit < 0:
            raise ValueError(f"feature_limit must be >= 0 bytes, got {feature_limit}")
        self._features: diskcache.Cache | None = None  # opened on first use
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
        """Close both stores."""
        self._cache.close()
        if self._features is not None:
            self._features.close()

    def _get(self, key: str) -> tuple[bytes, bool] | None:
        """``(payload, whether its seal names key)`` of ``key`` (``_unseal``), or None if absent or corrupt."""
        try:
            blob = self._cache.get(key)
            return None if blob is None else _unseal(blob, key)
        except (CorruptEntry, OSError, UnicodeDecodeError) as exc:
            self._corrupt(key, exc)
            return None
        except (sqlite3.Error, diskcache.core.Timeout) as exc:
            raise LazylabError(f"cannot read the memo at {self.directory}: {_one_line(exc)}"
                               " (move the directory away to start a fresh memo)") from None

    def _put(self, key: str, payload: bytes) -> None:
        try:
            # The tag is the code identity that wrote the entry: ``code_counts`` and ``prune`` read it.
            self._cache.set(key, _seal(payload, key), tag=code_identity())
        except (OSError, sqlite3.Error, diskcache.core.Timeout) as exc:
            # diskcache writes each entry in one sqlite transaction: a failed write leaves no partial entry.
            raise LazylabError(f"cannot write to the memo at {self.directory}: {_one_line(exc)}"
                               f" (disk full or read-only?); finished runs are kept{self._hint()}") from None

    def _corrupt(self, key: str, exc: BaseException, store: diskcache.Cache | None = None, what: str = "memo") -> None:
        """Report the unreadable entry ``key`` in one line and delete it (the caller recomputes it)."""
        self.problems.append(f"{what} entry {key} is corrupt ({_one_line(exc)}); recomputing")
        store = self._cache if store is None else store
        try:
            for rowid, filename, stored in store._sql(
                    "SELECT rowid, filename, store_time FROM Cache WHERE key = ? AND raw = 1", (key,)).fetchall():
                _drop_row(store, rowid, key, filename, stored)
        except (OSError, sqlite3.Error, diskcache.core.Timeout):
            pass  # the recomputed value overwrites it, or the write reports the problem

    def reject(self, key: str, why: str) -> None:
        """Report the entry ``key`` as corrupt (one line in ``problems``, ``why`` saying what is wrong) and delete it.

        For a reader whose entry passed its kind's schema but disagrees with the configuration it was looked up
        for (a Gram's widths, a probe's size) or with its sibling entry: the caller recomputes it.
        """
        self._corrupt(key, CorruptEntry(why))

    def get_record(self, key: str) -> dict | None:
        """The JSON record stored under ``key``, or None if absent or corrupt.

        A record is checked against the schema of its key's kind (``lazylab.schemas.entries``) and its seal
        against ``key`` (``lazylab.memo_disk._record``); one that fails, or is not JSON, is corrupt: one line
        in ``problems``, deleted, read as absent.
        """
        got = self._get(key)
        if got is None:
            return None
        try:
            return _record(key, *got)
        except CorruptEntry as exc:
            self._corrupt(key, exc)
            return None

    def put_record(self, key: str, record: dict) -> None:
        """Store ``record`` (JSON-serialisable) under ``key``."""
        self._put(key, json.dumps(record, sort_keys=True).encode())

    def get_arrays(self, key: str) -> dict[str, np.ndarray] | None:
        """The arrays stored under ``key`` (loaded with ``allow_pickle=False``), or None if absent or corrupt
        (not an npz, sealed for another key, or not the arrays of its key's kind: ``lazylab.schemas.entries``)."""
        got = self._get(key)
        if got is None:
            return None
        try:
            return _arrays(key, *got)
        except CorruptEntry as exc:
            self._corrupt(key, exc)
            return None

    def put_arrays(self, key: str, arrays: dict[str, np.ndarray]) -> None:
        """Store named numeric arrays under ``key`` as ``.npz`` bytes."""
        buf = io.BytesIO()
        np.savez(buf, **{k: np.asarray(v) for k, v in arrays.items()})
        self._put(key, buf.getvalue())

    def entries(self) -> list[tuple[str, str | None, float | None]]:
        """``(key, code identity, stored at)`` of every entry of the main store (not the feature store), by key.

        The code identity is the entry's diskcache tag (None for entries written before lazylab
        recorded one, or anything but text); ``stored at`` is the time it was written, in seconds
        since the epoch (UTC). Nothing is read or unsealed.
        Raises: LazylabError if the store cannot be read.
        """
        try:
            rows = self._cache._sql("SELECT key, tag, store_time FROM Cache ORDER BY key").fetchall()
        except (sqlite3.Error, diskcache.core.Timeout) as exc:
            raise LazylabError(f"cannot read the memo at {self.directory}: {_one_line(exc)}") from None
        return [(k, t if isinstance(t, str) else None, float(s) if isinstance(s, (int, float)) else None)
                for k, t, s in rows if isinstance(k, str)]

    def __contains__(self, key: str) -> bool:
        try:
            return key in self._cache
        except (sqlite3.Error, diskcache.core.Timeout) as exc:
            raise LazylabError(f"cannot read the memo at {self.directory}: {_one_line(exc)}"
                               " (move the directory away to start a fresh memo)") from None

    def __len__(self) -> int:
        return len(self._cache)

    def code_counts(self) -> dict[str | None, int]:
        """Entries per code identity (main store and feature store together), most first (ties by name, None last).

        The key None counts entries written before lazylab recorded code identities (0.1.0).
        Raises: LazylabError if the store cannot be read.
        """
        counts: dict[str | None, int] = {}
        for store in (self._cache, self._feature_store(create=False)):
            if store is None:
                continue
            try:
                rows = store._sql("SELECT tag, COUNT(*) FROM Cache GROUP BY tag").fetchall()
            except (sqlite3.Error, diskcache.core.Timeout) as exc:
                raise LazylabError(f"cannot read the memo at {self.directory}: {_one_line(exc)}") from None
            for tag, n in rows:
                tag = tag if isinstance(tag, str) else None  # anything but text is not an identity lazylab wrote
                counts[tag] = counts.get(tag, 0) + n
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0] is None, kv[0] or "")))

    def stale_note(self) -> str | None:
        """One line saying that the memo holds entries no current code can use, or None if it holds none (the
        entries' tags, which name that code, with their control characters escaped: ``lazylab.text.printable``)."""
        stale = {tag: n for tag, n in self.code_counts().items() if tag != code_identity()}
        if not stale:
            return None
        what = ", ".join(f"{n} by {tag or 'lazylab 0.1.0 (no code identity)'}" for tag, n in stale.items())
        return printable(f"note: the memo holds {sum(stale.values())} entries computed by other code ({what}); they "
                         f"are never reused, so those results are recomputed by {code_identity()} "
                         "(`lazylab cache prune` removes them)")

    def prune(self) -> int:
        """Remove every entry (both stores) not written by the current code identity; returns how many.

        Such entries can never be looked up: the code identity is part of every key.
        """
        removed = 0
        for store in (self._cache, self._feature_store(create=False)):
            if store is None:
                continue
            keys = [k for (k,) in store._sql("SELECT key FROM Cache WHERE tag IS NULL OR tag != ?",
                                             (code_identity(),)).fetchall()]
            removed += sum(bool(store.delete(k)) for k in keys)
        return removed

    def remove(self, keys) -> int:
        """Delete the main store's entries ``keys`` (those present); returns how many were removed.
        Raises: LazylabError if the store cannot be written."""
        try:
            return sum(bool(self._cache.delete(k)) for k in keys)
        except (sqlite3.Error, diskcache.core.Timeout) as exc:
            raise LazylabError(f"cannot write to the memo at {self.directory}: {_one_line(exc)}") from None

    def check(self) -> tuple[int, list[str]]:
        """Read every entry of both stores and remove those that cannot be read; good ones are left as they are.

        An entry cannot be read when its row is one lazylab never writes (a key that is not
        text, a pickled value, an unknown mode, a file mode with no file name or one outside the
        memo, a missing or non-regular value file), its SHA-256 seal does not match or names
        another key (a value moved), or its payload is not what lazylab reads back: a record that
        is not JSON or fails the schema of its key's kind (``lazylab.schemas.entries``), an npz that
        does not load or holds other arrays, a feature entry whose header or size is wrong
        (``_read_features``). Every value is read in full (the feature store
        too), so this takes about as long as reading the memo once.

        Returns: ``(sound entries, [one line per entry removed, naming its store, key and problem])``.
        Raises: LazylabError if a store's index cannot be read.
        """
        sound, removed = 0, []
        for store, what in ((self._cache, "memo"), (self._feature_store(create=False), "feature")):
            if store is None:
                continue
            try:
                rows = store._sql("SELECT rowid, key, raw, store_time, mode, filename FROM Cache ORDER BY rowid").fetchall()
            except (sqlite3.Error, diskcache.core.Timeout) as exc:
                raise LazylabError(f"cannot read the memo at {self.directory}: {_one_line(exc)}") from None
            for rowid, key, raw, stored, mode, filename in rows:
                problem = self._row_problem(store, what, rowid, key, raw, mode, filename)
                if problem is None:
                    sound += 1
                    continue
                try:
                    if _drop_row(store, rowid, key, filename, stored):
                        removed.append(printable(f"{what} entry {key!r}: {problem}; removed"))
                except (OSError, sqlite3.Error, diskcache.core.Timeout) as exc:
                    raise LazylabError(f"cannot write to the memo at {self.directory}: {_one_line(exc)}") from None
        return sound, removed

    @staticmethod
    def _row_problem(store: diskcache.Cache, what: str, rowid: int, key, raw, mode, filename) -> str | None:
        """Why the row ``rowid`` of ``store`` cannot be read (one line), or None if it reads whole."""
        if not isinstance(key, str) or raw != 1:
            return "its key is not text (lazylab never writes such a row)"
        try:
            rows = store._sql("SELECT value FROM Cache WHERE rowid = ?", (rowid,)).fetchall()
            if not rows:
                return None  # deleted meanwhile by another process
            value = rows[0][0]
            if what == "feature":
                handle = store._disk.fetch(mode, filename, value, True)
                if isinstance(handle, (bytes, str)):
                    handle = io.BytesIO(handle.encode() if isinstance(handle, str) else handle)
                with handle:
                    _read_features(handle, key)
                return None
            payload, bound = _unseal(store._disk.fetch(mode, filename, value, False), key)
            kind = entry_kind(key)
            # A key of no known kind: np.savez's zip holds arrays, anything else is a JSON record.
            if isinstance(kind, ArraySpec) or (kind is None and payload[:2] == b"PK"):
                _arrays(key, payload, bound)
            else:
                _record(key, payload, bound)
            return None
        except (CorruptEntry, OSError, UnicodeDecodeError) as exc:
            return _one_line(exc)
        except (sqlite3.Error, diskcache.core.Timeout) as exc:
            return f"unreadable row ({_one_line(exc)})"

    def clear(self) -> int:
        """Remove every entry, feature matrices included; returns how many were removed."""
        store = self._feature_store(create=False)
        return self._cache.clear() + (store.clear() if store is not None else 0)

    def volume(self) -> int:
        """Bytes used on disk by the main store (``feature_stats`` for the feature store)."""
        return self._cache.volume()

    # ----------------------------------------------------------- feature store
    @property
    def feature_dir(self) -> Path:
        """The feature store's folder, ``<memo>/features``."""
        return self.directory / FEATURE_DIR

    def _feature_store(self, create: bool) -> diskcache.Cache | None:
        """The feature store, opened on first use; None if absent (``create`` false) or unusable."""
        if self._features is not None or (not create and not (self.feature_dir / "cache.db").exists()):
            return self._features
        # A planted symlink (the folder, or its index) would have the store read, write and delete files elsewhere.
        outside = [self.feature_dir] if not _inside(str(self.directory), FEATURE_DIR) else \
            [self.feature_dir / name for name in files_outside(self.feature_dir)]
        if outside:
            self.problems.append(f"the feature store {outside[0]} resolves outside the memo; features are recomputed")
            self.feature_limit = 0
            return None
        try:
            self.feature_dir.mkdir(mode=0o700, exist_ok=True)
            # cull_limit=0: diskcache's own cull drops ten least-recently-used entries at once,
            # possibly the one just written; _make_room evicts exactly what the cap requires.
            # The LRU policy still makes every read refresh the entry's access time.
            self._features = diskcache.Cache(str(self.feature_dir), disk=SafeDisk, size_limit=self.feature_limit,
                                             eviction_policy="least-recently-used", cull_limit=0)
        except (OSError, sqlite3.Error, diskcache.core.Timeout) as exc:
            # Features are only ever a shortcut: go on without them.
            self.problems.append(f"cannot open the feature store at {self.feature_dir}: {_one_line(exc)}; "
                                 "features are recomputed")
            self.feature_limit = 0
        return self._features

    def get_features(self, key: str) -> dict[str, np.ndarray] | None:
        """The arrays stored under ``key`` in the feature store, or None if absent, corrupt or the cap is 0.

        A corrupt entry is reported in ``problems``, removed, and reads as missing.
        """
        store = self._feature_store(create=False) if self.feature_limit > 0 else None
        if store is None:
            return None
        try:
            handle = store.get(key, read=True)
            if handle is None:
                return None
            if isinstance(handle, (bytes, str)):  # a small value kept inside sqlite
                handle = io.BytesIO(handle.encode() if isinstance(handle, str) else handle)
            with handle:
                return _read_features(handle, key)
        except (CorruptEntry, OSError) as exc:
            self._corrupt(key, exc, store, "feature")
            return None
        except (sqlite3.Error, diskcache.core.Timeout) as exc:
            self.problems.append(f"cannot read the feature store at {self.feature_dir}: {_one_line(exc)}; recomputing")
            return None

    def put_features(self, key: str, arrays: dict[str, np.ndarray]) -> bool:
        """Store named numeric arrays under ``key`` in the feature store, evicting least-recently-used entries.

        Returns whether the entry was stored: False when the cap is 0, the entry
        alone exceeds the cap, or the write failed (reported in ``problems``;
        features are only a shortcut, so this never raises for a full disk).
        Run records live in the main store and are never evicted.
        Raises: TypeError for an array that is not plain numbers.
        """
        if self.feature_limit <= 0:
            return False
        parts = _feature_parts(arrays)
        size = len(_seal(b"", key)) + sum(len(p) for p in parts)  # the seal line, then the payload
        if size > self.feature_limit:
            return False
        store = self._feature_store(create=True)
        if store is None:
            return False
        try:
            store.delete(key)  # an older copy would count against the room made below
            self._make_room(store, size)
            store.set(key, _SealedReader(parts, key), read=True, tag=code_identity())
            return True
        except (OSError, sqlite3.Error, diskcache.core.Timeout) as exc:
            self.problems.append(f"cannot write to the feature store at {self.feature_dir}: {_one_line(exc)}; "
                                 "features will be recomputed next time")
            try:
                store.delete(key)
            except (OSError, sqlite3.Error, diskcache.core.Timeout):
                pass
            return False

    def _make_room(self, store: diskcache.Cache, incoming: int) -> None:
        """Evict least-recently-used feature entries until ``incoming`` more bytes fit under the cap."""
        excess = store.volume() + incoming - self.feature_limit
        if excess <= 0:
            return
        # diskcache has no public way to list entries by access time; this is its own cull query.
        for key, size in store._sql("SELECT key, size FROM Cache ORDER BY access_time").fetchall():
            if excess <= 0:
                break
            if store.delete(key):
                excess -= size if isinstance(size, int) else 0

    def feature_stats(self) -> tuple[int, int]:
        """``(entries, bytes on disk)`` of the feature store; ``(0, 0)`` if it was never created."""
        store = self._feature_store(create=False)
        return (0, 0) if store is None else (len(store), store.volume())
