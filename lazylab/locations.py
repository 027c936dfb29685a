"""Where lazylab keeps its memo by default: the user's cache folder, outside any clone."""

from __future__ import annotations

import os
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
