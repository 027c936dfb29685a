"""Every file lazylab reads back is checked like an option (issue 32; docs/reliability.md).

One way to read a file: ``read_json`` refuses anything but a regular file (a FIFO, a device or a
folder would hang or mislead the reader), caps its size, and turns JSON too deeply nested for the
parser into one line. One way to check it: ``validate`` runs a pydantic model whose types and
ranges are those of the options that produced the file (``lazylab.cli.options``: seeds
0..MAX_SEED, widths 1..MAX_WIDTH, ...), and reports the first field that breaks them in one line.

The models live beside this module, one per family of files:
``schemas.caches`` (calibration, memo records, parsed-data and feature metadata),
``schemas.results`` (the ``--json`` files of gram, readout, trajectory and ntk),
``schemas.ladder`` (the ``ladder --json`` file and the shipped reference), ``schemas.convex`` (its convex
readouts and lambda choices), on the field types of ``schemas.fields``.

pydantic (v2) was chosen over hand-written checks and over jsonschema because its models are
Python types with constraints (``Annotated[int, Field(ge=0, le=MAX_SEED)]``), strict mode refuses
the coercions a hostile file relies on (``"4"`` for 4, ``true`` for 1), ``allow_inf_nan=False``
refuses NaN and Infinity, and each error names its field's path.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ConfigDict

from lazylab.errors import LazylabError

# Every model's configuration: no coercion ("4" is not 4, true is not 1), no NaN or Infinity, and fields
# lazylab does not read are ignored (kept in the document, never trusted).
STRICT = ConfigDict(strict=True, allow_inf_nan=False, extra="ignore")
MAX_FILE_BYTES = 256 * 2**20  # far above the largest file lazylab writes (the paper reference: about 6 MB)

M = TypeVar("M")


def read_bytes(path: str | Path, what: str, max_bytes: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of the regular file ``path``, read without following it into a FIFO, device or folder.

    Args:
      path: the file.
      what: how the error names it (e.g. ``"--from FILE"`` or ``"calibration file"``); the path follows.
      max_bytes: the largest size accepted.
    Raises: LazylabError (one line naming ``what`` and the path) if it is missing, unreadable, not a
      regular file (FIFO, device, socket, folder), a symbolic-link loop, or larger than ``max_bytes``.
    """
    path = Path(path)
    try:
        # O_NONBLOCK: opening a FIFO with no writer returns at once instead of waiting for one.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise LazylabError(f"{what} {path}: cannot be read: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = ("a folder" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode)
                    else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else "not a regular file")
            raise LazylabError(f"{what} {path}: is {kind}, not a regular file")
        if st.st_size > max_bytes:
            raise LazylabError(f"{what} {path}: {st.st_size} bytes, more than the {max_bytes} this reader accepts")
        with os.fdopen(fd, "rb", closefd=True) as fh:
            fd = -1
            raw = fh.read(max_bytes + 1)
    except OSError as exc:
        raise LazylabError(f"{what} {path}: cannot be read: {exc.strerror or exc}") from None
    finally:
        if fd >= 0:
            os.close(fd)
    if len(raw) > max_bytes:
        raise LazylabError(f"{what} {path}: more than the {max_bytes} bytes this reader accepts")
    return raw


def parse_json(raw: bytes | str, what: str) -> Any:
    """``json.loads`` with its failures as one line: not JSON, not UTF-8, or nested too deeply.

    Raises: LazylabError naming ``what``.
    """
    try:
        return json.loads(raw)
    except RecursionError:
        raise LazylabError(f"{what}: JSON nested too deeply to read") from None
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise LazylabError(f"{what}: not JSON ({exc})") from None


def read_json(path: str | Path, what: str, max_bytes: int = MAX_FILE_BYTES) -> Any:
    """``parse_json(read_bytes(path, what, max_bytes))``; errors name ``what`` and the path.

    Raises: LazylabError (one line) as ``read_bytes`` and ``parse_json`` do.
    """
    return parse_json(read_bytes(path, what, max_bytes), f"{what} {path}")


def field_path(loc) -> str:
    """A pydantic error location as a dotted path: ``("runs", 3, "config", "seed")`` -> ``runs[3].config.seed``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "the document"


def validate(model: type[M], doc: Any, what: str) -> M:
    """``doc`` checked against the pydantic ``model`` (``model.model_validate``).

    Returns: the validated model instance.
    Raises: LazylabError, one line: ``<what>: field <path>: <problem>`` for the first error pydantic
      reports (a wrong type, a value out of range, a missing field, a non-finite number), or
      ``<what>: nested too deeply`` when validation itself recurses too far.
    """
    from pydantic import ValidationError

    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        err = exc.errors(include_url=False, include_input=False)[0]
        n = exc.error_count()
        more = f" (and {n - 1} more problem{'s' * (n > 2)})" if n > 1 else ""
        raise LazylabError(f"{what}: field {field_path(err['loc'])}: {err['msg']}{more}") from None
    except RecursionError:
        raise LazylabError(f"{what}: nested too deeply to check") from None
