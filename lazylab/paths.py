"""Output paths checked before any work, so a bad ``--out`` never costs a computation."""

from __future__ import annotations

import os
from pathlib import Path

from lazylab.errors import LazylabError


def writable_dir(path: str | Path, option: str) -> Path:
    """Create ``path`` (and parents) and check that a file can be written in it.

    Raises: LazylabError naming ``option`` if ``path`` is empty, is a file, lies
    below a file, cannot be created, or is not writable (checked by writing,
    so it also holds for root and read-only mounts).
    """
    if str(path) == "":
        raise LazylabError(f"{option}: empty path")
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise LazylabError(f"{option}: {path} is a file, not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LazylabError(f"{option}: cannot create the directory {path}: {exc.strerror or exc}") from None
    probe = path / f".lazylab-write-test-{os.getpid()}"
    try:
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise LazylabError(f"{option}: cannot write in {path}: {exc.strerror or exc}") from None
    return path


def writable_file(path: str | Path, option: str) -> Path:
    """Check that the file ``path`` can be written (its folder is created); returns it.

    Raises: LazylabError naming ``option`` if ``path`` is empty, ``-`` (standard output is not a file
      here), a directory, something else that is not a regular file (a device such as /dev/null, a
      FIFO: a write by rename would replace it), a symbolic-link loop, or its folder is not writable.
      A symbolic link is written through, to its target.
    """
    if str(path) in ("", "."):
        raise LazylabError(f"{option}: empty path")
    if str(path) == "-":
        raise LazylabError(f"{option} -: this command writes files only; give a file path")
    path = Path(path)
    if path.is_dir():
        raise LazylabError(f"{option}: {path} is a directory, not a file")
    _regular_or_absent(path, option)
    writable_dir(_resolve(path, option).parent, option)
    return path


def _resolve(path: Path, option: str | None) -> Path:
    """``path.resolve()``; LazylabError (one line) for a symbolic-link loop, which Python reports as a RuntimeError."""
    try:
        return path.resolve()
    except (RuntimeError, OSError) as exc:
        where = f"{option}: " if option else ""
        reason = "a symbolic-link loop" if isinstance(exc, RuntimeError) else (exc.strerror or str(exc))
        raise LazylabError(f"{where}cannot follow {path}: {reason}; give another path") from None


def _regular_or_absent(path: Path, option: str | None) -> Path:
    """``path`` with a symbolic link followed; LazylabError if it exists and is not a regular file,
    or if its links loop."""
    target = _resolve(path, option) if path.is_symlink() else path
    if target.exists() and not target.is_file():
        where = f"{option}: " if option else ""
        raise LazylabError(f"{where}{path} is not a regular file (a device, a FIFO or a socket); give a file path")
    return target


def write_atomically(path: str | Path, write, option: str | None = None) -> Path:
    """Write ``path`` whole or not at all: ``write(tmp)`` fills a temporary file beside it, then it is renamed.

    ``write`` takes the temporary path (a name ending in ``.tmp`` plus ``path``'s suffix,
    so that writers choosing a format by suffix pick the right one). On any failure the
    temporary file is removed, and the old ``path``, if any, is left as it was. A symbolic link
    is written through (its target is replaced).
    Raises: LazylabError (one line, naming ``option`` if given, and the reason) when
    the file cannot be written: a full disk, a read-only folder, a name too long, a
    symbolic-link loop, or ``path`` is not a regular file (a device, a FIFO).
    """
    path = _regular_or_absent(Path(path), option)  # a rename would replace a link or a device node
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp{path.suffix}")
    try:
        write(tmp)
        os.replace(tmp, path)
    except OSError as exc:
        where = f"{option}: " if option else ""
        raise LazylabError(f"{where}cannot write {path}: {exc.strerror or exc}") from None
    finally:
        try:
            tmp.unlink()
        except OSError:
            pass  # already renamed, or never created
    return path


def write_text_atomically(path: str | Path, text: str, option: str | None = None) -> Path:
    """``write_atomically`` of UTF-8 ``text``."""
    return write_atomically(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"), option)
