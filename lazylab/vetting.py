"""Plugins checked before they run: the conformance suite once per unit and source, its verdict kept.

A third-party unit runs ``lazylab.testing.check_unit`` (determinism, prefix
stability where declared, finite features below ``MAX_FEATURE`` on the 512
reference images, gradients, steps) before its first bank is built; the
verdict is kept per unit and plugin identity (distribution, version and
source hash, ``Arm.plugin``) in ``cache_home()/unit-checks.json``, so an
edited plugin is checked again and an unchanged one never twice. A failing
unit is refused under ``LAZYLAB_STRICT_PLUGINS=1`` (one ``LazylabError``
line) and announced otherwise (one ``warning:`` line through
``lazylab.arms.note``), before any of its runs is stored. lazylab's built-in
units are checked by lazylab's own test suite and skip this.
"""

from __future__ import annotations

import datetime as dt
import json

import numpy as np

from lazylab.arms import Arm, ContractError, note, strict_plugins
from lazylab.errors import LazylabError

VERDICTS = "unit-checks.json"
_known: dict[str, list[str]] = {}  # this process's verdicts: identity -> failures ([] passed)
_announced: set[str] = set()


def identity(arm: Arm) -> str:
    """The key a verdict is kept under: ``"<unit> <distribution> <version>+src.<hash>"``."""
    return f"{arm.unit.name} {arm.plugin}"


def _path():
    from lazylab.locations import cache_home

    return cache_home() / VERDICTS


def kept_verdicts() -> dict[str, dict]:
    """The verdicts kept on this machine, ``{identity: {"failures": [...], "checked": ISO time}}``;
    an unreadable or malformed file reads as none (its units are checked again)."""
    from lazylab.schemas import read_json

    try:
        path = _path()
        doc = read_json(path, "unit check verdicts", max_bytes=2**22) if path.is_file() else {}
    except (LazylabError, OSError):
        return {}
    if not isinstance(doc, dict):
        return {}
    return {k: v for k, v in doc.items() if isinstance(k, str) and isinstance(v, dict)
            and isinstance(v.get("failures"), list) and all(isinstance(f, str) for f in v["failures"])}


def _keep(key: str, failures: list[str]) -> None:
    """Add one verdict to the file; a home that cannot be written keeps it in this process only."""
    from lazylab.paths import write_text_atomically

    doc = kept_verdicts()
    doc[key] = {"failures": failures, "checked": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    try:
        _path().parent.mkdir(parents=True, exist_ok=True)
        write_text_atomically(_path(), json.dumps(doc, indent=1, sort_keys=True))
    except (LazylabError, OSError):
        pass


def verdict(arm: Arm, images: np.ndarray) -> list[str]:
    """The failures of ``arm``'s unit under the conformance suite ([] when it passes), checked once.

    Args:
      arm: any arm of the unit (the verdict is the unit's, for every init it declares).
      images: float32 ``(n, 784)`` real images, ``n >= 16``, or a function returning them (called only
        when the unit must be checked); the first 512 are the reference images (``lazylab.model``
        passes the first 512 training images).
    Returns: the failed checks, one line each (``lazylab.testing``'s messages).
    Cost: a few seconds the first time for a unit and plugin identity; a dictionary lookup after.
    """
    key = identity(arm)
    if key not in _known:
        kept = kept_verdicts().get(key)
        if kept is not None:
            _known[key] = kept["failures"]
        else:
            from lazylab.testing import check_unit

            try:
                check_unit(arm.unit, images() if callable(images) else images)
                failures = []
            except ContractError as exc:
                failures = getattr(exc, "failures", [str(exc)])
            _known[key] = failures
            _keep(key, failures)
    return _known[key]


def vet(arm: Arm, images: np.ndarray) -> None:
    """Refuse or announce a third-party unit that fails the conformance suite, before it runs.

    Args: as ``verdict``. Built-in units (distribution ``lazylab``) are not checked here.
    Raises: LazylabError (one line naming the unit, its plugin and the failed checks) under
      ``LAZYLAB_STRICT_PLUGINS=1``; otherwise the same line is announced once per process as a
      warning and the unit runs.
    """
    if arm.distribution == "lazylab":
        return
    failures = verdict(arm, images)
    if not failures:
        return
    line = (f"plugin unit {arm.unit.name!r} ({arm.plugin}) fails its conformance checks: {'; '.join(failures)}")
    if strict_plugins():
        raise LazylabError(f"{line}; refused [LAZYLAB_STRICT_PLUGINS is set]")
    if identity(arm) not in _announced:
        _announced.add(identity(arm))
        note(f"{line}; its results may not be reproducible (LAZYLAB_STRICT_PLUGINS=1 refuses it)")
