"""jax's persistent compilation cache, on by default for lazylab's commands.

A ladder compiles a few hundred XLA programs (one per shape of training step,
evaluation and feature pass); on 2 CPU cores that is about a third of the
quick preset's wall time. jax can keep compiled executables on disk and load
them in later processes (https://docs.jax.dev/en/latest/persistent_compilation_cache.html);
lazylab turns that on for the CLI and for its Ray workers. Results are the
same executables either way, so the memo's records do not depend on it.

Where it lives:
  * ``LAZYLAB_XLA_CACHE=0`` (or ``off``): jax's cache is off altogether.
  * ``LAZYLAB_XLA_CACHE=DIR``: under ``DIR``.
  * ``JAX_COMPILATION_CACHE_DIR`` (jax's own setting): that folder, as is.
  * otherwise ``$XDG_CACHE_HOME/lazylab/xla`` (``~/.cache/lazylab/xla``).
lazylab's own folders get a subfolder named after this CPU: jax's cache key
names the jaxlib version and platform but not the CPU's instruction set, and an
executable built for one CPU may not run on another (a cluster's shared home).
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import platform
import re
import sys
import warnings
from pathlib import Path

from lazylab.locations import cache_home

MAX_BYTES = 1 << 30  # LRU-evicted beyond this; the quick preset writes 1.3 MiB
OFF = ("0", "off", "false", "no")
# jax's warnings (jax/_src/compiler.py) and the lock file of a capped cache (jax/_src/lru_cache.py)
READ_ERROR = "Error reading persistent compilation cache entry"
WRITE_ERROR = "Error writing persistent compilation cache entry"
LOCK_FILE = ".lockfile"
# SHA-256 of each entry's bytes, recorded when the process that wrote it ends: jax checks
# nothing when it loads an entry, and one holding another program's executable (a swapped
# or hand-copied file) fails every later run with an error inside jax.
DIGESTS = "lazylab-sha256.json"
# The units (plugin identities, ``Arm.plugin``) whose banks a process built with this cache on, merged in at its
# end: ``lazylab.estimate`` prices the first compilations of any other unit cold.
UNITS = "lazylab-units.json"
_units_built: set[str] = set()


def note_unit(identity: str) -> None:
    """Remember that this process built a bank of the unit ``identity`` (``lazylab.model.build_model``)."""
    _units_built.add(identity)


def cached_units(folder: Path) -> set[str]:
    """The unit identities recorded in ``folder`` (``UNITS``); empty when none is, or the file is unreadable."""
    try:
        units = json.loads((folder / UNITS).read_text())
    except (OSError, ValueError):
        return set()
    return {u for u in units if isinstance(u, str)} if isinstance(units, list) else set()


def cpu_tag() -> str:
    """A short tag naming this machine's architecture and CPU instruction-set flags."""
    flags = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):  # x86 / ARM
                flags = " ".join(sorted(line.split(":", 1)[1].split()))
                break
    except OSError:  # not Linux
        flags = platform.processor()
    digest = hashlib.sha256(f"{platform.machine()} {flags}".encode()).hexdigest()[:12]
    return f"{platform.machine() or 'cpu'}-{digest}"


def cache_dir(environ=None) -> Path | None:
    """The folder compiled executables go to, or None when ``LAZYLAB_XLA_CACHE`` turns the cache off."""
    environ = os.environ if environ is None else environ
    setting = environ.get("LAZYLAB_XLA_CACHE", "").strip()
    if setting.lower() in OFF:
        return None
    if setting:
        base = Path(setting).expanduser()
    elif environ.get("JAX_COMPILATION_CACHE_DIR"):
        return Path(environ["JAX_COMPILATION_CACHE_DIR"]).expanduser()
    else:
        base = cache_home(environ) / "xla"
    return base / cpu_tag()


def usable(folder: Path) -> bool:
    """Whether this process can make ``folder`` and write its lock file (jax locks it for every read and write)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / LOCK_FILE, "a"):
            pass
    except OSError:
        return False
    return True


def enable() -> Path | None:
    """Point jax's persistent compilation cache at ``cache_dir()`` (every program cached, LRU-capped at ``MAX_BYTES``).

    Call it before the first compilation of the process: jax settles on its
    cache at the first compile. Set through the environment when jax is not yet
    imported (so a fully memoized run need not import it), through
    ``jax.config`` when it is. A capped cache makes jax lock the folder
    (``filelock``) on each read and write, so several processes may share it.
    When the cache is off, or its folder is not ``usable``, jax's cache is
    turned off altogether (its own ``JAX_COMPILATION_CACHE_DIR`` included), so
    that no program waits on a lock it cannot take. jax's warnings about
    entries it cannot read or write become one note each, and the entries at
    fault are removed so that they are stored again (``_note_cache_errors``).
    Returns the folder, or None when the cache is off or unusable.
    """
    folder = cache_dir()
    if folder is not None and not usable(folder):
        folder = None
    if folder is None:
        settings = {"jax_enable_compilation_cache": False}
    else:
        settings = {"jax_compilation_cache_dir": str(folder),
                    "jax_persistent_cache_min_compile_time_secs": 0,  # the many small programs add up
                    "jax_persistent_cache_min_entry_size_bytes": 0,
                    "jax_compilation_cache_max_size": MAX_BYTES,
                    # jax's default adds a GPU autotuning folder inside the cache to every key, so a
                    # copied or moved cache would match nothing; executables are cached either way.
                    "jax_persistent_cache_enable_xla_caches": "none"}
        remove_entries(folder)  # a write cut short in an earlier process would stop this one's writes
        _note_cache_errors(folder)
        bad = verify_entries(folder)
        if bad:
            print(f"note: {bad} compiled programs in {folder} did not match the SHA-256 recorded when they were "
                  "stored; removed, compiled again and stored", file=sys.stderr)
        _record_at_exit(folder)
    if "jax" in sys.modules:
        import jax

        for name, value in settings.items():
            jax.config.update(name, value)
    else:
        for name, value in settings.items():
            os.environ[name.upper()] = str(value).lower() if isinstance(value, bool) else str(value)
    return folder


def remove_entries(folder: Path, program: str | None = None) -> int:
    """Delete the entries of ``program`` (jax names them ``PROGRAM-HASH``) and those missing their ``-atime`` file.

    jax never replaces an entry it finds, so one it cannot read would fail on
    every later run; and before each write it reads every entry's ``-atime``
    file, so one missing (a write cut short) stops every later write. Holds
    jax's lock on the folder, so no entry being written is taken for broken.
    Returns the number of entries removed (0 if the lock is not had in 10 s).
    """
    import filelock

    removed = 0
    try:
        with filelock.FileLock(folder / LOCK_FILE, timeout=10):
            for entry in folder.glob("*-cache"):
                key = entry.name[: -len("-cache")]
                atime = folder / f"{key}-atime"
                if (program is not None and key.startswith(program + "-")) or not atime.exists():
                    entry.unlink(missing_ok=True)
                    atime.unlink(missing_ok=True)
                    removed += 1
    except (filelock.Timeout, OSError):
        pass
    return removed


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _read_digests(folder: Path) -> dict[str, str]:
    try:
        recorded = json.loads((folder / DIGESTS).read_text())
    except (OSError, ValueError):
        return {}  # none yet, or damaged: entries are recorded again as they are written
    return {k: v for k, v in recorded.items() if isinstance(k, str) and isinstance(v, str)} \
        if isinstance(recorded, dict) else {}


def _write_digests(folder: Path, recorded: dict[str, str]) -> None:
    tmp = folder / f".{DIGESTS}.{os.getpid()}.tmp"
    try:
        tmp.write_text(json.dumps(recorded, sort_keys=True))
        os.replace(tmp, folder / DIGESTS)
    finally:
        tmp.unlink(missing_ok=True)


def verify_entries(folder: Path) -> int:
    """Remove every entry whose bytes differ from the SHA-256 recorded for it (``record_entries``); returns how many.

    Entries not yet recorded are left as they are. Holds jax's lock on the folder.
    Returns 0 if the lock is not had in 10 s or the folder cannot be read.
    """
    import filelock

    removed = 0
    try:
        with filelock.FileLock(folder / LOCK_FILE, timeout=10):
            recorded = _read_digests(folder)
            kept = {}
            for name, digest in recorded.items():
                entry = folder / name
                if not entry.is_file() or entry.parent != folder:
                    continue  # evicted by jax's LRU, or not an entry name at all
                if _sha256(entry) != digest:
                    entry.unlink(missing_ok=True)
                    (folder / (name[: -len("-cache")] + "-atime")).unlink(missing_ok=True)
                    removed += 1
                else:
                    kept[name] = digest
            if kept != recorded:
                _write_digests(folder, kept)
    except (filelock.Timeout, OSError):
        pass
    return removed


def record_entries(folder: Path) -> None:
    """Record the SHA-256 of every entry in ``folder`` that has none yet, and the units this process built banks of
    (``note_unit``), at the end of the process that wrote them."""
    import filelock

    try:
        with filelock.FileLock(folder / LOCK_FILE, timeout=10):
            recorded = _read_digests(folder)
            new = {e.name: _sha256(e) for e in folder.glob("*-cache") if e.name not in recorded}
            if new:
                _write_digests(folder, {**recorded, **new})
            units = cached_units(folder)
            if _units_built - units:
                tmp = folder / f"{UNITS}.tmp{os.getpid()}"
                tmp.write_text(json.dumps(sorted(units | _units_built)))
                os.replace(tmp, folder / UNITS)
    except (filelock.Timeout, OSError):
        pass  # only a safeguard: unrecorded entries are recorded by a later process


_recording: set[Path] = set()


def _record_at_exit(folder: Path) -> None:
    if folder not in _recording:
        _recording.add(folder)
        atexit.register(record_entries, folder)


def _note_cache_errors(folder: Path) -> None:
    """Show jax's warnings about cache entries it cannot read or write as one note each per process.

    Each program whose entry cannot be read has its entries removed, and so has
    every entry that stops writes (``remove_entries``): they are stored again.
    """
    if getattr(warnings.showwarning, "lazylab_xla_cache", False):
        return
    show = warnings.showwarning
    noted = set()

    def showwarning(message, category, filename, lineno, file=None, line=None):
        text = str(message)
        kind = next((k for k in (READ_ERROR, WRITE_ERROR) if text.startswith(k)), None)
        if kind is None:
            return show(message, category, filename, lineno, file, line)
        # jax's text: "Error ... entry for 'PROGRAM': ErrorType: message", the message maybe many lines
        named = re.match(r"[^']*'([^']*)': (.*)", text, re.DOTALL)
        program, reason = (named.group(1), " ".join(named.group(2).split())[:200]) if named else (None, "")
        if kind == READ_ERROR and program is None:  # not jax's usual text: no way to tell which entry
            return show(message, category, filename, lineno, file, line)
        remove_entries(folder, program if kind == READ_ERROR else None)
        if kind in noted:
            return
        noted.add(kind)
        if kind == READ_ERROR:
            note = f"a compiled program in {folder} could not be read ({reason}); removed, compiled again and stored"
        else:
            note = f"compiled programs could not be stored in {folder} ({reason})"
        print(f"note: {note}", file=sys.stderr)

    showwarning.lazylab_xla_cache = True
    warnings.showwarning = showwarning


def stats(folder: Path) -> tuple[int, int]:
    """Compiled programs in ``folder`` and their bytes (0, 0 when it does not exist)."""
    files = list(folder.glob("*-cache")) if folder.is_dir() else []
    return len(files), sum(f.stat().st_size for f in files)
