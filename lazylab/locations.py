"""Where lazylab keeps its memo by default: the user's cache folder, outside any clone."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from lazylab.errors import LazylabError

LEGACY_DIR = "cache"  # the default memo of earlier lazylab versions (``./cache`` in the working directory)


def _home(environ) -> Path:
    try:
        return Path(environ["HOME"]) if environ.get("HOME") else Path.home()
    except (RuntimeError, KeyError):  # no HOME and no password entry (a bare container)
        raise LazylabError("no home directory for lazylab's cache: set LAZYLAB_CACHE or pass --cache-dir") from None


def cache_home(environ=None) -> Path:
    """lazylab's folder in the user's cache: ``$XDG_CACHE_HOME/lazylab`` when ``XDG_CACHE_HOME`` is an
    absolute path (the XDG base directory specification ignores a relative one), else
    ``~/.cache/lazylab``. The memo (``memo/``), the compiled programs (``xla/``, ``lazylab.xla_cache``)
    and the machine's calibration (``calibration.json``, ``lazylab.calibration``) live there.

    Args: environ: the environment to read [default: ``os.environ``].
    Raises: LazylabError (one line) when it must use the home directory and there is none.
    """
    environ = os.environ if environ is None else environ
    xdg = environ.get("XDG_CACHE_HOME") or ""
    return Path(xdg) / "lazylab" if os.path.isabs(xdg) else _home(environ) / ".cache" / "lazylab"


def default_dir(environ=None) -> Path:
    """The memo directory used when none is given: outside any clone, in ``cache_home()``.

    In order: ``$LAZYLAB_CACHE`` if set and not empty (``~`` expanded); else ``cache_home() / "memo"``
    (``$XDG_CACHE_HOME/lazylab/memo`` or ``~/.cache/lazylab/memo``).

    Args: environ: the environment to read [default: ``os.environ``].
    Raises: LazylabError (one line) when neither variable is set and there is no home directory.
    """
    environ = os.environ if environ is None else environ
    setting = environ.get("LAZYLAB_CACHE") or ""
    if setting:
        return _home(environ) / setting[2:] if setting == "~" or setting.startswith("~/") else Path(setting).expanduser()
    return cache_home(environ) / "memo"


def legacy_note(directory: Path, cwd: Path | None = None) -> str | None:
    """One line when ``./cache`` (the default memo of earlier versions) holds a memo that is not ``directory``.

    Such a memo is no longer read by default; the line says how to keep using it (or, by moving it,
    to silence the line). None otherwise.
    """
    old = Path(cwd or Path.cwd()) / LEGACY_DIR
    try:
        if not (old / "cache.db").is_file() or old.resolve() == directory.resolve():
            return None
    except OSError:
        return None
    return (f"note: {old} holds a memo from an earlier lazylab, which kept it in ./cache; the default memo is now "
            f"{directory}: pass --cache-dir {LEGACY_DIR} (or set LAZYLAB_CACHE) to use the old one, or move it there")


# What lazylab and diskcache make in a memo folder: the SQLite index (and its journals), the feature
# store, the parsed data copies, and diskcache's value folders (two hex digits, lazylab.cache.SafeDisk).
MEMO_FILES = ("cache.db", "cache.db-wal", "cache.db-shm", "cache.db-journal")
MEMO_FOLDERS = ("features", "data")
_VALUE_FOLDER = re.compile(r"[0-9a-f]{2}")


def resolves_inside(root: str | os.PathLike, path: str | os.PathLike) -> bool:
    """Whether ``path``'s ``realpath`` (symbolic links followed, a dangling one to its target) lies below
    ``root``'s: the rule for every path the memo opens, so that a planted link never has lazylab read,
    write or create a file elsewhere."""
    return os.path.realpath(path).startswith(os.path.realpath(root) + os.sep)


def files_outside(directory: Path) -> list[str]:
    """The names of ``MEMO_FILES`` in ``directory`` that exist (a dangling link included) but resolve outside
    it: sqlite would open, write through, or create the link's target."""
    return [name for name in MEMO_FILES
            if os.path.lexists(directory / name) and not resolves_inside(directory, directory / name)]


def check_memo_dir(directory: str | os.PathLike) -> Path:
    """Refuse a memo location that is not a memo folder, before anything opens or creates one there.

    Accepted: a missing path (it becomes a memo), an empty folder, a folder whose ``cache.db`` is a
    regular file (a memo), or a folder holding only what a memo holds (``MEMO_FILES``,
    ``MEMO_FOLDERS``, diskcache's two-hex-digit value folders). A symbolic link is followed.

    Args: directory: the memo location (``--cache-dir``, ``$LAZYLAB_CACHE`` or the default).
    Returns: ``directory`` as a Path.
    Raises: LazylabError (one line, naming the path and how to choose another) for a regular file,
      a device, a FIFO or a socket, a symbolic-link loop, a path below a file, a folder that
      cannot be read, a folder whose ``cache.db`` (or a journal of it) resolves outside it
      (``files_outside``), or a non-empty folder that is not a lazylab memo (it is left untouched).
    """
    directory = Path(directory)
    hint = "pass --cache-dir or set LAZYLAB_CACHE to a memo folder, or to an empty or missing one"
    try:
        mode = directory.stat().st_mode
    except FileNotFoundError:
        return directory  # created by the memo (a parent that cannot be created is the memo's one line)
    except OSError as exc:  # ELOOP, ENOTDIR (a parent is a file), EACCES
        raise LazylabError(f"the memo location {directory} cannot be used: {exc.strerror or exc}; {hint}") from None
    if not stat.S_ISDIR(mode):
        kind = ("a regular file" if stat.S_ISREG(mode) else "a FIFO" if stat.S_ISFIFO(mode)
                else "a socket" if stat.S_ISSOCK(mode) else "a device")
        raise LazylabError(f"the memo location {directory} is {kind}, not a folder; {hint}")
    try:
        outside = files_outside(directory)
        if outside:
            where = os.path.realpath(directory / outside[0])
            raise LazylabError(f"the memo location {directory} holds a {outside[0]} that resolves outside it, to "
                               f"{where}; it is not opened; {hint}")
        for name in MEMO_FILES:  # the index and its journals, where present, must be regular files (a FIFO hangs sqlite)
            try:
                db_mode = (directory / name).stat().st_mode
            except FileNotFoundError:
                continue
            if not stat.S_ISREG(db_mode):
                raise LazylabError(f"the memo location {directory} holds a {name} that is not a regular file; {hint}")
        if (directory / "cache.db").is_file():
            return directory
        names = os.listdir(directory)
    except OSError as exc:
        raise LazylabError(f"the memo location {directory} cannot be read: {exc.strerror or exc}; {hint}") from None
    foreign = sorted(n for n in names if n not in MEMO_FILES + MEMO_FOLDERS and not _VALUE_FOLDER.fullmatch(n))
    if foreign:
        raise LazylabError(f"the memo location {directory} is a folder that is not a lazylab memo (it holds "
                           f"{foreign[0]!r}{f' and {len(foreign) - 1} more' if len(foreign) > 1 else ''}, and no "
                           f"cache.db); it is left as it is; {hint}")
    return directory
