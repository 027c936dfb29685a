"""Plugins checked before they run: the conformance suite once per unit and source, its verdict kept.

A third-party unit runs ``lazylab.testing.check_unit`` (``lazylab.testing.CHECKS``: among them
determinism, batch and order invariance, a bank wider than the input, finite features and
gradients, the process-wide settings its import left alone) before its first bank is built, on the
first 1024 Fashion-MNIST test images; the verdict is kept per unit and plugin identity
(distribution, version and source hash, ``Arm.plugin``) in ``cache_home()/unit-checks.json``, so an
edited plugin is checked again and an unchanged one never twice (``lazylab arms --check`` keeps its
verdicts there too). A failing unit is refused under ``LAZYLAB_STRICT_PLUGINS=1`` (one
``LazylabError`` line) and announced otherwise (one ``warning:`` line through
``lazylab.arms.note``), before any of its runs is stored; every result then computed with it
carries the failures (``CHECKS_FAILED``, ``mark``). lazylab's built-in units are checked by
lazylab's own test suite and skip this.
"""

from __future__ import annotations

import datetime as dt
import json

import numpy as np

from lazylab.arms import Arm, ContractError, note, strict_plugins
from lazylab.errors import LazylabError

VERDICTS = "unit-checks.json"
# The record field naming the conformance checks a result's unit failed when it was computed.
CHECKS_FAILED = "checks_failed"
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


def check_images(data_dir=None, fallback: np.ndarray | None = None) -> np.ndarray:
    """The images the conformance suite runs on: the first ``lazylab.testing.WIDE`` (1024) Fashion-MNIST
    test images of ``data_dir`` (``lazylab.data.locate``), else of ``fallback`` (a command's training images)
    when the test images cannot be found and it holds that many. Raises: DataError otherwise."""
    from lazylab.errors import DataError
    from lazylab.testing import WIDE, real_images

    try:
        return real_images(WIDE, data_dir)
    except DataError:
        if fallback is not None and len(fallback) >= WIDE:
            return np.asarray(fallback[:WIDE], np.float32)
        raise


def verdict(arm: Arm, images=None, recheck: bool = False) -> list[str]:
    """The failures of ``arm``'s unit under the conformance suite ([] when it passes), checked once.

    Args:
      arm: any arm of the unit (the verdict is the unit's, for every init it declares).
      images: float32 ``(n, 784)`` real images (``lazylab.testing.check_unit``'s ``images``), or a function
        returning them (called only when the unit must be checked) [default: ``check_images()``].
      recheck: check even when a verdict is kept (``lazylab arms --check``), and keep the new one.
    Returns: the failed checks, one line each (``lazylab.testing``'s messages).
    Cost: a few seconds the first time for a unit and plugin identity; a dictionary lookup after.
    """
    key = identity(arm)
    if recheck or key not in _known:
        kept = None if recheck else kept_verdicts().get(key)
        if kept is not None:
            _known[key] = kept["failures"]
        else:
            from lazylab.testing import check_unit

            images = images() if callable(images) else check_images() if images is None else images
            try:
                check_unit(arm.unit, images)
                failures = []
            except ContractError as exc:
                failures = getattr(exc, "failures", [str(exc)])
            _known[key] = failures
            _keep(key, failures)
    return _known[key]


def vet(arm: Arm, images=None) -> None:
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
        note(f"{line}; its results may not be reproducible and are marked (LAZYLAB_STRICT_PLUGINS=1 refuses it)")


def failed_checks(arm: Arm) -> list[str]:
    """The conformance checks ``arm``'s unit failed, as this process's verdict says (``vet`` ran before its
    first bank); [] for lazylab's own units and for a unit not vetted in this process."""
    return [] if arm.distribution == "lazylab" else list(_known.get(identity(arm)) or [])


def mark(record: dict, arm: Arm) -> dict:
    """``record`` (a result of ``arm`` about to be stored) with ``CHECKS_FAILED``: the checks its unit failed,
    when it failed any (``failed_checks``); ``record`` itself otherwise, so the records of units that pass
    (lazylab's own among them) are unchanged."""
    failures = failed_checks(arm)
    return {**record, CHECKS_FAILED: failures} if failures else record
