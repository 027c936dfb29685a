"""The inputs of ``lazylab gram``: its configuration (the memo key), its validation, and which images it shows.

The experiment and what it measures are in ``lazylab.experiments.gram``; the
numbers behind the defaults (``max(32 * max_units, 50000)`` reference units,
seeds ``(seed + 1) * 4096 + j``) are explained there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

import numpy as np

from lazylab.arms import Arm
from lazylab.config import CACHE_SCHEMA, canonical_json, memo_key
from lazylab.data import CLASS_NAMES
from lazylab.errors import LazylabError
from lazylab.experiments.gram_measures import DEFAULT_FIT_MIN
from lazylab.limits import GRAM_MAX_REPEATS as MAX_REPEATS  # repeat seeds stay below the reference seeds
from lazylab.limits import GRAM_MAX_SEED as MAX_SEED  # every reference seed stays below 2**32

DEFAULT_CLASSES = (0, 1, 7)  # T-shirt/top, Trouser, Sneaker
DEFAULT_PER_CLASS = 10
DEFAULT_MAX_UNITS = 2000
DEFAULT_FRAMES = 40
REF_FACTOR = 32
REF_MIN_UNITS = 50_000
MIN_REF_FACTOR = 4  # an explicit --ref-units must be at least 4 x max_units
MAX_REF_CHUNKS = 4096  # independent max_units-wide banks in the reference, at most
REF_SEED_STRIDE = MAX_REF_CHUNKS  # reference seeds (seed + 1) * 4096 + j never equal the bank's seed
DATA_REF_CHUNK = 4096

Progress = Callable[[str, int, int], None]  # (stage, done, total)


def require_frozen(arm: Arm, command: str) -> None:
    """Raise LazylabError unless ``arm`` is a frozen arm (its bank never trains)."""
    if arm.trained:
        frozen = arm.name[: -len("-trained")] + "-frozen" if arm.name.endswith("-trained") else "a frozen arm"
        raise LazylabError(f"{command} needs a frozen arm; {arm.name!r} trains its bank (try {frozen!r})")


# ----------------------------------------------------------------- configs
@dataclass(frozen=True)
class GramConfig:
    """Everything that determines a ``gram`` result (memo key: ``gram-<sha256>``).

    Attributes:
      arm, plugin: arm name and ``"<distribution> <version>"`` of its unit.
      max_units: width of the growing bank (>= 1).
      frames: requested number of widths (at most ``max_units`` are used).
      classes: test-set class indices, in display order (>= 2 distinct).
      per_class: images per class: the first ``per_class`` of each class in the test set.
      seed: seed of the growing bank; the reference uses other seeds (module docstring).
      ref_units: reference width (for data-seeded arms: the number of training images).
      fit_min: smallest width used in the log-log slope fit.
      repeats: independent banks (seeds ``seed .. seed + repeats - 1``) whose
        root-mean-square distances give the ensemble slope; the first is shown.
      data: Fashion-MNIST fingerprint. schema: cache schema.
    """

    arm: str
    plugin: str
    max_units: int = DEFAULT_MAX_UNITS
    frames: int = DEFAULT_FRAMES
    classes: tuple[int, ...] = DEFAULT_CLASSES
    per_class: int = DEFAULT_PER_CLASS
    seed: int = 0
    ref_units: int = REF_FACTOR * DEFAULT_MAX_UNITS
    fit_min: int = DEFAULT_FIT_MIN
    repeats: int = 1
    data: str = ""
    schema: int = CACHE_SCHEMA

    def canonical(self) -> str:
        """Canonical JSON: sorted keys, no spaces."""
        return canonical_json(self)

    def key(self) -> str:
        return memo_key("gram", self)


@dataclass(frozen=True)
class _FeaturesKey:
    kind: str
    arm: str
    plugin: str
    max_units: int
    seed: int
    classes: tuple[int, ...]
    per_class: int
    data: str
    schema: int


@dataclass(frozen=True)
class _ReferenceKey(_FeaturesKey):
    ref_units: int = 0


@dataclass(frozen=True)
class _RepeatKey(_FeaturesKey):
    repeat: int = 0  # features of the independent bank with seed ``seed + repeat`` (the base bank's scalars)


def default_ref_units(max_units: int) -> int:
    """``max(32 * max_units, 50000)`` rounded up to whole ``max_units`` chunks, at most 4096 chunks."""
    want = max(REF_FACTOR * max_units, REF_MIN_UNITS)
    return min(-(-want // max_units), MAX_REF_CHUNKS) * max_units


def gram_config(ws, arm: Arm, *, max_units: int = DEFAULT_MAX_UNITS, frames: int = DEFAULT_FRAMES,
                classes: tuple[int, ...] = DEFAULT_CLASSES, per_class: int = DEFAULT_PER_CLASS,
                seed: int = 0, ref_units: int | None = None, fit_min: int = DEFAULT_FIT_MIN,
                repeats: int = 1) -> GramConfig:
    """Validate the inputs and build the canonical config on workspace ``ws``.

    Raises: LazylabError for a trained arm, ``max_units < 1``, ``frames < 1``,
    fewer than 2 distinct classes, a class outside 0..9, ``per_class < 2``,
    a seed outside 0..1,000,000, ``repeats`` outside 1..64, or ``ref_units`` outside
    ``[4 * max_units, 4096 * max_units]`` (random inits; rounded up to whole chunks).
    """
    require_frozen(arm, "gram")
    if max_units < 1:
        raise LazylabError(f"max_units must be at least 1, got {max_units}")
    if frames < 1:
        raise LazylabError(f"frames must be at least 1, got {frames}")
    if per_class < 2:
        raise LazylabError(f"per_class must be at least 2 (within-class pairs), got {per_class}")
    if not 0 <= seed <= MAX_SEED:
        raise LazylabError(f"seed must be between 0 and {MAX_SEED}, got {seed}")
    if not 1 <= repeats <= MAX_REPEATS:
        raise LazylabError(f"repeats must be between 1 and {MAX_REPEATS}, got {repeats}")
    classes = tuple(int(c) for c in classes)
    if any(not 0 <= c < len(CLASS_NAMES) for c in classes):
        raise LazylabError(f"classes must be in 0..{len(CLASS_NAMES) - 1}, got {list(classes)}")
    if len(set(classes)) != len(classes) or len(classes) < 2:
        raise LazylabError(f"need at least 2 distinct classes, got {list(classes)}")
    if arm.init == "data":
        n_train = len(ws.data.y_train)
        if max_units > n_train:
            raise LazylabError(f"max_units {max_units} exceeds the {n_train} training images available for data seeding")
        ref = n_train  # the exact expectation over the training images
    else:
        ref = default_ref_units(max_units) if ref_units is None else -(-int(ref_units) // max_units) * max_units
        if ref_units is not None and not MIN_REF_FACTOR * max_units <= ref_units <= MAX_REF_CHUNKS * max_units:
            raise LazylabError(f"ref_units must be between {MIN_REF_FACTOR} x max_units ({MIN_REF_FACTOR * max_units}; "
                               f"the reference must be much wider than the bank) and {MAX_REF_CHUNKS} x max_units "
                               f"({MAX_REF_CHUNKS * max_units}), got {ref_units}")
    return GramConfig(arm=arm.name, plugin=arm.plugin, max_units=max_units, frames=frames, classes=classes,
                      per_class=per_class, seed=seed, ref_units=ref, fit_min=fit_min, repeats=repeats,
                      data=ws.fingerprint)


def parse_classes(text: str) -> tuple[int, ...]:
    """Comma-separated class indices (0..9) or names (case and punctuation ignored: ``tshirt-top``).

    Returns: class indices in the order given.
    Raises: LazylabError naming the bad item and the valid names.
    """
    def norm(s: str) -> str:
        return re.sub(r"[^a-z0-9]", "", s.lower())

    by_name = {norm(n): i for i, n in enumerate(CLASS_NAMES)}
    by_name.update({"tshirt": 0, "top": 0, "boot": 9})
    items = [s.strip() for s in str(text).split(",")]
    if not any(items):
        raise LazylabError("--images: expected comma-separated class indices or names, got nothing")
    out = []
    for s in items:
        if not s:
            continue
        if s.isdigit() and int(s) < len(CLASS_NAMES):
            out.append(int(s))
        elif norm(s) in by_name:
            out.append(by_name[norm(s)])
        else:
            names = ", ".join(f"{i} {n}" for i, n in enumerate(CLASS_NAMES))
            raise LazylabError(f"--images: unknown class {s!r}; classes are {names}")
    return tuple(out)


def select_images(y_test: np.ndarray, classes: tuple[int, ...], per_class: int) -> np.ndarray:
    """Indices of the first ``per_class`` test images of each class, grouped in ``classes`` order.

    Raises: LazylabError if a class has fewer images.
    """
    idx = []
    for c in classes:
        hits = np.flatnonzero(np.asarray(y_test) == c)[:per_class]
        if len(hits) < per_class:
            raise LazylabError(f"class {c} ({CLASS_NAMES[c]}) has only {len(hits)} test images, need {per_class}")
        idx.append(hits)
    return np.concatenate(idx).astype(np.int64)
